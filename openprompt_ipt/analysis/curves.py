"""Per-epoch learning curves of runs, from their ``log.csv``: does a method learn, stall or memorise?

A run's final test score cannot tell a method that never fits the training set (train loss stuck at
the chance level) from one that memorises it (train loss falling, dev loss rising): both end near the
majority rate. The per-epoch train loss, dev loss and dev score side by side can. ``log.csv`` is
written as the run goes, so the curves of an unfinished run are readable too.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Optional, Sequence, Tuple

from ..training.logs import CSV_FILE, read_log

Curve = Dict[int, Dict[str, float]]  # epoch -> {"train_loss", "dev_loss", "dev_<metric>", ...}
ERRORS = {"mse"}  # dev values where lower is better: never the default score, never scaled to %


def epoch_curve(run_dir: str) -> Curve:
    """The finished epochs of one run: ``train/epoch_loss`` and every ``dev/<name>`` logged at its end."""
    path = os.path.join(run_dir, CSV_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {CSV_FILE} in {run_dir}: pass a run directory of one seed "
                                "(e.g. runs/cb_prompt_tuning/seed1)")
    curve: Curve = {}
    for row in read_log(path):
        name = row["name"]
        if name == "train/epoch_loss":
            curve.setdefault(row["epoch"], {})["train_loss"] = row["value"]
        elif name.startswith("dev/"):
            curve.setdefault(row["epoch"], {})["dev_" + name[4:]] = row["value"]
    if not curve:
        raise ValueError(f"{path} has no finished epoch yet: wait for the first epoch's end")
    return dict(sorted(curve.items()))


def run_metric(run_dir: str) -> Optional[str]:
    """The dev score the run selected its best epoch by (its config.json's ``train.metric``), if recorded."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            metric = json.load(f)["train"]["metric"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return metric if isinstance(metric, str) else None


def dev_metric(curves: Dict[str, Curve], preferred: Optional[str] = None) -> str:
    """The dev score every curve has, what the third panel plots: ``preferred`` (the runs' selection
    metric) when all have it, else accuracy, else the mean of Pearson and Spearman (STS-B), else the
    first score by name; an error such as the MSE of a regression run (the dev loss again) comes last."""
    names = [set(k[4:] for point in c.values() for k in point if k.startswith("dev_") and k != "dev_loss")
             for c in curves.values()]
    shared = set.intersection(*names) if names else set()
    if not shared:
        raise ValueError("the runs share no dev metric: compare runs of one task")
    for name in (preferred, "accuracy", "pearson_spearman"):
        if name in shared:
            return name
    return sorted(shared, key=lambda k: (k in ERRORS, k))[0]


def _score_row(metric: str) -> Tuple[str, float]:
    """The third row's key and scale: scores in %, errors as logged."""
    return "dev_" + metric, (1.0 if metric in ERRORS else 100.0)


def curves_table(curves: Dict[str, Curve], metric: Optional[str] = None) -> str:
    """Markdown, one column per epoch; per run three rows: train loss, dev loss, dev score (×100; an
    error such as mse as logged). ``metric``: the dev score to show (default :func:`dev_metric`)."""
    metric = metric or dev_metric(curves)
    key, scale = _score_row(metric)
    epochs = sorted({e for c in curves.values() for e in c})
    lines = ["| run | epoch | " + " | ".join(str(e) for e in epochs) + " |", "|---|---|" + "---:|" * len(epochs)]
    rows = (("train_loss", "train loss", "{:.3f}", 1.0), ("dev_loss", "dev loss", "{:.3f}", 1.0),
            (key, f"dev {metric}", "{:.1f}" if scale == 100.0 else "{:.3f}", scale))
    for label, c in curves.items():
        for i, (key, name, form, scale) in enumerate(rows):
            cells = [form.format(scale * c[e][key]) if key in c.get(e, {}) else "-" for e in epochs]
            lines.append(f"| {label if i == 0 else ''} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def curves_figure(curves: Dict[str, Curve], title: str = "", metric: Optional[str] = None) -> bytes:
    """Three panels over epochs (train loss, dev loss, dev score), one line per run; PNG bytes."""
    from ..runner.plotting import png_bytes, pyplot

    metric = metric or dev_metric(curves)
    key, scale = _score_row(metric)
    panels: Sequence[Tuple[str, str, float]] = (("train_loss", "train loss", 1.0), ("dev_loss", "dev loss", 1.0),
                                                (key, f"dev {metric}" + (" (%)" if scale == 100.0 else ""), scale))
    fig, axes = pyplot().subplots(1, 3, figsize=(11, 3.4))
    for ax, (key, name, scale) in zip(axes, panels):
        for label, c in curves.items():
            xs = [e for e in c if key in c[e]]
            ax.plot(xs, [scale * c[e][key] for e in xs], marker="o", markersize=3, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    return png_bytes(fig)
