"""Our training loop (OpenPrompt's ClassificationRunner moves batches to CUDA unconditionally).

Research code (what a prompt is) lives in templates/generators; this file is engineering only:
devices, optimizers, accumulation, evaluation each epoch, best-on-dev selection, progress bars.
It runs on CPU, one GPU or several processes (``distributed.Runtime``, started by ``accelerate
launch``), saves resumable checkpoints (``checkpoint.py``) and logs scalars (``logs.py``).
"""
from __future__ import annotations

import contextlib
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..progress import bar as progress_bar
from ..serialization import trainable_state
from .checkpoint import (Progress, check_parameter_names, checkpoint_root, latest_checkpoint, load_checkpoint,
                         remove_checkpoints, rng_state, save_checkpoint, set_rng_state)
from .distributed import Runtime, mark_sparse, resolve_device
from .logs import RunLogger
from .metrics import METRICS, answer_metrics, binary_metrics, classification_metrics, regression_metrics
from .optim import (build_optimizers, check_optimizer_settings, clip_grad_norm, grad_norm, group_names, group_rates,
                    linear_warmup, resolve_warmup, split_counts)
from .row_sparse_adam import RowSparseAdam

FROZEN_PREFIXES = ("prompt_model.plm.", "prompt_model.template.raw_embedding.")


@dataclass
class TrainConfig:
    epochs: int = 10
    lr_prompt: float = 3e-3
    lr_head: Optional[float] = 1e-3   # None: the prompt's rate
    lr_plm: float = 1e-5
    lr_instance: Optional[float] = None  # the instance-wise generator's rate; None: lr_prompt (the papers)
    weight_decay: float = 0.0
    adam_betas: Tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    scheduler: str = "linear"     # linear: warmup then linear decay to 0; constant: warmup then flat
    warmup_steps: int = 0
    warmup_ratio: float = 0.06
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    metric: str = "accuracy"  # dev metric that picks the best epoch
    device: str = "auto"
    seed: int = 42
    show_progress: bool = True
    checkpoint_every: int = 500   # optimizer steps between mid-epoch checkpoints (0: epoch ends only; -1: none)
    checkpoint_minutes: Optional[float] = 5.0  # and at most this long between checkpoints (None / 0: by steps only)
    keep_checkpoints: int = 1     # newest checkpoint directories kept
    history: List[Dict] = field(default_factory=list)

    def resolved_device(self) -> torch.device:
        return resolve_device(self.device)


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def to_device(batch: Dict, device: torch.device) -> Dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def is_regression(model) -> bool:
    """Whether ``model``'s head predicts one real-valued score (``regression_head``) instead of classes."""
    return bool(getattr(getattr(model, "verbalizer", None), "regression", False))


def task_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy over classes, or (regression) the mean squared error of the one output, as fairseq's
    sentence_prediction criterion with --regression-target (the IDPG authors' STS-B)."""
    if regression:
        return F.mse_loss(logits.squeeze(-1), labels.float(), reduction=reduction)
    return F.cross_entropy(logits, labels, reduction=reduction)


def predictions(logits: torch.Tensor, regression: bool) -> List:
    return logits.squeeze(-1).tolist() if regression else logits.argmax(-1).tolist()


@torch.no_grad()
def evaluate(model, loader, device=None, desc: str = "eval", show_progress: bool = True,
             runtime: Optional[Runtime] = None) -> Dict[str, float]:
    """Metrics over ``loader``; with several processes each evaluates its slice of every batch and the
    outputs are gathered in batch order (disjoint slices: nothing is counted twice)."""
    device = device or (runtime.device if runtime else next(model.parameters()).device)
    regression = is_regression(model)
    was_training = model.training
    model.eval()
    parts = []
    for i, batch in enumerate(progress_bar(loader, show_progress, desc=desc, leave=False)):
        if runtime is not None:
            batch, _ = runtime.shard(batch)
        if len(batch["label"]) == 0:
            continue
        batch = to_device(batch, device)
        with runtime.autocast() if runtime else contextlib.nullcontext():
            logits = model(batch).float()
        parts.append((i, task_loss(logits, batch["label"], regression, reduction="sum").item(), batch["label"].tolist(),
                      predictions(logits, regression), list(batch.get("group") or []), logits.size(-1)))
    model.train(was_training)
    if runtime is not None and runtime.world_size > 1:
        parts = runtime.gather_objects(parts)
        order = sorted(range(len(parts)), key=lambda j: parts[j][0])  # stable: rank order within a batch
        parts = [parts[j] for j in order]
    labels = [y for p in parts for y in p[2]]
    preds = [y for p in parts for y in p[3]]
    groups = [g for p in parts for g in p[4]]
    n_outputs = max((p[5] for p in parts), default=0)  # from the gathered parts: the same on every process
    if regression:
        metrics = regression_metrics(labels, preds)
    else:
        metrics = classification_metrics(labels, preds)
        if n_outputs == 2:  # binary tasks: F1 of class 1 and the mean of accuracy and F1 (MRPC / QQP)
            metrics.update(binary_metrics(labels, preds))
    if groups:  # answer-level tasks (MultiRC): F1a over answers, EM over questions
        metrics.update(answer_metrics(labels, preds, groups))
    metrics["loss"] = sum(p[1] for p in parts) / max(1, len(labels))
    return metrics


class NonFiniteLoss(FloatingPointError):
    """The loss became NaN/inf; training stopped and the last checkpoint on disk is the last good one."""


class Trainer:
    def __init__(self, model, config: TrainConfig, output_dir: Optional[str] = None,
                 runtime: Optional[Runtime] = None, run_config: Optional[Dict] = None,
                 data_digest: Optional[str] = None):
        """``data_digest``: a hash of the data (``data.prepare.examples_digest``), kept in each checkpoint; a
        resume on data with another hash is refused."""
        self.model, self.config, self.output_dir = model, config, output_dir
        self.data_digest = data_digest
        self.runtime = runtime or Runtime(config.resolved_device())
        self.device = self.runtime.device
        self.run_config = run_config
        self.model.to(self.device)
        self.best_state: Optional[Dict[str, torch.Tensor]] = None
        self.best_metrics: Optional[Dict[str, float]] = None
        self.info: Dict = {}
        self._last_save = time.monotonic()

    def trainable_state(self) -> Dict[str, torch.Tensor]:
        return trainable_state(self.model, skip=FROZEN_PREFIXES if not self._plm_trainable() else ())

    def trainable_shapes(self) -> Dict[str, tuple]:
        """Name -> shape of what ``trainable_state`` saves, without copying it."""
        skip = FROZEN_PREFIXES if not self._plm_trainable() else ()
        return {n: tuple(p.shape) for n, p in self.model.named_parameters() if p.requires_grad and not n.startswith(skip)}

    def _plm_trainable(self) -> bool:
        return any(p.requires_grad for p in self.model.plm.parameters())

    def load_state(self, state: Dict[str, torch.Tensor]) -> None:
        params = dict(self.model.named_parameters())
        for name, value in state.items():
            params[name].data.copy_(value.to(params[name].device))

    def fit(self, train_loader, dev_loader, resume: Optional[str] = None) -> Dict[str, float]:
        """Train with best-on-dev selection; ``resume``: a checkpoint directory to continue from."""
        cfg, rt = self.config, self.runtime
        verbose = cfg.show_progress and rt.is_main
        if len(train_loader) == 0:
            raise ValueError("the training split is empty: check dataset.path and the split sizes")
        if cfg.metric not in METRICS:
            raise ValueError(f"unknown metric '{cfg.metric}': choose one of {list(METRICS)}")
        check_optimizer_settings(cfg.adam_betas, cfg.adam_eps, cfg.weight_decay, cfg.scheduler)
        lr_head = cfg.lr_prompt if cfg.lr_head is None else cfg.lr_head  # null: one rate, as fairseq (IDPG)
        optimizers = build_optimizers(self.model, cfg.lr_prompt, lr_head, cfg.lr_plm, cfg.weight_decay,
                                      cfg.adam_betas, cfg.adam_eps, lr_instance=cfg.lr_instance)
        accum = cfg.gradient_accumulation_steps
        steps_per_epoch = math.ceil(len(train_loader) / accum)
        total = steps_per_epoch * cfg.epochs
        warmup = resolve_warmup(cfg.warmup_steps, cfg.warmup_ratio, total)
        schedulers = linear_warmup(optimizers, warmup, total, cfg.scheduler)
        names = group_names(optimizers)  # before a resume replaces the groups with the checkpoint's
        params = [p for opt in optimizers for g in opt.param_groups for p in g["params"]]
        mark_sparse([p for opt in optimizers if isinstance(opt, RowSparseAdam) for g in opt.param_groups for p in g["params"]])
        scaler = rt.grad_scaler()
        gen = getattr(train_loader, "generator", None)
        regression = is_regression(self.model)
        progress, pending_rng = Progress(), None
        resumed_from = None
        if resume:
            ckpt = load_checkpoint(resume)
            st = ckpt["state"]
            self._check_same_data(resume, st.get("data_digest"))
            check_parameter_names(resume, ckpt, self.trainable_shapes())
            self.load_state(ckpt["trainable"])
            for opt, sd in zip(optimizers, st["optimizers"]):
                opt.load_state_dict(sd)
            for sched, sd in zip(schedulers, st["schedulers"]):
                sched.load_state_dict(sd)
            if scaler is not None and st.get("scaler"):
                scaler.load_state_dict(st["scaler"])
            self.best_state, self.best_metrics = ckpt["best"], st["best_metrics"]
            if self.output_dir and rt.is_main:
                self._restore_best()
            cfg.history[:] = st["history"]
            progress = Progress(**st["progress"])
            if gen is not None and st.get("loader_generator") is not None:
                gen.set_state(st["loader_generator"])
            rngs = st["rng"]
            pending_rng = rngs[rt.rank] if rt.rank < len(rngs) else rngs[0]
            resumed_from = progress.global_step
            if rt.is_main:  # said even with --quiet: the user must see where a resumed run starts
                print(f"resuming from {resume}: optimizer step {progress.global_step}, epoch {progress.epoch} "
                      f"after {progress.batches_done} of {len(train_loader)} batches")
        elif self.output_dir and rt.is_main and os.path.isdir(checkpoint_root(self.output_dir)):
            remove_checkpoints(self.output_dir)  # a fresh run: no stale checkpoint may outlive it
        self.info = {"resumed_from_step": resumed_from, "epochs": cfg.epochs, "processes": rt.world_size,
                     "mixed_precision": rt.mixed_precision}
        logger = RunLogger(self.output_dir if rt.is_main else None, resume_step=resumed_from, verbose=verbose)
        prompt_n, head_n, plm_n = split_counts(self.model)
        if verbose:
            print(f"trainable parameters: prompt {prompt_n:,} | head {head_n:,} | plm {plm_n:,} "
                  f"| device {self.device} x {rt.world_size} | {total} optimizer steps")
        step_no = progress.global_step
        self._last_save = time.monotonic()
        self.model.train()
        try:
            for epoch in range(progress.epoch, cfg.epochs + 1):
                first = epoch == progress.epoch
                skip = progress.batches_done if first else 0
                running = progress.running_loss if first else 0.0
                epoch_gen_state = gen.get_state() if gen is not None else None
                window: List = []  # (batch number, batch) of the optimizer step in progress
                if pending_rng is not None and skip == 0:
                    set_rng_state(pending_rng)
                    pending_rng = None
                bar = progress_bar(train_loader, verbose, desc=f"epoch {epoch}/{cfg.epochs}", leave=False, initial=0)
                for step, batch in enumerate(bar, 1):
                    if step <= skip:  # batches of this epoch done before the checkpoint
                        continue
                    if pending_rng is not None:
                        set_rng_state(pending_rng)
                        pending_rng = None
                    window.append((step, batch))
                    if step % accum and step < len(train_loader):
                        continue
                    # one optimizer step over the window's micro-batches: each loss is summed over its examples and
                    # divided by the window's, so the gradient and the logged loss are those of one batch of all
                    # of them (a short last batch or a short last window included), on any number of processes
                    n_window = sum(len(b["label"]) for _, b in window)
                    window_loss = sum(self._backward(b, n_window, regression, scaler, f"optimizer step {step_no + 1} "
                                                     f"(epoch {epoch}, batch {i})") for i, b in window)
                    window = []
                    rt.all_reduce_gradients(params)
                    self._step(optimizers, params, scaler)
                    rates = group_rates(optimizers, names)  # the rates this step used
                    for sched in schedulers:
                        sched.step()
                    for opt in optimizers:
                        opt.zero_grad(set_to_none=True)
                    step_no += 1
                    running += window_loss
                    logger.log(step_no, epoch, {"train/loss": window_loss, **rates})
                    if step < len(train_loader) and self._checkpoint_due(step_no):
                        self._checkpoint(optimizers, schedulers, scaler, Progress(epoch, step, step_no, running),
                                         epoch_gen_state)
                    bar.set_postfix(loss=f"{running / math.ceil(step / accum):.4f}")
                dev = evaluate(self.model, dev_loader, self.device, desc="dev", show_progress=verbose, runtime=rt)
                self._check_finite_dev(dev, epoch)
                record = {"epoch": epoch, "train_loss": running / steps_per_epoch,  # the mean optimizer step's loss
                          **{f"dev_{k}": v for k, v in dev.items()}}
                cfg.history.append(record)
                logger.log(step_no, epoch, {"train/epoch_loss": record["train_loss"],
                                            **{f"dev/{k}": v for k, v in dev.items()}})
                if cfg.metric not in dev:
                    raise ValueError(f"train.metric '{cfg.metric}' is not computed for this task (it reports "
                                     f"{sorted(k for k in dev if k != 'loss')}); f1a and em need answer groups (multirc)")
                improved = self.best_metrics is None or dev[cfg.metric] > self.best_metrics[cfg.metric]
                if improved:
                    self.best_metrics = dev
                    self.best_state = {k: v.clone() for k, v in self.trainable_state().items()}
                    if self.output_dir and rt.is_main:
                        self._save_best()
                self._checkpoint(optimizers, schedulers, scaler, Progress(epoch + 1, 0, step_no, 0.0),
                                 gen.get_state() if gen is not None else None)
                if verbose:
                    shown = ("pearson", "spearman") if regression else ("accuracy", "macro_f1", "f1a", "em")
                    extra = "".join(f" | dev {k} {dev[k]:.4f}" for k in dict.fromkeys((*shown, cfg.metric)) if k in dev)
                    print(f"epoch {epoch:3d} | train loss {record['train_loss']:.4f}{extra}{'  *best' if improved else ''}")
        finally:
            logger.close()
        self.info.update(optimizer_steps=step_no, best_epoch=self._best_epoch())
        self.load_state(self.best_state)
        return self.best_metrics

    def _step(self, optimizers, params, scaler) -> None:
        """Clip (one norm over dense and sparse vocab-table gradients) and step every optimizer. Under fp16 an
        overflow anywhere skips *every* optimizer's step, as with one optimizer: the scaler decides per optimizer,
        and RowSparseAdam would otherwise step on alone (on gradients an inf norm clipped to zero: momentum only)."""
        if scaler is not None:
            for opt in optimizers:
                scaler.unscale_(opt)
        norm = None
        if self.config.max_grad_norm:
            norm = clip_grad_norm(params, self.config.max_grad_norm)
        elif scaler is not None:
            norm = grad_norm(params)
        if scaler is None or bool(torch.isfinite(norm)):
            for opt in optimizers:
                scaler.step(opt) if scaler is not None else opt.step()
        if scaler is not None:
            scaler.update()  # the unscale_ calls recorded the overflow: the scale backs off

    def _backward(self, batch: Dict, n_window: int, regression: bool, scaler, where: str) -> float:
        """Backward of this process's slice of ``batch``: its loss summed over the slice / ``n_window`` (the
        examples of the whole optimizer step, all processes), so the summed gradients are the window mean's.
        Returns the batch's share of the window's loss over all processes; a NaN / inf stops before backward."""
        rt = self.runtime
        local, _ = rt.shard(batch)
        loss = None
        if len(local["label"]):
            local = to_device(local, self.device)
            with rt.autocast():
                logits = self.model(local).float()
            loss = task_loss(logits, local["label"], regression, reduction="sum") / n_window
        value = rt.sum(loss.item() if loss is not None else 0.0)
        if not math.isfinite(value):
            last = latest_checkpoint(self.output_dir) if self.output_dir else None
            raise NonFiniteLoss(f"loss became {value} at {where}: stopped; last good checkpoint: {last or 'none'} "
                                "(lower train.lr_prompt / train.lr_head)")
        if loss is not None:
            (scaler.scale(loss) if scaler is not None else loss).backward()
        return value

    def _check_finite_dev(self, dev: Dict[str, float], epoch: int) -> None:
        """A NaN / inf dev loss: the epoch's last steps left the model's outputs non-finite (its train loss, taken
        before those steps, was finite). Its predictions (argmax of NaN) still score a real-looking accuracy, which
        could be selected and saved over the best model: stop before selection, as a NaN train loss does."""
        if math.isfinite(dev["loss"]):
            return
        last = latest_checkpoint(self.output_dir) if self.output_dir else None
        best = "none" if self.best_state is None else f"epoch {self._best_epoch()}, kept"
        raise NonFiniteLoss(f"dev loss became {dev['loss']} after epoch {epoch}: the model's outputs are not finite; "
                            f"stopped; best so far: {best}; last good checkpoint: {last or 'none'} "
                            "(lower train.lr_prompt / train.lr_head)")

    def _best_epoch(self) -> int:
        """The selected epoch: the best dev score, the earlier epoch on a tie (as ``improved`` picks)."""
        metric = f"dev_{self.config.metric}"
        return max(self.config.history, key=lambda r: (r[metric], -r["epoch"]))["epoch"]

    def _checkpoint_due(self, step_no: int) -> bool:
        """Mid-epoch: every ``checkpoint_every`` optimizer steps, or when ``checkpoint_minutes`` have passed
        since the last save (a slow first epoch is not lost to a kill); every process decides alike."""
        cfg = self.config
        if not self.output_dir or cfg.checkpoint_every is None or cfg.checkpoint_every < 0:
            return False
        if cfg.checkpoint_every and step_no % cfg.checkpoint_every == 0:
            return True
        if not cfg.checkpoint_minutes:
            return False
        late = time.monotonic() - self._last_save >= 60.0 * float(cfg.checkpoint_minutes)
        return self.runtime.sum(float(late)) > 0 if self.runtime.world_size > 1 else late

    def _checkpoint(self, optimizers, schedulers, scaler, progress: Progress, loader_state) -> None:
        """Save a resumable checkpoint (main process writes; every process contributes its RNG state)."""
        if not self.output_dir or self.config.checkpoint_every is None or self.config.checkpoint_every < 0:
            return
        self._last_save = time.monotonic()
        rngs = self.runtime.gather_objects([rng_state()])
        if self.runtime.is_main:
            state = {"progress": asdict(progress), "optimizers": [o.state_dict() for o in optimizers],
                     "schedulers": [s.state_dict() for s in schedulers],
                     "scaler": scaler.state_dict() if scaler is not None else None,
                     "rng": rngs, "loader_generator": loader_state, "history": list(self.config.history),
                     "best_metrics": self.best_metrics, "data_digest": self.data_digest}
            save_checkpoint(self.output_dir, self.trainable_state(), self.best_state, state, self.run_config,
                            keep=self.config.keep_checkpoints)
        self.runtime.barrier()
    def _check_same_data(self, resume: str, saved: Optional[str]) -> None:
        if saved and self.data_digest and saved != self.data_digest:  # a checkpoint from before the hash: no check
            raise ValueError(f"cannot resume from {resume}: the data found now differs from the data it trained on "
                             "(a relative data root or dataset.path read from another directory, or files changed "
                             "since): run from the directory it started in, or point --data-root / IPT_ASSETS / "
                             "dataset.path at the data it used; for this data, start a new run (--overwrite, or "
                             "another --output-dir)")

    def _restore_best(self) -> None:
        """On resume: best.safetensors as the checkpoint's best. A kill after a dev evaluation saved a new best but
        before its checkpoint left that best on disk; the resumed run (on a GPU, not bit-identical) may never
        reach it again, and the file predict loads would then not be the model its metrics.json reports."""
        if self.best_state is not None:
            self._save_best()
        elif os.path.isfile(os.path.join(self.output_dir, "best.safetensors")):
            os.remove(os.path.join(self.output_dir, "best.safetensors"))

    def _save_best(self) -> None:
        from safetensors.torch import save_file

        from ..serialization import durable, usual_mode

        os.makedirs(self.output_dir, exist_ok=True)
        path = os.path.join(self.output_dir, "best.safetensors")
        save_file(self.best_state, path + ".tmp")
        usual_mode(path + ".tmp")  # safetensors writes 0600; every other file of the run is 0644
        durable(path + ".tmp")
        os.replace(path + ".tmp", path)

    def summary(self) -> Dict:
        return {"config": {k: v for k, v in asdict(self.config).items() if k != "history"},
                "history": self.config.history, "best_dev": self.best_metrics}
