"""Classification metrics reported by the trainer."""
from __future__ import annotations

from typing import Dict, Sequence


def classification_metrics(labels: Sequence[int], preds: Sequence[int]) -> Dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score

    if len(labels) == 0:
        raise ValueError("cannot compute metrics on an empty split")
    return {"accuracy": float(accuracy_score(labels, preds)),
            "macro_f1": float(f1_score(labels, preds, average="macro", zero_division=0))}
