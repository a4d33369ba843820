"""Gradient checkpointing with prompts that hooks put into the layers (kv, hidden, late injection).

The prompt reaches a layer through hooks that a forward arms and disarms (``post_processing_outputs``, the 🤗
model's ``forward``); a checkpointed layer is run again in the backward, after that forward has returned and
disarmed them: without its prefix the recompute fails (``CheckpointError``), and a reentrant checkpoint, which
runs the layer under ``no_grad``, would give the prompt no gradient at all, silently. Each injector wraps the
checkpoint function of the PLM it hooks (``PromptCarrier``) when it is armed, so however checkpointing was
turned on (``plm.gradient_checkpointing_enable()``, the Trainer's flag), the recompute runs with the plan its
forward ran with: the same prompt, the same graph, the same gradients."""
from __future__ import annotations

import warnings
from contextlib import contextmanager

CHECKPOINTED = "gradient_checkpointing"  # the flag transformers gives each module that can checkpoint (4.x: the
FUNC = "_gradient_checkpointing_func"    # encoder, 5.x: each layer), and the function it checkpoints with


@contextmanager
def armed(plans):
    """Arm each ``(injector, plan)`` for the block; each injector's own plan afterwards."""
    previous = [(injector, injector.plan) for injector, _ in plans]
    for injector, plan in plans:
        injector.plan = plan
    try:
        yield
    finally:
        for injector, plan in previous:
            injector.plan = plan


class PromptCarrier:
    """A base model's checkpoint function that carries the armed plans into the backward's recompute. An object,
    not a closure, so ``copy.deepcopy`` of the model gives the copy's injectors (as the hooks' ``partial``)."""

    def __init__(self, func):
        self.func, self.injectors = func, []  # every template hooked into this PLM, armed or not

    def __call__(self, function, *args, **kwargs):
        plans = [(injector, injector.plan) for injector in self.injectors if injector.plan is not None]
        if not plans:  # a pass without the prompt (IDPG's sentence encoder, disable_adapter, a plain template)
            return self.func(function, *args, **kwargs)

        def replay(*a, **k):
            with armed(plans):
                return function(*a, **k)
        # a reentrant checkpoint passes gradients only to its explicit inputs and leaves: the prompt, made once per
        # batch outside the layer, would get none (or a second backward through its generator), so these layers
        # checkpoint non-reentrant: same memory, same recompute
        return self.func(replay, *args, **{**kwargs, "use_reentrant": False})


def checkpointable(model) -> list:
    """The modules of ``model`` that transformers may checkpoint (found once: their flag exists enabled or not)."""
    return [m for m in model.modules() if hasattr(m, CHECKPOINTED)]


def carry_prompt(modules, injector) -> None:
    """Wrap the checkpoint function of every module in ``modules`` that checkpoints now, so the recompute runs
    with ``injector``'s plan; idempotent, cheap enough for every forward (a few attribute reads)."""
    reentrant = False
    for module in modules:
        func = getattr(module, FUNC, None)
        if func is None or not getattr(module, CHECKPOINTED, False):
            continue
        if not isinstance(func, PromptCarrier):
            reentrant |= getattr(func, "keywords", {}).get("use_reentrant", True) is not False
            func = PromptCarrier(func)
            setattr(module, FUNC, func)
        if injector not in func.injectors:
            func.injectors.append(injector)
    if reentrant:
        warnings.warn("gradient checkpointing: the layers that carry the prompt checkpoint with use_reentrant=False "
                      "(a reentrant checkpoint cannot pass gradients to a prompt made outside the layer)", stacklevel=3)


def drop_prompt(modules, injector) -> None:
    """``injector`` is removed: the carriers stop arming it."""
    for module in modules:
        func = getattr(module, FUNC, None)
        if isinstance(func, PromptCarrier) and injector in func.injectors:
            func.injectors.remove(injector)
