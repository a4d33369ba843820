"""The contract between GeneratedPrefixTemplate and the generators that make per-layer prompts.

A generator is built from a ``GeneratorContext`` (sizes of the PLM, how many *slots* to fill:
1 for the input layer, L for per-layer hidden prompts, 2L for per-layer keys and values) and its
own config dataclass. Per batch, ``begin(inputs)`` computes what the whole batch shares, then
``slot(state, s, previous)`` returns slot ``s``'s prompt, (batch, n_positions, hidden); generators
with ``uses_previous`` read the previous layer's first-token state (M-IDPG), or, on ``late`` injection (1 slot,
after layer l), the hidden states there and the attention mask (LPT).
"""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any, Dict, Optional, Type

import torch
from torch import nn

INJECTIONS = ("input", "kv", "hidden", "late")


@dataclass
class GeneratorContext:
    hidden_size: int
    num_layers: int
    injection: str
    prompt_length: int
    vocab_size: int
    word_embeddings: nn.Embedding
    tokenizer: Any
    plm: nn.Module
    injector: Any = None
    init_std: float = 0.02

    @property
    def slots(self) -> int:
        return {"input": 1, "late": 1, "hidden": self.num_layers, "kv": 2 * self.num_layers}[self.injection]


@dataclass
class InstanceInputs:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    content_mask: torch.Tensor   # the example's own tokens (placeholders), not template words/specials
    part_ids: Optional[torch.Tensor] = None  # 1 text_a, 2 text_b, 3 other placeholders, 0 template/specials

    @property
    def batch_size(self) -> int:
        return self.input_ids.size(0)


def make_config(cls: Type, values: Optional[Dict], where: str):
    """A config dataclass from a YAML section; unknown keys name the nearest valid one."""
    values = dict(values or {})
    names = [f.name for f in dataclasses.fields(cls)]
    for key in values:
        if key not in names:
            match = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean '{match[0]}'?" if match else f"valid: {names}"
            raise KeyError(f"unknown key '{where}.{key}' ({hint})")
    return cls(**values)


def positive_count(where: str, value) -> int:
    """A size from a config section: a positive int (1.5 or true were truncated / read as 1 without a word)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where} must be a positive integer, got {value!r}")
    return value


class LayerPromptGenerator(nn.Module):
    config_class: Type = object
    section: str = ""            # the YAML section holding this generator's config
    uses_previous: bool = False

    def __init__(self, ctx: GeneratorContext, config):
        super().__init__()
        self.ctx, self.config = ctx, config

    @classmethod
    def default_injection(cls, config) -> str:
        return "kv"

    @property
    def n_positions(self) -> int:
        raise NotImplementedError

    def begin(self, inputs: InstanceInputs):
        raise NotImplementedError

    def slot(self, state, s: int, previous: Optional[torch.Tensor] = None) -> torch.Tensor:
        raise NotImplementedError
