"""Few-shot protocol (IPT §5.1): K examples per label for train and K per label for dev, sampled
(seeded) from the original train; k-fold cross-validation over the 2K examples picks hyper-parameters."""
from __future__ import annotations

import random
from typing import Dict, List, Sequence, Tuple


def by_label(examples: Sequence) -> Dict:
    groups: Dict = {}
    for ex in examples:
        groups.setdefault(ex.label, []).append(ex)
    return groups


def _key(ex) -> str:
    return str(ex.guid)


def sample_per_label(examples: Sequence, k: int, seed: int, labels: Sequence | None = None,
                     what: str = "train", need: int | None = None) -> Tuple[List, List]:
    """(chosen, rest): exactly ``k`` examples of each label, chosen by ``seed`` independently of the
    input order. ``need`` (default k) is how many a label must have; ``labels`` names them in errors."""
    groups = by_label(examples)
    need = k if need is None else need
    present = sorted(set(groups) | set(range(len(labels or []))), key=str)
    for label in present:
        have = len(groups.get(label, []))
        if have < need:
            name = labels[label] if labels and isinstance(label, int) and label < len(labels) else label
            raise ValueError(f"protocol.k={k} needs {need} examples of label '{name}' in {what} but it has {have}: "
                             "lower protocol.k (few-shot takes K per label for train and K per label for dev)")
    rng = random.Random(seed)
    chosen, rest = [], []
    for label in sorted(groups, key=str):
        group = sorted(groups[label], key=_key)
        rng.shuffle(group)
        chosen += group[:k]
        rest += group[k:]
    rng.shuffle(chosen)
    return chosen, sorted(rest, key=_key)


def few_shot_splits(pool: Sequence, k: int, dev_k: int, seed: int, labels: Sequence | None = None,
                    train_source: Sequence | None = None) -> Tuple[List, List]:
    """(train, dev), disjoint: K per label each from ``pool`` (the original train); with
    ``train_source`` (FewGLUE's 32 examples) that is train and dev is sampled from the rest of ``pool``."""
    if train_source is not None:
        seen = {(ex.text_a, ex.text_b) for ex in train_source}
        rest = [ex for ex in pool if (ex.text_a, ex.text_b) not in seen]
        dev, _ = sample_per_label(rest, dev_k, seed, labels, what="train (minus the FewGLUE examples)")
        return list(train_source), dev
    sample_per_label(pool, k, seed, labels, need=k + dev_k)  # one clear error before sampling
    train, rest = sample_per_label(pool, k, seed, labels)
    dev, _ = sample_per_label(rest, dev_k, seed + 1, labels)
    return train, dev


def cv_folds(examples: Sequence, n_folds: int, seed: int) -> List[Tuple[List, List]]:
    """``n_folds`` (train, held) pairs: label-stratified, the held parts disjoint and covering ``examples``."""
    if n_folds < 2 or n_folds > len(examples):
        raise ValueError(f"protocol.cv_folds={n_folds} must be between 2 and the {len(examples)} examples")
    rng = random.Random(seed)
    parts: List[List] = [[] for _ in range(n_folds)]
    offset = 0
    for label in sorted(by_label(examples), key=str):
        group = sorted(by_label(examples)[label], key=_key)
        rng.shuffle(group)
        for i, ex in enumerate(group):  # deal round-robin, continuing where the last label stopped
            parts[(offset + i) % n_folds].append(ex)
        offset += len(group)
    return [([ex for j, p in enumerate(parts) if j != i for ex in p], parts[i]) for i in range(n_folds)]
