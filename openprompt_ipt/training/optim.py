"""Optimizers: separate learning rates for prompt / head / PLM, and sparse rows for vocab tables.

A sparse ``nn.Embedding`` yields gradients for the looked-up rows only; ``RowSparseAdam`` updates
just those rows and keeps moments only for rows ever touched, so a step costs what the batch
touches, not the vocabulary. Everything dense shares one AdamW with per-group learning rates.
"""
from __future__ import annotations

import math
import warnings
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn

from .row_sparse_adam import RowSparseAdam


def sparse_parameter_ids(module: nn.Module) -> set:
    return {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding) and m.sparse}


SCHEDULERS = ("linear", "constant")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_optimizer_settings(adam_betas=(0.9, 0.999), adam_eps: float = 1e-8, weight_decay: float = 0.0,
                             scheduler: str = "linear") -> None:
    """One clear ValueError for a bad ``train.adam_betas / adam_eps / weight_decay / scheduler``."""
    if not (isinstance(adam_betas, (list, tuple)) and len(adam_betas) == 2
            and all(_number(b) and 0.0 <= b < 1.0 for b in adam_betas)):
        raise ValueError(f"train.adam_betas must be two numbers in [0, 1), e.g. [0.9, 0.98] (got {adam_betas!r})")
    if not (_number(adam_eps) and adam_eps > 0):
        raise ValueError(f"train.adam_eps must be a positive number, e.g. 1.0e-6 (got {adam_eps!r})")
    if not (_number(weight_decay) and weight_decay >= 0):
        raise ValueError(f"train.weight_decay must be a number >= 0 (got {weight_decay!r})")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"train.scheduler must be one of {list(SCHEDULERS)} (got {scheduler!r})")


def instance_parameter_ids(template: nn.Module) -> set:
    """The trainable parameters of a template's input-dependent part: the generator (IPT table / encoder,
    IDPG generator) less its task-level prefix (``TaskPrefix``), and not the task prompt. Empty for a
    template without instance-wise prompts (Prompt Tuning, Prefix Tuning)."""
    from ..generators.prefix import TaskPrefix

    generator = getattr(template, "generator", None)
    if not isinstance(generator, nn.Module):
        return set()
    task = {id(p) for m in generator.modules() if isinstance(m, TaskPrefix) for p in m.parameters()}
    return {id(p) for p in generator.parameters() if p.requires_grad and id(p) not in task}


def build_optimizers(model, lr_prompt: float, lr_head: float, lr_plm: float = 1e-5,
                     weight_decay: float = 0.0, adam_betas=(0.9, 0.999),
                     adam_eps: float = 1e-8, lr_instance: Optional[float] = None) -> List[torch.optim.Optimizer]:
    """``model`` is an OpenPrompt ``PromptForClassification``. AdamW (decoupled weight decay) for
    the dense parameters and RowSparseAdam for sparse vocab tables, both with ``adam_betas`` / ``adam_eps``
    / ``weight_decay`` (the sparse table decays lazily: rows decay on the steps they are looked up).
    ``lr_instance``: the rate of the instance-wise generator (``instance_parameter_ids``); ``None``: ``lr_prompt``,
    as in the papers; 0 keeps it at its initialisation."""
    check_optimizer_settings(adam_betas, adam_eps, weight_decay)
    betas = (float(adam_betas[0]), float(adam_betas[1]))
    sparse_ids = sparse_parameter_ids(model.template)
    plm_ids = {id(p) for p in model.plm.parameters()}

    def trainable(module, exclude=()):
        return [p for p in module.parameters() if p.requires_grad and id(p) not in exclude]

    sparse = [p for p in model.template.parameters() if p.requires_grad and id(p) in sparse_ids]
    instance_ids = instance_parameter_ids(model.template) if lr_instance is not None else set()
    lr_instance = lr_prompt if lr_instance is None else float(lr_instance)
    dense_template = trainable(model.template, sparse_ids | plm_ids)
    prompt = [p for p in dense_template if id(p) not in instance_ids]
    instance = [p for p in dense_template if id(p) in instance_ids]
    head = trainable(model.verbalizer, plm_ids)
    plm = trainable(model.plm)
    groups = [{"params": ps, "lr": lr, "weight_decay": weight_decay, "name": name}
              for name, ps, lr in (("prompt", prompt, lr_prompt), ("instance", instance, lr_instance),
                                   ("head", head, lr_head), ("plm", plm, lr_plm)) if ps]
    optimizers: List[torch.optim.Optimizer] = []
    if groups:
        optimizers.append(torch.optim.AdamW(groups, betas=betas, eps=float(adam_eps)))
    if sparse:
        optimizers.append(RowSparseAdam([{"params": sparse, "name": "instance"}], lr=lr_instance, betas=betas, eps=float(adam_eps),
                                        weight_decay=float(weight_decay)))
    if not optimizers:
        raise ValueError("nothing to train: every parameter is frozen (check the template strategy and plm.freeze)")
    return optimizers


# train/lr: the prompt's rate, i.e. the first of these groups the setup trains (Random IPT alone has no task
# prompt group: its prompt is the instance-wise table; a fine-tuned PLM without a prompt: the PLM's)
MAIN_GROUPS = ("prompt", "instance", "plm", "head")


def group_names(optimizers) -> List[List[str]]:
    """Each parameter group's name (``build_optimizers``), taken before a resume: a checkpoint's optimizer state
    from an older release has none, and ``load_state_dict`` replaces the groups with the saved ones."""
    return [[g.get("name", f"group{i}") for i, g in enumerate(opt.param_groups)] for opt in optimizers]


def group_rates(optimizers, names: List[List[str]]) -> Dict[str, float]:
    """The rates the step about to be taken uses: ``train/lr_<group>`` for each group and ``train/lr``, the
    prompt's (``MAIN_GROUPS``); was the first group's, which is the head's when there is no task prompt."""
    rates: Dict[str, float] = {}
    for opt, opt_names in zip(optimizers, names):
        for g, name in zip(opt.param_groups, opt_names):
            rates.setdefault(f"train/lr_{name}", float(g["lr"]))  # a dense and a sparse instance group: one rate
    main = next((rates[f"train/lr_{n}"] for n in MAIN_GROUPS if f"train/lr_{n}" in rates), next(iter(rates.values())))
    return {"train/lr": main, **rates}


def clip_grad_norm(params, max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` over dense *and* sparse gradients: one global L2 norm (a
    sparse gradient counts its coalesced rows, duplicates summed as a dense copy would), then every
    gradient scaled by ``max_norm / (norm + 1e-6)`` when that is below 1. Returns the total norm."""
    params = [p for p in params if p.grad is not None]
    if not params:
        return torch.tensor(0.0)
    total = grad_norm(params)
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad.mul_(coef.to(device=p.grad.device, dtype=p.grad.dtype))
    return total


def grad_norm(params) -> torch.Tensor:
    """The global L2 norm of the gradients of ``params``, dense and sparse (coalesced in place: a duplicate row
    counts as the dense copy's sum); inf / nan when any gradient is not finite."""
    squares = []
    for p in params:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            p.grad = p.grad.coalesce()
            squares.append(p.grad.values().float().pow(2).sum())
        else:
            squares.append(p.grad.detach().float().pow(2).sum())
    if not squares:
        return torch.tensor(0.0)
    device = squares[0].device
    return torch.stack([s.to(device) for s in squares]).sum().sqrt()


def linear_warmup(optimizers, warmup_steps: int, total_steps: int,
                  scheduler: str = "linear") -> List[torch.optim.lr_scheduler.LambdaLR]:
    """Linear warmup over ``warmup_steps``, then ``linear``: decay to 0 at ``total_steps``, or
    ``constant``: the peak rate to the end (IDPG Table 4's 'fixed' learning rate)."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"train.scheduler must be one of {list(SCHEDULERS)} (got {scheduler!r})")

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        if scheduler == "constant":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return [torch.optim.lr_scheduler.LambdaLR(opt, factor) for opt in optimizers]


def resolve_warmup(warmup_steps: int, warmup_ratio: float, total_steps: int) -> int:
    """Warmup optimizer steps: ``warmup_steps`` when > 0, else ``warmup_ratio`` of the run. Warns when
    warmup covers the whole run: the peak rate is then never reached (IPT's 2000 steps on CB's ~200)."""
    if not 0.0 <= float(warmup_ratio) < 1.0:
        raise ValueError(f"train.warmup_ratio must be in [0, 1) (got {warmup_ratio!r}): the fraction of the run spent warming up")
    if int(warmup_steps) < 0:
        raise ValueError(f"train.warmup_steps must be >= 0 (got {warmup_steps!r}); 0 uses train.warmup_ratio")
    warmup = int(warmup_steps) or int(float(warmup_ratio) * total_steps)
    if total_steps > 0 and warmup >= total_steps:
        warnings.warn(f"warmup ({warmup} optimizer steps) >= the whole run ({total_steps} steps): the learning rate never "
                      f"reaches its peak; use train.warmup_ratio (a fraction of the run) with train.warmup_steps: 0",
                      stacklevel=2)
    return warmup


def split_counts(model) -> Tuple[int, int, int]:
    """(prompt, head, plm) trainable parameter counts."""
    t = model.template.num_trainable_parameters() if hasattr(model.template, "num_trainable_parameters") else \
        sum(p.numel() for n, p in model.template.named_parameters() if p.requires_grad and "raw_embedding" not in n)
    plm_ids = {id(p) for p in model.plm.parameters()}
    h = sum(p.numel() for p in model.verbalizer.parameters() if p.requires_grad and id(p) not in plm_ids)
    m = sum(p.numel() for p in model.plm.parameters() if p.requires_grad)
    return t, h, m
