"""LPT's prompt generators (Late Prompt Tuning, Liu et al., Findings of EMNLP 2022), from the hidden states at
the layer where the prompt joins (``injection: late``; ``injection/late.py`` puts it there):

* ``npg``   -- the first ([CLS]) state -> Linear(d, bottleneck) -> ReLU -> Linear(bottleneck, t*d) -> dropout;
* ``appg`` / ``mppg`` -- every real token's state -> Linear(d, bottleneck); adaptive average / max pooling
  over the real tokens (padding excluded) down to t positions; ReLU; Linear(bottleneck, d); dropout;
* ``plain`` -- t trained vectors, the same for every input (the paper's ablation without a generator).

Pooling follows ``nn.AdaptiveAvgPool1d`` / ``AdaptiveMaxPool1d`` on each example's real tokens (``pooling.py``, the
bins IPT's encoders use): bin j of t covers tokens [floor(j*m/t), ceil((j+1)*m/t)) of m. With t > m the bins overlap, so tokens repeat (nothing is padded
with zeros); a one-time warning says so.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from .layered import GeneratorContext, LayerPromptGenerator, positive_count
from .pooling import bin_mask, pool_to_length

KINDS = ("npg", "appg", "mppg", "plain")
logger = logging.getLogger(__name__)


@dataclass
class LPTConfig:
    kind: str = "npg"             # npg | appg | mppg | plain
    bottleneck: int = 128         # the authors' down-projection size
    dropout: float = 0.1          # on the generated prompt (RoBERTa's hidden dropout, as the authors)
    init_std: Optional[float] = None  # plain: N(0, init_std); default 1.0, the scale of LayerNorm'd hidden states


class LatePromptGenerator(LayerPromptGenerator):
    config_class = LPTConfig
    section = "lpt"
    uses_previous = True  # reads the hidden states where the prompt joins

    @classmethod
    def default_injection(cls, config) -> str:
        return "late"

    def __init__(self, ctx: GeneratorContext, config: LPTConfig):
        super().__init__(ctx, config)
        if config.kind not in KINDS:
            raise ValueError(f"unknown lpt.kind '{config.kind}': choose one of {list(KINDS)}")
        if ctx.injection != "late":
            raise ValueError(f"the lpt generator makes its prompt from the hidden states at late_layer: use injection: "
                             f"late, not '{ctx.injection}'")
        positive_count("lpt.bottleneck", config.bottleneck)
        if not 0.0 <= float(config.dropout) < 1.0:
            raise ValueError(f"lpt.dropout must be in [0, 1), got {config.dropout}")
        d, t, m = ctx.hidden_size, ctx.prompt_length, int(config.bottleneck)
        self.kind = config.kind
        self._warned = False
        if self.kind == "plain":
            std = 1.0 if config.init_std is None else float(config.init_std)
            self.prompt = nn.Parameter(torch.randn(t, d) * std)
            return
        self.down = nn.Linear(d, m)
        self.act = nn.ReLU()
        self.up = nn.Linear(m, t * d if self.kind == "npg" else d)
        self.dropout = nn.Dropout(float(config.dropout))

    @property
    def n_positions(self) -> int:
        return self.ctx.prompt_length

    def begin(self, inputs):
        return {"batch": inputs.batch_size}

    def slot(self, state, s: int, previous: Optional[torch.Tensor] = None, attention_mask=None) -> torch.Tensor:
        if s != 0:
            raise IndexError(f"a late prompt has one slot, slot {s} requested")
        if self.kind == "plain":
            return self.prompt.unsqueeze(0).expand(state["batch"], -1, -1)
        if previous is None or previous.dim() != 3:
            raise ValueError("the lpt generator needs the (batch, tokens, hidden) states at late_layer: "
                             "use it with injection: late")
        return self.generate(previous, attention_mask)

    def generate(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        t, d = self.ctx.prompt_length, self.ctx.hidden_size
        hidden = hidden.to(self.down.weight.dtype)
        if self.kind == "npg":
            out = self.up(self.act(self.down(hidden[:, 0])))
            return self.dropout(out.view(hidden.size(0), t, d))
        short = attention_mask.sum(dim=1) < t
        if not self._warned and bool(short.any()):
            logger.warning("lpt.kind %s: %d example(s) have fewer real tokens than the %d prompt positions; adaptive "
                           "pooling repeats their tokens to fill them (as nn.Adaptive%sPool1d does)", self.kind,
                           int(short.sum()), t, "Avg" if self.kind == "appg" else "Max")
            self._warned = True
        x = self.down(hidden)                                      # (B, n, m)
        if self.kind == "appg":
            pooled = pool_to_length(x, attention_mask, t)
        else:
            bins = bin_mask(attention_mask, t)                     # (B, t, n)
            scores = x.unsqueeze(1).masked_fill(~bins.unsqueeze(-1), float("-inf"))  # (B, t, n, m)
            pooled = scores.max(dim=2).values
        return self.dropout(self.up(self.act(pooled)))
