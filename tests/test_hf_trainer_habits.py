"""Issue #42: every Trainer habit works on the 🤗 door, and the model behaves like a PEFT model; #43 item 3: the
tokenizer is checked against the model. Each test drives the Trainer as a user constructs it, with the
TrainingArguments of its row and nothing else changed, on tiny BERT and RoBERTa classifiers."""
import copy
import inspect
import json
import os

import pytest
import torch

from test_hf_trainer import NEGATIVE, POSITIVE, _one_line, classifier_from, config_for, dataset, trainer_for
from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

pytestmark = pytest.mark.usefixtures("one_thread")

# one method per way a prompt enters the model: before the text, as k/v prefixes, into every layer's hidden states
BY_INJECTION = ["ipt-random", "p_tuning_v2-kv", "m_idpg-phm-cls", "lpt-mppg"]  # input, kv, hidden, late
CONFIG_KEY = "instance_prompt_config"


def _wrap(base, case, tmp_path, mlm, tok):
    torch.manual_seed(7)  # the same prompt initialisation every time
    return get_instance_prompt_model(copy.deepcopy(base), config_for(case, tmp_path, mlm), tokenizer=tok)


def _trained(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _assert_same(a, b, atol=1e-6):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=0, atol=atol, msg=k)


def _eval_strategy(value):
    """``eval_strategy`` (transformers >= 4.41) or ``evaluation_strategy`` (4.39)."""
    from transformers import TrainingArguments

    name = "eval_strategy" if "eval_strategy" in inspect.signature(TrainingArguments).parameters else "evaluation_strategy"
    return {name: value}


def _batch(tok):
    return tok(POSITIVE[:3] + NEGATIVE[:3], padding=True, return_tensors="pt", return_special_tokens_mask=True)


class _Killed(Exception):
    pass


@pytest.mark.parametrize("case", BY_INJECTION)
def test_resume_from_checkpoint_ends_where_an_uninterrupted_run_does(plm, case, tmp_path):
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    mlm, tok = plm
    base, ds = classifier_from(mlm, initializer_range=0.2), dataset(tok)
    args = dict(num_train_epochs=2, save_strategy="steps", save_steps=4)  # 16 rows, batch 4: 8 steps
    whole = _wrap(base, case, tmp_path, mlm, tok)
    trainer_for(whole, tok, ds, tmp_path / "whole", **args).train()

    class KillAtStep6(TrainerCallback):  # the run dies after checkpoint-4 was written
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 6:
                raise _Killed

    first = _wrap(base, case, tmp_path, mlm, tok)
    trainer = trainer_for(first, tok, ds, tmp_path / "run", **args)
    trainer.add_callback(KillAtStep6)
    with pytest.raises(_Killed):
        trainer.train()
    saved = load_file(str(tmp_path / "run" / "checkpoint-4" / "model.safetensors"))
    assert set(saved) == set(_trained(first)) | {CONFIG_KEY}  # nothing of the frozen base

    resumed = _wrap(base, case, tmp_path, mlm, tok)
    trainer = trainer_for(resumed, tok, ds, tmp_path / "run", **args)
    trainer.train(resume_from_checkpoint=True)
    assert trainer.state.global_step == 8
    _assert_same(_trained(whole), _trained(resumed))


@pytest.mark.parametrize("case", BY_INJECTION)
def test_load_best_model_at_end_loads_the_best_epoch(plm, case, tmp_path):
    """The eval set has the train set's labels flipped, so its loss rises as the model learns: the best
    checkpoint is an early one, not the last, and its weights are the ones the model ends with."""
    from datasets import Dataset
    from safetensors.torch import load_file
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok)
    train = dataset(tok)
    flipped = train.remove_columns("label").add_column("label", [1 - y for y in train["label"]])
    assert isinstance(flipped, Dataset)
    args = TrainingArguments(output_dir=str(tmp_path / "run"), report_to="none", use_cpu=True, disable_tqdm=True,
                             num_train_epochs=8, per_device_train_batch_size=4, learning_rate=5e-2,
                             save_strategy="epoch", load_best_model_at_end=True, **_eval_strategy("epoch"))
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=flipped,
                      data_collator=DataCollatorWithPadding(tok))
    trainer.train()
    best = trainer.state.best_model_checkpoint
    assert best and not best.endswith("checkpoint-32"), best
    weights = load_file(os.path.join(best, "model.safetensors"))
    weights.pop(CONFIG_KEY)
    _assert_same(weights, _trained(model), atol=0)


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_trainer_save_model_writes_the_save_pretrained_folder(plm, case, tmp_path):
    """``trainer.save_model(dir)`` and ``save_pretrained(dir)`` write one format; both load, with the base given
    and in one call from the base's recorded path."""
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    mlm, tok = plm
    path = str(tmp_path / "base")
    classifier_from(mlm, initializer_range=0.2).save_pretrained(path)
    tok.save_pretrained(path)
    tok_there = type(tok).from_pretrained(path)
    model = get_instance_prompt_model(AutoModelForSequenceClassification.from_pretrained(path), 
                                      config_for(case, tmp_path, mlm), tokenizer=tok_there)
    trainer = trainer_for(model, tok, dataset(tok), tmp_path / "run", num_train_epochs=1)
    trainer.train()
    trainer.save_model(str(tmp_path / "by_trainer"))
    model.save_pretrained(str(tmp_path / "by_model"))
    _assert_same(load_file(str(tmp_path / "by_model" / "model.safetensors")),
                 load_file(str(tmp_path / "by_trainer" / "model.safetensors")), atol=0)
    model.eval()
    batch = _batch(tok)
    with torch.no_grad():
        expected = model(**batch).logits
        for folder in ("by_trainer", "by_model"):
            given = InstancePromptModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(path),
                                                        str(tmp_path / folder), tok_there).eval()
            one_call = InstancePromptModel.from_pretrained(str(tmp_path / folder)).eval()
            assert one_call.prompt_config == model.prompt_config
            for loaded in (given, one_call):
                torch.testing.assert_close(loaded(**batch).logits, expected, rtol=0, atol=1e-6)
    # pipeline(task, model=<folder>) never loads the bare base without the prompt: no folder holds a config.json
    # (transformers stops in "Unrecognized model in ..."; docs/transformers.md: from_pretrained, then pass the model)
    from transformers import pipeline

    folders = ["by_trainer", "by_model"] + [f"run/{n}" for n in os.listdir(tmp_path / "run") if n.startswith("checkpoint-")]
    for folder in folders:
        assert not (tmp_path / folder / "config.json").exists(), folder
        with pytest.raises((ValueError, OSError), match="Unrecognized model in|does not appear to have a file named "
                                                         "config.json"):  # transformers 5 | 4
            pipeline("text-classification", model=str(tmp_path / folder), tokenizer=tok)


@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("case", ["ipt-random", "prefix_tuning", "p_tuning_v2-hidden", "m_idpg-phm-cls",
                                  "m_idpg-dnn-static-kv", "lpt-appg", "late_ipt-random"])
def test_gradient_checkpointing_trains_as_without_it(plm, case, reentrant, tmp_path):
    """``TrainingArguments(gradient_checkpointing=True)``: the prompt and head end where the run without it
    ends (the recompute sees the same prompt), and the prompt did train."""
    mlm, tok = plm
    base, ds = classifier_from(mlm, initializer_range=0.2), dataset(tok)
    initial = _trained(_wrap(base, case, tmp_path, mlm, tok))
    ends = []
    for checkpointing in (False, True):
        model = _wrap(base, case, tmp_path, mlm, tok)
        extra = dict(gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": reentrant}) \
            if checkpointing else {}
        trainer_for(model, tok, ds, tmp_path / f"run{checkpointing}", max_steps=3, save_strategy="no", **extra).train()
        ends.append(_trained(model))
    _assert_same(ends[0], ends[1], atol=1e-6)
    prompt = [k for k in ends[1] if not k.startswith("base_model.")]
    assert prompt and any(not torch.equal(ends[1][k], initial[k]) for k in prompt)


def test_pipeline_predicts_with_the_prompt(plm, tmp_path):
    from transformers import pipeline

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "p_tuning_v2-kv", tmp_path, mlm, tok).eval()
    texts = POSITIVE[:2] + NEGATIVE[:2]
    predictions = pipeline("text-classification", model=model, tokenizer=tok, top_k=None)(texts)
    with torch.no_grad():
        # .to(model.device): on a machine with a GPU the pipeline (device unset) moved the model there (transformers 5)
        probs = model(**tok(texts, padding=True, return_tensors="pt").to(model.device)).logits.softmax(-1).cpu()
    for row, p in zip(predictions, probs):
        got = {d["label"]: d["score"] for d in row}
        torch.testing.assert_close(torch.tensor([got["LABEL_0"], got["LABEL_1"]]), p, rtol=0, atol=1e-5)


def test_peft_habits(plm, tmp_path, capsys):
    mlm, tok = plm
    base = classifier_from(mlm, initializer_range=0.2)
    model = _wrap(base, "m_idpg-phm-cls", tmp_path, mlm, tok).eval()
    inner = model.get_base_model()
    assert inner is model.base_model and model.classifier is inner.classifier  # attributes reach the base
    assert model.device == torch.device("cpu") and model.dtype == torch.float32
    trainable, total = model.get_nb_trainable_parameters()
    assert trainable == model.num_trainable_parameters() == model.num_parameters(only_trainable=True)
    assert total == model.num_parameters() == inner.num_parameters() + sum(
        p.numel() for n, p in model.named_parameters() if not n.startswith("base_model."))
    model.print_trainable_parameters()
    assert capsys.readouterr().out.strip() == (f"trainable params: {trainable:,d} || all params: {total:,d} || "
                                               f"trainable%: {100 * trainable / total:.4f}")
    batch = _batch(tok)
    with torch.no_grad():
        prompted = model(**batch).logits
        with model.disable_adapter():
            plain = model(**batch).logits
        plain_base = inner(**{k: v for k, v in batch.items() if k != "special_tokens_mask"}).logits
        again = model(**batch).logits
    torch.testing.assert_close(plain, plain_base, rtol=0, atol=1e-6)
    assert not torch.allclose(plain, prompted, atol=1e-4)
    torch.testing.assert_close(again, prompted, rtol=0, atol=0)


def test_from_pretrained_in_one_call_needs_a_recorded_base(bert, tmp_path):
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("prompt_tuning", prompt_length=2),
                                      tokenizer=tok)
    model.save_pretrained(str(tmp_path / "p"))  # built from a config: no name or path to rebuild it from
    with pytest.raises(ValueError, match="records no name or path of its base model.*pass the base") as e:
        InstancePromptModel.from_pretrained(str(tmp_path / "p"))
    _one_line(e)
    saved = json.loads((tmp_path / "p" / "instance_prompt_config.json").read_text())
    assert saved["tokenizer"]["name_or_path"] == tok.name_or_path
    assert saved["tokenizer"]["vocab_size"] == len(tok)
    assert saved["tokenizer"]["special_ids"]["mask_token_id"] == tok.mask_token_id


# ---- #43 item 3: the wrong tokenizer -------------------------------------------------------------------------
def _bert_tokenizer(tmp_path, vocab_edit):
    """A BERT tokenizer from the tiny BERT's vocabulary, edited."""
    from transformers import AutoTokenizer

    from conftest import WORDS

    d = tmp_path / "tok"
    d.mkdir()
    vocab = vocab_edit(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(WORDS))
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (d / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    return AutoTokenizer.from_pretrained(str(d))


def test_a_tokenizer_of_another_model_is_one_line(plm, bert, tmp_path):
    mlm, tok = bert
    other_mlm, other_tok = plm
    config = InstancePromptConfig("p_tuning_v2", prompt_length=2)
    if other_mlm.config.model_type != "bert":  # RoBERTa's tokenizer on the BERT model: another vocabulary size
        with pytest.raises(ValueError, match=r"has \d+ tokens but the model's vocabulary has \d+") as e:
            get_instance_prompt_model(classifier_from(mlm), config, tokenizer=other_tok)
        _one_line(e)
        return
    # same size, [PAD] and [UNK] swapped: the pad id disagrees with the model's config
    swapped = _bert_tokenizer(tmp_path, lambda v: [v[1], v[0]] + v[2:])
    with pytest.raises(ValueError, match="has pad_token_id 1 but the model's config has 0") as e:
        get_instance_prompt_model(classifier_from(mlm), config, tokenizer=swapped)
    _one_line(e)


@pytest.mark.parametrize("case", ["ipt-random", "prefix_ipt-random", "p_tuning_v2-kv"])
def test_a_vocabulary_padded_to_a_multiple_wraps_and_reloads(bert, case, tmp_path):
    """``tokenizer.add_tokens(...); base.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=8)`` (the base
    has more rows than the tokenizer has tokens, as models padded for tensor cores do) was refused as "another
    model's tokenizer". The table has a row per row of the base's embeddings; a tokenizer larger than the base names
    the resize; a gap wider than a padded vocabulary's is still another model's tokenizer."""
    mlm, tok = bert
    tok = copy.deepcopy(tok)
    tok.add_tokens(["newword"])
    base = classifier_from(mlm, initializer_range=0.2)
    base.resize_token_embeddings(len(tok), pad_to_multiple_of=8)
    assert (len(tok), base.config.vocab_size) == (58, 64)
    model = _wrap(base, case, tmp_path, mlm, tok).eval()
    batch = tok(["the newword movie was great", "a bad film"], return_tensors="pt", padding=True,
                return_special_tokens_mask=True)
    with torch.no_grad():
        expected = model(**batch).logits
    model.save_pretrained(str(tmp_path / "saved"))
    loaded = InstancePromptModel.from_pretrained(copy.deepcopy(base), str(tmp_path / "saved"), tok)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, expected, rtol=0, atol=1e-6)
    more = copy.deepcopy(tok)
    more.add_tokens([f"word{i}" for i in range(7)])  # 65 tokens on the 64 rows: ids past the base's table
    with pytest.raises(ValueError, match=r"has 65 tokens but the model's vocabulary has 64: after tokenizer"
                                         r".add_tokens\(...\), resize the base first") as e:
        get_instance_prompt_model(copy.deepcopy(base), config_for(case, tmp_path, mlm), tokenizer=more)
    _one_line(e)
    wide = copy.deepcopy(base)
    wide.resize_token_embeddings(58 + 128)
    with pytest.raises(ValueError, match=r"has 58 tokens but the model's vocabulary has 186 \(a vocabulary padded"):
        get_instance_prompt_model(wide, config_for(case, tmp_path, mlm), tokenizer=tok)


def test_loading_with_another_tokenizer_than_saved_is_one_line(bert, tmp_path):
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("p_tuning_v2", prompt_length=2),
                                      tokenizer=tok)
    model.save_pretrained(str(tmp_path / "p"))
    # same size and special ids, two words swapped: only the saved record can tell
    words_swapped = _bert_tokenizer(tmp_path, lambda v: v[:5] + [v[6], v[5]] + v[7:])
    with pytest.raises(ValueError, match="was saved with tokenizer .* has another vocabulary") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), words_swapped)
    _one_line(e)
    InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), tok)  # the right one loads


def test_another_hub_name_with_agreeing_ids_is_one_warning(bert):
    mlm, tok = bert
    model = classifier_from(mlm)
    model.config._name_or_path, tok.name_or_path = "google/electra-small-discriminator", "bert-base-uncased"
    with pytest.warns(UserWarning, match="tokenizer 'bert-base-uncased' and model 'google/electra-small-discriminator' "
                                         "have different names") as record:
        get_instance_prompt_model(model, InstancePromptConfig("prompt_tuning", prompt_length=2), tokenizer=tok)
    assert all("\n" not in str(w.message) for w in record)


def test_a_checkpoint_of_another_prompt_config_is_one_line(bert, tmp_path):
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("p_tuning_v2", prompt_length=2),
                                      tokenizer=tok)
    other = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("p_tuning_v2", prompt_length=3),
                                      tokenizer=tok)
    with pytest.raises(ValueError, match="the checkpoint holds a 'p_tuning_v2' prompt of another config") as e:
        model.load_state_dict(other.state_dict())
    _one_line(e)
    model.load_state_dict(model.state_dict())  # strict: the frozen base is not expected


def test_push_to_hub_uploads_what_save_pretrained_writes(bert, tmp_path, monkeypatch):
    """#42: ``push_to_hub`` follows ``save_pretrained``'s path: the trained tensors and the config, not the frozen
    base (attribute forwarding would otherwise push the whole base model). The hub is unreachable here, so the
    client's two calls are recorded instead."""
    import huggingface_hub

    mlm, tok = bert
    model = _wrap(classifier_from(mlm), "p_tuning_v2-kv", tmp_path, mlm, tok)
    calls = {}

    def create_repo(self, repo_id, **kwargs):
        calls["repo"] = repo_id
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, *, repo_id, folder_path, **kwargs):
        calls["files"] = sorted(os.listdir(folder_path))
        calls["sizes"] = {f: os.path.getsize(os.path.join(folder_path, f)) for f in calls["files"]}
        return "ok"

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    assert model.push_to_hub("me/my-prompt") == "ok"
    assert calls["repo"] == "me/my-prompt"
    assert calls["files"] == ["instance_prompt_config.json", "model.safetensors"]
    model.save_pretrained(str(tmp_path / "local"))
    assert calls["sizes"]["model.safetensors"] == os.path.getsize(tmp_path / "local" / "model.safetensors")
