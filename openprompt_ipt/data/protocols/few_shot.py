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


def balanced_quotas(counts: Dict, total: int) -> Dict:
    """Per-label counts summing to ``total``, as equal as the labels' sizes allow (water-filling;
    leftovers go to the labels in sorted order)."""
    if total > sum(counts.values()):
        raise ValueError(f"protocol.k: {total} examples needed but the training data has {sum(counts.values())}")
    quota = {label: 0 for label in counts}
    left = total
    while left:
        open_labels = sorted((lab for lab in counts if quota[lab] < counts[lab]), key=str)
        share = max(1, left // len(open_labels))
        for lab in open_labels:
            take = min(share, counts[lab] - quota[lab], left)
            quota[lab] += take
            left -= take
            if not left:
                break
    return quota


def sample_total(examples: Sequence, k: int, dev_k: int, seed: int) -> Tuple[List, List]:
    """(train, dev) of K and dev_k examples in total, balanced across labels as far as they allow
    (IPT appendix A.3: "32 samples ... keep the samples across labels balanced"; CB has 16 neutral)."""
    groups = by_label(examples)
    both = balanced_quotas({lab: len(g) for lab, g in groups.items()}, k + dev_k)
    train_q = balanced_quotas(both, k)
    rng = random.Random(seed)
    train, dev = [], []
    for label in sorted(groups, key=str):
        group = sorted(groups[label], key=_key)
        rng.shuffle(group)
        train += group[:train_q[label]]
        dev += group[train_q[label]:both[label]]
    rng.shuffle(train)
    rng.shuffle(dev)
    return train, dev


def few_shot_splits(pool: Sequence, k: int, dev_k: int, seed: int, labels: Sequence | None = None,
                    train_source: Sequence | None = None, per: str = "label") -> Tuple[List, List]:
    """(train, dev), disjoint: K per label each from ``pool`` (the original train), or with
    ``per="total"`` K in total, balanced as far as the labels allow; with ``train_source``
    (FewGLUE's 32 examples) that is train and dev is sampled from the rest of ``pool``."""
    if per not in ("label", "total"):
        raise ValueError(f"protocol.k_per must be 'label' or 'total', got {per!r}")
    if train_source is not None:
        seen = {(ex.text_a, ex.text_b) for ex in train_source}
        rest = [ex for ex in pool if (ex.text_a, ex.text_b) not in seen]
        if per == "total":
            return list(train_source), sample_total(rest, 0, dev_k, seed)[1]
        dev, _ = sample_per_label(rest, dev_k, seed, labels, what="train (minus the FewGLUE examples)")
        return list(train_source), dev
    if per == "total":
        return sample_total(pool, k, dev_k, seed)
    sample_per_label(pool, k, seed, labels, need=k + dev_k)  # one clear error before sampling
    train, rest = sample_per_label(pool, k, seed, labels)
    dev, _ = sample_per_label(rest, dev_k, seed + 1, labels)
    return train, dev


def cv_folds(examples: Sequence, n_folds: int, seed: int) -> List[Tuple[List, List]]:
    """``n_folds`` (train, held) pairs: label-stratified, the held parts disjoint and covering ``examples``;
    answer-level examples (MultiRC) by whole paragraphs, so no question is both trained on and held out."""
    if n_folds < 2 or n_folds > len(examples):
        raise ValueError(f"protocol.cv_folds={n_folds} must be between 2 and the {len(examples)} examples")
    if _paragraph(examples[0]) is not None:
        return _paragraph_folds(examples, n_folds, seed)
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


def _paragraph(example):
    """The paragraph an answer-level example (MultiRC) belongs to, as ``splits.held_out_split`` keeps it whole."""
    return (getattr(example, "meta", None) or {}).get("paragraph")


def _paragraph_folds(examples: Sequence, n_folds: int, seed: int) -> List[Tuple[List, List]]:
    """Folds of whole paragraphs (seeded), each to the fold with the fewest examples so far: a question split
    across folds would be trained on with its other answers while one is scored as held out."""
    units: Dict[str, List] = {}
    for ex in sorted(examples, key=_key):
        units.setdefault(str(_paragraph(ex)), []).append(ex)
    if len(units) < n_folds:
        raise ValueError(f"protocol.cv_folds={n_folds} needs at least {n_folds} paragraphs (answers of one paragraph "
                         f"stay in one fold) but the {len(examples)} examples come from {len(units)}: lower cv_folds")
    keys = sorted(units)
    random.Random(seed).shuffle(keys)
    parts: List[List] = [[] for _ in range(n_folds)]
    for k in keys:
        min(parts, key=len).extend(units[k])
    return [([ex for j, p in enumerate(parts) if j != i for ex in p], parts[i]) for i in range(n_folds)]
