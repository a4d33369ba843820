"""Parameterized hypercomplex multiplication (PHM) layers (IDPG §3.2.1, Compacter).

``W = sum_i A_i (x) B_i`` with ``A_i`` n x n and ``B_i`` (out/n) x (in/n): ``n^3 + in*out/n``
parameters instead of ``in*out``. The ``A`` set can be owned by the layer or shared between layers
(IDPG counts one shared set for S-IDPG, one per generator layer for M-IDPG).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn


def check_divides(n: int, **sizes: int) -> None:
    bad = {k: v for k, v in sizes.items() if v % n}
    if n <= 0 or bad:
        raise ValueError(f"PHM n={n} must divide every layer size, but not {bad}: "
                         f"pick n among the common divisors of {sorted(set(sizes.values()))}")


class PHMLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, n: int, bias: bool = True,
                 shared_a: Optional[nn.Parameter] = None):
        super().__init__()
        check_divides(n, in_features=in_features, out_features=out_features)
        self.in_features, self.out_features, self.n = in_features, out_features, n
        if shared_a is None:
            self.a = nn.Parameter(torch.empty(n, n, n))
            nn.init.normal_(self.a, std=1.0 / n)
        else:
            self.__dict__["a"] = shared_a  # owned (and counted) by whoever shares it
        self.b = nn.Parameter(torch.empty(n, out_features // n, in_features // n))
        nn.init.normal_(self.b, std=math.sqrt(2.0 / (in_features + out_features)))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def weight(self) -> torch.Tensor:
        # (A_i kron B_i)[a*p + b, c*q + d] = A_i[a, c] * B_i[b, d]
        w = torch.einsum("iac,ibd->abcd", self.a, self.b)
        return w.reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor, weight: Optional[torch.Tensor] = None) -> torch.Tensor:
        # weight: this layer's weight() built once by a caller that applies the layer several times a step
        return nn.functional.linear(x, self.weight() if weight is None else weight, self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, n={self.n}, shared_a={'a' not in self._parameters}"
