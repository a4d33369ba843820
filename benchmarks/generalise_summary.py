"""Issue #33's study across its four tasks, in two tables (docs/results/generalise_table.md).

    python benchmarks/generalise_summary.py      # writes docs/results/generalise_table.md and prints it

1. The reference study (groups generalise_mr / _subj / _mpqa / _agnews): every method's test accuracy per
   task, mean ± std (n seeds), then each instance-wise row against its own base (Prompt Tuning, or Prefix
   Tuning for the prefix rows and M-IDPG) with the issue's verdict: "within one std" when the row is no
   worse than its base by more than the larger of the two stds, "missed" otherwise, "n < 2" while either
   row has a single seed.
2. The fix (groups h33_fix_*): Prompt Tuning, the paper's PT + Random IPT, and the two fixed rows, with the
   same verdict and the per-seed paired difference of the kept fix (16 task + 4 instance) against Prompt
   Tuning.
Cells come from the finished runs under results/accuracy/<group>/ (benchmarks/accuracy.py writes them).
Beside the table, docs/results/generalise_table.png: a panel per task, every row's seeds and mean ± std,
over the bands the bar is read against (Prompt Tuning's and Prefix Tuning's mean ± std).
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import accuracy  # noqa: E402

TASKS = [("mr", "MR"), ("subj", "Subj"), ("mpqa", "MPQA"), ("agnews", "AG News")]


def cell(row) -> str:
    if not row["n"]:
        return "–"
    return f"{accuracy.pct(row['test_score'])} (n={row['n']})"


def verdict(row, base) -> str:
    """The issue's bar for one row against its base: Δ in points and whether it is within one std."""
    if not (row["n"] and base["n"]):
        return "–"
    d = 100 * (row["test_score"]["mean"] - base["test_score"]["mean"])
    if min(row["n"], base["n"]) < 2:
        return f"{d:+.2f} (n < 2)"
    spread = 100 * max(row["test_score"]["std"], base["test_score"]["std"])
    return f"{d:+.2f} ({'within one std' if d >= -spread else 'missed'}, bar ≥ −{spread:.2f})"


def group_rows(prefix: str, task: str, results_root: str):
    name = f"{prefix}_{task}"
    group = accuracy.load_group(name)
    return group, {r["method"]: r for r in accuracy.collect(group, os.path.join(results_root, name))}


def reference_table(results_root: str) -> str:
    tables = {t: group_rows("generalise", t, results_root) for t, _ in TASKS}
    methods = tables[TASKS[0][0]][0]["methods"]
    head = "| method | " + " | ".join(n for _, n in TASKS) + " |"
    rule = "|---|" + "---|" * len(TASKS)
    lines = ["Test accuracy, mean ± std (n seeds):", "", head, rule]
    for m in methods:
        lines.append(f"| {m['label']} | " + " | ".join(cell(tables[t][1][m["label"]]) for t, _ in TASKS) + " |")
    lines += ["", "Each instance-wise row against its base: Δ of the means in points, the issue's bar (no worse than "
              "the larger std), then the paired Δ per seed (same seed = same data draw):", "",
              "| method (base) | " + " | ".join(n for _, n in TASKS) + " |", rule]
    for m in methods:
        if not m.get("base"):
            continue
        cells = []
        for t, _ in TASKS:
            group, rows = tables[t]
            paired = per_seed_delta(group, rows[m["label"]], rows[m["base"]])
            judged = verdict(rows[m["label"]], rows[m["base"]])
            cells.append(judged if judged == "–" else f"{judged}; per seed {paired}")
        lines.append(f"| {m['label']} ({m['base']}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_seed_delta(group, row, base) -> str:
    """The row minus its base on each seed both have finished (same seed = same data draw)."""
    a, b = base["score_by_seed"], row["score_by_seed"]
    return " ".join(f"{b[s] - a[s]:+.1f}" for s in group["seeds"] if s in a and s in b) or "–"


def fix_table(results_root: str) -> str:
    lines = ["| task | Prompt Tuning | PT + Random IPT (paper: 4 task + 16 instance) | fix: PLM rows, table lr 3e-4 "
             "(4 + 16) | its Δ vs PT | fix with 16 task + 4 instance | its Δ vs PT | per-seed Δ of 16 + 4 |",
             "|---|---|---|---|---|---|---|---|"]
    for t, name in TASKS:
        group, rows = group_rows("h33_fix", t, results_root)
        pt, ipt, fix, kept = (rows[m["label"]] for m in group["methods"])  # the order the h33_fix groups declare
        paired = per_seed_delta(group, kept, pt)
        lines.append(f"| {name} | {cell(pt)} | {cell(ipt)} | {cell(fix)} | {verdict(fix, pt)} | {cell(kept)} | "
                     f"{verdict(kept, pt)} | {paired} |")
    return "\n".join(lines)


def build(results_root: str) -> str:
    return ("## The reference study (`generalise_*`)\n\n" + reference_table(results_root) +
            "\n\n## The fix (`h33_fix_*`)\n\n" + fix_table(results_root) + "\n")


FAMILY_COLOURS = {"Prompt Tuning": "#4c72b0", "Prefix Tuning": "#dd8452"}
FIX_COLOUR = "#55a868"
FIX_NAME = "fix: PLM rows, lr 3e-4, 16 + 4"


def figure_rows(task: str, results_root: str):
    """(label, row, colour) for one task's panel: the reference study's rows, then the kept fix."""
    group, rows = group_rows("generalise", task, results_root)
    out = [(m["label"], rows[m["label"]], FAMILY_COLOURS[m.get("base") or m["label"]]) for m in group["methods"]]
    fix_group, fix_rows = group_rows("h33_fix", task, results_root)
    out.append((FIX_NAME, fix_rows[fix_group["methods"][-1]["label"]], FIX_COLOUR))
    return out


def figure(results_root: str) -> bytes:
    """A panel per task: each row's seeds (dots) and mean ± std (bar), over its base's mean ± std band."""
    from openprompt_ipt.runner.plotting import png_bytes, pyplot

    fig, axes = pyplot().subplots(2, 2, figsize=(11, 9), squeeze=False)  # the four tasks
    for ax, (task, name) in zip(axes.flat, TASKS):
        rows = figure_rows(task, results_root)
        for base, colour in FAMILY_COLOURS.items():
            row = next(r for label, r, _ in rows if label == base)
            if row["n"] >= 2:  # one seed has no spread to draw
                mean, std = 100 * row["test_score"]["mean"], 100 * row["test_score"]["std"]
                ax.axhspan(mean - std, mean + std, color=colour, alpha=0.15, lw=0, label=f"{base} mean ± std")
        for x, (label, row, colour) in enumerate(rows):
            seeds = list(row["score_by_seed"].values())
            ax.scatter([x] * len(seeds), seeds, s=12, color=colour, alpha=0.45, zorder=3)
            if row["n"]:
                mean, std = 100 * row["test_score"]["mean"], 100 * (row["test_score"]["std"] or 0)
                ax.errorbar([x], [mean], yerr=[std], fmt="o", capsize=4, color=colour, zorder=4)
                ax.annotate(f"n={row['n']}", (x, mean), xytext=(5, 0), textcoords="offset points", fontsize=6,
                            va="center")
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([label for label, _, _ in rows], rotation=35, ha="right", fontsize=7)
        ax.set_title(name, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy (%)")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Issue #33, MiniLM, 2,000 training rows, 5 epochs: dots = seeds, bars = mean ± std", fontsize=10)
    return png_bytes(fig)


def main(argv=None) -> int:
    header = ("Issue #33 on MiniLM, 2,000 training rows, 5 epochs, test accuracy. "
              "`python benchmarks/generalise_summary.py`")
    groups = [f"{prefix}_{t}" for prefix in ("generalise", "h33_fix") for t, _ in TASKS]
    return accuracy.summary_cli(__doc__, "generalise_table.md", header, build, groups, argv, figure=figure)


if __name__ == "__main__":
    sys.exit(main())
