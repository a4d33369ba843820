"""``nn.DataParallel``: the 🤗 Trainer wraps a model in it when one process sees several GPUs (``python train.py``
on a multi-GPU machine, no launcher). Each forward then runs shallow copies of the model, one per GPU, at once in
threads: whatever the copies share and a forward changes, or reads outside the module tree, is shared wrongly."""
from __future__ import annotations

from torch import nn


def shares_state_across_replicas(model) -> str:
    """Why ``model``'s DataParallel copies would compute wrong logits ("" when they would not): the injector's
    armed plan (kv / hidden / late prompts), one object for every copy, so one copy's prompts (or none: a plan
    taken as stale is dropped) reached another's layers; or a module the generator holds outside its tree (the
    PLM or its embeddings, for IDPG's M(x) and the encoder / pretrained strategies), never copied to the GPUs."""
    if model.injector is not None:
        return "its prompts enter the backbone's layers through hooks that every copy shares"
    for module in model.generator.modules() if model.generator is not None else ():
        if any(isinstance(value, nn.Module) for value in vars(module).values()):
            return "its generator reads the backbone (or its embeddings) outside the copied modules"
    return ""


def refuse_data_parallel(model) -> None:
    """One line where a DataParallel copy would be wrong, before its forward runs."""
    why = shares_state_across_replicas(model)
    if why:
        raise RuntimeError(f"method '{model.prompt_config.method}' does not run under nn.DataParallel (the 🤗 "
                           f"Trainer's choice when one process sees several GPUs): {why}, so the copies' logits "
                           "would be wrong. Launch one process per GPU (torchrun --nproc_per_node N train.py, or "
                           "accelerate launch), or make one GPU visible (CUDA_VISIBLE_DEVICES=0)")
