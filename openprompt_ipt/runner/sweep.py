"""Hyper-parameter sweeps: a ``sweep:`` grid over ``section.key`` values, one config per point, and
the best point on dev (mean cross-validation score under the few-shot protocol)."""
from __future__ import annotations

import copy
import itertools
from typing import Dict, List, Sequence


def expand_grid(sweep: Dict[str, Sequence]) -> List[Dict]:
    """Every combination of the sweep values, in YAML order (the last key varies fastest); ``[{}]``
    when there is no sweep."""
    for key, values in sweep.items():
        if not isinstance(values, (list, tuple)) or len(values) == 0:
            raise ValueError(f"sweep '{key}' has no values: give a non-empty list, e.g. {key}: [a, b]")
    keys = list(sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def point_name(point: Dict) -> str:
    """A folder name for a sweep point, e.g. ``lr_prompt=0.003,prompt_length=8``."""
    if not point:
        return "default"
    short = {k: k.split(".")[-1] for k in point}
    if len(set(short.values())) < len(short):  # two keys end alike: keep their full paths
        short = {k: k for k in point}
    return ",".join(f"{short[k]}={v}" for k, v in point.items()).replace("/", "_")


def apply_point(cfg: Dict, point: Dict) -> Dict:
    """A copy of ``cfg`` with each ``section.key`` of ``point`` set."""
    out = copy.deepcopy(cfg)
    for key, value in point.items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def select_best(scores: Sequence[float]) -> int:
    """Index of the highest score; ties go to the earliest point."""
    if not scores:
        raise ValueError("no sweep points to select from")
    return max(range(len(scores)), key=lambda i: (scores[i], -i))
