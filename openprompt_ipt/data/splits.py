"""How one list of examples is split or capped, seeded and independent of the machine: label-stratified
held-out parts (whole MultiRC paragraphs; random for regression scores) and seeded caps (whole MultiRC
questions). ``data/prepare.py`` applies them under each protocol."""
from __future__ import annotations

import random
from typing import Dict, List, Sequence


def stratified_split(examples: Sequence, fraction: float, seed: int):
    """(train, dev): ``fraction`` of each label's examples go to dev, chosen by ``seed``."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"dataset.dev_from_train must be in (0, 1), got {fraction}")
    by_label: Dict[int, List] = {}
    for ex in examples:
        by_label.setdefault(ex.label, []).append(ex)
    rng = random.Random(seed)
    train, dev = [], []
    for label in sorted(by_label, key=str):
        group = by_label[label][:]
        rng.shuffle(group)
        n_dev = max(1, round(len(group) * fraction)) if len(group) > 1 else 0
        dev += group[:n_dev]
        train += group[n_dev:]
    rng.shuffle(train)
    return train, dev


def random_split(examples: Sequence, fraction: float, seed: int):
    """(train, dev): a seeded random ``fraction`` to dev (regression scores have no classes to balance)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"dataset.dev_from_train must be in (0, 1), got {fraction}")
    items = list(examples)
    random.Random(seed).shuffle(items)
    n_dev = max(1, round(len(items) * fraction)) if len(items) > 1 else 0
    return items[n_dev:], items[:n_dev]


def _group_of(example):
    """The unit that must stay on one side of a split: a MultiRC paragraph, else the example itself."""
    meta = getattr(example, "meta", None) or {}
    return meta.get("paragraph")


def held_out_split(examples: Sequence, fraction: float, seed: int):
    """(rest, held_out): label-stratified by ``seed``; for answer-level tasks (MultiRC) whole
    paragraphs go to one side, so no question is split across train and dev."""
    if isinstance(examples[0].label, float):  # regression scores: no classes to stratify by
        return random_split(examples, fraction, seed)
    if _group_of(examples[0]) is None:
        return stratified_split(examples, fraction, seed)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"held-out fraction must be in (0, 1), got {fraction}")
    groups: Dict[str, List] = {}
    for ex in examples:
        groups.setdefault(_group_of(ex), []).append(ex)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    n_held = max(1, round(len(keys) * fraction)) if len(keys) > 1 else 0
    held = [ex for k in keys[:n_held] for ex in groups[k]]
    rest = [ex for k in keys[n_held:] for ex in groups[k]]
    return rest, held


def cap_examples(examples: Sequence, limit, seed: int) -> List:
    """At most ``limit`` examples, a seeded random choice (whole MultiRC questions), in source order."""
    if not limit or len(examples) <= int(limit):
        return list(examples)
    limit = int(limit)
    units: Dict[str, List[int]] = {}
    for i, ex in enumerate(examples):
        meta = getattr(ex, "meta", None) or {}
        units.setdefault(meta.get("group", str(i)), []).append(i)
    keys = list(units)
    random.Random(seed).shuffle(keys)
    chosen: List[int] = []
    for k in keys:
        if chosen and len(chosen) + len(units[k]) > limit:
            continue
        chosen += units[k]
        if len(chosen) >= limit:
            break
    return [examples[i] for i in sorted(chosen)]
