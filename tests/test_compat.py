"""The compat shims make unmodified OpenPrompt import and tokenise on the installed transformers."""
import importlib
import os
import subprocess
import sys

import pytest
import transformers

import openprompt_ipt  # noqa: F401
from openprompt_ipt.openprompt import compat


def test_openprompt_imports_and_removed_names_resolve():
    import openprompt
    from openprompt.prompts import TEMPLATE_CLASS

    assert openprompt.PromptForClassification is not None
    assert importlib.import_module("transformers.generation_utils").GenerationMixin.__name__ == "GenerationMixin"
    from transformers import AdamW  # removed in 4.50; shimmed to transformers 4's AdamW there

    assert AdamW is not None
    assert TEMPLATE_CLASS["instance_wise"].__name__ == "InstanceWiseTemplate"


def test_apply_is_idempotent():
    compat.apply()
    compat.apply()
    from transformers import AdamW  # noqa: F401


def test_openprompts_trainer_builds_transformers_4s_adamw():
    """OpenPrompt's ClassificationRunner builds its template and verbalizer optimizers as ``AdamW(params, lr=...)``:
    transformers 4's defaults (no weight decay, eps 1e-6). torch's AdamW (the old shim) decayed by 0.01 every step,
    so a weight without gradient shrank and a run on 5.x trained otherwise than on 4.39, silently."""
    import torch
    from openprompt import trainer

    kept, moved = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    optimizer = trainer.AdamW([kept, moved], lr=0.1)  # as configure_optimizers builds the verbalizer's
    assert (optimizer.defaults["weight_decay"], optimizer.defaults["eps"]) == (0.0, 1e-6)
    for _ in range(3):
        kept.grad, moved.grad = torch.zeros(3), torch.tensor([0.5, -0.2, 1e-7])
        optimizer.step()
    assert torch.equal(kept.detach(), torch.ones(3))
    assert moved[0] < 1 < moved[1]


def test_the_adamw_shim_resumes_an_optimizer_state_saved_with_torchs_adamw():
    """Before the shim, transformers >= 4.50 gave OpenPrompt's trainer torch's AdamW: a checkpoint it saved has
    param groups without ``correct_bias``, and resuming it stopped at the first step with KeyError: 'correct_bias'.
    It resumes now, with its saved moments and step count."""
    import torch

    before = torch.nn.Parameter(torch.ones(3))
    saved = torch.optim.AdamW([before], lr=0.1)
    before.grad = torch.ones(3)
    saved.step()
    param = torch.nn.Parameter(before.detach().clone())
    shim = compat.Transformers4AdamW([param], lr=0.1)
    shim.load_state_dict(saved.state_dict())
    param.grad = torch.ones(3)
    shim.step()
    assert int(shim.state[param]["step"]) == 2 and bool((param < before).all())


@pytest.mark.skipif(not hasattr(importlib.import_module("transformers.optimization"), "AdamW"), reason="transformers >= 4.50 has no AdamW of its own to compare with")
@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.03, eps=1e-8), dict(lr=0.01, weight_decay=0.1),
                                    dict(lr=0.01, correct_bias=False, betas=(0.8, 0.99))])
def test_the_adamw_shim_steps_as_transformers_4s_own(kwargs):
    """Where transformers still ships AdamW (the 4.39 CI line), the shim's steps are bit for bit its steps."""
    import warnings

    import torch
    from transformers.optimization import AdamW

    torch.manual_seed(0)
    theirs = torch.nn.Parameter(torch.randn(4, 3))
    ours = torch.nn.Parameter(theirs.detach().clone())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # its deprecation notice
        reference = AdamW([theirs], **kwargs)
    shim = compat.Transformers4AdamW([ours], **kwargs)
    for i in range(5):
        grad = torch.randn(4, 3) * 10.0 ** -i  # down to gradients below eps
        theirs.grad, ours.grad = grad.clone(), grad.clone()
        reference.step()
        shim.step()
    assert torch.equal(theirs, ours)


def test_special_tokens_rebuilt_for_bert_and_roberta(plm):
    _, tok = plm
    ids = tok.encode("cat dog", add_special_tokens=False)
    full = tok.encode("cat dog", add_special_tokens=True)
    assert tok.build_inputs_with_special_tokens(ids) == full
    mask = tok.get_special_tokens_mask(ids)
    assert len(mask) == len(full) and mask[0] == 1 and mask[-1] == 1 and sum(mask) == len(full) - len(ids)


def test_openprompt_wrapper_tokenises(plm):
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from helpers import build, examples

    model, tok = plm
    pm = build(model, tok, strategy="random", prompt_length=3)
    wrapper = MLMTokenizerWrapper(max_seq_length=32, tokenizer=tok, truncate_method="balanced")
    enc = wrapper.tokenize_one_example(pm.template.wrap_one_example(examples(1)[0]), False)
    assert enc["input_ids"][0] == tok.cls_token_id or enc["input_ids"][0] == tok.bos_token_id
    assert enc["loss_ids"].count(1) == 1 and enc["input_ids"][enc["loss_ids"].index(1)] == tok.mask_token_id


def test_the_hf_door_alone_can_resume_on_old_transformers():
    """transformers < 4.47 on torch >= 2.6: the Trainer's resume reads numpy RNG states that ``weights_only`` refuses.
    Importing the 🤗 door allowlists them, with OpenPrompt never imported (a user of that door only)."""
    code = ("import sys, numpy, torch, transformers\n"
            "from packaging import version\n"
            "import openprompt_ipt.hf\n"
            "assert 'openprompt' not in sys.modules\n"
            "old = version.parse(transformers.__version__).release < (4, 47) and version.parse(torch.__version__).release >= (2, 6)\n"
            "allowed = numpy.ndarray in torch.serialization.get_safe_globals()\n"
            "assert allowed == old, (transformers.__version__, allowed)\n"
            "print('old' if old else 'new')\n")
    _in_a_fresh_process(code)


def test_the_pair_separator_needs_no_openprompt_shim():
    """The prompt layer finds RoBERTa's </s></s> between a pair's sentences by probing the tokenizer itself, so the
    🤗 door's IDPG reads pairs right on transformers 5 (no build_inputs_with_special_tokens) without OpenPrompt."""
    code = ("import sys, tempfile\n"
            f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
            "import conftest\n"
            "from openprompt_ipt.generators.sentence import pair_separator\n"
            "_, tok = conftest._roberta(tempfile.mkdtemp())\n"
            "assert 'openprompt' not in sys.modules\n"
            "assert pair_separator(tok, tok.sep_token_id) == [tok.sep_token_id, tok.sep_token_id], pair_separator(tok, 0)\n")
    _in_a_fresh_process(code)


def _in_a_fresh_process(code: str) -> None:
    """Run ``code`` where nothing has imported OpenPrompt yet (this process has); its asserts fail the test."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
