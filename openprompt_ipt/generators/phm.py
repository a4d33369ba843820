"""Parameterized hypercomplex multiplication (PHM) layers (IDPG §3.2.1, Compacter).

``W = sum_i A_i (x) B_i`` with ``A_i`` n x n and ``B_i`` (out/n) x (in/n): ``n^3 + in*out/n``
parameters instead of ``in*out``. The ``A`` set can be owned by the layer or shared between layers
(IDPG counts one shared set for S-IDPG, one per generator layer for M-IDPG).

A shared set is read from its owner at every use (``shared_a=(owner, name)``), never held: ``.double()`` / ``.half()``
under ``torch.__future__.set_overwrite_module_params_on_conversion(True)``, ``load_state_dict(..., assign=True)``
and ``to_empty`` give the owner a new parameter object, and a layer holding the old one computed with the stale
tensor (silently wrong outputs, or a dtype error). ``copy.deepcopy`` and pickle copy the owner with the layer.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
from torch import nn


def check_divides(n: int, **sizes: int) -> None:
    bad = {k: v for k, v in sizes.items() if v % n}
    if n <= 0 or bad:
        raise ValueError(f"PHM n={n} must divide every layer size, but not {bad}: "
                         f"pick n among the common divisors of {sorted(set(sizes.values()))}")


class PHMLinear(nn.Module):
    def __init__(self, in_features: int, out_features: int, n: int, bias: bool = True,
                 shared_a: Optional[Union[nn.Parameter, Tuple[nn.Module, str]]] = None):
        super().__init__()
        check_divides(n, in_features=in_features, out_features=out_features)
        self.in_features, self.out_features, self.n = in_features, out_features, n
        if shared_a is None:
            self.a = nn.Parameter(torch.empty(n, n, n))
            nn.init.normal_(self.a, std=1.0 / n)
        elif isinstance(shared_a, tuple):
            owner, name = shared_a  # owned (and counted) by ``owner``, read there at every use
            if not isinstance(getattr(owner, name, None), torch.Tensor):
                raise ValueError(f"PHMLinear shared_a=({type(owner).__name__}, '{name}'): that module has no tensor "
                                 f"'{name}'; register the shared A parameter on it first")
            self.__dict__["_a_from"] = (owner, name)
        else:  # a bare parameter: held as given (an owner that replaces it, e.g. load_state_dict(assign=True), is
            # not seen; pass (owner, name) instead)
            self.__dict__["_a_held"] = shared_a
        self.b = nn.Parameter(torch.empty(n, out_features // n, in_features // n))
        nn.init.normal_(self.b, std=math.sqrt(2.0 / (in_features + out_features)))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def __getattr__(self, name: str):
        if name == "a":  # a shared A set: the owner's current parameter
            source = self.__dict__.get("_a_from")
            if source is not None:
                return getattr(source[0], source[1])
            if "_a_held" in self.__dict__:
                return self.__dict__["_a_held"]
        return super().__getattr__(name)

    def weight(self, a: Optional[torch.Tensor] = None) -> torch.Tensor:
        # a: the shared A set, given by its owner (nn.DataParallel's copy of the owner holds its own copy of A, while
        # the copied layer's (owner, name) still names the original owner)
        # (A_i kron B_i)[a*p + b, c*q + d] = A_i[a, c] * B_i[b, d]
        w = torch.einsum("iac,ibd->abcd", self.a if a is None else a, self.b)
        return w.reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor, weight: Optional[torch.Tensor] = None) -> torch.Tensor:
        # weight: this layer's weight() built once by a caller that applies the layer several times a step
        return nn.functional.linear(x, self.weight() if weight is None else weight, self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, n={self.n}, shared_a={'a' not in self._parameters}"
