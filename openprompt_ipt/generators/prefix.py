"""Task-level prefixes: Prefix Tuning (Li & Liang, MLP reparameterisation) and P-tuning v2 (none).

Every slot (a layer's key or value under ``kv``, a layer's hidden prompt under ``hidden``) gets
``length`` trained vectors, the same for every example."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from .layered import GeneratorContext, LayerPromptGenerator


@dataclass
class PrefixConfig:
    reparameterize: bool = False   # Li & Liang: prefix = MLP(embedding); P-tuning v2: direct vectors
    reparam_hidden: int = 512
    init_std: Optional[float] = None  # default: the PLM's input-embedding std


class TaskPrefix(nn.Module):
    def __init__(self, slots: int, length: int, hidden: int, config: PrefixConfig, init_std: float):
        super().__init__()
        self.slots, self.length, self.hidden = slots, length, hidden
        std = config.init_std if config.init_std is not None else init_std
        if config.reparameterize:
            self.embedding = nn.Parameter(torch.randn(length, hidden) * std)
            self.mlp = nn.Sequential(nn.Linear(hidden, config.reparam_hidden), nn.Tanh(),
                                     nn.Linear(config.reparam_hidden, slots * hidden))
            self.prompts = None
        else:
            self.prompts = nn.Parameter(torch.randn(slots, length, hidden) * std)

    def forward(self) -> torch.Tensor:
        """(slots, length, hidden)."""
        if self.prompts is not None:
            return self.prompts
        return self.mlp(self.embedding).view(self.length, self.slots, self.hidden).transpose(0, 1)


class PrefixGenerator(LayerPromptGenerator):
    config_class = PrefixConfig
    section = "prefix"

    def __init__(self, ctx: GeneratorContext, config: PrefixConfig):
        super().__init__(ctx, config)
        self.task = TaskPrefix(ctx.slots, ctx.prompt_length, ctx.hidden_size, config, ctx.init_std)

    @property
    def n_positions(self) -> int:
        return self.ctx.prompt_length

    def begin(self, inputs):
        # unbound once: the backward stacks the slots' gradients in one op, where indexing per slot would
        # scatter each into a zero tensor of the whole table and sum 2L of them
        return {"prompts": self.task().unbind(0), "batch": inputs.batch_size}

    def slot(self, state, s, previous=None):
        return state["prompts"][s].expand(state["batch"], -1, -1)
