"""Pick, per example and fully vectorised, which token ids feed an instance-wise prompt.

The authors' code loops over the batch in Python; here a cumulative count over the content mask
gives every token its rank inside its own example, and one scatter places the first ``length``
of them into a (batch, length) id matrix."""
from __future__ import annotations

import math

import torch


def first_content_ids(input_ids: torch.Tensor, content_mask: torch.Tensor, length: int, pad_id: int) -> torch.Tensor:
    """Ids of the first ``length`` tokens where ``content_mask`` is true, left-aligned, ``pad_id`` after."""
    batch = input_ids.size(0)
    content_mask = content_mask.bool()
    rank = content_mask.long().cumsum(dim=1) - 1  # position of each token among its example's content
    keep = content_mask & (rank < length)
    out = input_ids.new_full((batch, length), pad_id)
    rows = torch.arange(batch, device=input_ids.device).unsqueeze(1).expand_as(rank)
    out[rows[keep], rank[keep]] = input_ids[keep]
    return out


def utilized_content_ids(input_ids: torch.Tensor, content_mask: torch.Tensor, rate: float, pad_id: int,
                         max_tokens: int | None = None):
    """The first ceil(rate * n_i) content tokens of each example i (at least one position).

    Returns ``(ids, mask)`` of shape (batch, T) with T the longest kept prefix in the batch; examples
    without content get a single ``pad_id`` position so every example feeds the encoder something.
    """
    counts = content_mask.bool().sum(dim=1)
    keep = torch.clamp(torch.ceil(counts.double() * rate).long(), min=1)
    if max_tokens is not None:
        keep = keep.clamp(max=max_tokens)
    length = int(keep.max().item())
    ids = first_content_ids(input_ids, content_mask, length, pad_id)
    mask = torch.arange(length, device=ids.device).unsqueeze(0) < keep.unsqueeze(1)
    return ids, mask


def utilized_length(n_tokens: int, rate: float) -> int:
    """Scalar form of the rule above (the tests check the tensor form against it)."""
    return max(1, math.ceil(n_tokens * rate))
