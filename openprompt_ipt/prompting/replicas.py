"""``nn.DataParallel``: a host wraps the model in it when one process sees several GPUs (the 🤗 Trainer; OpenPrompt's
ClassificationRunner with ``environment.num_gpus > 1``). Each forward then runs shallow copies of the model, one per
GPU, at once in threads: whatever the copies share and a forward changes, or reads outside the module tree, is
shared wrongly. Both front doors ask this before a copy's forward runs."""
from __future__ import annotations

from torch import nn


def shares_state_across_replicas(injector, generator) -> str:
    """Why DataParallel copies of a prompt with this ``injector`` and ``generator`` would compute wrong logits ("" when
    they would not): the injector's armed plan (kv / hidden / late prompts), one object for every copy, so one copy's
    prompts (or none: a plan taken as stale is dropped) reached another's layers; or a module the generator holds
    outside its tree (the PLM or its embeddings, for IDPG's M(x) and the encoder / pretrained strategies), never
    copied to the GPUs."""
    if injector is not None:
        return "its prompts enter the backbone's layers through hooks that every copy shares"
    for module in generator.modules() if generator is not None else ():
        if any(isinstance(value, nn.Module) for value in vars(module).values()):
            return "its generator reads the backbone (or its embeddings) outside the copied modules"
    return ""
