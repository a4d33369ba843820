"""The 🤗 door beyond the Trainer habits (test_hf_trainer_habits.py): the mode a model is handed back in, bases in
bf16, heads other than sequence classification, and from_pretrained's keyword arguments; tiny BERT and RoBERTa."""
import copy
import os
import warnings

import pytest
import torch

from test_hf_trainer import _one_line, classifier_from, config_for, dataset, trainer_for
from test_hf_trainer_habits import _batch, _trained, _wrap
from openprompt_ipt.hf import InstancePromptModel, SharedBaseWarning, get_instance_prompt_model

pytestmark = pytest.mark.usefixtures("one_thread")

# generators with dropout of their own: in training mode two calls give two different logits
WITH_DROPOUT = ["ipt-encoder", "prefix_ipt-encoder", "lpt-npg"]


@pytest.mark.parametrize("case", WITH_DROPOUT)
def test_a_loaded_model_predicts_the_same_twice_and_trains_further(plm, case, tmp_path):
    """from_pretrained hands back a model ready to predict (eval mode, as transformers' and PEFT's), so a
    generator's dropout cannot change its logits from call to call; the Trainer still trains it further."""
    mlm, tok = plm
    base = classifier_from(mlm, initializer_range=0.2)
    model = _wrap(base, case, tmp_path, mlm, tok)
    assert not model.training  # the base's mode (classifier_from gives eval), not nn.Module's default
    model.save_pretrained(str(tmp_path / "p"))
    loaded = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(tmp_path / "p"), tok)
    assert not any(m.training for m in loaded.modules())
    batch = _batch(tok)
    with torch.no_grad():
        first, second = loaded(**batch).logits, loaded(**batch).logits
        saved = model(**batch).logits
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    torch.testing.assert_close(first, saved, rtol=0, atol=1e-6)
    before = _trained(loaded)
    trainer_for(loaded, tok, dataset(tok), tmp_path / "more", max_steps=2, save_strategy="no").train()
    assert any(not torch.equal(p, before[n]) for n, p in _trained(loaded).items())


@pytest.mark.parametrize("case", ["ipt-encoder", "prefix_ipt-encoder", "m_idpg-phm-cls", "lpt-npg"])
def test_a_base_loaded_in_bf16(plm, case, tmp_path):
    """A base in bf16 (``from_pretrained(..., dtype=torch.bfloat16)``) wrapped as it is: the prompt generators
    read the PLM's bf16 embeddings and predict what the fp32 model predicts, to bf16's precision."""
    mlm, tok = plm
    base = classifier_from(mlm, initializer_range=0.2)
    full = _wrap(base, case, tmp_path, mlm, tok)
    half = _wrap(base.to(torch.bfloat16), case, tmp_path, mlm, tok)
    half.load_state_dict(full.state_dict())
    batch = _batch(tok)
    with torch.no_grad():
        logits = half(**batch).logits
        expected = full(**batch).logits
    assert logits.dtype == torch.bfloat16
    torch.testing.assert_close(logits.float(), expected, rtol=0, atol=0.1)


@pytest.mark.parametrize("case", ["prompt_tuning", "ipt-random"])
def test_a_bf16_base_trains_its_task_prompt_in_fp32(plm, case, tmp_path):
    """On a base loaded in bf16 the task prompt was a bf16 copy of embedding rows while every generator is fp32:
    AdamW's steps at the Trainer's default lr (5e-5) fell below bf16's spacing at its values (~1e-4 at 0.02) and
    were rounded away, so the task prompt did not train. It is fp32 now, like the generators; save_pretrained
    writes it as fp32 (the head in the base's dtype) and an fp32 model loads the same values."""
    mlm, tok = plm
    model = _wrap(classifier_from(mlm).to(torch.bfloat16), case, tmp_path, mlm, tok).train()
    own = {n: p for n, p in model.named_parameters() if not n.startswith("base_model.")}
    assert {p.dtype for p in own.values()} == {torch.float32} and model.task_prompt is not None
    before = model.task_prompt.detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-5)
    for _ in range(2):
        model(**_batch(tok), labels=torch.tensor([1, 1, 1, 0, 0, 0])).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert bool((model.task_prompt != before).all())  # every value moved, none rounded away
    model.save_pretrained(str(tmp_path / "p"))
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "p" / "model.safetensors"))
    assert saved["task_prompt"].dtype == torch.float32
    assert {v.dtype for k, v in saved.items() if k.startswith("base_model.classifier.")} == {torch.bfloat16}
    loaded = InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), tok)
    torch.testing.assert_close(loaded.task_prompt, model.task_prompt, rtol=0, atol=0)


@pytest.mark.parametrize("case", ["m_idpg-phm-cls", "s_idpg-dnn-cls"])
def test_a_cast_model_does_not_reuse_the_cached_sentence_representations(plm, case, tmp_path):
    """IDPG's [CLS] encoder caches M(x) per text and drops the cache when a PLM weight changes; ``model.half()`` /
    ``.to(torch.bfloat16)`` / ``.float()`` swap ``param.data`` and keep its version, so texts seen before the cast
    were read with the other dtype's M(x) (bf16 logits off by ~1e-2 from a fresh pass: predictions depended on what
    the model had seen); so did M(x) cached under autocast (the Trainer's ``bf16=True``) for a later fp32 predict.
    A cast or another autocast now empties it: every call equals a pass without the cache, bit for bit."""
    from openprompt_ipt.generators.sentence import PLMClsEncoder

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok).eval()
    batch = _batch(tok)

    def uncached(m):
        fresh = copy.deepcopy(m)
        for encoder in (e for e in fresh.modules() if isinstance(e, PLMClsEncoder)):
            encoder.cache.clear()
        return fresh(**batch).logits

    with torch.no_grad():
        model(**batch)  # the texts' M(x), cached in fp32
        for cast in (torch.bfloat16, torch.float32, torch.float16):
            model.to(cast)
            torch.testing.assert_close(model(**batch).logits, uncached(model), rtol=0, atol=0)
        model.float()
        with torch.autocast("cpu", dtype=torch.bfloat16):  # cached under autocast, as Trainer(bf16=True) trains
            model(**batch)
        torch.testing.assert_close(model(**batch).logits, uncached(model), rtol=0, atol=0)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "lpt-npg"])
def test_a_base_on_the_meta_device_is_one_line(bert, case, tmp_path):
    """A base made under accelerate's ``init_empty_weights`` (or offloaded to disk) has no values to start the
    prompt from: the wrap said ``Tensor.item() cannot be called on meta tensors``; now one line with the fix."""
    from accelerate import init_empty_weights

    mlm, tok = bert
    with init_empty_weights():
        base = classifier_from(mlm, initializer_range=0.2)
    with pytest.raises(ValueError, match="weights are on the meta device .* load the weights first") as e:
        _wrap(base, case, tmp_path, mlm, tok)
    _one_line(e)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "lpt-npg"])
def test_a_loaded_base_wrapped_under_init_empty_weights_is_one_line(bert, case, tmp_path):
    """The base has its weights, but the wrap ran inside ``init_empty_weights()``: the prompt came out on the meta
    device, and the first forward raised torch's "Tensor on device cpu is not on the expected device meta!"."""
    from accelerate import init_empty_weights

    mlm, tok = bert
    base = classifier_from(mlm)
    hooks = sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in base.modules())
    with init_empty_weights(), pytest.raises(ValueError, match=r"the prompt was made on the meta device \(.*\): "
                                             r"accelerate's init_empty_weights\(\) was on .* wrap the loaded base "
                                             "outside init_empty_weights") as e:
        get_instance_prompt_model(base, config_for(case, tmp_path, mlm), tokenizer=tok)
    _one_line(e)
    assert sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in base.modules()) == hooks  # left as it was
    assert all(p.requires_grad for p in base.parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)  # the refused wrap left no mark on the base
        model = get_instance_prompt_model(base, config_for(case, tmp_path, mlm), tokenizer=tok)  # outside: it trains
    model(**_batch(tok), labels=torch.tensor([0, 1, 0, 1, 0, 1])).loss.backward()


def _head(mlm, auto_class, num_labels=3):
    import transformers

    cfg = copy.deepcopy(mlm.config)
    cfg.num_labels = num_labels
    torch.manual_seed(1)
    return getattr(transformers, auto_class).from_config(cfg).eval()


@pytest.mark.parametrize("auto_class", ["AutoModelForQuestionAnswering", "AutoModelForMultipleChoice"])
def test_a_head_whose_positions_the_prompt_would_shift_is_one_line(bert, auto_class, tmp_path):
    """A QA head's start / end logits came back with the prompt's positions in them (answer spans silently off by
    the prompt); a multiple-choice head crashed in the first forward. Both are refused when the prompt is built."""
    mlm, tok = bert
    with pytest.raises(ValueError, match="is not supported: its outputs per position would count the prompt") as e:
        _wrap(_head(mlm, auto_class, num_labels=2), "ipt-random", tmp_path, mlm, tok)
    _one_line(e)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv", "m_idpg-phm-cls", "s_idpg-dnn-cls", "lpt-mppg"])
def test_token_level_heads_at_the_callers_positions(plm, case, tmp_path):
    """A token classifier's logits, its loss and a bare encoder's last_hidden_state are at the tokenizer's
    positions, whatever the prompt adds: logits = classifier(last hidden state), the loss is the head's
    cross-entropy over them (-100 ignored), and the Trainer trains it."""
    mlm, tok = plm
    model = _wrap(_head(mlm, "AutoModelForTokenClassification"), case, tmp_path, mlm, tok)
    batch = _batch(tok)
    labels = (batch["input_ids"] % 3).masked_fill(batch["special_tokens_mask"].bool(), -100)
    with torch.no_grad():
        out = model(**batch, labels=labels, output_hidden_states=True)
        expected = model.classifier(out.hidden_states[-1])
    assert out.logits.shape == (*batch["input_ids"].shape, 3)
    torch.testing.assert_close(out.logits, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(expected.flatten(0, 1), labels.flatten()),
                               rtol=0, atol=1e-5)
    assert model(**batch, labels=labels, return_dict=False)[0].ndim == 0  # the loss first, as the head's tuple
    from datasets import Dataset

    rows = Dataset.from_dict({k: v.tolist() for k, v in dict(batch, labels=labels).items()})
    before = _trained(model)
    trainer_for(model, tok, rows, tmp_path / "run", max_steps=2, save_strategy="no").train()
    assert any(not torch.equal(p, before[n]) for n, p in _trained(model).items())

    encoder = _wrap(_head(mlm, "AutoModel"), case, tmp_path, mlm, tok)
    with torch.no_grad():
        out = encoder(**batch, output_hidden_states=True)
    assert out.last_hidden_state.shape[:2] == batch["input_ids"].shape
    torch.testing.assert_close(out.last_hidden_state, out.hidden_states[-1], rtol=0, atol=0)


@pytest.mark.parametrize("case", ["ipt-random", "m_idpg-phm-cls"])
def test_a_model_frozen_for_inference_still_saves_its_prompt(plm, case, tmp_path):
    """``model.requires_grad_(False)`` (an inference habit) then ``save_pretrained`` over the trained folder wrote
    a model.safetensors holding the config alone: the trained prompt was gone, and the folder no longer loaded.
    A checkpoint holds what trained since the prompt was built; ``from_pretrained(..., is_trainable=False)``
    (PEFT's keyword) hands back such a frozen model, which saves and loads as the trained one."""
    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok)
    folder = str(tmp_path / "p")
    model.save_pretrained(folder)
    model.requires_grad_(False)
    model.save_pretrained(folder)  # over the trained folder
    frozen = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), folder, tok,
                                                 is_trainable=False)
    assert frozen.num_trainable_parameters() == 0 and not frozen.training
    frozen.save_pretrained(str(tmp_path / "again"))
    loaded = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(tmp_path / "again"), tok)
    assert loaded.num_trainable_parameters() == sum(p.numel() for p in model.saved_parameters().values()) > 0
    batch = _batch(tok)
    with torch.no_grad():
        expected = model.eval()(**batch).logits
        torch.testing.assert_close(frozen(**batch).logits, expected, rtol=0, atol=1e-6)
        torch.testing.assert_close(loaded(**batch).logits, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv"])
def test_a_base_layer_the_user_unfroze_saves_and_loads(plm, case, tmp_path):
    """A base layer unfrozen and trained with the prompt: ``save_pretrained`` wrote it (it required grad), but
    ``from_pretrained`` refused the folder (``has unknown [...]: it was not saved from a ... prompt``); and once
    the model was frozen for inference (``requires_grad_(False)``) the save dropped the layer without a word, so
    the loaded model predicted with the untrained one. Both now load the trained layer back, trainable."""
    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok)
    layer = model.base_model.base_model.encoder.layer[-1].output.dense
    layer.requires_grad_(True)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model(**_batch(tok), labels=torch.tensor([1, 1, 1, 0, 0, 0])).loss.backward()
    optimizer.step()
    batch = _batch(tok)
    with torch.no_grad():
        expected = model.eval()(**batch).logits
    names = {f"base_model.{n}" for n, p in model.base_model.named_parameters() if p is layer.weight or p is layer.bias}
    for frozen in (False, True):
        if frozen:
            model.requires_grad_(False)  # an inference habit before saving
        folder = str(tmp_path / f"p{frozen}")
        model.save_pretrained(folder)
        loaded = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), folder, tok)
        assert names <= set(loaded.saved_parameters())
        assert all(p.requires_grad for n, p in loaded.named_parameters() if n in names)
        with torch.no_grad():
            torch.testing.assert_close(loaded(**batch).logits, expected, rtol=0, atol=1e-6)


def test_base_model_arguments_with_a_given_base_are_one_line(bert, tmp_path):
    """``from_pretrained(base, dir, tok, dtype=torch.bfloat16)``: the keyword arguments build the base in the one-call
    form; with a base given they were dropped without a word (the model stayed fp32)."""
    mlm, tok = bert
    _wrap(classifier_from(mlm), "p_tuning_v2-kv", tmp_path, mlm, tok).save_pretrained(str(tmp_path / "p"))
    with pytest.raises(ValueError, match=r"\['dtype'\] go to the base model's from_pretrained, but the base was given") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), tok, dtype=torch.bfloat16)
    _one_line(e)


@pytest.mark.parametrize("case, room", [("ipt-random", 123), ("p_tuning_v2-hidden", 125), ("s_idpg-dnn-cls", 125),
                                        ("p_tuning_v2-kv", 125)])
def test_a_batch_the_prompt_overflows_names_the_tokenizers_max_length(bert, case, room, tmp_path):
    """Texts truncated to the model's 128 positions leave no room for the prompt: one line naming the
    tokenizer's max_length to truncate to (it named only OpenPrompt's max_seq_length for input and hidden prompts)."""
    mlm, tok = bert
    model = _wrap(classifier_from(mlm), case, tmp_path, mlm, tok)
    batch = tok([" ".join(["good"] * 200)], truncation=True, return_tensors="pt")
    assert batch["input_ids"].shape[1] == 128
    with pytest.raises(ValueError, match=rf"<= {room} \(the tokenizer's max_length under 🤗 Transformers; in "
                                         rf"a pipeline, tokenizer.model_max_length = {room}\)") as e:
        model(**batch)
    _one_line(e)
    batch = tok([" ".join(["good"] * 200)], truncation=True, max_length=room, return_tensors="pt")
    assert model(**batch).logits.shape == (1, 2)


@pytest.mark.parametrize("case", ["prefix_tuning", "p_tuning_v2-kv", "prefix_ipt-random", "lpt-npg", "s_idpg-dnn-cls"])
def test_electra_small_shaped_base_trains_its_layer_prompts(bert, case, tmp_path):
    """ELECTRA-small's word embeddings are narrower than its layers (128 -> 256; 16 -> 32 here): prompts for the
    layers (kv, late) were made at the embeddings' width and every forward stopped with a shape error."""
    from transformers import ElectraConfig, ElectraForSequenceClassification

    mlm, tok = bert
    torch.manual_seed(0)
    base = ElectraForSequenceClassification(ElectraConfig(vocab_size=len(tok), embedding_size=16, hidden_size=32,
                                                          num_hidden_layers=2, num_attention_heads=4,
                                                          intermediate_size=64, max_position_embeddings=128))
    model = _wrap(base, case, tmp_path, mlm, tok)
    batch = _batch(tok)
    out = model(**batch, labels=torch.tensor([1, 1, 1, 0, 0, 0]))
    out.loss.backward()
    grads = [p.grad for n, p in model.named_parameters() if p.requires_grad and n.startswith("generator.")]
    assert torch.isfinite(out.loss) and grads and any(g is not None and g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("position", [2, 3])
def test_a_text_b_position_on_one_text_batches_is_said(bert, position):
    """insert_position 2 / 3 name text_b: on one-text batches the prompt went before the final special token
    (as 4) without a word. Pairs: no warning."""
    import warnings

    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model
    from openprompt_ipt.hf import NoSecondTextWarning  # the public name

    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig(
        "s_idpg", prompt_length=2, insert_position=position, options={"layer": "dnn", "hidden": 8}), tokenizer=tok).eval()
    with pytest.warns(NoSecondTextWarning, match=f"insert_position {position} .* as insert_position 4"):
        model(**tok(["the cat sat", "a dog"], return_tensors="pt", padding=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoSecondTextWarning)
        model(**tok(["the cat sat", "a dog"], ["it sat", "it ran"], return_tensors="pt", padding=True))


@pytest.mark.parametrize("config", [dict(method="lpt", insert_position=1), dict(method="lpt", hidden_mode="add"),
                                    dict(method="ipt", prefix_positions="keep"),
                                    dict(method="prefix_tuning", hidden_mode="add"),
                                    dict(method="p_tuning_v2", insert_position=1)])
def test_placement_settings_the_injection_never_reads_are_refused(bert, config):
    """insert_position / prefix_positions / hidden_mode under a method whose injection never reads them trained the
    same prompt as without them, without a word (the runner notes such a key; here it is an error)."""
    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    model, tok = bert
    with pytest.raises(ValueError, match=f"{next(k for k in config if k != 'method')}=.* is read by"):
        get_instance_prompt_model(model, InstancePromptConfig(prompt_length=2, **config), tok)
    assert all(p.requires_grad for p in model.parameters())


def test_placement_settings_the_injection_reads_are_taken(bert):
    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    model, tok = bert
    get_instance_prompt_model(model, InstancePromptConfig(method="p_tuning_v2", prompt_length=2,
                                                          prefix_positions="keep"), tok)


def test_saving_nan_weights_warns_in_one_line_naming_them(bert, tmp_path):
    """The stock Trainer trains on through a NaN loss (it logs loss 0, grad_norm nan) and save_pretrained wrote
    the NaN prompt without a word: loaded, it predicts one class everywhere."""
    import warnings

    from openprompt_ipt.hf import NonFiniteWeightsWarning

    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "ipt-random", tmp_path, mlm, tok)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonFiniteWeightsWarning)
        model.save_pretrained(str(tmp_path / "good"))  # finite: no warning
    name, weight = next((n, p) for n, p in model.named_parameters() if p.requires_grad and n.startswith("generator"))
    with torch.no_grad():
        weight[0, 0] = float("inf")
    with pytest.warns(NonFiniteWeightsWarning) as caught:
        model.save_pretrained(str(tmp_path / "bad"))
    message = str(caught[0].message)
    assert message.startswith(f"save_pretrained('{tmp_path / 'bad'}'): 1 tensor(s) hold NaN / inf ({name}): training "
                              "diverged") and "lower the learning rate" in message and "\n" not in message
    assert caught[0].filename == __file__  # points at the caller's line


def test_save_pretrained_reads_or_refuses_every_keyword(bert, tmp_path):
    """save_pretrained took any keyword and ignored it: push_to_hub=True uploaded nothing, variant= named no file,
    is_main_process=False (another rank) still wrote."""
    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "ipt-random", tmp_path, mlm, tok)
    with pytest.raises(ValueError, match=r"^save_pretrained\(push_to_hub=True\): call model.push_to_hub\(repo_id\)"):
        model.save_pretrained(str(tmp_path / "hub"), push_to_hub=True)
    with pytest.raises(TypeError, match=r"^save_pretrained does not read \['variant'\]"):
        model.save_pretrained(str(tmp_path / "variant"), variant="fp16")
    model.save_pretrained(str(tmp_path / "rank1"), is_main_process=False)
    assert not (tmp_path / "hub").exists() and not (tmp_path / "variant").exists() and not (tmp_path / "rank1").exists()
    model.save_pretrained(str(tmp_path / "bin"), safe_serialization=False, max_shard_size="1GB")  # a pipeline's call
    assert sorted(os.listdir(tmp_path / "bin")) == ["instance_prompt_config.json", "model.safetensors"]


def test_save_pretrained_into_a_models_folder_is_one_line_and_keeps_its_weights(bert, tmp_path):
    """Our weights file is named as a 🤗 model's: saved "in place" into the base's own folder (as after full
    fine-tuning), save_pretrained replaced the base's model.safetensors with the prompt's tensors, and the folder's
    base then loaded as random weights (from_pretrained(dir) predicted other logits; transformers only logged a table
    of MISSING keys). A folder with a model's config.json, or a model.safetensors of other weights, is one line now,
    and nothing in it changes; saving over our own folder still works."""
    from transformers import AutoModelForSequenceClassification

    mlm, tok = bert
    base_dir = tmp_path / "base"
    classifier_from(mlm, initializer_range=0.2).save_pretrained(str(base_dir))
    tok.save_pretrained(str(base_dir))
    before = {name: (base_dir / name).read_bytes() for name in os.listdir(base_dir)}
    model = _wrap(AutoModelForSequenceClassification.from_pretrained(str(base_dir)), "p_tuning_v2-kv", tmp_path, mlm, tok)
    with pytest.raises(ValueError, match=r"^save_pretrained\('.*base'\): the folder holds a 🤗 model \(config.json\), "
                                         r"whose model.safetensors this would replace .*: save the prompt to a folder "
                                         r"of its own") as e:
        model.save_pretrained(str(base_dir))
    _one_line(e)
    assert {name: (base_dir / name).read_bytes() for name in os.listdir(base_dir)} == before
    (base_dir / "config.json").unlink()  # the weights alone
    with pytest.raises(ValueError, match=r"its model.safetensors holds other weights \(not an InstancePromptModel's\)"):
        model.save_pretrained(str(base_dir))
    assert (base_dir / "model.safetensors").read_bytes() == before["model.safetensors"]
    model.save_pretrained(str(tmp_path / "out"))
    model.save_pretrained(str(tmp_path / "out"))  # our own folder: saved again
    assert sorted(os.listdir(tmp_path / "out")) == ["instance_prompt_config.json", "model.safetensors"]


@pytest.mark.parametrize("case", ["prompt_tuning", "ipt-encoder", "p_tuning_v2-kv", "m_idpg-phm-cls", "lpt-npg"])
def test_tracing_or_exporting_is_one_line(bert, case, tmp_path):
    """``torch.jit.trace`` (and the legacy ``torch.onnx.export``, which traces) recorded the prompt's per-batch steps as
    constants: the traced model gave the eager logits on the batch it was traced with and others on a left-padded
    batch (every method, off by ~0.5) or other texts (Encoder IPT), without a word; ``torch.export`` stopped in a
    page of ``GuardOnDataDependentSymNode``. Each is one line now, ``torch.export(strict=True)`` too (dynamo traced
    the refusal and raised its own page, "Observed exception ... Developer debug context: ..."); the eager model
    predicts as before."""
    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok).eval()
    batch = _batch(tok)
    args = (batch["input_ids"], batch["attention_mask"])
    for export in (lambda: torch.jit.trace(model, args, strict=False),
                   lambda: torch.export.export(model, args, strict=False),
                   lambda: torch.export.export(model, args, strict=True)):
        with pytest.raises(RuntimeError, match=r"cannot be traced or exported .* serve the eager model") as e:
            export()
        _one_line(e)
    with torch.inference_mode():
        assert model(*args).logits.shape == (6, 2)


def test_torch_compile_which_the_trace_refusal_recommends_predicts_as_eager(bert, tmp_path):
    """The trace / export refusal sends users to torch.compile (the Trainer's torch_compile=True too): under
    dynamo neither is_tracing nor is_exporting may trip it, and the compiled model gives the eager logits."""
    import logging

    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "p_tuning_v2-kv", tmp_path, mlm, tok).eval()
    batch = _batch(tok)
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)  # its graph-break notes
    with torch.no_grad():
        eager = model(**batch).logits
        compiled = torch.compile(model, backend="eager")(**batch).logits
    assert torch.allclose(eager, compiled, atol=1e-5)


def test_torch_older_than_2_6_without_is_exporting_predicts(bert, tmp_path, monkeypatch):
    """The trace / export refusal asked ``torch.compiler.is_exporting``, which torch < 2.6 lacks (setup.cfg allows
    torch >= 2.1): every forward raised an AttributeError there. (Only the forward runs without it: torch's own
    tracers ask for it once dynamo is loaded.)"""
    mlm, tok = bert
    model = _wrap(classifier_from(mlm), "p_tuning_v2-kv", tmp_path, mlm, tok).eval()
    batch = _batch(tok)
    with torch.inference_mode():
        eager = model(**batch).logits
        monkeypatch.delattr(torch.compiler, "is_exporting")
        assert torch.equal(model(**batch).logits, eager)


def test_a_folder_of_format_1_loads_and_one_of_a_later_format_is_one_line(bert, tmp_path):
    """Format 1 (``instance_prompt.safetensors`` + ``instance_prompt_config.json``, the first release) still loads
    with the logits it was saved with; a folder a later release wrote (another ``format``) was read as this one
    without a word, whatever its tensors meant there: one line now."""
    import json

    from safetensors.torch import load_file, save_file

    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "m_idpg-phm-cls", tmp_path, mlm, tok)
    batch = _batch(tok)
    with torch.no_grad():
        expected = model(**batch).logits
    model.save_pretrained(str(tmp_path / "p"))
    state = load_file(str(tmp_path / "p" / "model.safetensors"))
    saved = json.loads(bytes(state.pop("instance_prompt_config").tolist()))
    old = tmp_path / "old"
    old.mkdir()
    save_file(state, str(old / "instance_prompt.safetensors"))
    (old / "instance_prompt_config.json").write_text(json.dumps(
        {"prompt": saved["prompt"], "base_model": {k: v for k, v in saved["base_model"].items() if k != "name_or_path"},
         "format": "openprompt_ipt.hf/1"}))
    loaded = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(old), tok)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, expected, rtol=0, atol=1e-6)

    later = {**saved, "format": "openprompt_ipt.hf/3"}
    save_file({**state, "instance_prompt_config": torch.tensor(list(json.dumps(later).encode()), dtype=torch.uint8)},
              str(tmp_path / "p" / "model.safetensors"))
    with pytest.raises(ValueError, match=r"saved in format 'openprompt_ipt.hf/3', which this openprompt-ipt does not "
                                         r"read .*pip install -U openprompt-ipt") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(tmp_path / "p"), tok)
    _one_line(e)


def test_the_trainers_jit_mode_eval_predicts_with_the_eager_model(bert, tmp_path):
    """transformers 4's ``TrainingArguments(jit_mode_eval=True)`` traced the model on the first evaluation batch and
    scored every later batch with that trace: Encoder IPT's predictions were off by ~2e-2 without a word. The
    refused trace makes the Trainer log it and predict with the eager model (5.x has no jit_mode_eval)."""
    from transformers import TrainingArguments

    if "jit_mode_eval" not in TrainingArguments.__dataclass_fields__:
        pytest.skip("transformers 5 removed jit_mode_eval")
    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), "ipt-encoder", tmp_path, mlm, tok).eval()
    ds = dataset(tok)
    eager = trainer_for(model, tok, ds, tmp_path / "a", per_device_eval_batch_size=3).predict(ds).predictions
    jit = trainer_for(model, tok, ds, tmp_path / "b", per_device_eval_batch_size=3, jit_mode_eval=True).predict(ds)
    assert (jit.predictions == eager).all()


def test_a_base_loaded_by_a_relative_path_loads_from_any_working_directory(bert, tmp_path, monkeypatch):
    """``from_pretrained("models/bert")`` recorded 'models/bert' as it was written: ``InstancePromptModel.from_pretrained
    (dir)`` run from another directory loaded whatever model of the same shape that path named there, and predicted
    with it without a word. A local folder is recorded as its absolute path (base and tokenizer)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    mlm, tok = bert
    for where, init in (("a", None), ("b", 0.2)):  # two projects, each with its own models/bert of the same shape
        folder = tmp_path / where / "models" / "bert"
        classifier_from(mlm, initializer_range=init).save_pretrained(str(folder))
        tok.save_pretrained(str(folder))
    monkeypatch.chdir(tmp_path / "a")
    base, tok_a = AutoModelForSequenceClassification.from_pretrained("models/bert"), AutoTokenizer.from_pretrained("models/bert")
    model = _wrap(base.eval(), "p_tuning_v2-kv", tmp_path, mlm, tok_a)
    batch = _batch(tok)
    with torch.no_grad():
        expected = model(**batch).logits
    model.save_pretrained(str(tmp_path / "p"))
    monkeypatch.chdir(tmp_path / "b")
    loaded = InstancePromptModel.from_pretrained(str(tmp_path / "p"))
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, expected, rtol=0, atol=1e-6)
    assert loaded.config._name_or_path == str(tmp_path / "a" / "models" / "bert")


@pytest.mark.parametrize("case", ["m_idpg-phm-cls", "s_idpg-dnn-cls"])
def test_training_the_head_keeps_the_cached_sentence_representations(plm, case, tmp_path):
    """IDPG's M(x) cache was emptied whenever any weight of the base changed, the head the 🤗 door trains with the
    prompt (``modules_to_save``) included: every optimizer step emptied it, so each example paid a PLM pass per step
    instead of once. The head is not read by the M(x) pass; a change to the encoder still empties it."""
    from openprompt_ipt.generators.sentence import PLMClsEncoder

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok).train()
    encoder = next(e for e in model.modules() if isinstance(e, PLMClsEncoder))
    batch, labels = _batch(tok), torch.tensor([1, 1, 1, 0, 0, 0])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    head = next(p for n, p in model.named_parameters() if p.requires_grad and "classifier" in n)
    before = head.detach().clone()
    for _ in range(3):
        model(**batch, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert not torch.equal(head, before)  # the head trained
    assert encoder.passes == 6, "each step ran the PLM again for M(x)"
    with torch.no_grad():
        model.base_model.base_model.embeddings.word_embeddings.weight.add_(0.1)  # the encoder changed: M(x) anew
        model(**batch, labels=labels)
    assert encoder.passes == 12


def test_wrapping_a_base_again_says_its_head_is_shared(bert, tmp_path):
    """A sweep that wraps one base per method trained each on the previous method's head (it trains in place, as
    the base's own module), and training the second changed the first model's logits, silently. Wrapping a base
    again now says so; a fresh base, a copy made before the first wrap and from_pretrained (it loads its own head)
    stay silent."""
    import warnings

    from openprompt_ipt.hf import SharedBaseWarning, get_instance_prompt_model

    mlm, tok = bert
    base = classifier_from(mlm)
    spare = copy.deepcopy(base)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)
        first = get_instance_prompt_model(base, config_for("p_tuning_v2-kv", tmp_path, mlm), tok)
        get_instance_prompt_model(spare, config_for("ipt-random", tmp_path, mlm), tok)
    first.save_pretrained(str(tmp_path / "p"))
    with pytest.warns(SharedBaseWarning, match=r"classifier is shared and trains in place.*wrap a fresh base"):
        second = get_instance_prompt_model(base, config_for("ipt-random", tmp_path, mlm), tok)
    assert second.base_model.classifier is first.base_model.classifier  # what the line says
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)
        InstancePromptModel.from_pretrained(base, str(tmp_path / "p"), tok)


def test_a_copy_of_a_wrapped_base_wraps_as_a_fresh_one(bert, tmp_path):
    """``copy.deepcopy(model.base_model)`` copied the mark of the wrap too, so wrapping the copy said its head "is
    shared and trains in place" (the copy's head is its own: training it changes no other model), and it copied the
    hooks on it, which no model owned, so the new wrap stacked its own on them. A copy of the whole model still says
    so when its own base is wrapped again: that head is the copy's."""
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), config_for("p_tuning_v2-kv", tmp_path, mlm), tok)
    spare, twin = copy.deepcopy(model.base_model), copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)
        other = get_instance_prompt_model(spare, config_for("p_tuning_v2-hidden", tmp_path, mlm), tok)
    assert other.base_model.classifier is not model.base_model.classifier
    # the copied base carried the copied hooks too, which no model owns: the new wrap's hooks are its only ones
    from openprompt_ipt.injection.encoder_hooks import ArmedHooks
    ours = {getattr(getattr(h, "func", h), "__self__", None) for m in spare.modules()
            for h in (*m._forward_pre_hooks.values(), *m._forward_hooks.values())}
    assert {o for o in ours if isinstance(o, ArmedHooks)} == {other.injector}
    with torch.no_grad():
        assert other(**_batch(tok)).logits.shape == (6, 2)
    with pytest.warns(SharedBaseWarning, match="classifier is shared and trains in place"):
        get_instance_prompt_model(twin.base_model, config_for("ipt-random", tmp_path, mlm), tok)
    with pytest.warns(SharedBaseWarning, match="classifier is shared and trains in place"):
        get_instance_prompt_model(model.base_model, config_for("ipt-random", tmp_path, mlm), tok)


def test_a_deleted_model_takes_its_hooks_off_the_base(bert, tmp_path):
    """A sweep wrapping one base per method kept every deleted wrapper's hooks on it (idle, run on every forward,
    their injectors alive for as long as the base): the base's hooks are now those of the wrappers still alive."""
    import gc
    import warnings

    from openprompt_ipt.hf import get_instance_prompt_model
    from openprompt_ipt.injection.encoder_hooks import ArmedHooks

    mlm, tok = bert
    base = classifier_from(mlm)

    def hooks():  # ours: transformers 5 adds output-capturing hooks of its own at the first forward
        return sum(isinstance(getattr(getattr(h, "func", h), "__self__", None), ArmedHooks)
                   for m in base.modules() for h in (*m._forward_pre_hooks.values(), *m._forward_hooks.values()))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SharedBaseWarning: this test wraps one base on purpose
        gc.collect()
        before = hooks()
        kept = get_instance_prompt_model(base, config_for("p_tuning_v2-kv", tmp_path, mlm), tok)
        alive = hooks()
        for case in ("m_idpg-phm-cls", "lpt-npg", "p_tuning_v2-hidden"):
            get_instance_prompt_model(base, config_for(case, tmp_path, mlm), tok)
            gc.collect()
            assert hooks() == alive, f"{case}: a deleted model's hooks stayed on the base"
    batch = _batch(tok)
    with torch.no_grad():
        assert kept(**batch).logits.shape == (6, 2)  # the live one still works
    del kept
    gc.collect()
    assert hooks() == before



@pytest.mark.parametrize("make_copy", ["deepcopy", "torch.save"])
def test_a_deleted_copy_takes_its_hooks_off_the_base_it_owns(bert, tmp_path, make_copy):
    """``copy.deepcopy(model)`` (or a whole-model torch.save / torch.load) copies the base and the hooks on it, but
    only the original took its hooks off when it was garbage: a copy's base kept them (idle, run on every forward)
    once the copy was gone, and wrapping that base again stacked new hooks on them. A copy now does as the original."""
    import gc
    import io

    from openprompt_ipt.injection.encoder_hooks import ArmedHooks

    mlm, tok = bert

    def hooks(base):
        return sum(isinstance(getattr(getattr(h, "func", h), "__self__", None), ArmedHooks)
                   for m in base.modules() for h in (*m._forward_pre_hooks.values(), *m._forward_hooks.values()))

    model = get_instance_prompt_model(classifier_from(mlm), config_for("p_tuning_v2-kv", tmp_path, mlm), tok).eval()
    batch = _batch(tok)
    with torch.no_grad():
        ref = model(**batch).logits
    if make_copy == "deepcopy":
        twin = copy.deepcopy(model)
    else:
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        twin = torch.load(buffer, weights_only=False)
    with torch.no_grad():
        torch.testing.assert_close(twin(**batch).logits, ref, rtol=0, atol=0)
    base = twin.base_model
    assert hooks(base) == hooks(model.base_model) > 0
    del twin
    gc.collect()
    assert hooks(base) == 0
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, ref, rtol=0, atol=0)  # the original still works

@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "ipt-random"])
def test_a_refused_folder_leaves_the_given_base_as_it_was(bert, case, tmp_path):
    """A tampered model.safetensors whose last tensor has another shape: from_pretrained(base, dir) copied the
    tensors before it (the base's own head among them) and left the base frozen with the prompt's hooks on it,
    then refused. Now every name and shape is checked first: the base keeps its weights, flags and no hooks."""
    from safetensors.torch import load_file, save_file

    from openprompt_ipt.hf.model import WRAPPED_HEADS

    mlm, tok = bert
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok)
    with torch.no_grad():
        model.base_model.classifier.weight.add_(1.0)  # a trained head: the given base's own one differs
    folder = tmp_path / "p"
    model.save_pretrained(str(folder))
    state = load_file(str(folder / "model.safetensors"))
    names = [k for k in state if k != "instance_prompt_config"]
    assert any(k.startswith("base_model.classifier") for k in names[:-1])  # the head comes before the bad tensor
    state[names[-1]] = torch.zeros(*state[names[-1]].shape[:-1], state[names[-1]].shape[-1] + 1)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    base = classifier_from(mlm, initializer_range=0.2)
    base.bert.embeddings.requires_grad_(False)  # the caller's own choice of what trains
    before = {n: p.detach().clone() for n, p in base.named_parameters()}
    flags = {n: p.requires_grad for n, p in base.named_parameters()}
    with pytest.raises(ValueError, match="but the prompt expects") as e:
        InstancePromptModel.from_pretrained(base, str(folder), tok)
    _one_line(e)
    assert all(torch.equal(p, before[n]) for n, p in base.named_parameters())
    assert {n: p.requires_grad for n, p in base.named_parameters()} == flags
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in base.modules())
    assert WRAPPED_HEADS not in base.__dict__
    # the base wraps as a fresh one afterwards (no SharedBaseWarning), and the untampered folder still loads
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)
        get_instance_prompt_model(base, config_for(case, tmp_path, mlm), tokenizer=tok)


def test_loading_two_folders_onto_one_base_says_the_first_now_predicts_with_the_second(bert, tmp_path):
    """from_pretrained(base, dir) copies the saved head into the base in place: two saved runs loaded onto one base
    both scored with the second's head, and the first model's logits changed without a word (from_pretrained was
    exempt from SharedBaseWarning). Now it says so where a live model's head changes, and only there."""
    mlm, tok = bert
    for name, shift in (("a", 0.0), ("b", 1.0)):
        saved = get_instance_prompt_model(classifier_from(mlm), config_for("p_tuning_v2-kv", tmp_path, mlm), tok)
        with torch.no_grad():
            saved.base_model.classifier.weight.add_(shift)
        saved.save_pretrained(str(tmp_path / name))
    base, batch = classifier_from(mlm), _batch(tok)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)
        first = InstancePromptModel.from_pretrained(base, str(tmp_path / "a"), tok)
        InstancePromptModel.from_pretrained(base, str(tmp_path / "a"), tok)  # the same head again: nothing changes
    with torch.no_grad():
        before = first(**batch).logits
    with pytest.warns(SharedBaseWarning, match=r"another InstancePromptModel built on it still uses.*fresh base"):
        InstancePromptModel.from_pretrained(base, str(tmp_path / "b"), tok)
    with torch.no_grad():
        assert not torch.allclose(first(**batch).logits, before)  # what the line says
    del first
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedBaseWarning)  # no live model left that reads the base's head
        InstancePromptModel.from_pretrained(base, str(tmp_path / "a"), tok)
