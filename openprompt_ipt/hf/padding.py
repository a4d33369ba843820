"""Left-padded batches (``tokenizer.padding_side = "left"``) are read as right-padded ones.

The prompts assume an example starts at position 0: the first-token state M-IDPG (``input_from: previous``) and
LPT's NPG read, the index where S-/M-IDPG splice their prompt, and RoBERTa's position ids, which the model numbers
in order when it is given ``inputs_embeds`` (as every prompt's forward is) instead of counting attended tokens as it
does from ``input_ids``. So a row that starts with padding is rotated to put its tokens first, and the per-token
outputs are rotated back to the caller's positions. Right-padded batches pass untouched."""
from __future__ import annotations

from typing import Optional

import torch


def right_padding_order(attention_mask: torch.Tensor) -> Optional[torch.Tensor]:
    """(B, n) gather index that moves each row's leading padding to its end; ``None`` when no row has any."""
    n = attention_mask.size(1)
    leading = (attention_mask == 0).long().cumprod(dim=1).sum(dim=1, keepdim=True)  # (B, 1)
    if not bool(((leading > 0) & (leading < n)).any()):  # one host read per batch; all-padding rows stay
        return None
    return (torch.arange(n, device=attention_mask.device).unsqueeze(0) + leading) % n


def caller_order(order: torch.Tensor) -> torch.Tensor:
    """The inverse of ``right_padding_order``'s index: rotated positions back to the caller's."""
    n = order.size(1)
    return (torch.arange(n, device=order.device).unsqueeze(0) - order[:, :1]) % n


def take(x: Optional[torch.Tensor], order: torch.Tensor) -> Optional[torch.Tensor]:
    """``x`` (B, n, ...) with its positions gathered by ``order`` (B, n)."""
    if x is None:
        return None
    index = order.view(*order.shape, *([1] * (x.dim() - 2))).expand(*order.shape, *x.shape[2:])
    return x.gather(1, index)


def width_within(attention_mask: torch.Tensor, room: int, labels: Optional[torch.Tensor] = None) -> Optional[int]:
    """The width to cut a right-padded batch to when only its padding overflows the ``room`` the prompt leaves under
    the model's positions (``padding="max_length"`` at the tokenizer's limit, or ``pad_to_multiple_of=8`` rounding a
    fitting ``max_length`` up): ``room``; ``None`` when the batch fits, or when a token (or a token label other than
    -100) sits past the room, which the position check then names."""
    if attention_mask.size(1) <= room:
        return None
    if bool(attention_mask[:, room:].any()) or (labels is not None and bool((labels[:, room:] != -100).any())):
        return None
    return room


def padded_to(x: Optional[torch.Tensor], width: int) -> Optional[torch.Tensor]:
    """``x`` (B, n, ...) with zeros after position n, to ``width`` positions: the padding columns ``width_within``
    cut, back in a per-token output."""
    if x is None or x.size(1) >= width:
        return x
    return torch.cat([x, x.new_zeros(x.size(0), width - x.size(1), *x.shape[2:])], dim=1)
