"""Paper heads (issue #24 item 2) and the frozen PLM's dropout (item 10): ``cls_head`` is IDPG's
[CLS] classification head; ``plm.frozen_dropout`` keeps a frozen PLM's dropout on as the authors do."""
from __future__ import annotations

import os

import pytest
import torch
from openprompt import PromptForClassification
from transformers.models.roberta.modeling_roberta import RobertaClassificationHead

from helpers import TEXT, batch_for, clone, examples
from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.runner.experiment import build_model
from openprompt_ipt.openprompt.verbalizers import ClsHeadVerbalizer


def test_cls_head_reads_the_first_token_state_only(plm):
    model, tok = plm
    for template in (InstanceWiseTemplate(model, tok, text=TEXT, strategy="random", prompt_length=3),
                     GeneratedPrefixTemplate(model, tok, text=TEXT, generator="idpg", prompt_length=2,
                                             idpg={"depth": "single", "layer": "dnn", "hidden": 8})):
        head = ClsHeadVerbalizer(tok, model, num_classes=3)
        assert isinstance(head.head, RobertaClassificationHead)  # the field library's module, unchanged
        pm = PromptForClassification(model, template, head, freeze_plm=True, plm_eval_mode=True).eval()
        batch = batch_for(pm, tok, examples(4))
        with torch.no_grad():
            logits = pm(clone(batch))
            states = pm.prompt_model(clone(batch)).hidden_states[-1]  # prompts trimmed: position 0 is [CLS] / <s>
        assert logits.shape == (4, 3)
        assert torch.allclose(logits, head.head(states[:, :1]), atol=1e-6)  # = the head on the first token
        assert not torch.allclose(head.head(states[:, 1:2]), logits)        # ... not on another position
        pm.train()
        torch.nn.functional.cross_entropy(pm(clone(batch)), batch["label"]).backward()
        assert head.head.dense.weight.grad is not None and head.head.out_proj.weight.grad is not None
        assert all(p.grad is None for p in model.parameters())  # the PLM stays frozen
        model.zero_grad(set_to_none=True)


def test_cls_head_needs_num_classes(bert):
    model, tok = bert
    with pytest.raises(ValueError, match="cls_head needs the PLM and num_classes"):
        ClsHeadVerbalizer(tok, model)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from conftest import _roberta

    tmp = str(tmp_path_factory.mktemp("heads"))
    model, tok = _roberta(tmp)
    path = os.path.join(tmp, "tiny-roberta")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def write_config(tmp_path, ckpt, verbalizer, plm_extra=""):
    section = {"cls_head": "cls_head: {}\n",
               "manual_verbalizer": 'manual_verbalizer:\n  label_words: [["yes"], ["no"], ["maybe"]]\n'}[verbalizer]
    path = tmp_path / f"{verbalizer}.yaml"
    path.write_text(f"dataset:\n  name: cb\nplm:\n  model_path: {ckpt}\n  freeze: true\n{plm_extra}"
                    f"template: instance_wise\ninstance_wise:\n  text: '{TEXT}'\n  strategy: random\n  prompt_length: 2\n"
                    f"verbalizer: {verbalizer}\n{section}")
    return str(path)


def test_runner_builds_cls_head_and_manual_verbalizer(tiny_checkpoint, tmp_path):
    labels = ["entailment", "contradiction", "neutral"]
    pm, _, _ = build_model(load_config(write_config(tmp_path, tiny_checkpoint, "cls_head")), [], 3, labels)
    assert isinstance(pm.verbalizer, ClsHeadVerbalizer)
    head_n = sum(p.numel() for p in pm.verbalizer.parameters() if p.requires_grad)
    assert head_n == 32 * 32 + 32 + 32 * 3 + 3  # dense H x H + out_proj H x classes
    pm, _, _ = build_model(load_config(write_config(tmp_path, tiny_checkpoint, "manual_verbalizer")), [], 3, labels)
    assert sum(p.numel() for p in pm.verbalizer.parameters() if p.requires_grad) == 0  # the PLM's own MLM head


def test_frozen_dropout_keeps_the_frozen_plm_dropout_on(tiny_checkpoint, tmp_path):
    labels = ["entailment", "contradiction", "neutral"]
    cfg = load_config(write_config(tmp_path, tiny_checkpoint, "cls_head"))
    assert cfg["plm"]["frozen_dropout"] is False  # default: today's behaviour (a frozen PLM runs in eval mode)
    off, tok, _ = build_model(cfg, [], 3, labels)
    on, _, _ = build_model(load_config(write_config(tmp_path, tiny_checkpoint, "cls_head",
                                                    "  frozen_dropout: true\n")), [], 3, labels)
    for pm, dropout_on in ((off, False), (on, True)):
        pm.train()
        assert pm.plm.training is dropout_on
        assert all(not p.requires_grad for p in pm.plm.parameters())  # frozen either way
        batch = batch_for(pm, tok, examples(4))
        with torch.no_grad():
            torch.manual_seed(0)
            a = pm.prompt_model(clone(batch)).hidden_states[-1]
            torch.manual_seed(1)
            b = pm.prompt_model(clone(batch)).hidden_states[-1]
        assert torch.allclose(a, b) is (not dropout_on)  # two passes differ only with dropout on


@pytest.mark.parametrize("head_class", ["cls_head", "regression_head"])
def test_cls_head_on_a_plm_loaded_in_bf16(plm, head_class):
    """The head is made in fp32 (like the prompt, so its small steps are not rounded away); on a PLM loaded in bf16
    it read the PLM's bf16 states and stopped: "mat1 and mat2 must have the same dtype, but got BFloat16 and
    Float". The states are cast to the head's dtype: fp32 logits = the head on the bf16 PLM's first-token state."""
    from openprompt_ipt.openprompt.verbalizers import RegressionHeadVerbalizer

    model, tok = plm
    model = model.to(torch.bfloat16)
    template = InstanceWiseTemplate(model, tok, text=TEXT, strategy="random", prompt_length=3)
    head = (ClsHeadVerbalizer(tok, model, num_classes=3) if head_class == "cls_head"
            else RegressionHeadVerbalizer(tok, model, num_classes=1))
    assert {p.dtype for p in head.parameters()} == {torch.float32}
    pm = PromptForClassification(model, template, head, freeze_plm=True, plm_eval_mode=True).eval()
    batch = batch_for(pm, tok, examples(4))
    with torch.no_grad():
        logits = pm(clone(batch))
        states = pm.prompt_model(clone(batch)).hidden_states[-1]
    assert states.dtype == torch.bfloat16 and logits.dtype == torch.float32
    torch.testing.assert_close(logits, head.head(states[:, :1].float()), rtol=0, atol=0)
    pm.train()
    logits = pm(clone(batch))
    loss = (torch.nn.functional.cross_entropy(logits, batch["label"]) if head_class == "cls_head"
            else torch.nn.functional.mse_loss(logits.squeeze(-1), batch["label"].float()))
    loss.backward()
    trained = list(head.parameters()) + [p for n, p in template.named_parameters()
                                         if p.requires_grad and not n.startswith("raw_embedding")]
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in trained)
