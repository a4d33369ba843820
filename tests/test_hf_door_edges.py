"""The 🤗 door beyond the Trainer habits (test_hf_trainer_habits.py): the mode a model is handed back in, bases in
bf16, heads other than sequence classification, and from_pretrained's keyword arguments; tiny BERT and RoBERTa."""
import pytest
import torch

from test_hf_trainer import _one_line, classifier_from, config_for, dataset, trainer_for
from test_hf_trainer_habits import _batch, _trained, _wrap
from openprompt_ipt.hf import InstancePromptModel

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
