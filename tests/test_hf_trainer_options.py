"""The 🤗 door under Trainer options users turn on every day, beyond tests/test_hf_trainer_habits.py: the base's
config flags for extra outputs, NEFTune, gradient accumulation against the unaccumulated run, and PEFT's adapter
calls that do not apply to a prompt. Tiny BERT and RoBERTa classifiers, the Trainer as constructed by default plus
only the option under test."""
import copy

import numpy as np
import pytest
import torch

from test_hf_trainer import _one_line, classifier_from, config_for, dataset, trainer_for
from test_hf_trainer_habits import BY_INJECTION, _batch, _trained, _wrap
from openprompt_ipt.hf import get_instance_prompt_model

pytestmark = pytest.mark.usefixtures("one_thread")
# PEFT's calls for LoRA-like adapters, and transformers' PeftAdapterMixin on the base
ADAPTER_CALLS = ("merge_and_unload", "unload", "merge_adapter", "unmerge_adapter", "add_adapter", "set_adapter",
                 "load_adapter", "delete_adapter", "enable_adapters", "disable_adapters", "active_adapters",
                 "get_adapter_state_dict")


@pytest.mark.parametrize("case", BY_INJECTION)
def test_hidden_states_the_base_config_asks_for(plm, case, tmp_path):
    """A base loaded with ``output_hidden_states=True`` (its config's flag) gives hidden states through the wrapper
    too, so ``Trainer.predict`` returns them beside the logits, at the tokenizer's positions (transformers 5 read
    the wrapper's explicit ``None`` as False, over the config: no hidden states, unseen)."""
    mlm, tok = plm
    base = classifier_from(mlm, initializer_range=0.2)
    base.config.output_hidden_states = True
    model = _wrap(base, case, tmp_path, mlm, tok).eval()
    ds = dataset(tok)
    predictions = trainer_for(model, tok, ds, tmp_path / "run").predict(ds).predictions
    assert isinstance(predictions, tuple) and len(predictions) == 2
    logits, hidden = predictions
    width = max(len(ids) for ids in ds["input_ids"])
    assert np.shape(logits) == (16, 2)
    assert np.shape(hidden) == (base.config.num_hidden_layers + 1, 16, width, base.config.hidden_size)
    batch = _batch(tok)
    with torch.no_grad():
        from_config, asked = model(**batch).hidden_states, model(**batch, output_hidden_states=True).hidden_states
    assert from_config is not None and len(from_config) == len(asked)
    for a, b in zip(from_config, asked):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with torch.no_grad():
        assert model(**batch, output_hidden_states=False).hidden_states is None  # the caller's False still wins


@pytest.mark.parametrize("case", ["ipt-random", "m_idpg-phm-cls"])
def test_neftune_noises_training_only_and_is_removed(plm, case, tmp_path):
    """``neftune_noise_alpha`` hooks the base's input embeddings, which the wrapper's forward calls: training
    changes (the noise reaches the text's embeddings), evaluation is deterministic, and no hook is left after."""
    from transformers import TrainerCallback

    mlm, tok = plm
    base, ds = classifier_from(mlm, initializer_range=0.2), dataset(tok)
    runs, batch = {}, _batch(tok)

    class PredictTwiceMidRun(TrainerCallback):  # while the hook is on: eval mode draws no noise
        def on_step_end(self, args, state, control, model=None, **kwargs):
            hooked.append(bool(model.get_input_embeddings()._forward_hooks))
            model.eval()
            with torch.no_grad():
                same.append(torch.equal(model(**batch).logits, model(**batch).logits))
            model.train()

    for alpha in (None, 5.0):
        hooked, same = [], []
        model = _wrap(base, case, tmp_path, mlm, tok)
        trainer = trainer_for(model, tok, ds, tmp_path / str(alpha), num_train_epochs=2, neftune_noise_alpha=alpha,
                              seed=3)
        trainer.add_callback(PredictTwiceMidRun())
        trainer.train()
        assert same and all(same) and all(hooked) == (alpha is not None)
        assert trainer.evaluate()["eval_loss"] == trainer.evaluate()["eval_loss"]
        assert not model.get_input_embeddings()._forward_hooks
        runs[alpha] = _trained(model)
    assert any(not torch.allclose(runs[None][k], runs[5.0][k], atol=1e-4) for k in runs[None])


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "m_idpg-phm-cls", "lpt-mppg"])
def test_gradient_accumulation_equals_the_unaccumulated_run(plm, case, tmp_path):
    """Batches of 4 against 2 x 2 accumulated (dropout off, so both draw the same): the logged losses and the trained
    weights agree within float noise. SGD, whose step is linear in the gradient: Adam's would hide a gradient scaled
    by the number of accumulation steps, and turns float noise in near-zero gradients into steps of lr."""
    mlm, tok = plm
    mlm = copy.deepcopy(mlm)
    mlm.config.hidden_dropout_prob = mlm.config.attention_probs_dropout_prob = 0.0
    base, ds = classifier_from(mlm, initializer_range=0.2), dataset(tok)
    runs = []
    for batch, steps in ((4, 1), (2, 2)):
        model = _wrap(base, case, tmp_path, mlm, tok)
        trainer = trainer_for(model, tok, ds, tmp_path / str(steps), num_train_epochs=1, seed=3, logging_steps=1,
                              per_device_train_batch_size=batch, gradient_accumulation_steps=steps, optim="sgd")
        trainer.train()
        runs.append(([h["loss"] for h in trainer.state.log_history if "loss" in h], _trained(model)))
    (loss_a, weights_a), (loss_b, weights_b) = runs
    assert len(loss_a) == len(loss_b) == 4
    np.testing.assert_allclose(loss_b, loss_a, rtol=0, atol=1e-5)
    for k in weights_a:
        torch.testing.assert_close(weights_b[k], weights_a[k], rtol=0, atol=1e-5, msg=k)


def test_peft_adapter_calls_that_do_not_apply_are_one_line(bert, tmp_path):
    """After a Trainer run, PEFT's merge / adapter calls name why they do not apply to a prompt, instead of reaching
    the frozen base (its PeftAdapterMixin would add a LoRA there, saved into a checkpoint that then does not load,
    or answer "BertForSequenceClassification has no attribute merge_and_unload")."""
    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2),
                                      config_for("p_tuning_v2-kv", tmp_path, mlm), tokenizer=tok)
    trainer_for(model, tok, dataset(tok), tmp_path / "run", num_train_epochs=1).train()
    with pytest.raises(AttributeError, match="InstancePromptModel has no merge_and_unload: .*no weights to merge") as e:
        model.merge_and_unload()
    _one_line(e)
    with pytest.raises(AttributeError, match="InstancePromptModel has no add_adapter: .*not PEFT adapters") as e:
        model.add_adapter(object(), adapter_name="lora")
    _one_line(e)
    for name in ADAPTER_CALLS:
        assert not hasattr(model, name), name  # probes (hasattr(model, "active_adapters")) read "not a PEFT model"
    assert model.classifier is model.base_model.classifier  # other attributes still reach the base


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "m_idpg-phm-cls"])
def test_a_folder_the_trainer_saved_without_safetensors_loads(plm, case, tmp_path):
    """transformers < 5, ``save_safetensors=False``: ``save_model`` and the checkpoints write ``pytorch_model.bin``;
    from_pretrained reads it (it said "has no model.safetensors: save the model again (... trainer.save_model)")."""
    import inspect

    from transformers import TrainingArguments

    from openprompt_ipt.hf import InstancePromptModel

    if "save_safetensors" not in inspect.signature(TrainingArguments).parameters:
        pytest.skip("transformers 5 always writes safetensors")
    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok)
    trainer = trainer_for(model, tok, dataset(tok), tmp_path / "run", num_train_epochs=1, save_safetensors=False,
                          save_strategy="epoch")
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    for folder in (tmp_path / "final", tmp_path / "run" / "checkpoint-4"):
        assert (folder / "pytorch_model.bin").is_file() and not (folder / "model.safetensors").exists()
        loaded = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(folder), tok)
        with torch.no_grad():
            torch.testing.assert_close(loaded(**_batch(tok)).logits, model.eval()(**_batch(tok)).logits, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", ["ipt-random", "p_tuning_v2-kv"])
def test_resizing_the_vocabulary_goes_before_the_prompt(plm, case, tmp_path):
    """``tokenizer.add_tokens(...); model.resize_token_embeddings(len(tokenizer))`` on the wrapper is one line naming
    the order that works (Random IPT indexed past its vocabulary table; other prompts trained, and the folder they
    saved matched neither the resized base nor the original); the same size is the base's no-op; resizing the base
    first trains under the Trainer and reloads."""
    from openprompt_ipt.hf import InstancePromptModel

    mlm, tok = plm
    model = _wrap(classifier_from(mlm, initializer_range=0.2), case, tmp_path, mlm, tok)
    size = model.get_input_embeddings().num_embeddings
    assert model.resize_token_embeddings(size) is model.get_input_embeddings()
    tok = copy.deepcopy(tok)
    tok.add_tokens(["newword", "otherword"])
    with pytest.raises(ValueError, match=r"after the prompt was built for the base's \d+ tokens.*resize the base first") as e:
        model.resize_token_embeddings(len(tok))
    _one_line(e)
    assert model.get_input_embeddings().num_embeddings == size  # nothing changed
    resized = classifier_from(mlm, initializer_range=0.2)
    resized.resize_token_embeddings(len(tok))
    model = _wrap(resized, case, tmp_path, mlm, tok)
    trainer_for(model, tok, dataset(tok), tmp_path / "run", num_train_epochs=1).train()
    model.save_pretrained(str(tmp_path / "saved"))
    base = classifier_from(mlm, initializer_range=0.2)
    base.resize_token_embeddings(len(tok))
    base.get_input_embeddings().weight.data.copy_(resized.get_input_embeddings().weight)  # the new rows as trained with
    loaded = InstancePromptModel.from_pretrained(base, str(tmp_path / "saved"), tok)
    batch = tok(["the newword movie was great"], return_tensors="pt", return_special_tokens_mask=True)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model.eval()(**batch).logits, rtol=0, atol=1e-6)


# each head the door trains, with labels of unequal counts per micro-batch: 7 rows (a last micro-batch of one)
# and, for the token-level heads, a different number of labelled tokens in every row
SEQ = "AutoModelForSequenceClassification"
HEADS = {"token": ("AutoModelForTokenClassification", 3), "masked_lm": ("AutoModelForMaskedLM", None),
         "label_words": ("AutoModelForMaskedLM", None), "single_label": (SEQ, 2), "multi_label": (SEQ, 3),
         "regression": (SEQ, 1)}


def _rows_for(head, tok):
    from datasets import Dataset

    texts = ["the movie was great", "a good film", "he said it was bad and slow", "bad cat", "great world",
             "they think it is terrible", "good dog"]
    if head == "label_words":
        texts = [f"{t} it was {tok.mask_token}" for t in texts]
    enc = dict(tok(texts, return_special_tokens_mask=True))
    if head in ("token", "masked_lm"):  # row k labels every (k % 3 + 1)-th word (1 to 6 tokens), the last none
        enc["labels"] = [[-100 if special or i % (k % 3 + 1) or k == 6 else (ids[i] if head == "masked_lm" else i % 3)
                          for i, special in enumerate(mask)]
                         for k, (ids, mask) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"]))]
    elif head == "multi_label":
        enc["labels"] = [[float(k % 2), float(k % 3 == 0), 1.0] for k in range(len(texts))]
    elif head == "regression":
        enc["labels"] = [0.5 * k - 1.0 for k in range(len(texts))]
    else:
        enc["labels"] = [k % 2 for k in range(len(texts))]
    return Dataset.from_dict(enc)


@pytest.mark.parametrize("head", list(HEADS))
def test_gradient_accumulation_is_one_larger_batch_for_every_head(bert, head, tmp_path):
    """2 x 2 accumulated against batches of 4, for each head, with unequal label counts per micro-batch: the
    logged losses and trained weights agree within 1e-6. The wrapper's loss was each micro-batch's mean, which
    the Trainer averaged: a token head's step weighted every micro-batch alike, whatever its number of labelled
    tokens, and a last micro-batch of one example as one of two. Now forward takes the Trainer's
    ``num_items_in_batch`` (transformers >= 4.48 reads ``accepts_loss_kwargs``)."""
    import transformers
    from packaging import version

    if version.parse(transformers.__version__).release < (4, 48):
        pytest.skip("this Trainer passes no num_items_in_batch: each micro-batch's mean, divided by the steps")
    from transformers import DataCollatorForTokenClassification, DataCollatorWithPadding, Trainer, TrainingArguments

    mlm, tok = bert
    auto_class, num_labels = HEADS[head]
    cfg = copy.deepcopy(mlm.config)
    cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0
    cfg.initializer_range = 0.2
    if num_labels is not None:
        cfg.num_labels = num_labels
    if head == "multi_label":
        cfg.problem_type = "multi_label_classification"
    torch.manual_seed(1)
    base = getattr(transformers, auto_class).from_config(cfg).eval()
    config = config_for("p_tuning_v2-kv", tmp_path, mlm)
    if head == "label_words":
        config.label_words = [["bad", "terrible"], ["good"]]
    rows = _rows_for(head, tok)
    collator = (DataCollatorForTokenClassification if head in ("token", "masked_lm") else DataCollatorWithPadding)(tok)
    runs = []
    for batch, steps in ((4, 1), (2, 2)):
        torch.manual_seed(7)
        model = get_instance_prompt_model(copy.deepcopy(base), copy.deepcopy(config), tokenizer=tok)
        args = TrainingArguments(output_dir=str(tmp_path / str(steps)), report_to="none", use_cpu=True,
                                 disable_tqdm=True, num_train_epochs=2, per_device_train_batch_size=batch,
                                 gradient_accumulation_steps=steps, learning_rate=0.1, optim="sgd", logging_steps=1,
                                 seed=3, save_strategy="no")
        trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator)
        trainer.train()
        runs.append(([h["loss"] for h in trainer.state.log_history if "loss" in h], _trained(model)))
    (loss_a, weights_a), (loss_b, weights_b) = runs
    assert len(loss_a) == len(loss_b) == 4
    np.testing.assert_allclose(loss_b, loss_a, rtol=0, atol=1e-6)
    for k in weights_a:
        torch.testing.assert_close(weights_b[k], weights_a[k], rtol=0, atol=1e-6, msg=k)


@pytest.mark.parametrize("head", ["token", "single_label"])
def test_a_micro_batch_without_labels_adds_nothing_to_the_step(bert, head, tmp_path):
    """A micro-batch whose labels are all -100 (a short sentence the masking skipped, the last rows of an epoch):
    its loss was NaN (0 / 0, hidden by the Trainer's log filter) and it still counted as 1/k of the step; its share
    of the step's ``num_items_in_batch`` is 0, with a gradient of zeros. Without the count the loss is the head's
    own mean, as the base's."""
    import transformers

    mlm, tok = bert
    auto_class, num_labels = HEADS[head]
    cfg = copy.deepcopy(mlm.config)
    cfg.num_labels = num_labels
    model = _wrap(getattr(transformers, auto_class).from_config(cfg).eval(), "p_tuning_v2-kv", tmp_path, mlm, tok)
    batch = _batch(tok)
    shape = batch["input_ids"].shape if head == "token" else batch["input_ids"].shape[:1]
    labels = torch.full(shape, -100)
    loss = model(**batch, labels=labels, num_items_in_batch=torch.tensor(5)).loss
    assert loss.item() == 0.0
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and not g.any() for g in grads)
    labels.fill_(1)
    out = model(**batch, labels=labels)
    counted = model(**batch, labels=labels, num_items_in_batch=torch.tensor(4 * labels.numel()))
    torch.testing.assert_close(counted.loss, out.loss / 4, rtol=0, atol=1e-6)


@pytest.mark.parametrize("case", ["ipt-random", "prefix_ipt-random", "late_ipt-random", "ipt-pretrained",
                                  "prompt_tuning"])
def test_resizing_the_base_after_the_prompt_is_one_line_before_any_lookup(bert, case, tmp_path):
    """``base.resize_token_embeddings`` on the base itself after wrapping (or after ``from_pretrained``): the first
    new id read IPT's pad row (another prompt, no error), the second was an IndexError inside the table (on CUDA a
    device-side assert). Now the forward (and a save) is one line naming the order that works."""
    from openprompt_ipt.hf import InstancePromptModel

    mlm, tok = bert
    base = classifier_from(mlm, initializer_range=0.2)
    model = _wrap(base, case, tmp_path, mlm, tok).eval()
    model.save_pretrained(str(tmp_path / "saved"))
    loaded = InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(tmp_path / "saved"),
                                                 tok)
    tok = copy.deepcopy(tok)
    tok.add_tokens(["newword", "otherword"])
    for wrapped in (model, loaded):
        wrapped.get_base_model().resize_token_embeddings(len(tok))
        for text in ("the newword movie", "the otherword movie"):
            batch = tok([text], return_tensors="pt", return_special_tokens_mask=True)
            with pytest.raises(ValueError, match=r"vocabulary changed from \d+ to \d+ tokens after the prompt was "
                                                 r"built.*resize the base first") as e:
                wrapped(**batch)
            _one_line(e)
        with pytest.raises(ValueError, match="resize the base first"):
            wrapped.save_pretrained(str(tmp_path / "again"))
    assert not (tmp_path / "again").exists()


def test_a_prompt_saved_on_a_resized_base_names_the_resize_when_loaded_on_the_original(bert, tmp_path):
    """Tokens added and the base resized before wrapping: loaded onto the base as it comes from its path (not
    resized), the refusal names the resize that makes it load."""
    from openprompt_ipt.hf import InstancePromptModel

    mlm, tok = bert
    tok = copy.deepcopy(tok)
    tok.add_tokens(["newword", "otherword"])
    base = classifier_from(mlm, initializer_range=0.2)
    base.resize_token_embeddings(len(tok))
    _wrap(base, "ipt-random", tmp_path, mlm, tok).save_pretrained(str(tmp_path / "saved"))
    with pytest.raises(ValueError, match=r"\(vocab_size 59, this model has 57\): load it onto the model it was trained "
                                         r"on \(resized after tokenizer.add_tokens: base.resize_token_embeddings\(59\)")\
            as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm, initializer_range=0.2), str(tmp_path / "saved"), tok)
    _one_line(e)
    resized = classifier_from(mlm, initializer_range=0.2)
    resized.resize_token_embeddings(59)
    InstancePromptModel.from_pretrained(resized, str(tmp_path / "saved"), tok)


def test_a_padded_base_keeps_its_size_under_a_defensive_resize_with_a_multiple(bert, tmp_path):
    """``model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=8)`` on a wrapped base already padded to
    that multiple is the base's no-op (it was refused: 58 != 64); another size is still one line."""
    mlm, tok = bert
    tok = copy.deepcopy(tok)
    tok.add_tokens(["newword"])
    base = classifier_from(mlm, initializer_range=0.2)
    base.resize_token_embeddings(len(tok), pad_to_multiple_of=8)
    model = _wrap(base, "ipt-random", tmp_path, mlm, tok)
    assert model.resize_token_embeddings(len(tok), pad_to_multiple_of=8).num_embeddings == 64
    with pytest.raises(ValueError, match="after the prompt was built for the base's 64 tokens"):
        model.resize_token_embeddings(len(tok), pad_to_multiple_of=128)
    with pytest.raises(ValueError, match="after the prompt was built for the base's 64 tokens"):
        model.resize_token_embeddings(len(tok))
