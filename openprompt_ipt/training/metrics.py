"""Metrics reported by the trainer: accuracy and macro-F1 for every task; MultiRC adds F1a and EM."""
from __future__ import annotations

from typing import Dict, Hashable, Sequence

METRICS = ("accuracy", "macro_f1", "f1a", "em")  # names train.metric may select


def classification_metrics(labels: Sequence[int], preds: Sequence[int]) -> Dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score

    if len(labels) == 0:
        raise ValueError("cannot compute metrics on an empty split")
    return {"accuracy": float(accuracy_score(labels, preds)),
            "macro_f1": float(f1_score(labels, preds, average="macro", zero_division=0))}


def answer_metrics(labels: Sequence[int], preds: Sequence[int], groups: Sequence[Hashable]) -> Dict[str, float]:
    """MultiRC (SuperGLUE): F1a = binary F1 of the positive class (1 = a correct answer) over all
    answer options; EM = the fraction of questions (``groups``) whose options are all predicted right."""
    from sklearn.metrics import f1_score

    if not len(labels) == len(preds) == len(groups):
        raise ValueError(f"labels, preds and groups differ in length: {len(labels)}, {len(preds)}, {len(groups)}")
    if len(labels) == 0:
        raise ValueError("cannot compute metrics on an empty split")
    exact: Dict[Hashable, bool] = {}
    for y, p, g in zip(labels, preds, groups):
        exact[g] = exact.get(g, True) and int(y) == int(p)
    return {"f1a": float(f1_score(labels, preds, pos_label=1, average="binary", zero_division=0)),
            "em": sum(exact.values()) / len(exact)}
