"""Training loop of the category classifier: cross-entropy (IPT's L_p), best-on-dev early stopping,
per-epoch resumable state, tqdm progress, and accuracy / macro-F1 / confusion matrix at the end."""
from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from ..progress import bar as progress_bar
from .corpus import Corpus, Example


@dataclass
class PretrainConfig:
    epochs: int = 6
    batch_size: int = 32
    lr: float = 1e-3            # encoder body + head (AdamW)
    lr_embedding: float = 1e-3  # the vocab table (SparseAdam: only looked-up rows move)
    weight_decay: float = 0.0
    patience: int = 2           # epochs without a dev macro-F1 gain before stopping
    max_grad_norm: float = 5.0
    max_minutes: Optional[float] = None  # wall-clock cap; the best epoch so far is kept
    metric: str = "macro_f1"
    device: str = "cpu"
    seed: int = 42
    show_progress: bool = True
    history: List[Dict] = field(default_factory=list)


def collate(examples: Sequence[Example], pad_id: int = 0):
    width = max(len(e.ids) for e in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.bool)
    for i, e in enumerate(examples):
        ids[i, : len(e.ids)] = torch.tensor(e.ids, dtype=torch.long)
        mask[i, : len(e.ids)] = True
    return ids, mask, torch.tensor([e.label for e in examples], dtype=torch.long)


def batches(examples: Sequence[Example], size: int, generator: Optional[torch.Generator] = None):
    order = torch.randperm(len(examples), generator=generator).tolist() if generator is not None else \
        sorted(range(len(examples)), key=lambda i: len(examples[i].ids))  # eval: length-sorted, less padding
    for start in range(0, len(order), size):
        yield collate([examples[i] for i in order[start:start + size]])


@torch.no_grad()
def predict(model, examples: Sequence[Example], batch_size: int = 128, device="cpu"):
    model.eval()
    labels, preds = [], []
    for ids, mask, y in batches(examples, batch_size):
        preds += model(ids.to(device), mask.to(device)).argmax(-1).cpu().tolist()
        labels += y.tolist()
    return labels, preds


def metrics_for(labels, preds, num_classes: int, with_matrix: bool = False) -> Dict:
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score

    out = {"accuracy": float(accuracy_score(labels, preds)),
           "macro_f1": float(f1_score(labels, preds, average="macro", labels=list(range(num_classes)), zero_division=0)),
           "n": len(labels)}
    if with_matrix:
        out["per_class_f1"] = [float(x) for x in f1_score(labels, preds, average=None, labels=list(range(num_classes)),
                                                          zero_division=0)]
        out["confusion_matrix"] = confusion_matrix(labels, preds, labels=list(range(num_classes))).tolist()
    return out


def _optimizers(model, cfg: PretrainConfig):
    emb = [model.embedding.weight] if model.embedding.sparse else []
    dense = [p for p in model.parameters() if p.requires_grad and not any(p is e for e in emb)]
    opts = [torch.optim.AdamW(dense, lr=cfg.lr, weight_decay=cfg.weight_decay)]
    if emb:
        opts.append(torch.optim.SparseAdam(emb, lr=cfg.lr_embedding))
    return opts


def _save_atomic(obj, path: str) -> None:
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _rng_state() -> Dict:
    """The RNG streams training draws from (dropout): a resumed run continues them, so it ends where the
    uninterrupted run would have."""
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Optional[Dict]) -> None:
    if not state:  # a state file of an older version: training goes on from the seed's stream
        return
    from ..training.checkpoint import restore_cuda_rng

    torch.set_rng_state(state["cpu"].cpu())
    restore_cuda_rng(state.get("cuda"))  # a machine with fewer GPUs continues those it has (restored none before)


def check_finite(loss: float, epoch: int, batch: int, state_path: Optional[str]) -> None:
    """A NaN / inf loss stops before its backward: training went on through it, NaN weights scored the argmax of
    NaN logits (a real-looking dev accuracy), and the NaN table was exported as finished (with DONE)."""
    from ..training.trainer import NonFiniteLoss

    if not math.isfinite(loss):
        saved = state_path is not None and os.path.isfile(state_path)  # an epoch before: the unfinished run stays
        raise NonFiniteLoss(f"pretraining loss became {loss} at epoch {epoch}, batch {batch}: stopped, nothing "
                            "exported: lower train.lr / train.lr_embedding and run again"
                            + (" with --overwrite (it replaces the unfinished run)" if saved else ""))


def train_classifier(model, corpus: Corpus, cfg: PretrainConfig, state_path: Optional[str] = None,
                     log: Callable = print) -> Dict:
    """Train with early stopping on dev; returns dev/test metrics of the best epoch (model left at it)."""
    from ..training.distributed import resolve_device

    device = resolve_device(cfg.device)
    model.to(device)
    opts = _optimizers(model, cfg)
    k = len(corpus.categories)
    start_epoch, best, best_state, bad, elapsed = 0, None, None, 0, 0.0
    if state_path and os.path.isfile(state_path):
        from ..serialization import read_torch

        state = read_torch(state_path, "delete it (--resume then restarts training) or rerun with --overwrite",
                           map_location=device)
        model.load_state_dict(state["model"])
        for o, s in zip(opts, state["optimizers"]):
            o.load_state_dict(s)
        start_epoch, best, best_state, bad = state["epoch"] + 1, state["best"], state["best_state"], state["bad"]
        cfg.history[:] = state["history"]
        elapsed = state.get("seconds", 0.0)
        _set_rng_state(state.get("rng"))
        log(f"resumed after epoch {state['epoch'] + 1} (best dev {cfg.metric} {best[cfg.metric]:.4f})")
    started = time.time() - elapsed
    for epoch in range(start_epoch, cfg.epochs):
        if best is not None and bad >= cfg.patience:
            break
        model.train()
        gen = torch.Generator().manual_seed(cfg.seed * 1000 + epoch)
        n_batches = (len(corpus.train) + cfg.batch_size - 1) // cfg.batch_size
        bar = progress_bar(batches(corpus.train, cfg.batch_size, gen), cfg.show_progress, total=n_batches,
                           desc=f"epoch {epoch + 1}/{cfg.epochs}", leave=False)
        total, seen = 0.0, 0
        for batch_no, (ids, mask, y) in enumerate(bar, 1):
            ids, mask, y = ids.to(device), mask.to(device), y.to(device)
            loss = F.cross_entropy(model(ids, mask), y)
            check_finite(loss.item(), epoch + 1, batch_no, state_path)
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm:
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p is not model.embedding.weight
                                                or not model.embedding.sparse], cfg.max_grad_norm)
            for o in opts:
                o.step()
            total, seen = total + loss.item() * len(y), seen + len(y)
            bar.set_postfix(loss=f"{total / seen:.4f}")
        dev = metrics_for(*predict(model, corpus.dev, device=device), k)
        improved = best is None or dev[cfg.metric] > best[cfg.metric]
        if improved:
            best, bad = dev, 0
            best_state = {n: t.detach().cpu().clone() for n, t in model.state_dict().items()}
        else:
            bad += 1
        row = {"epoch": epoch + 1, "train_loss": total / max(seen, 1), "dev_accuracy": dev["accuracy"],
               "dev_macro_f1": dev["macro_f1"], "seconds": round(time.time() - started, 1)}
        cfg.history.append(row)
        if state_path:  # saved before anything else can interrupt: a rerun resumes after this epoch
            _save_atomic({"model": model.state_dict(), "optimizers": [o.state_dict() for o in opts], "epoch": epoch,
                          "best": best, "best_state": best_state, "bad": bad, "history": cfg.history,
                          "seconds": time.time() - started, "rng": _rng_state()}, state_path)
        log(f"epoch {epoch + 1}: loss {row['train_loss']:.4f} | dev acc {dev['accuracy']:.4f} macro-F1 "
            f"{dev['macro_f1']:.4f}{' *' if improved else ''} | {row['seconds']}s")
        if cfg.max_minutes and time.time() - started > 60 * cfg.max_minutes:
            log(f"stopping: the {cfg.max_minutes}-minute budget is spent")
            break
    if best_state is None:
        raise ValueError("no epoch was trained: train.epochs must be >= 1")
    model.load_state_dict(best_state)
    dev = metrics_for(*predict(model, corpus.dev, device=device), k, with_matrix=True)
    test = metrics_for(*predict(model, corpus.test, device=device), k, with_matrix=True)
    return {"dev": dev, "test": test, "history": copy.deepcopy(cfg.history),
            "best_epoch": max(cfg.history, key=lambda r: r["dev_" + cfg.metric])["epoch"],
            "train_seconds": round(time.time() - started, 1)}
