"""Input-layer prompts (Prompt Tuning, IPT on Prompt Tuning): ``[task prompt][G(x)]`` before the text.

``build_input_prompt`` checks the arguments and makes the two trained pieces, ``task_prompt``
(Lester et al.'s task-level vectors) and ``generator`` (an IPT strategy G(x)); the host keeps them
under those names, so saved weights keep their keys whichever door trained them."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from ..generators.strategies import STRATEGIES, TOKEN_SOURCES, EncoderIPT, PretrainedIPT, RandomIPT

STRATEGY_NAMES = ("none",) + tuple(STRATEGIES)
TABLE_INITS = ("random", "plm")
COMBINES = ("concat", "add")


class PositionDropout(nn.Module):
    """Zeroes whole prompt vectors with probability ``p`` while training (no rescaling: a dropped position
    carries no instance information, like a missing token), so the model cannot rely on any single
    instance vector; the identity in eval mode. An opt-in regulariser, not in the papers (issue #33)."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= float(p) < 1.0:
            raise ValueError(f"instance_dropout must be in [0, 1), got {p}")
        self.p = float(p)

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return vectors
        keep = torch.rand(vectors.shape[:-1] + (1,), device=vectors.device) >= self.p
        return vectors * keep.to(vectors.dtype)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def build_input_prompt(embedding: nn.Embedding, tokenizer, position_limit: int, strategy: str = "random",
                       prompt_length: int = 16, task_prompt_length: int = 0, token_source: str = "content",
                       table_dim: Optional[int] = None, vocab_rows: Optional[Sequence[int]] = None,
                       init_std: Optional[float] = None, sparse: bool = False, pretrained_path: Optional[str] = None,
                       encoder: str = "textcnn", encoder_hidden: int = 128, encoder_dropout: float = 0.1,
                       encoder_path: Optional[str] = None, sequence_utilization_rate: float = 1.0,
                       max_source_tokens: int = 512, table_init: str = "random", combine: str = "concat"):
    """``combine``: ``concat`` puts G(x) after the task prompt (the paper: task_prompt_length + prompt_length
    positions); ``add`` adds G(x) onto the task prompt, position by position (prompt_length ==
    task_prompt_length positions, as the IPT authors' Prefix Tuning code adds G(x) onto the prefix), so the PLM
    sees Prompt Tuning's positions and a per-example offset on them.

    ``table_init``: ``random`` (N(0, init_std), the paper) or ``plm`` (Random IPT's rows start as copies of
    the PLM's own input embeddings, so an instance vector starts as the embedding of its token).

    Returns ``(task_prompt or None, generator or None, settings)``; ``settings`` are the resolved
    arguments (prompt lengths, init_std) a host saves to rebuild the same prompt."""
    if strategy not in STRATEGY_NAMES:
        raise ValueError(f"unknown strategy '{strategy}': choose one of {list(STRATEGY_NAMES)}")
    if token_source not in TOKEN_SOURCES:
        raise ValueError(f"unknown token_source '{token_source}': choose one of {list(TOKEN_SOURCES)}")
    if strategy != "none" and int(prompt_length) <= 0:
        raise ValueError(f"prompt_length must be a positive integer for strategy '{strategy}', got {prompt_length}")
    if int(task_prompt_length) < 0:
        raise ValueError(f"task_prompt_length must be >= 0, got {task_prompt_length}")
    if table_init not in TABLE_INITS:
        raise ValueError(f"unknown table_init '{table_init}': choose one of {list(TABLE_INITS)}")
    if table_init == "plm" and (strategy != "random" or table_dim not in (None, embedding.embedding_dim)):
        raise ValueError("table_init 'plm' copies the PLM's input embeddings into Random IPT's table: it needs strategy "
                         "'random' and table_dim unset (the hidden size); use table_init: random otherwise")
    prompt_length = int(prompt_length) if strategy != "none" else 0
    task_prompt_length = int(task_prompt_length)
    if combine not in COMBINES:
        raise ValueError(f"unknown combine '{combine}': choose one of {list(COMBINES)}")
    if combine == "add" and strategy != "none" and prompt_length != task_prompt_length:
        raise ValueError(f"combine 'add' adds G(x) onto the task prompt position by position: prompt_length "
                         f"({prompt_length}) must equal task_prompt_length ({task_prompt_length})")
    added = combine == "add" and strategy != "none"
    n_prefix = task_prompt_length if added else prompt_length + task_prompt_length
    if n_prefix + 3 > position_limit:  # [CLS] <mask> [SEP] at least
        raise ValueError(f"prompt_length + task_prompt_length = {n_prefix} leaves no room under the model's "
                         f"{position_limit} positions: use at most {position_limit - 3} prompt tokens")
    hidden, vocab_size = embedding.embedding_dim, embedding.num_embeddings
    if init_std is None:  # prompts start at the scale of the PLM's own token embeddings
        init_std = float(embedding.weight.detach().float().std())
    common = dict(vocab_size=vocab_size, hidden_size=hidden, prompt_length=prompt_length,
                  token_source=token_source, pad_token_id=tokenizer.pad_token_id or 0)
    if strategy == "none":
        generator = None
    elif strategy == "encoder":
        generator = EncoderIPT(**common, plm_embedding=embedding, pretrained_path=pretrained_path,
                               tokenizer_vocab=len(tokenizer), encoder=encoder, encoder_hidden=encoder_hidden,
                               sequence_utilization_rate=sequence_utilization_rate,
                               max_source_tokens=max_source_tokens, encoder_dropout=encoder_dropout,
                               encoder_path=encoder_path, tokenizer=tokenizer)
    else:
        kwargs = dict(common, vocab_rows=vocab_rows, init_std=init_std, sparse=sparse)
        if strategy == "pretrained":
            generator = PretrainedIPT(pretrained_path=pretrained_path, tokenizer_vocab=len(tokenizer),
                                      tokenizer=tokenizer, **kwargs)
        else:
            generator = RandomIPT(table_dim=table_dim, **kwargs)
            if table_init == "plm":
                generator.table.load_vocab_weight(embedding.weight.detach())
    task_prompt = None
    if task_prompt_length:
        # Lester et al.: start task prompts from embeddings of sampled vocabulary tokens; in the generators' dtype
        # (the default, fp32), not the PLM's: on a bf16 / fp16 base, steps below the half-precision spacing of its
        # values (the Trainer's default lr 5e-5) were rounded away, so the task prompt did not train
        rows = torch.randint(0, vocab_size, (task_prompt_length,))
        task_prompt = nn.Parameter(embedding.weight.detach()[rows].to(torch.get_default_dtype(), copy=True))
    settings = dict(prompt_length=prompt_length, task_prompt_length=task_prompt_length, init_std=init_std,
                    combine=combine, n_prefix=n_prefix)
    return task_prompt, generator, settings


def input_prompt_vectors(task_prompt: Optional[torch.Tensor], generator: Optional[nn.Module], input_ids: torch.Tensor,
                         content_mask: torch.Tensor, attention_mask: torch.Tensor,
                         dropout: Optional[nn.Module] = None, combine: str = "concat") -> Optional[torch.Tensor]:
    """(B, task_prompt_length + prompt_length, H): the task vectors, then G(x) (through ``dropout`` when
    given, e.g. ``PositionDropout``); with ``combine="add"``, (B, task_prompt_length, H): task vectors + G(x).
    ``None`` without either."""
    instance = generator(input_ids, content_mask, attention_mask) if generator is not None else None
    if instance is not None and dropout is not None:
        instance = dropout(instance)
    if combine == "add" and task_prompt is not None and instance is not None:
        return task_prompt.unsqueeze(0) + instance
    parts = []
    if task_prompt is not None:
        parts.append(task_prompt.unsqueeze(0).expand(input_ids.size(0), -1, -1))
    if instance is not None:
        parts.append(instance)
    return torch.cat(parts, dim=1) if parts else None
