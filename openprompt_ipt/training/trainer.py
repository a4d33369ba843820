"""Our training loop (OpenPrompt's ClassificationRunner moves batches to CUDA unconditionally).

Research code (what a prompt is) lives in templates/generators; this file is engineering only:
devices, optimizers, accumulation, evaluation each epoch, best-on-dev selection, progress bars.
It runs on CPU or one GPU and keeps model/optimizer/loader handling in one place so Accelerate can
drive it later.
"""
from __future__ import annotations

import math
import os
import random
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..serialization import trainable_state
from .metrics import METRICS, answer_metrics, classification_metrics
from .optim import build_optimizers, dense_parameters, linear_warmup, split_counts

FROZEN_PREFIXES = ("prompt_model.plm.", "prompt_model.template.raw_embedding.")


@dataclass
class TrainConfig:
    epochs: int = 10
    lr_prompt: float = 3e-3
    lr_head: float = 1e-3
    lr_plm: float = 1e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0
    warmup_ratio: float = 0.06
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    metric: str = "accuracy"  # dev metric that picks the best epoch
    device: str = "auto"
    seed: int = 42
    show_progress: bool = True
    history: List[Dict] = field(default_factory=list)

    def resolved_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def to_device(batch: Dict, device: torch.device) -> Dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


@torch.no_grad()
def evaluate(model, loader, device=None, desc: str = "eval", show_progress: bool = True) -> Dict[str, float]:
    device = device or next(model.parameters()).device
    was_training = model.training
    model.eval()
    labels, preds, groups, loss_sum = [], [], [], 0.0
    for batch in tqdm(loader, desc=desc, leave=False, disable=not show_progress):
        batch = to_device(batch, device)
        logits = model(batch)
        loss_sum += F.cross_entropy(logits, batch["label"], reduction="sum").item()
        labels += batch["label"].tolist()
        preds += logits.argmax(-1).tolist()
        groups += batch.get("group") or []
    model.train(was_training)
    metrics = classification_metrics(labels, preds)
    if groups:  # answer-level tasks (MultiRC): F1a over answers, EM over questions
        metrics.update(answer_metrics(labels, preds, groups))
    metrics["loss"] = loss_sum / max(1, len(labels))
    return metrics


class Trainer:
    def __init__(self, model, config: TrainConfig, output_dir: Optional[str] = None):
        self.model, self.config, self.output_dir = model, config, output_dir
        self.device = config.resolved_device()
        self.model.to(self.device)
        self.best_state: Optional[Dict[str, torch.Tensor]] = None
        self.best_metrics: Optional[Dict[str, float]] = None

    def trainable_state(self) -> Dict[str, torch.Tensor]:
        return trainable_state(self.model, skip=FROZEN_PREFIXES if not self._plm_trainable() else ())

    def _plm_trainable(self) -> bool:
        return any(p.requires_grad for p in self.model.plm.parameters())

    def load_state(self, state: Dict[str, torch.Tensor]) -> None:
        params = dict(self.model.named_parameters())
        for name, value in state.items():
            params[name].data.copy_(value.to(params[name].device))

    def fit(self, train_loader, dev_loader) -> Dict[str, float]:
        cfg = self.config
        if len(train_loader) == 0:
            raise ValueError("the training split is empty: check dataset.path and the split sizes")
        if cfg.metric not in METRICS:
            raise ValueError(f"unknown metric '{cfg.metric}': choose one of {list(METRICS)}")
        optimizers = build_optimizers(self.model, cfg.lr_prompt, cfg.lr_head, cfg.lr_plm, cfg.weight_decay)
        steps_per_epoch = math.ceil(len(train_loader) / cfg.gradient_accumulation_steps)
        total = steps_per_epoch * cfg.epochs
        warmup = cfg.warmup_steps or int(cfg.warmup_ratio * total)
        schedulers = linear_warmup(optimizers, warmup, total)
        dense = dense_parameters(optimizers)
        prompt_n, head_n, plm_n = split_counts(self.model)
        if cfg.show_progress:
            print(f"trainable parameters: prompt {prompt_n:,} | head {head_n:,} | plm {plm_n:,} "
                  f"| device {self.device} | {total} optimizer steps")
        self.model.train()
        for epoch in range(1, cfg.epochs + 1):
            bar = tqdm(train_loader, desc=f"epoch {epoch}/{cfg.epochs}", leave=False, disable=not cfg.show_progress)
            running = 0.0
            for step, batch in enumerate(bar, 1):
                batch = to_device(batch, self.device)
                loss = F.cross_entropy(self.model(batch), batch["label"])
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"loss became {loss.item()} at epoch {epoch} step {step}: lower the "
                                             "learning rates (train.lr_prompt / train.lr_head)")
                (loss / cfg.gradient_accumulation_steps).backward()
                running += loss.item()
                if step % cfg.gradient_accumulation_steps == 0 or step == len(train_loader):
                    if cfg.max_grad_norm and dense:
                        torch.nn.utils.clip_grad_norm_(dense, cfg.max_grad_norm)
                    for opt in optimizers:
                        opt.step()
                    for sched in schedulers:
                        sched.step()
                    for opt in optimizers:
                        opt.zero_grad(set_to_none=True)
                bar.set_postfix(loss=f"{running / step:.4f}")
            dev = evaluate(self.model, dev_loader, self.device, desc="dev", show_progress=cfg.show_progress)
            record = {"epoch": epoch, "train_loss": running / max(1, len(train_loader)),
                      **{f"dev_{k}": v for k, v in dev.items()}}
            cfg.history.append(record)
            if cfg.metric not in dev:
                raise ValueError(f"train.metric '{cfg.metric}' is not computed for this task (it reports "
                                 f"{sorted(k for k in dev if k != 'loss')}); f1a and em need answer groups (multirc)")
            improved = self.best_metrics is None or dev[cfg.metric] > self.best_metrics[cfg.metric]
            if improved:
                self.best_metrics = dev
                self.best_state = {k: v.clone() for k, v in self.trainable_state().items()}
                if self.output_dir:
                    self._save_best()
            if cfg.show_progress:
                extra = "".join(f" | dev {k} {dev[k]:.4f}" for k in ("f1a", "em") if k in dev)
                print(f"epoch {epoch:3d} | train loss {record['train_loss']:.4f} | dev acc {dev['accuracy']:.4f} "
                      f"| dev macro-F1 {dev['macro_f1']:.4f}{extra}{'  *best' if improved else ''}")
        self.load_state(self.best_state)
        return self.best_metrics

    def _save_best(self) -> None:
        from safetensors.torch import save_file

        os.makedirs(self.output_dir, exist_ok=True)
        path = os.path.join(self.output_dir, "best.safetensors")
        save_file(self.best_state, path + ".tmp")
        os.replace(path + ".tmp", path)

    def summary(self) -> Dict:
        return {"config": {k: v for k, v in asdict(self.config).items() if k != "history"},
                "history": self.config.history, "best_dev": self.best_metrics}
