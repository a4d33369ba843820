"""A fix the 🤗 door needs on old transformers with new torch, applied when ``openprompt_ipt.hf`` is imported."""
from __future__ import annotations


def allow_numpy_in_rng_states() -> None:
    """transformers < 4.47 reads the Trainer's ``rng_state.pth`` (numpy arrays) with ``torch.load``'s default, which
    torch 2.6 made ``weights_only``: every ``resume_from_checkpoint`` then fails. Allowlist the numpy array types,
    as transformers >= 4.47 does around that load (its ``safe_globals``); numpy arrays are data, not code."""
    import torch
    import transformers
    from packaging import version

    if (version.parse(transformers.__version__).release >= (4, 47)
            or version.parse(torch.__version__).release < (2, 6) or not hasattr(torch.serialization, "add_safe_globals")):
        return
    import numpy as np

    core = np._core if hasattr(np, "_core") else np.core
    torch.serialization.add_safe_globals([core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))])
