"""The compat shims make unmodified OpenPrompt import and tokenise on the installed transformers."""
import importlib

import transformers

import openprompt_ipt  # noqa: F401
from openprompt_ipt import compat


def test_openprompt_imports_and_removed_names_resolve():
    import openprompt
    from openprompt.prompts import TEMPLATE_CLASS

    assert openprompt.PromptForClassification is not None
    assert importlib.import_module("transformers.generation_utils").GenerationMixin.__name__ == "GenerationMixin"
    from transformers import AdamW  # removed in 4.50; shimmed to torch's AdamW there

    assert AdamW is not None
    assert TEMPLATE_CLASS["instance_wise"].__name__ == "InstanceWiseTemplate"


def test_apply_is_idempotent():
    compat.apply()
    compat.apply()
    from transformers import AdamW  # noqa: F401


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
