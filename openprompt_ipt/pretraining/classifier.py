"""The category classifier of IPT's pretraining (§4.2, appendix A.3): embedding -> encoder body ->
pooling over tokens -> class head, trained with cross-entropy (IPT's L_p).

The body is the *same* module class Encoder IPT uses (``generators.encoders.build_body``), so the
exported ``body.*`` tensors load into ``strategy: encoder`` with ``strict=True``; the embedding
(vocab x dim, rows = the target PLM's tokenizer ids) is the table ``strategy: pretrained`` reads.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import torch
from torch import nn

from ..generators.encoders import EncoderConfig, build_body
from .config import POOLINGS


@dataclass
class ClassifierConfig:
    encoder: str = "textcnn"
    vocab_size: int = 30522
    dim: int = 384
    hidden: int = 128
    kernel_sizes: Tuple[int, ...] = (3, 5, 7)
    dropout: float = 0.3
    pool: str = "max"
    num_classes: int = 13
    sparse: bool = True

    def encoder_config(self) -> EncoderConfig:
        return EncoderConfig(name=self.encoder, input_dim=self.dim, hidden=self.hidden,
                             kernel_sizes=tuple(self.kernel_sizes), dropout=self.dropout)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kernel_sizes"] = list(self.kernel_sizes)
        return d


def masked_pool(feats: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(feats.dtype)
    if how == "max":
        return feats.masked_fill(m == 0, torch.finfo(feats.dtype).min).amax(dim=1)
    return (feats * m).sum(1) / m.sum(1).clamp(min=1.0)


class CategoryClassifier(nn.Module):
    def __init__(self, cfg: ClassifierConfig, embedding_weight: Optional[torch.Tensor] = None):
        super().__init__()
        if cfg.pool not in POOLINGS:
            raise ValueError(f"unknown pool '{cfg.pool}': choose one of {list(POOLINGS)}")
        self.config = cfg
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.dim, sparse=cfg.sparse)
        if embedding_weight is not None:
            if tuple(embedding_weight.shape) != (cfg.vocab_size, cfg.dim):
                raise ValueError(f"initial embedding is {tuple(embedding_weight.shape)}, expected "
                                 f"({cfg.vocab_size}, {cfg.dim})")
            with torch.no_grad():
                self.embedding.weight.copy_(embedding_weight)
        else:
            nn.init.normal_(self.embedding.weight, std=0.02)
        self.body = build_body(cfg.encoder_config())
        width = self.body.out_dim
        if cfg.encoder == "lstm":  # appendix A.3: three LSTM layers and three linear layers
            self.head = nn.Sequential(nn.Dropout(cfg.dropout), nn.Linear(width, cfg.hidden), nn.ReLU(),
                                      nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(), nn.Linear(cfg.hidden, cfg.num_classes))
        else:  # textcnn: three convolutions + pooling; mlp: two token-wise layers + this third linear layer
            self.head = nn.Sequential(nn.Dropout(cfg.dropout), nn.Linear(width, cfg.num_classes))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        feats = self.body(self.embedding(ids), mask)
        return self.head(masked_pool(feats, mask, self.config.pool))
