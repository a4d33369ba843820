"""``nn.DataParallel``: the 🤗 Trainer wraps a model in it when one process sees several GPUs (``python train.py``
on a multi-GPU machine, no launcher). Each forward then runs shallow copies of the model, one per GPU, at once in
threads: whatever the copies share and a forward changes, or reads outside the module tree, is shared wrongly
(``prompting/replicas.py`` says what, for both front doors)."""
from __future__ import annotations

from ..prompting.replicas import shares_state_across_replicas as _shares


def shares_state_across_replicas(model) -> str:
    """Why ``model``'s DataParallel copies would compute wrong logits ("" when they would not)."""
    return _shares(model.injector, model.generator)


def refuse_data_parallel(model) -> None:
    """One line where a DataParallel copy would be wrong, before its forward runs."""
    why = shares_state_across_replicas(model)
    if why:
        raise RuntimeError(f"method '{model.prompt_config.method}' does not run under nn.DataParallel (the 🤗 "
                           f"Trainer's choice when one process sees several GPUs): {why}, so the copies' logits "
                           "would be wrong. Launch one process per GPU (torchrun --nproc_per_node N train.py, or "
                           "accelerate launch), or make one GPU visible (CUDA_VISIBLE_DEVICES=0)")
