"""Find the pieces of a BERT-style encoder that per-layer injection hooks attach to.

Works for any masked LM whose base model has ``encoder.layer[i].attention.self`` with
``query``/``key``/``value`` projections (BERT, RoBERTa, XLM-R, CamemBERT, ELECTRA, ERNIE, Data2Vec-text,
...), on transformers 4.39 (``past_key_value`` tuples) and 5.x (Cache objects, passed as ``past_key_values``,
or as ``cache`` from 5.24 on).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import List

from torch import nn

CACHE_ARGS = ("past_key_values", "cache", "past_key_value")  # newest first: 5.x, 5.24+, 4.x
# the BERT-style encoders both doors support (the 🤗 door refuses other model types by this list)
FAMILIES = ("bert", "roberta", "xlm-roberta", "camembert", "electra", "ernie", "data2vec-text", "roberta-prelayernorm")
SUPPORTED = f"{', '.join(FAMILIES)} (BERT-style encoder.layer[i].attention.self)"


@dataclass
class EncoderLayout:
    layers: List[nn.Module]          # transformer blocks, input = hidden states of the previous block
    attentions: List[nn.Module]      # their self-attention modules (q/k/v projections)
    num_heads: int
    head_dim: int
    # the self-attention keyword the prefix key/values go in: ``past_key_value`` takes a (k, v) tuple
    # (transformers 4.x), ``past_key_values`` a Cache (5.x), renamed ``cache`` in 5.24
    cache_arg: str

    @property
    def cache_style(self) -> str:
        return "tuple" if self.cache_arg == "past_key_value" else "cache"

    @property
    def num_layers(self) -> int:
        return len(self.layers)


def find_layout(model: nn.Module) -> EncoderLayout:
    base = getattr(model, "base_model", model)
    family = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    problem = None
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        problem = "no encoder.layer list"
    else:
        attentions = [getattr(getattr(layer, "attention", None), "self", None) for layer in layers]
        if any(a is None or not all(hasattr(a, p) for p in ("query", "key", "value")) for a in attentions):
            problem = "no attention.self with query/key/value in its layers"
    if problem:
        raise ValueError(f"per-layer prompts cannot find the attention layout of '{family}' ({type(model).__name__}: "
                         f"{problem}); supported families: {SUPPORTED}. Use injection: input for other models")
    first = attentions[0]
    params = inspect.signature(first.forward).parameters
    cache_arg = next((name for name in CACHE_ARGS if name in params), None)
    if cache_arg is None:
        raise ValueError(f"'{family}' self-attention ({type(first).__name__}) takes no past key/values: "
                         f"kv prefixes are unsupported there; use injection: hidden or input")
    heads = int(getattr(first, "num_attention_heads", 0) or model.config.num_attention_heads)
    head_dim = int(getattr(first, "attention_head_size", 0) or model.config.hidden_size // heads)
    return EncoderLayout(list(layers), attentions, heads, head_dim, cache_arg)
