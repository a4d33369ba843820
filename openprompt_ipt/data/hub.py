"""Whether the 🤗 hub can be reached: offline flags win, else one short connection try per process.
Both the data lookup (``data/sources.py``) and the backbone loader (``runner/backbones.py``) ask it, so an
offline run fails or falls back in seconds instead of after the hub clients' retries."""
from __future__ import annotations

import os
import socket
from functools import lru_cache

OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def hub_online(timeout: float = 3.0) -> bool:
    """Whether the 🤗 hub can be reached: False under an offline flag (read on every call), else
    whether huggingface.co answers (asked once per process; ``hub_online.cache_clear()`` asks again)."""
    if any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in OFFLINE_FLAGS):
        return False
    import huggingface_hub.constants

    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return False
    return _reachable(timeout)


@lru_cache(maxsize=1)
def _reachable(timeout: float) -> bool:
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


hub_online.cache_clear = _reachable.cache_clear
