"""IDPG: a light bottleneck generator maps a sentence representation M(x) to t prompt tokens.

``G(x) = W2 act(W1 M(x) + b1) + b2`` with ``W1: d_in -> m`` and ``W2: m -> t*d`` dense (``dnn``) or
PHM (``phm``); the bias ``b2`` is a task prompt, the rest makes the prompt instance-dependent.
``depth: single`` is S-IDPG (t tokens spliced into the input); ``depth: multi`` is M-IDPG (every
layer), with generators shared per ``sharing``: ``S`` one W and b for all layers, ``M`` shared W
with a per-layer output bias (the paper's M-IDPG), ``L`` a whole generator per layer. Under
``input_from: previous`` layer i's generator reads layer i-1's first-token output instead of M(x).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import math

import torch
from torch import nn

from .layered import GeneratorContext, LayerPromptGenerator
from .phm import PHMLinear
from .sentence import CACHE_SIZE, SENTENCE_ENCODERS, GLOVE_PACKAGE, GloveEncoder, PLMClsEncoder, StaticMeanEncoder

LAYER_TYPES, DEPTHS, SHARINGS, INPUTS = ("dnn", "phm"), ("single", "multi"), ("S", "M", "L"), ("layer0", "previous")
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}


@dataclass
class IDPGConfig:
    layer: str = "phm"                 # dnn | phm
    hidden: int = 16                   # generator bottleneck m
    phm_n: int = 16                    # PHM n (divides d_in, m and t*d)
    phm_share_a: Optional[bool] = None  # one A set for both layers; default: yes for single, no for multi (paper)
    activation: str = "tanh"
    encoder: str = "plm_cls"           # plm_cls | static_mean | glove
    glove_path: str = GLOVE_PACKAGE
    glove_dim: Optional[int] = None    # expected GloVe width (checked against the file)
    cache: bool = True                 # plm_cls: reuse representations of seen examples
    cache_size: int = CACHE_SIZE       # plm_cls: at most this many texts' representations kept (on the device)
    depth: str = "multi"               # single (S-IDPG) | multi (M-IDPG)
    sharing: str = "M"                 # S | M | L
    input_from: str = "layer0"         # layer0 | previous
    residual: bool = False             # IDPG Table 7
    layernorm: bool = False
    init_std: Optional[float] = None   # output-bias (task prompt) init; default PLM embedding std


def _check(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"unknown idpg.{name} '{value}': choose one of {list(allowed)}")


class Bottleneck(nn.Module):
    """act(W1 x + b1) -> W2 (.) [+ b2]: one generator's two layers."""

    def __init__(self, d_in: int, m: int, out: int, cfg: IDPGConfig, shared_a, out_bias: bool, out_std: float):
        super().__init__()
        if cfg.layer == "phm":
            share = self.up_shares_a = shared_a is not None
            self.down = PHMLinear(d_in, m, cfg.phm_n, shared_a=shared_a)
            self.up = PHMLinear(m, out, cfg.phm_n, bias=out_bias, shared_a=shared_a if share else None)
            # weight std = std(B) / sqrt(n) * n * std(A) -> keep the instance part at the prompt's scale
            nn.init.normal_(self.up.b, std=out_std * math.sqrt(cfg.phm_n / m))
        else:
            self.down = nn.Linear(d_in, m)
            self.up = nn.Linear(m, out, bias=out_bias)
            nn.init.normal_(self.up.weight, std=out_std / math.sqrt(m))
        if out_bias:
            nn.init.normal_(self.up.bias, std=out_std)
        self.act = ACTIVATIONS[cfg.activation]()

    def weights(self, shared_a=None):
        """The PHM layers' Kronecker-sum weights, to build once per batch (None for dense layers); ``shared_a``: the
        A set the layers share, as the caller holds it."""
        if isinstance(self.down, PHMLinear):
            return self.down.weight(shared_a), self.up.weight(shared_a if self.up_shares_a else None)
        return None

    def forward(self, x, weights=None):
        if weights is None:
            return self.up(self.act(self.down(x)))
        return self.up(self.act(self.down(x, weights[0])), weights[1])


class IDPGGenerator(LayerPromptGenerator):
    config_class = IDPGConfig
    section = "idpg"

    @classmethod
    def default_injection(cls, config) -> str:
        return "input" if config.depth == "single" else "hidden"

    def __init__(self, ctx: GeneratorContext, config: IDPGConfig):
        super().__init__(ctx, config)
        for name, allowed in (("layer", LAYER_TYPES), ("encoder", SENTENCE_ENCODERS), ("depth", DEPTHS),
                              ("sharing", SHARINGS), ("input_from", INPUTS), ("activation", ACTIVATIONS)):
            _check(name, getattr(config, name), allowed)
        if config.depth == "single" and ctx.injection not in ("input", "late"):
            raise ValueError(f"idpg.depth 'single' (S-IDPG) puts prompts in one place: use injection: input (or late, "
                             f"after late_layer), not '{ctx.injection}'")
        if config.depth == "multi" and ctx.injection in ("input", "late"):
            raise ValueError(f"idpg.depth 'multi' (M-IDPG) needs injection: hidden or kv, not '{ctx.injection}'")
        size = config.cache_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"idpg.cache_size must be a positive integer (texts whose M(x) is kept), got {size!r}: "
                             "use idpg.cache: false to keep none")
        d, t = ctx.hidden_size, ctx.prompt_length
        if config.encoder == "plm_cls":
            self.sentence = PLMClsEncoder(ctx.plm, ctx.tokenizer, cache=config.cache, injector=ctx.injector,
                                          cache_size=size)
        elif config.encoder == "static_mean":
            self.sentence = StaticMeanEncoder(ctx.word_embeddings)
        else:
            self.sentence = GloveEncoder(ctx.tokenizer, config.glove_path, config.glove_dim)
        d_in = self.sentence.output_dim
        self.uses_previous = config.depth == "multi" and config.input_from == "previous"
        if self.uses_previous and d_in != d:
            raise ValueError(f"idpg.input_from 'previous' feeds {d}-d layer outputs to a generator built for the "
                             f"{d_in}-d '{config.encoder}' input: use input_from: layer0")
        if config.residual and d_in != d:
            raise ValueError(f"idpg.residual adds M(x) ({d_in}-d) to {d}-d prompt tokens: turn residual off "
                             "or use a PLM-sized sentence encoder")
        slots = ctx.slots if config.depth == "multi" else 1
        sharing = config.sharing if config.depth == "multi" else "S"
        share_a = config.phm_share_a if config.phm_share_a is not None else config.depth == "single"
        self.phm_a = None
        if config.layer == "phm" and share_a:
            self.phm_a = nn.Parameter(torch.randn(config.phm_n, config.phm_n, config.phm_n) / config.phm_n)
        std = config.init_std if config.init_std is not None else ctx.init_std
        out, m = t * d, config.hidden
        n_gen = slots if sharing == "L" else 1
        shared_a = (self, "phm_a") if self.phm_a is not None else None  # read here at every use (generators/phm.py)
        self.generators = nn.ModuleList(Bottleneck(d_in, m, out, config, shared_a, sharing != "M", std)
                                        for _ in range(n_gen))
        self.slot_bias = nn.Parameter(torch.randn(slots, out) * std) if sharing == "M" else None
        self.sharing, self.slots = sharing, slots
        if config.layernorm:
            self.norm_out = nn.LayerNorm(d)
            self.norm_tok = nn.LayerNorm(d) if config.residual else None
            self.norm_in = nn.LayerNorm(d) if config.residual else None

    @property
    def n_positions(self) -> int:
        return self.ctx.prompt_length

    def _finish(self, y, x):
        b, d = y.size(0), self.ctx.hidden_size
        y = y.view(b, -1, d)
        if self.config.residual and self.config.layernorm:
            return self.norm_out(self.norm_tok(y) + self.norm_in(x).unsqueeze(1))
        if self.config.residual:
            y = y + x.unsqueeze(1)
        if self.config.layernorm:
            y = self.norm_out(y)
        return y

    def _generate(self, x, s: int, weights=None):
        g = s if self.sharing == "L" else 0  # sharing L: no slot bias (each generator has its own)
        return self.generators[g](x, weights[g] if weights is not None else None)

    def begin(self, inputs):
        x = self.sentence(inputs.input_ids, inputs.content_mask, inputs.attention_mask, part_ids=inputs.part_ids)
        # the first layer's bias, by name: nn.DataParallel's copies list no parameters() (a StopIteration here)
        x = x.to(self.generators[0].down.bias.dtype)
        state = {"x": x}
        if self.slot_bias is not None:
            # unbound once: the backward stacks the slots' gradients in one op, where indexing per slot would
            # fill a zero tensor of the whole (slots, t*d) bias for each slot (2L of them on kv)
            state["bias"] = self.slot_bias.unbind(0)
        if self.config.layer == "phm" and (self.uses_previous or self.phm_a is not None):
            # every layer runs the generator on its own input: build each PHM weight once per batch, not once
            # per slot (2L einsums and their backward on kv injection); on a GPU these small kernels add up.
            # A shared A set is passed as this module holds it: an nn.DataParallel copy holds its own
            state["weights"] = [gen.weights(self.phm_a) for gen in self.generators]
        if self.sharing != "L":  # W applied once per batch; slots differ by their bias only
            state["shared"] = self.generators[0](x, state["weights"][0] if "weights" in state else None)
        return state

    def slot(self, state, s, previous=None):
        # the injector asks for slots 0..ctx.slots-1 only (1 input, L hidden, 2L kv: tests/test_generated_prefix.py);
        # anything else is a wiring bug, never to be clamped onto another layer's prompt
        if not 0 <= s < self.slots:
            raise IndexError(f"IDPG prompt slot {s} requested, but the generator has {self.slots} slot(s) "
                             f"({self.config.depth} depth, {self.ctx.injection} injection over {self.ctx.num_layers} layers)")
        if previous is not None:  # M-IDPG fed by the previous layer's output
            x = previous.to(state["x"].dtype)
            if self.sharing == "L":
                return self._finish(self._generate(x, s, state.get("weights")), x)
            # kv asks for a layer's key and value slot with the same previous output: one shared W pass for both
            memo = state.get("previous_out")
            if memo is None or memo[0] is not previous:
                weights = state.get("weights")
                memo = state["previous_out"] = (previous, self.generators[0](x, weights[0] if weights else None))
            y = memo[1] + state["bias"][s] if "bias" in state else memo[1]
            return self._finish(y, x)
        x = state["x"]
        if "shared" in state:
            y = state["shared"] + state["bias"][s] if "bias" in state else state["shared"]
        else:
            y = self._generate(x, s, state.get("weights"))
        return self._finish(y, x)
