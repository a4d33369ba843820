"""Gradient checkpointing with per-layer prompts (kv / hidden injection).

The prompt reaches a layer through hooks that ``forward`` arms and disarms; a checkpointed layer is run again
in the backward, after ``forward`` has returned and disarmed them. ``carry_prompt`` wraps the base model's
checkpoint function so the recompute runs with the plan its forward ran with: the same prompt, the same
graph, the same gradients."""
from __future__ import annotations

import warnings
from contextlib import contextmanager


@contextmanager
def armed(injector, plan):
    previous, injector.plan = injector.plan, plan
    try:
        yield
    finally:
        injector.plan = previous


def _carrier(checkpoint_func, injector):
    def run(function, *args, **kwargs):
        plan = injector.plan
        if plan is None:  # a pass without the prompt (IDPG's sentence encoder, disable_adapter)
            return checkpoint_func(function, *args, **kwargs)

        def replay(*a, **k):
            with armed(injector, plan):
                return function(*a, **k)
        # a reentrant checkpoint passes gradients only to its explicit inputs and leaves: the prompt, made once per
        # batch outside the layer, would get none (or a second backward through its generator), so these layers
        # checkpoint non-reentrant: same memory, same recompute
        return checkpoint_func(replay, *args, **{**kwargs, "use_reentrant": False})
    run.carries_prompt = True
    return run


def carry_prompt(base_model, injector) -> None:
    """Wrap every checkpoint function the base model just installed (4.x: on the encoder, 5.x: on each layer)."""
    if injector is None:
        return
    reentrant = False
    for module in base_model.modules():
        func = getattr(module, "_gradient_checkpointing_func", None)
        if func is not None and not getattr(func, "carries_prompt", False):
            reentrant |= getattr(func, "keywords", {}).get("use_reentrant", True) is not False
            module._gradient_checkpointing_func = _carrier(func, injector)
    if reentrant:
        warnings.warn("gradient checkpointing: the layers that carry the prompt checkpoint with use_reentrant=False "
                      "(a reentrant checkpoint cannot pass gradients to a prompt made outside the layer)", stacklevel=3)
