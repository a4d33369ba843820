"""Per-epoch learning curves of runs, from their ``log.csv``: does a method learn, stall or memorise?

A run's final test score cannot tell a method that never fits the training set (train loss stuck at
the chance level) from one that memorises it (train loss falling, dev loss rising): both end near the
majority rate. The per-epoch train loss, dev loss and dev score side by side can. ``log.csv`` is
written as the run goes, so the curves of an unfinished run are readable too.
"""
from __future__ import annotations

import os
from typing import Dict, Sequence, Tuple

from ..training.logs import CSV_FILE, read_log

Curve = Dict[int, Dict[str, float]]  # epoch -> {"train_loss", "dev_loss", "dev_<metric>", ...}


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


def dev_metric(curves: Dict[str, Curve]) -> str:
    """The dev score every curve has (accuracy first): what the third panel plots."""
    names = [set(k[4:] for point in c.values() for k in point if k.startswith("dev_") and k != "dev_loss")
             for c in curves.values()]
    shared = set.intersection(*names) if names else set()
    if not shared:
        raise ValueError("the runs share no dev metric: compare runs of one task")
    return "accuracy" if "accuracy" in shared else sorted(shared)[0]


def curves_table(curves: Dict[str, Curve]) -> str:
    """Markdown, one column per epoch; per run three rows: train loss, dev loss, dev score (×100)."""
    metric = dev_metric(curves)
    epochs = sorted({e for c in curves.values() for e in c})
    lines = ["| run | epoch | " + " | ".join(str(e) for e in epochs) + " |", "|---|---|" + "---:|" * len(epochs)]
    rows = (("train_loss", "train loss", "{:.3f}", 1.0), ("dev_loss", "dev loss", "{:.3f}", 1.0),
            ("dev_" + metric, f"dev {metric}", "{:.1f}", 100.0))
    for label, c in curves.items():
        for i, (key, name, form, scale) in enumerate(rows):
            cells = [form.format(scale * c[e][key]) if key in c.get(e, {}) else "-" for e in epochs]
            lines.append(f"| {label if i == 0 else ''} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def curves_figure(curves: Dict[str, Curve], title: str = "") -> bytes:
    """Three panels over epochs (train loss, dev loss, dev score), one line per run; PNG bytes."""
    from ..runner.plotting import png_bytes, pyplot

    metric = dev_metric(curves)
    panels: Sequence[Tuple[str, str, float]] = (("train_loss", "train loss", 1.0), ("dev_loss", "dev loss", 1.0),
                                                ("dev_" + metric, f"dev {metric} (%)", 100.0))
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
