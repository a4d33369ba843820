"""``optimizer_groups(prompt_model)``: the parameter groups of a ``PromptForClassification`` for a stock
PyTorch optimizer, so an OpenPrompt loop trains our template too.

OpenPrompt's tutorial 1.2 builds its optimizers from ``prompt_model.plm`` and ``prompt_model.verbalizer``
only, which is right for a ManualTemplate (nothing to train) and leaves a soft template as it was made.
Here the template's, the verbalizer's and (when it trains) the PLM's parameters each get one group with
its own learning rate; a parameter shared by two parts (the template's ``raw_embedding`` *is* the PLM's
word embedding) is listed once, with the PLM.
"""
from __future__ import annotations

from typing import Dict, List

from torch import nn


def _sparse_ids(module: nn.Module) -> set:
    return {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding) and m.sparse}


def optimizer_groups(prompt_model, lr_template: float = 0.03, lr_verbalizer: float = 1e-3,
                     lr_plm: float = 1e-5, weight_decay: float = 0.0) -> List[Dict]:
    """``[{"name": "template", "params": [...], "lr": lr_template, ...}, {"name": "verbalizer", ...},
    {"name": "plm", ...}]`` for ``torch.optim.AdamW(optimizer_groups(prompt_model))``: only parameters
    that train (``requires_grad``), each once; parts with nothing to train are left out.

    The defaults: 0.03 for prompts (the IPT authors' rate), 1e-3 for a trainable head (SoftVerbalizer),
    1e-5 for a PLM that is not frozen. A template built with ``sparse=True`` needs a sparse-aware
    optimizer (``openprompt_ipt.training.build_optimizers``): refused here with that fix."""
    for part in ("plm", "template", "verbalizer"):
        if not isinstance(getattr(prompt_model, part, None), nn.Module):
            raise TypeError(f"optimizer_groups needs a PromptForClassification (no .{part} module on "
                            f"{type(prompt_model).__name__})")
    sparse = _sparse_ids(prompt_model.template)
    if any(p.requires_grad and id(p) in sparse for p in prompt_model.template.parameters()):
        raise ValueError("the template has sparse vocab tables (sparse=True), which a stock optimizer cannot step: "
                         "build it with sparse=False (the default), or use openprompt_ipt.training.build_optimizers")
    seen: set = set()
    groups: List[Dict] = []
    for name, module, lr in (("plm", prompt_model.plm, lr_plm), ("template", prompt_model.template, lr_template),
                             ("verbalizer", prompt_model.verbalizer, lr_verbalizer)):
        params = [p for p in module.parameters() if p.requires_grad and id(p) not in seen]
        seen.update(id(p) for p in params)
        if params:
            groups.append({"name": name, "params": params, "lr": float(lr), "weight_decay": float(weight_decay)})
    if not groups:
        raise ValueError("nothing in this prompt model trains: every parameter has requires_grad=False")
    return groups

