"""Metrics reported by the trainer: accuracy and macro-F1 for every classification task; binary tasks add
the positive class's F1 and the mean of accuracy and F1 (IDPG Table 1's MRPC / QQP score); MultiRC adds
F1a and EM; regression (STS-B) reports Pearson, Spearman and their mean (IDPG Table 1's STS-B score)."""
from __future__ import annotations

from typing import Dict, Hashable, Sequence

# names train.metric may select
METRICS = ("accuracy", "macro_f1", "f1", "acc_and_f1", "f1a", "em", "pearson", "spearman", "pearson_spearman")
REGRESSION_METRICS = ("pearson_spearman", "pearson", "spearman")


def classification_metrics(labels: Sequence[int], preds: Sequence[int]) -> Dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score

    if len(labels) == 0:
        raise ValueError("cannot compute metrics on an empty split")
    return {"accuracy": float(accuracy_score(labels, preds)),
            "macro_f1": float(f1_score(labels, preds, average="macro", zero_division=0))}


def binary_metrics(labels: Sequence[int], preds: Sequence[int]) -> Dict[str, float]:
    """GLUE's MRPC / QQP scores: F1 of the positive class (label 1) and the mean of accuracy and that F1."""
    from sklearn.metrics import f1_score

    scores = classification_metrics(labels, preds)
    f1 = float(f1_score(labels, preds, pos_label=1, average="binary", zero_division=0))
    return {"f1": f1, "acc_and_f1": (scores["accuracy"] + f1) / 2}


def _correlation(x, y) -> float:
    """Pearson's r; 0.0 when either side is constant (r is undefined there: a constant predictor ranks
    nothing, and a NaN would never be selected nor compared)."""
    import numpy as np

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = float(np.sqrt((x * x).sum() * (y * y).sum()))
    return float((x * y).sum() / denominator) if denominator > 0 else 0.0


def regression_metrics(labels: Sequence[float], preds: Sequence[float]) -> Dict[str, float]:
    """Pearson and Spearman correlation (Spearman = Pearson of the ranks, ties averaged) and their mean,
    plus the mean squared error on the training scale."""
    from scipy.stats import rankdata

    if len(labels) != len(preds):
        raise ValueError(f"labels and predictions differ in length: {len(labels)} vs {len(preds)}")
    if len(labels) < 2:
        raise ValueError(f"correlation needs at least 2 scored examples, got {len(labels)}")
    pearson = _correlation(labels, preds)
    spearman = _correlation(rankdata(labels), rankdata(preds))
    mse = sum((float(p) - float(y)) ** 2 for y, p in zip(labels, preds)) / len(labels)
    return {"pearson": pearson, "spearman": spearman, "pearson_spearman": (pearson + spearman) / 2, "mse": mse}


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
