"""Optimizers: separate learning rates for prompt / head / PLM, and sparse rows for vocab tables.

A sparse ``nn.Embedding`` yields gradients for the looked-up rows only; ``RowSparseAdam`` updates
just those rows and keeps moments only for rows ever touched, so a step costs what the batch
touches, not the vocabulary. Everything dense shares one AdamW with per-group learning rates.
"""
from __future__ import annotations

from typing import List, Tuple

import torch
from torch import nn

from .row_sparse_adam import RowSparseAdam


def sparse_parameter_ids(module: nn.Module) -> set:
    return {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding) and m.sparse}


def build_optimizers(model, lr_prompt: float, lr_head: float, lr_plm: float = 1e-5,
                     weight_decay: float = 0.0) -> List[torch.optim.Optimizer]:
    """``model`` is an OpenPrompt ``PromptForClassification``."""
    sparse_ids = sparse_parameter_ids(model.template)
    plm_ids = {id(p) for p in model.plm.parameters()}

    def trainable(module, exclude=()):
        return [p for p in module.parameters() if p.requires_grad and id(p) not in exclude]

    sparse = [p for p in model.template.parameters() if p.requires_grad and id(p) in sparse_ids]
    prompt = trainable(model.template, sparse_ids | plm_ids)
    head = trainable(model.verbalizer, plm_ids)
    plm = trainable(model.plm)
    groups = [{"params": ps, "lr": lr, "weight_decay": weight_decay}
              for ps, lr in ((prompt, lr_prompt), (head, lr_head), (plm, lr_plm)) if ps]
    optimizers: List[torch.optim.Optimizer] = []
    if groups:
        optimizers.append(torch.optim.AdamW(groups))
    if sparse:
        optimizers.append(RowSparseAdam(sparse, lr=lr_prompt))
    if not optimizers:
        raise ValueError("nothing to train: every parameter is frozen (check the template strategy and plm.freeze)")
    return optimizers


def dense_parameters(optimizers) -> List[torch.Tensor]:
    return [p for opt in optimizers if not isinstance(opt, RowSparseAdam)
            for g in opt.param_groups for p in g["params"]]


def linear_warmup(optimizers, warmup_steps: int, total_steps: int) -> List[torch.optim.lr_scheduler.LambdaLR]:
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return [torch.optim.lr_scheduler.LambdaLR(opt, factor) for opt in optimizers]


def split_counts(model) -> Tuple[int, int, int]:
    """(prompt, head, plm) trainable parameter counts."""
    t = model.template.num_trainable_parameters() if hasattr(model.template, "num_trainable_parameters") else \
        sum(p.numel() for n, p in model.template.named_parameters() if p.requires_grad and "raw_embedding" not in n)
    plm_ids = {id(p) for p in model.plm.parameters()}
    h = sum(p.numel() for p in model.verbalizer.parameters() if p.requires_grad and id(p) not in plm_ids)
    m = sum(p.numel() for p in model.plm.parameters() if p.requires_grad)
    return t, h, m
