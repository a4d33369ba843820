"""The 🤗 Transformers door (openprompt_ipt.hf) under the real ``Trainer`` as constructed by default, on tiny
BERT and RoBERTa sequence classifiers, for every method it covers: the loss falls, only the prompt, its
generator and the head change, the backbone stays bit-identical, save_pretrained -> from_pretrained gives the
same logits, and for the same weights the hidden states equal those of the OpenPrompt template path."""
import copy

import pytest
import torch

from conftest import WORDS
from helpers import TEXT, clone, examples, loader_for, run_process_group
from openprompt_ipt.hf import (METHODS, InstancePromptConfig, InstancePromptModel, MethodSpec, get_instance_prompt_model,
                               instance_tokens, register_method)

pytestmark = pytest.mark.usefixtures("one_thread")


def _glove(tmp_path):
    path = tmp_path / "glove.8d.txt"
    gen = torch.Generator().manual_seed(0)
    path.write_text("".join(w + " " + " ".join(f"{v:.4f}" for v in torch.randn(8, generator=gen).tolist()) + "\n"
                            for w in WORDS))
    return str(path)


def _table(tmp_path, model):
    from openprompt_ipt.generators import save_table

    path = str(tmp_path / "table.safetensors")
    save_table(path, torch.randn(*model.get_input_embeddings().weight.shape) * 0.02, {"tokenizer": "tiny"})
    return path


# every method the door covers, with small generators; "{table}" / "{glove}" are files the test writes
CASES = {
    "prompt_tuning": dict(method="prompt_tuning", prompt_length=4),
    "ipt-random": dict(method="ipt", prompt_length=3, task_prompt_length=2),
    "ipt-pretrained": dict(method="ipt", strategy="pretrained", prompt_length=3, options={"pretrained_path": "{table}"}),
    "ipt-encoder": dict(method="ipt", strategy="encoder", prompt_length=3, options={"encoder": "mlp", "encoder_hidden": 8}),
    "prefix_tuning": dict(method="prefix_tuning", prompt_length=3, options={"reparam_hidden": 8}),
    "p_tuning_v2-kv": dict(method="p_tuning_v2", prompt_length=3),
    "p_tuning_v2-hidden": dict(method="p_tuning_v2", injection="hidden", prompt_length=3),
    "prefix_ipt-random": dict(method="prefix_ipt", prompt_length=3, options={"projection_hidden": 8}),
    "prefix_ipt-pretrained": dict(method="prefix_ipt", strategy="pretrained", prompt_length=3,
                                  options={"pretrained_path": "{table}", "projection_hidden": 8}),
    "prefix_ipt-encoder": dict(method="prefix_ipt", strategy="encoder", prompt_length=3,
                               options={"encoder": "textcnn", "encoder_hidden": 8, "projection_hidden": 8}),
    "s_idpg-dnn-cls": dict(method="s_idpg", prompt_length=3, options={"layer": "dnn", "hidden": 8}),
    "s_idpg-phm-static": dict(method="s_idpg", prompt_length=3, options={"layer": "phm", "phm_n": 4, "hidden": 8,
                                                                         "encoder": "static_mean"}),
    "m_idpg-phm-cls": dict(method="m_idpg", prompt_length=3, options={"layer": "phm", "phm_n": 4, "hidden": 8}),
    "m_idpg-dnn-glove": dict(method="m_idpg", prompt_length=3, options={"layer": "dnn", "hidden": 8,
                                                                        "encoder": "glove", "glove_path": "{glove}"}),
    "m_idpg-dnn-static-kv": dict(method="m_idpg", injection="kv", prompt_length=3,
                                 options={"layer": "dnn", "hidden": 8, "encoder": "static_mean"}),
    # late prompts (issue #41): after layer 1 of the tiny models' 2
    **{f"lpt-{k}": dict(method="lpt", prompt_length=3, late_layer=1, options={"kind": k, "bottleneck": 8})
       for k in ("npg", "appg", "mppg", "plain")},
    "late_ipt-random": dict(method="late_ipt", prompt_length=3, late_layer=1, options={"projection_hidden": 8}),
    "s_idpg-late": dict(method="s_idpg", injection="late", late_layer=1, prompt_length=3,
                        options={"layer": "dnn", "hidden": 8}),
}
TRAINED = ("generator.", "task_prompt", "base_model.classifier.")


def config_for(case, tmp_path, model):
    kw = copy.deepcopy(CASES[case])
    for key, value in kw.get("options", {}).items():
        if value == "{table}":
            kw["options"][key] = _table(tmp_path, model)
        elif value == "{glove}":
            kw["options"][key] = _glove(tmp_path)
    return InstancePromptConfig(**kw)


def classifier_from(mlm, num_labels=2, initializer_range=None):
    """A sequence classifier of the masked LM's family and size: with the masked LM's backbone weights (its head
    and pooler fresh), or all fresh at ``initializer_range``. At the default 0.02 a tiny random encoder gives
    every sentence nearly the same [CLS] state (std 0.002 across examples), so nothing can learn from it."""
    from transformers import AutoModelForSequenceClassification

    cfg = copy.deepcopy(mlm.config)
    cfg.num_labels = num_labels
    if initializer_range is not None:
        cfg.initializer_range = initializer_range
    torch.manual_seed(1)
    model = AutoModelForSequenceClassification.from_config(cfg)
    if initializer_range is None:
        missing, unexpected = model.base_model.load_state_dict(mlm.base_model.state_dict(), strict=False)
        assert not unexpected and all(k.startswith("pooler") for k in missing)
    return model.eval()


POSITIVE = ["the movie was great", "a good film", "great music is art", "she said it was good", "good dog",
            "the film was great and good", "great world", "we think it is good"]
NEGATIVE = ["the movie was terrible", "a bad film", "terrible music", "he said it was bad", "bad cat",
            "the film was terrible and bad", "slow and bad", "they think it is terrible"]


def dataset(tok):
    from datasets import Dataset

    ds = Dataset.from_dict({"text": POSITIVE + NEGATIVE, "label": [1] * len(POSITIVE) + [0] * len(NEGATIVE)})
    return ds.map(lambda b: tok(b["text"], return_special_tokens_mask=True), batched=True)


def trainer_for(model, tok, ds, out_dir, **args):
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    args = TrainingArguments(output_dir=str(out_dir), report_to="none", use_cpu=True, disable_tqdm=True,
                             **{"num_train_epochs": 15, "per_device_train_batch_size": 4, "learning_rate": 1e-2, **args})
    return Trainer(model=model, args=args, train_dataset=ds, eval_dataset=ds, data_collator=DataCollatorWithPadding(tok))


@pytest.mark.parametrize("case", list(CASES))
def test_trainer_trains_only_the_prompt_and_head_and_reloads(plm, case, tmp_path):
    mlm, tok = plm
    base = classifier_from(mlm, initializer_range=0.2)
    fresh = copy.deepcopy(base)
    model = get_instance_prompt_model(base, config_for(case, tmp_path, mlm), tokenizer=tok)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(n.startswith(TRAINED) for n in trainable), trainable
    assert any(n.startswith(("generator.", "task_prompt")) for n in trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ds = dataset(tok)
    # Prompt Tuning (4 vectors, the least capacity) is the slowest learner here: on transformers 4.39 its
    # RoBERTa loss fell by only 0.019 in 15 epochs; so did the plain late prompt's (BERT, 0.017), once the head read
    # [CLS] rather than the trained vector itself
    slow = case in ("prompt_tuning", "lpt-plain")
    trainer = trainer_for(model, tok, ds, tmp_path / "run", **({"num_train_epochs": 30} if slow else {}))
    loss0 = trainer.evaluate()["eval_loss"]
    trainer.train()
    loss1 = trainer.evaluate()["eval_loss"]
    assert loss1 < loss0 - 0.03, (loss0, loss1)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert changed <= set(trainable)
    assert any(n.startswith(("generator.", "task_prompt")) for n in changed), changed
    assert any(n.startswith("base_model.classifier.") for n in changed)
    for n, p in model.named_parameters():  # the frozen backbone: bit-identical
        if not p.requires_grad:
            assert torch.equal(p, before[n]), n

    model.save_pretrained(str(tmp_path / "saved"))
    loaded = InstancePromptModel.from_pretrained(fresh, str(tmp_path / "saved"), tokenizer=tok).eval()
    batch = tok(POSITIVE[:3] + NEGATIVE[:3], padding=True, return_tensors="pt", return_special_tokens_mask=True)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_same_weights_same_hidden_states_as_the_template_path(plm, case, tmp_path):
    """The OpenPrompt door (template + PromptModel on the masked LM) and the 🤗 door (on a classifier with the
    same backbone) read the same tokens and, with the same prompt weights, give the same hidden states."""
    import openprompt_ipt
    from openprompt import PromptModel

    mlm, tok = plm
    config = config_for(case, tmp_path, mlm)
    name, kwargs = config.template_arguments()
    template = getattr(openprompt_ipt, name)(mlm, tok, text=TEXT, **kwargs)
    prompt_model = PromptModel(mlm, template, freeze_plm=True, plm_eval_mode=True).eval()
    ours = get_instance_prompt_model(classifier_from(mlm), config, tokenizer=tok).eval()
    missing, unexpected = ours.load_state_dict(template.state_dict(), strict=False)
    assert not unexpected or all(k.startswith(("raw_embedding", "soft_embedding")) for k in unexpected)
    assert not [k for k in missing if k.startswith(("generator", "task_prompt"))]

    batch = next(iter(loader_for(prompt_model, tok, examples(4), 4)))
    flag = "text_part_ids" if name == "GeneratedPrefixTemplate" else "instance_token_ids"
    own = batch[flag] > 0
    inputs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  special_tokens_mask=(~own).long())  # the tokens the template reads as the example's own
    if "token_type_ids" in batch and batch["token_type_ids"] is not None:
        inputs["token_type_ids"] = batch["token_type_ids"]
    with torch.no_grad():
        theirs = prompt_model(clone(batch)).hidden_states
        mine = ours(**inputs, output_hidden_states=True).hidden_states
    assert len(theirs) == len(mine)
    for a, b in zip(theirs, mine):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)


def test_instance_tokens_from_the_tokenizer_output(plm):
    """Pairs: text_a -> part 1, text_b -> part 2 for BERT's [SEP] and RoBERTa's </s></s>; without the
    special-tokens mask the tokenizer's special ids give the same tokens."""
    _, tok = plm
    enc = tok(["the cat sat", "a dog"], ["is it good", "yes"], padding=True, return_tensors="pt",
              return_special_tokens_mask=True)
    content, parts = instance_tokens(enc["input_ids"], enc["attention_mask"], enc["special_tokens_mask"])
    words = lambda row, part: tok.decode(enc["input_ids"][row][parts[row] == part]).split()  # noqa: E731
    assert words(0, 1) == ["the", "cat", "sat"] and words(0, 2) == ["is", "it", "good"]
    assert words(1, 1) == ["a", "dog"] and words(1, 2) == ["yes"]
    special = torch.tensor(tok.all_special_ids)
    again, parts2 = instance_tokens(enc["input_ids"], enc["attention_mask"], special_ids=special)
    assert torch.equal(again, content) and torch.equal(parts2, parts)


# ---- bad input: one line each ----------------------------------------------------------------------
def _one_line(excinfo):
    assert "\n" not in str(excinfo.value)
    return str(excinfo.value)


def test_unsupported_architecture_names_the_supported_families(bert):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    _, tok = bert
    gpt = GPT2ForSequenceClassification(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match=r"unsupported architecture 'gpt2'.*bert, roberta") as e:
        get_instance_prompt_model(gpt, InstancePromptConfig("prompt_tuning"), tokenizer=tok)
    _one_line(e)


@pytest.mark.parametrize("method", ["ipt", "m_idpg"])
def test_prompt_longer_than_the_models_positions(bert, method):
    mlm, tok = bert
    with pytest.raises(ValueError, match="no room under the model's 128 positions") as e:
        get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig(method, prompt_length=200), tokenizer=tok)
    _one_line(e)


def test_saved_directory_for_another_base_model_or_method(plm, bert, tmp_path):
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("p_tuning_v2", prompt_length=2),
                                      tokenizer=tok)
    model.save_pretrained(str(tmp_path / "p"))
    with pytest.raises(ValueError, match="holds a 'p_tuning_v2' prompt, not 'm_idpg'") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), tokenizer=tok, method="m_idpg")
    _one_line(e)
    with pytest.raises(ValueError, match="saved for another base model") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm, num_labels=3), str(tmp_path / "p"), tokenizer=tok)
    _one_line(e)
    other, other_tok = plm
    if other.config.model_type != "bert":
        with pytest.raises(ValueError, match="saved for another base model") as e:
            InstancePromptModel.from_pretrained(classifier_from(other), str(tmp_path / "p"), tokenizer=other_tok)
        _one_line(e)
    with pytest.raises(FileNotFoundError, match="has no model.safetensors: save the model again") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path), tokenizer=tok)
    _one_line(e)


def test_batch_without_attention_mask(bert):
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("ipt", prompt_length=2), tokenizer=tok)
    enc = tok(["the cat sat"], return_tensors="pt")
    with pytest.raises(ValueError, match="no attention_mask") as e:
        model(input_ids=enc["input_ids"])
    _one_line(e)


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_two_processes_match_one(bert, case, tmp_path):
    """The default Trainer under torchrun (2 CPU processes, gloo, 2 examples each) ends at the weights one
    process reaches with batches of 4: the same global batches, gradients averaged across the processes."""
    import os
    import subprocess
    import sys

    from safetensors.torch import load_file

    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "hf_trainer_ddp.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [os.path.join(here, os.pardir), os.environ.get("PYTHONPATH")]))}
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU processes (gloo) also where a GPU is present
    mlm, tok = bert
    mlm_dir = str(tmp_path / "mlm")
    mlm.save_pretrained(mlm_dir)
    tok.save_pretrained(mlm_dir)
    one = subprocess.run([sys.executable, script, mlm_dir, str(tmp_path / "one"), case, "4"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-2000:]
    # --standalone: the rendezvous store binds port 0 and the workers share it, so concurrent runs never collide
    two = run_process_group([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                             script, mlm_dir, str(tmp_path / "two"), case, "2"], env=env, timeout=300)
    ranks = [line for line in two.stderr.splitlines() if line.startswith("[rank")]  # each rank's traceback
    assert two.returncode == 0, "\n".join(ranks[:60]) + "\n...\n" + two.stderr[-3000:]
    assert "processes 2" in two.stdout and "processes 1" in one.stdout, (one.stdout[-500:], two.stdout[-500:])
    a = load_file(str(tmp_path / "one" / "prompt" / "model.safetensors"))
    b = load_file(str(tmp_path / "two" / "prompt" / "model.safetensors"))
    assert a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a)
    # both runs are deterministic: the gap is the same every run, under load or not (max 1.2e-7 for p_tuning_v2-kv,
    # 7.2e-7 for m_idpg-phm-cls; 2e-7 on transformers 4.39), float rounding of 2+2 vs 4 rows; 1e-5 leaves >10x
    gaps = {k: (b[k].double() - a[k].double()).abs().max().item() for k in a}
    assert max(gaps.values()) <= 1e-5, f"per-tensor max |two - one|: {gaps}"


def test_example_runs_on_the_quick_start_data(bert, tmp_path):
    """examples/hf_trainer.py end to end (quick start data, Trainer, save, reload, test) on a tiny BERT checkpoint."""
    import importlib.util
    import os

    from safetensors.torch import load_file

    mlm, tok = bert
    path = str(tmp_path / "ckpt")
    mlm.save_pretrained(path)
    tok.save_pretrained(path)
    spec = importlib.util.spec_from_file_location(
        "hf_trainer_example", os.path.join(os.path.dirname(__file__), os.pardir, "examples", "hf_trainer.py"))
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.main(["--model", path, "--max-train", "80", "--epochs", "1",
                            "--output-dir", str(tmp_path / "out")])
    assert sorted(results) == ["m_idpg_phm", "prefix_ipt"] and all(0.0 <= v <= 1.0 for v in results.values())
    assert os.path.isfile(tmp_path / "out" / "prefix_ipt" / "prompt" / "instance_prompt_config.json")
    # the same --seed gives the same trained prompt, whatever the global RNG held before (torch 2.13 seeds it afresh
    # in every process): the model was built before the Trainer seeded anything, so each run drew another prompt
    trained = []
    for before in (1, 2):
        torch.manual_seed(before)
        out = tmp_path / f"seeded{before}"
        example.main(["--model", path, "--max-train", "80", "--epochs", "1", "--methods", "m_idpg_phm",
                      "--output-dir", str(out), "--seed", "7"])
        trained.append(load_file(str(out / "m_idpg_phm" / "prompt" / "model.safetensors")))
    assert trained[0].keys() == trained[1].keys() and all(torch.equal(trained[0][k], trained[1][k]) for k in trained[0])


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_masked_lm_with_label_words(plm, case, tmp_path):
    """AutoModelForMaskedLM + label words: the class logits are the label words' logits at the mask token; the
    default Trainer lowers the loss training only the prompt (the whole masked LM, its head included, stays
    bit-identical), and save -> load gives the same logits."""
    from transformers import AutoModelForMaskedLM

    mlm, tok = plm
    cfg = copy.deepcopy(mlm.config)
    cfg.initializer_range = 0.2
    torch.manual_seed(1)
    base = AutoModelForMaskedLM.from_config(cfg).eval()
    fresh = copy.deepcopy(base)
    config = config_for(case, tmp_path, mlm)
    config.label_words = [["bad", "terrible"], ["good"]]
    model = get_instance_prompt_model(base, config, tokenizer=tok)
    assert all(n.startswith(("generator.", "task_prompt")) for n, p in model.named_parameters() if p.requires_grad)
    before = {n: p.detach().clone() for n, p in model.base_model.named_parameters()}
    ds = dataset(tok).map(lambda b: tok([f"{t} it was {tok.mask_token}" for t in b["text"]],
                                         return_special_tokens_mask=True), batched=True)
    # save_strategy epoch: transformers 4.39 writes no checkpoint before save_steps (500) by default
    trainer = trainer_for(model, tok, ds, tmp_path / "run", num_train_epochs=40, learning_rate=3e-2,
                          save_strategy="epoch", save_total_limit=1)
    loss0 = trainer.evaluate()["eval_loss"]
    trainer.train()
    assert trainer.evaluate()["eval_loss"] < loss0 - 0.03
    from safetensors.torch import load_file  # the Trainer's own checkpoint: only what trains (tied head or not)
    checkpoints = sorted((tmp_path / "run").glob("checkpoint-*/model.safetensors"))
    assert checkpoints and set(load_file(str(checkpoints[-1]))) == {n for n, p in model.named_parameters()
                                                                     if p.requires_grad} | {"instance_prompt_config"}
    for n, p in model.base_model.named_parameters():
        assert torch.equal(p, before[n]), n
    batch = tok([f"a good film it was {tok.mask_token}", f"bad cat {tok.mask_token}"], padding=True,
                return_tensors="pt")
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
        assert logits.shape == (2, 2)
        ids = [tok.convert_tokens_to_ids(tok.tokenize(" " + w))[0] for w in ("bad", "terrible", "good")]
        assert ids[0] != ids[2]
        model.save_pretrained(str(tmp_path / "saved"))
        loaded = InstancePromptModel.from_pretrained(fresh, str(tmp_path / "saved"), tokenizer=tok).eval()
        # 1e-5: plm_cls's M(x) of these texts comes from the cache the training batches filled (other widths)
        torch.testing.assert_close(loaded(**batch).logits, logits, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="exactly one mask token") as e:
        model(**tok(["no mask here"], return_tensors="pt"))
    _one_line(e)


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_gradient_accumulation_and_bf16_under_the_trainer(plm, case, tmp_path):
    """The Trainer's own gradient accumulation and (CPU) bf16 autocast drive the wrapped model unchanged: the
    loss falls, the backbone stays bit-identical, and the prompt's weights stay fp32 (autocast computes in bf16)."""
    mlm, tok = plm
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), config_for(case, tmp_path, mlm),
                                      tokenizer=tok)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    trainer = trainer_for(model, tok, dataset(tok), tmp_path / "run", per_device_train_batch_size=2,
                          gradient_accumulation_steps=2, bf16=True)
    loss0 = trainer.evaluate()["eval_loss"]
    trainer.train()
    assert trainer.evaluate()["eval_loss"] < loss0 - 0.03
    assert trainer.state.global_step == 15 * 4  # 16 rows / (2 x 2) per optimizer step, 15 epochs
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    assert {p.dtype for p in model.parameters() if p.requires_grad} == {torch.float32}


@pytest.mark.parametrize("kw, line", [
    (dict(method="nope"), "unknown method 'nope': choose one of"),
    (dict(method="ipt", prompt_length=-1), r"prompt_length=-1 is not allowed: give an integer >= 1"),
    (dict(method="prompt_tuning", prompt_length=2.7), r"prompt_length=2.7 is not allowed: give an integer >= 1"),
    (dict(method="ipt", task_prompt_length=-2), r"task_prompt_length=-2 is not allowed: give an integer >= 0"),
])
def test_a_bad_config_value_is_one_line_when_the_config_is_made(kw, line):
    with pytest.raises(ValueError, match=line) as e:
        InstancePromptConfig(**kw)
    assert "\n" not in str(e.value)


def test_a_damaged_saved_config_is_one_line_naming_it(bert, tmp_path):
    mlm, tok = bert
    (tmp_path / "instance_prompt_config.json").write_text('{"prompt": {"method": "prompt_tu')  # cut short
    with pytest.raises(ValueError, match=r"instance_prompt_config.json' is damaged or truncated") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path), tokenizer=tok)
    assert "\n" not in str(e.value) and "save_pretrained" in str(e.value)


def test_register_method_replaces_your_preset_but_refuses_a_built_in_one(monkeypatch):
    """A notebook cell run again (or edited) re-registers its preset; a built-in name keeps its meaning, since every
    config and saved model naming it would otherwise build the preset without a word."""
    monkeypatch.setitem(METHODS, "my_ipt", METHODS["ipt"])  # both as they were after the test, whatever happens
    monkeypatch.setitem(METHODS, "ipt", METHODS["ipt"])
    register_method("my_ipt", MethodSpec("input", uses_strategy=True, description="v2"))
    assert METHODS["my_ipt"].description == "v2"
    register_method("ipt", METHODS["ipt"])  # the same spec again: nothing changes
    with pytest.raises(ValueError, match="'ipt' is a built-in method"):
        register_method("ipt", MethodSpec("input", description="mine"))
    assert METHODS["ipt"].uses_strategy and InstancePromptConfig("ipt").method == "ipt"
