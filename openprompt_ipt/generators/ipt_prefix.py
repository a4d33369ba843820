"""IPT on Prefix Tuning: a task prefix per slot plus the instance prompt G(x) of an IPT strategy.

* default (``faithful: false``): the prefix is ``[task prefix (task_length)][instance part
  (instance_length)]``; G(x) reaches every slot through a learned bottleneck projection
  ``d -> projection_hidden -> slots * d``.
* ``faithful: true`` reproduces the authors' code (IPT-Prompttuning/IPT, openprompt/prompts/
  soft_template.py): the task prefix is a plain table (their ``nn.Embedding(n, 2*H*L)``, no MLP
  reparameterisation, N(0, 1) init) and ``faithful_scale * G(x)`` (0.05) is added to layer 0's key and
  value only; under ``kv`` the random strategy's table is vocab x 2H (U(-0.5, 0.5) init, their
  ``random_range``), its first H columns go to the key and the last H to the value. Pretrained /
  encoder strategies give an H-wide G(x) (our exports), added to both. ``instance_length`` must
  equal ``task_length``; under ``hidden``/``input`` G(x) goes to the input slot.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import torch
from torch import nn

from .layered import GeneratorContext, LayerPromptGenerator, positive_count
from .prefix import PrefixConfig, TaskPrefix
from .strategies import EncoderIPT, PretrainedIPT, RandomIPT


@dataclass
class IPTPrefixConfig:
    task_length: Optional[int] = None       # default: the template's prompt_length
    instance_length: Optional[int] = None   # default: the template's prompt_length
    faithful: bool = False
    faithful_scale: float = 0.05
    projection_hidden: int = 64
    reparameterize: bool = False
    reparam_hidden: int = 512
    token_source: str = "content"
    table_dim: Optional[int] = None
    vocab_rows: Optional[List[int]] = None
    init_std: Optional[float] = None
    sparse: bool = False
    pretrained_path: Optional[str] = None
    encoder: str = "textcnn"
    encoder_hidden: int = 128
    encoder_dropout: float = 0.1
    encoder_path: Optional[str] = None
    sequence_utilization_rate: float = 1.0
    max_source_tokens: int = 512


class IPTPrefixGenerator(LayerPromptGenerator):
    config_class = IPTPrefixConfig
    section = "ipt"
    strategy = "random"

    def __init__(self, ctx: GeneratorContext, config: IPTPrefixConfig):
        super().__init__(ctx, config)
        d = ctx.hidden_size
        self.task_length = positive_count("ipt.task_length", config.task_length or ctx.prompt_length)
        self.instance_length = positive_count("ipt.instance_length", config.instance_length or ctx.prompt_length)
        if config.faithful and self.instance_length != self.task_length:
            raise ValueError(f"ipt.faithful adds G(x) onto the task prefix, so instance_length ({self.instance_length}) "
                             f"must equal task_length ({self.task_length})")
        if config.faithful and config.reparameterize:
            raise ValueError("ipt.faithful is the authors' plain prefix table (no MLP): set ipt.reparameterize: false, "
                             "or faithful: false for the reparameterised prefix")
        std = config.init_std if config.init_std is not None else ctx.init_std
        # the authors' inits unless init_std is given: nn.Embedding's N(0, 1) prefix, a U(-0.5, 0.5) table
        task_std = 1.0 if config.faithful and config.init_std is None else config.init_std
        self.task = TaskPrefix(ctx.slots, self.task_length, d,
                               PrefixConfig(config.reparameterize, config.reparam_hidden, task_std), ctx.init_std)
        # faithful + kv: one 2H row per token, split into layer 0's key (first H) and value (last H)
        self.split_kv = config.faithful and ctx.injection == "kv" and self.strategy == "random"
        common = dict(vocab_size=ctx.vocab_size, hidden_size=2 * d if self.split_kv else d,
                      prompt_length=self.instance_length,
                      token_source=config.token_source, pad_token_id=ctx.tokenizer.pad_token_id or 0)
        if self.strategy == "encoder":
            self.instance = EncoderIPT(**common, plm_embedding=ctx.word_embeddings, pretrained_path=config.pretrained_path,
                                       tokenizer_vocab=len(ctx.tokenizer), encoder=config.encoder,
                                       encoder_hidden=config.encoder_hidden,
                                       sequence_utilization_rate=config.sequence_utilization_rate,
                                       max_source_tokens=config.max_source_tokens,
                                       encoder_dropout=config.encoder_dropout, encoder_path=config.encoder_path,
                                       tokenizer=ctx.tokenizer)
        elif self.strategy == "pretrained":
            self.instance = PretrainedIPT(pretrained_path=config.pretrained_path, tokenizer_vocab=len(ctx.tokenizer),
                                          tokenizer=ctx.tokenizer,
                                          vocab_rows=config.vocab_rows, init_std=std, sparse=config.sparse, **common)
        else:
            self.instance = RandomIPT(table_dim=config.table_dim, vocab_rows=config.vocab_rows, init_std=std,
                                      sparse=config.sparse, **common)
            if config.faithful and config.init_std is None:
                nn.init.uniform_(self.instance.table.embedding.weight, -0.5, 0.5)
        if config.faithful:
            self.projection = None
        else:
            self.projection = nn.Sequential(nn.Linear(d, config.projection_hidden), nn.Tanh(),
                                            nn.Linear(config.projection_hidden, ctx.slots * d))

    @property
    def n_positions(self) -> int:
        return self.task_length if self.config.faithful else self.task_length + self.instance_length

    def begin(self, inputs):
        g = self.instance(inputs.input_ids, inputs.content_mask, inputs.attention_mask)  # (B, k, d)
        state = {"task": self.task().unbind(0), "g": g, "batch": inputs.batch_size}  # one stack in backward
        if self.projection is not None:
            b, k, d = g.shape
            state["per_slot"] = self.projection(g).view(b, k, self.ctx.slots, d).unbind(2)  # as "task"
        return state

    def slot(self, state, s, previous=None):
        task = state["task"][s].expand(state["batch"], -1, -1)
        if self.projection is not None:
            return torch.cat([task, state["per_slot"][s]], dim=1)
        if s < (2 if self.ctx.injection == "kv" else 1):  # layer 0's key and value / the input slot
            g = state["g"]
            if self.split_kv:
                d = self.ctx.hidden_size
                g = g[..., :d] if s == 0 else g[..., d:]
            return task + self.config.faithful_scale * g
        return task


class RandomIPTPrefix(IPTPrefixGenerator):
    strategy = "random"


class PretrainedIPTPrefix(IPTPrefixGenerator):
    strategy = "pretrained"


class EncoderIPTPrefix(IPTPrefixGenerator):
    strategy = "encoder"
