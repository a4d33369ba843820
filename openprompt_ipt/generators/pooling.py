"""Masked adaptive pooling: any number of valid tokens -> exactly ``k`` vectors.

Bin b of an example with n valid tokens covers tokens [floor(b*n/k), ceil((b+1)*n/k)), the rule
of ``adaptive_avg_pool1d``, so no bin is ever empty (also when n < k) and every token is used."""
from __future__ import annotations

import torch


def bin_mask(mask: torch.Tensor, k: int) -> torch.Tensor:
    """(batch, k, T) bool: which valid tokens fall into each of the k bins. Tokens are counted by their rank among
    the example's valid ones, so padding may sit on either side (or anywhere)."""
    mask = mask.bool()
    n = mask.sum(dim=1).clamp(min=1).unsqueeze(1)  # (B, 1)
    b = torch.arange(k, device=mask.device).unsqueeze(0)  # (1, k)
    start = torch.div(b * n, k, rounding_mode="floor")  # (B, k)
    end = torch.div((b + 1) * n + k - 1, k, rounding_mode="floor")
    rank = (torch.cumsum(mask.long(), dim=1) - 1).unsqueeze(1)  # (B, 1, T)
    return (rank >= start.unsqueeze(-1)) & (rank < end.unsqueeze(-1)) & mask.unsqueeze(1)


def bin_weights(mask: torch.Tensor, k: int) -> torch.Tensor:
    """(batch, k, T) averaging weights over each bin's valid tokens."""
    weights = bin_mask(mask, k).float()
    return weights / weights.sum(dim=-1, keepdim=True).clamp(min=1.0)


def pool_to_length(x: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """(B, T, C) features + (B, T) mask -> (B, k, C) bin means."""
    return torch.bmm(bin_weights(mask, k).to(x.dtype), x)
