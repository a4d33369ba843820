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
