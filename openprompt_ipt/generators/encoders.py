"""Trainable sequence encoders of Encoder IPT (IPT §4.2, appendix A.3).

Each encoder is a *body* (token vectors -> token features) followed by masked pooling to exactly
``prompt_length`` positions and a *head* (features -> PLM hidden size). The body is the part a
category classifier pretrains (``experiments/pretrain_categories.py`` puts a class head on the same
body), the head is new per task. Nothing is tied to a hidden size, prompt length or input length.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, Tuple, Type

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..injection.precision import autocast_dtype
from .pooling import pool_to_length


@dataclass
class EncoderConfig:
    name: str = "textcnn"
    input_dim: int = 768
    hidden: int = 128  # channels per convolution / LSTM units per direction / MLP width
    kernel_sizes: Tuple[int, ...] = (3, 5, 7)  # odd widths keep "same" padding copy-free
    dropout: float = 0.1

    def to_dict(self) -> dict:
        d = asdict(self)
        d["kernel_sizes"] = list(self.kernel_sizes)
        return d


class TextCNNBody(nn.Module):
    """Three 1-d convolutions of different widths (Kim 2014), 'same' length so pooling sees every token."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(cfg.input_dim, cfg.hidden, k, padding="same") for k in cfg.kernel_sizes
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.out_dim = cfg.hidden * len(cfg.kernel_sizes)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = (x * mask.unsqueeze(-1)).transpose(1, 2)  # padding must not leak into neighbours
        feats = torch.cat([torch.relu(conv(x)) for conv in self.convs], dim=1)
        return self.dropout(feats.transpose(1, 2))


class LSTMBody(nn.Module):
    """Three stacked bidirectional LSTM layers over the valid tokens only (packed).

    Under CPU autocast the recurrence runs in fp32: oneDNN has no bf16 LSTM on CPUs without AVX-512 (it
    raises "could not create a primitive descriptor for the LSTM forward propagation primitive"), and where
    it runs, the packed path re-casts the weights to bf16 at every time step. What follows (the head) is
    autocast again. GPUs keep autocast (cuDNN runs bf16 / fp16 LSTMs)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.lstm = nn.LSTM(cfg.input_dim, cfg.hidden, num_layers=3, batch_first=True,
                            bidirectional=True, dropout=cfg.dropout)
        self.out_dim = 2 * cfg.hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if x.device.type == "cpu" and autocast_dtype("cpu") is not None:
            with torch.autocast("cpu", enabled=False):
                return self._recur(x.float(), mask)
        return self._recur(x, mask)

    def _recur(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
        return out


class MLPBody(nn.Module):
    """Two token-wise linear layers (the third linear layer is the shared head)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(cfg.input_dim, cfg.hidden), nn.ReLU(), nn.Dropout(cfg.dropout),
            nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(),
        )
        self.out_dim = cfg.hidden

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(x)


ENCODER_BODIES: Dict[str, Type[nn.Module]] = {"textcnn": TextCNNBody, "lstm": LSTMBody, "mlp": MLPBody}


def build_body(cfg: EncoderConfig) -> nn.Module:
    if cfg.name not in ENCODER_BODIES:
        raise ValueError(f"unknown encoder '{cfg.name}': choose one of {sorted(ENCODER_BODIES)}")
    return ENCODER_BODIES[cfg.name](cfg)


class PromptEncoder(nn.Module):
    """body -> pool to ``prompt_length`` -> head; the LSTM keeps its paper shape of three linear layers."""

    def __init__(self, cfg: EncoderConfig, prompt_length: int, output_dim: int):
        super().__init__()
        self.config = cfg
        self.prompt_length = prompt_length
        self.body = build_body(cfg)
        width = self.body.out_dim
        if cfg.name == "lstm":
            self.head = nn.Sequential(nn.Linear(width, cfg.hidden), nn.ReLU(),
                                      nn.Linear(cfg.hidden, cfg.hidden), nn.ReLU(),
                                      nn.Linear(cfg.hidden, output_dim))
        else:
            self.head = nn.Linear(width, output_dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        feats = self.body(x, mask)
        return self.head(pool_to_length(feats, mask, self.prompt_length))
