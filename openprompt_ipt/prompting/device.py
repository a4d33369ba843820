"""Where a new prompt's parameters go: beside the backbone they were made over, in both front doors."""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


def backbone_device(embedding: nn.Module):
    """The device of the backbone's input embeddings (where a prompt's first use meets them), or None when its
    weights are not loaded (the meta device: nothing real to place beside)."""
    weight = getattr(embedding, "weight", None)
    if weight is None or weight.is_meta:
        return None
    return weight.device


def place_beside(owner: nn.Module, device, skip: Iterable[nn.Module] = ()) -> None:
    """``owner``'s own parts (its children other than ``skip``, its direct parameters and buffers) on ``device``,
    as PEFT places its adapters: a backbone loaded onto a GPU (or moved there) before the prompt was built over
    it got a prompt made on the CPU, and its first forward failed on tensors on two devices. Parameters keep
    their ``requires_grad``; ``skip`` (the backbone, or its embedding table) is left where it is."""
    if device is None:
        return
    device = torch.device(device)
    skipped = [id(m) for m in skip]
    for child in owner.children():
        if id(child) not in skipped:
            child.to(device)
    for name, param in owner._parameters.items():
        if param is not None and param.device != device:
            owner._parameters[name] = nn.Parameter(param.detach().to(device), requires_grad=param.requires_grad)
    for name, buffer in owner._buffers.items():
        if buffer is not None and buffer.device != device:
            owner._buffers[name] = buffer.to(device)
