"""What dtype autocast gives matmul outputs on a device, on every torch this package supports (>= 2.1)."""
from __future__ import annotations

from typing import Optional

import torch


def autocast_dtype(device_type: str) -> Optional[torch.dtype]:
    """The dtype autocast casts linear layers to on ``device_type`` ("cpu", "cuda", ...), or None when off."""
    try:
        enabled = torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4: one switch for CPU, one for CUDA
        enabled = torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()
    if not enabled:
        return None
    if hasattr(torch, "get_autocast_dtype"):
        return torch.get_autocast_dtype(device_type)
    return torch.get_autocast_cpu_dtype() if device_type == "cpu" else torch.get_autocast_gpu_dtype()
