"""The runner's view of a backbone (loading: ``backbones.py``), and ``skip_mlm_head``
for heads that read hidden states only."""
from __future__ import annotations

from typing import Optional, Tuple

from torch import nn

from .backbones import backbone_path

resolve_backbone = backbone_path  # the name this module had before the top-level API


TRAINED_HEADS = ("soft_verbalizer", "cls_head", "regression_head")  # trained on the task: the MLM head is not read


def load_backbone(name_or_path: str, model_name: Optional[str] = None,
                  verbalizer: Optional[str] = None) -> Tuple[object, object, type]:
    """(model, tokenizer, OpenPrompt tokenizer-wrapper class) for a masked LM (``openprompt_ipt.load_backbone``
    without the model config); ``verbalizer``: the run's, so an untrained MLM head is only mentioned where
    the verbalizer reads it."""
    from .backbones import load_backbone as load

    model, tokenizer, _, wrapper_class = load(name_or_path, model_name=model_name,
                                              warn_untrained_head=verbalizer not in TRAINED_HEADS)
    return model, tokenizer, wrapper_class


class HiddenStatesAsLogits(nn.Module):
    """Stands in for a masked LM's vocabulary head when nothing reads the vocabulary logits.

    A SoftVerbalizer reads the last hidden state at the mask; the vocab head (hidden x 30-50k
    matmul at *every* position) is then a third of the forward pass for nothing. ``skip_mlm_head``
    swaps it for this identity, so ``outputs.logits`` are the final hidden states."""

    def forward(self, hidden_states):
        return hidden_states


def skip_unread_mlm_head(model, verbalizer) -> None:
    """The vocabulary head skipped where the verbalizer reads hidden states only: by the run and by ``predict``
    alike, so a fine-tuned run's saved weights (which then lack the skipped head) match the model it loads."""
    from openprompt.prompts import SoftVerbalizer

    if isinstance(verbalizer, SoftVerbalizer) or getattr(verbalizer, "reads_hidden_states", False):
        skip_mlm_head(model)  # SoftVerbalizer copied what it needs of the head


def skip_mlm_head(model) -> str:
    """Replace the child module holding the output (vocabulary) projection; returns its name."""
    decoder = model.get_output_embeddings()
    for name, child in model.named_children():
        if decoder is not None and any(m is decoder for m in child.modules()):
            setattr(model, name, HiddenStatesAsLogits())
            return name
    raise ValueError(f"{type(model).__name__}: cannot find the vocabulary head to skip (get_output_embeddings() "
                     "is not inside a child module); use a verbalizer that reads logits")
