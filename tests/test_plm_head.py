"""Skipping the unused vocabulary head leaves SoftVerbalizer predictions unchanged."""
import torch

from helpers import batch_for, build, build_prefix, clone, examples
from openprompt_ipt.runner.plm import HiddenStatesAsLogits, skip_mlm_head


def test_skip_mlm_head_keeps_soft_verbalizer_logits(plm):
    model, tok = plm
    for builder, kw in ((build, dict(strategy="random", prompt_length=3)), (build_prefix, dict(generator="prefix"))):
        pm = builder(model, tok, **kw)
        batch = batch_for(pm, tok, examples())
        with torch.no_grad():
            before = pm(clone(batch))
        name = skip_mlm_head(model)
        assert isinstance(getattr(model, name), HiddenStatesAsLogits)
        with torch.no_grad():
            after = pm(clone(batch))
            out = pm.prompt_model(clone(batch))
        assert torch.allclose(before, after, atol=1e-6)
        assert out.logits.shape[-1] == model.config.hidden_size  # no vocabulary projection computed
        model, tok = type(model)(model.config).eval(), tok  # fresh head for the next builder
