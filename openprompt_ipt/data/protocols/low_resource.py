"""Low-resource protocol (IDPG §4.4): K training examples (K in {100, 500, 1000} in the paper) and a
1000-example dev set, both sampled (seeded, disjoint) from the original train. MultiRC keeps each
paragraph on one side, as ``splits.held_out_split`` does."""
from __future__ import annotations

import random
from typing import Dict, List, Sequence, Tuple

from ..splits import _group_of


def low_resource_splits(pool: Sequence, k: int, dev_size: int, seed: int) -> Tuple[List, List]:
    if k + dev_size > len(pool):
        raise ValueError(f"protocol.k={k} + protocol.dev_size={dev_size} exceeds the {len(pool)} training "
                         "examples: lower protocol.k or protocol.dev_size")
    items = sorted(pool, key=lambda ex: str(ex.guid))
    if items and _group_of(items[0]) is not None:
        return _paragraph_splits(items, k, dev_size, seed)
    random.Random(seed).shuffle(items)
    return items[:k], items[k:k + dev_size]


def _paragraph_splits(items: List, k: int, dev_size: int, seed: int) -> Tuple[List, List]:
    """MultiRC (answer-level rows): dev is whole questions of paragraphs in seeded order, at most ``dev_size``
    answers (EM scores whole questions); train is K answers at random from the paragraphs dev leaves untouched
    (answer by answer, dev repeated questions train had seen: about 15% of dev at K = 1000)."""
    paragraphs: Dict[str, List] = {}
    for ex in items:
        paragraphs.setdefault(_group_of(ex), []).append(ex)
    keys = sorted(paragraphs)
    rng = random.Random(seed)
    rng.shuffle(keys)
    dev: List = []
    opened = set()
    for p in keys:
        for answers in _questions(paragraphs[p]):  # a question that would overflow is skipped (splits.cap_examples)
            if len(dev) + len(answers) <= dev_size:
                dev += answers
                opened.add(p)
        if len(dev) == dev_size:
            break
    if not dev:
        raise ValueError(f"protocol.dev_size={dev_size} is smaller than every MultiRC question (dev holds a question's "
                         "answers whole): raise protocol.dev_size")
    rest = [ex for ex in items if _group_of(ex) not in opened]
    if len(rest) < k:
        raise ValueError(f"protocol.k={k} + protocol.dev_size={dev_size}: MultiRC keeps a paragraph's answers on one "
                         f"side, and the paragraphs dev does not touch hold only {len(rest)} answers: lower protocol.k "
                         "or protocol.dev_size")
    rng.shuffle(rest)
    return rest[:k], dev


def _questions(answers: List) -> List[List]:
    """A paragraph's answers grouped by question (``meta["group"]``), in the given order."""
    groups: Dict[str, List] = {}
    for ex in answers:
        groups.setdefault((ex.meta or {}).get("group", str(ex.guid)), []).append(ex)
    return list(groups.values())
