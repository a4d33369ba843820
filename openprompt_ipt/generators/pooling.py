"""Masked adaptive pooling: any number of valid tokens -> exactly ``k`` vectors.

Bin b of an example with n valid tokens covers tokens [floor(b*n/k), ceil((b+1)*n/k)), the rule
of ``adaptive_avg_pool1d``, so no bin is ever empty (also when n < k) and every token is used."""
from __future__ import annotations

import torch


def bin_weights(mask: torch.Tensor, k: int) -> torch.Tensor:
    """(batch, k, T) averaging weights over each example's own valid prefix."""
    mask = mask.bool()
    n = mask.sum(dim=1).clamp(min=1).unsqueeze(1)  # (B, 1)
    b = torch.arange(k, device=mask.device).unsqueeze(0)  # (1, k)
    start = torch.div(b * n, k, rounding_mode="floor")  # (B, k)
    end = torch.div((b + 1) * n + k - 1, k, rounding_mode="floor")
    pos = torch.arange(mask.size(1), device=mask.device).view(1, 1, -1)
    inside = (pos >= start.unsqueeze(-1)) & (pos < end.unsqueeze(-1)) & mask.unsqueeze(1)
    weights = inside.float()
    return weights / weights.sum(dim=-1, keepdim=True).clamp(min=1.0)


def pool_to_length(x: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """(B, T, C) features + (B, T) mask -> (B, k, C) bin means."""
    return torch.bmm(bin_weights(mask, k).to(x.dtype), x)
