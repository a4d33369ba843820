"""The Trainer's ``gradient_checkpointing=True`` on ``InstancePromptModel``: the base's checkpointing, with the
per-layer prompt carried into the backward's recompute."""
from __future__ import annotations

from ..injection.checkpointing import carry_prompt


class GradientCheckpointingMixin:
    """``gradient_checkpointing_enable`` (the Trainer's call) and ``activation_checkpointing_enable`` (its
    transformers 5 name)."""

    def activation_checkpointing_enable(self, activation_checkpointing_kwargs=None, **kwargs):
        """The base's gradient checkpointing, with the per-layer prompt carried into the backward's recompute
        (injection/checkpointing.py); the input embeddings then require grad, so a reentrant checkpoint sees the
        graph."""
        enable = getattr(self.base_model, "activation_checkpointing_enable", None)
        if enable is not None:  # transformers >= 5 (gradient_checkpointing_enable is its deprecated alias)
            enable(activation_checkpointing_kwargs=activation_checkpointing_kwargs, **kwargs)
        else:
            self.base_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=activation_checkpointing_kwargs,
                                                          **kwargs)
        if self.injector is not None:  # at once, not at the first forward: a reentrant request warns here
            carry_prompt(self.injector.checkpointable, self.injector)
        self._checkpointing = True

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.activation_checkpointing_enable(gradient_checkpointing_kwargs, **kwargs)
