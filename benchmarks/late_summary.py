"""Issue #41's study (docs/results/late_table.md and .png): late, instance-aware prompts on the four reference tasks.

    python benchmarks/late_summary.py      # writes docs/results/late_table.md (+ .png) and prints it

1. The layer sweep: LPT-NPG on MR at seed 1, late_layer 1..5 at two prompt rates (dev accuracy picks l and the
   rate; test shown, not used), from results/sweeps/mr_lpt_npg_layer_sweep_lr{1,3}/.
2. The groups late_mr / _subj / _mpqa / _agnews: every row's test accuracy per task, mean ± std (n seeds).
3. The issue's target per instance-aware row: above Prompt Tuning by more than one std (the larger of the two
   rows') on at least 3 of the 4 tasks, and not below Prefix Tuning by more than one std on any; with the paired
   per-seed Δ against Prompt Tuning.
"""
from __future__ import annotations

import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import accuracy  # noqa: E402
from generalise_summary import TASKS, cell, group_rows, per_seed_delta  # noqa: E402

BASES = ("Prompt Tuning", "Prefix Tuning", "P-tuning v2", "M-IDPG-PHM")  # what the late rows are set against
SWEEPS = {"0.001": "mr_lpt_npg_layer_sweep_lr1", "0.003": "mr_lpt_npg_layer_sweep_lr3"}


def sweep_points(sweeps_root: str):
    """{rate: {late_layer: (dev accuracy, test accuracy)}} of the finished sweep points."""
    out = {}
    for rate, name in SWEEPS.items():
        for path in sorted(glob.glob(os.path.join(sweeps_root, name, "seed1", "late_layer=*", "metrics.json"))):
            layer = int(os.path.basename(os.path.dirname(path)).split("=")[1])
            with open(path) as f:
                m = json.load(f)
            out.setdefault(rate, {})[layer] = (100 * m["best_dev"]["accuracy"], 100 * m["test"]["accuracy"])
    return out


def sweep_table(points) -> str:
    if not points:
        return "No sweep point has finished yet."
    layers = sorted({l for p in points.values() for l in p})
    lines = ["| lr_prompt | " + " | ".join(f"l = {l}" for l in layers) + " |", "|---|" + "---|" * len(layers)]
    for rate, p in points.items():
        lines.append(f"| {rate} | " + " | ".join(f"{p[l][0]:.1f} / {p[l][1]:.1f}" if l in p else "–" for l in layers)
                     + " |")
    best = max(((d, -l, rate, l) for rate, p in points.items() for l, (d, _) in p.items()))
    return ("MR, seed 1, LPT-NPG (t = 5, bottleneck 128): dev / test accuracy. Dev picks; ties go to the lower "
            "layer (a shorter backward).\n\n" + "\n".join(lines) +
            f"\n\nBest on dev: late_layer {best[3]}, lr_prompt {best[2]} (dev {best[0]:.1f}).")


def judge(row, base, above: bool):
    """(Δ in points, met?) for the target: above the base by more than one std (``above``), or not below it by
    more than one std. None while either row has fewer than 2 seeds."""
    if min(row["n"], base["n"]) < 2:
        return None
    d = 100 * (row["test_score"]["mean"] - base["test_score"]["mean"])
    spread = 100 * max(row["test_score"]["std"], base["test_score"]["std"])
    return d, (d > spread if above else d >= -spread), spread


def target_table(tables) -> str:
    methods = [m for m in tables[TASKS[0][0]][0]["methods"] if m["label"] not in BASES]
    lines = ["| row | " + " | ".join(n for _, n in TASKS) + " | above PT on | not below Prefix on | target |",
             "|---|" + "---|" * len(TASKS) + "---|---|---|"]
    for m in methods:
        cells, above, kept, judged = [], 0, 0, 0
        for t, _ in TASKS:
            group, rows = tables[t]
            row, pt, prefix = rows[m["label"]], rows["Prompt Tuning"], rows["Prefix Tuning"]
            a, b = judge(row, pt, True), judge(row, prefix, False)
            if a is None or b is None:
                cells.append("n < 2" if row["n"] else "–")
                continue
            judged += 1
            above += a[1]
            kept += b[1]
            cells.append(f"vs PT {a[0]:+.1f} ({'>' if a[1] else '≤'} {a[2]:.1f}); vs Prefix {b[0]:+.1f}; "
                         f"per seed vs PT {per_seed_delta(group, row, pt)}")
        verdict = "–" if judged < len(TASKS) else ("**met**" if above >= 3 and kept == len(TASKS) else "missed")
        lines.append(f"| {m['label']} | " + " | ".join(cells) + f" | {above} of {judged} | {kept} of {judged} | "
                     f"{verdict} |")
    return "\n".join(lines)


def build(results_root: str) -> str:
    tables = {t: group_rows("late", t, results_root) for t, _ in TASKS}
    methods = tables[TASKS[0][0]][0]["methods"]
    lines = ["| method | " + " | ".join(n for _, n in TASKS) + " |", "|---|" + "---|" * len(TASKS)]
    for m in methods:
        lines.append(f"| {m['label']} | " + " | ".join(cell(tables[t][1][m["label"]]) for t, _ in TASKS) + " |")
    sweeps = os.path.join(os.path.dirname(results_root), "sweeps")
    return ("## The layer sweep\n\n" + sweep_table(sweep_points(sweeps)) +
            "\n\n## Test accuracy, mean ± std (n seeds)\n\n" + "\n".join(lines) +
            "\n\n## The target (issue #41)\n\nAbove Prompt Tuning by more than the larger std on ≥ 3 of 4 tasks, and "
            "not below Prefix Tuning by more than the larger std on any:\n\n" + target_table(tables) + "\n")


def figure(results_root: str) -> bytes:
    """Left: the sweep (dev accuracy against late_layer, one line per rate). Right four: each task's rows."""
    from openprompt_ipt.runner.plotting import png_bytes, pyplot

    fig, axes = pyplot().subplots(1, 5, figsize=(20, 4.8), squeeze=False)
    ax = axes[0][0]
    for rate, p in sweep_points(os.path.join(os.path.dirname(results_root), "sweeps")).items():
        layers = sorted(p)
        ax.plot(layers, [p[l][0] for l in layers], "o-", label=f"dev, lr {rate}")
        ax.plot(layers, [p[l][1] for l in layers], "x--", alpha=0.5, label=f"test, lr {rate}")
    ax.set_xlabel("late_layer (of 6)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("MR layer sweep, LPT-NPG, seed 1", fontsize=9)
    ax.legend(fontsize=7)
    for ax, (task, name) in zip(axes[0][1:], TASKS):
        group, rows = group_rows("late", task, results_root)
        labels = [m["label"] for m in group["methods"]]
        for x, label in enumerate(labels):
            row = rows[label]
            colour = "#4c72b0" if label in BASES else "#c44e52"
            seeds = list(row["score_by_seed"].values())
            ax.scatter([x] * len(seeds), seeds, s=12, color=colour, alpha=0.45, zorder=3)
            if row["n"]:
                mean, std = 100 * row["test_score"]["mean"], 100 * (row["test_score"]["std"] or 0)
                ax.errorbar([x], [mean], yerr=[std], fmt="o", capsize=4, color=colour, zorder=4)
        pt = rows["Prompt Tuning"]
        if pt["n"] >= 2:
            mean, std = 100 * pt["test_score"]["mean"], 100 * pt["test_score"]["std"]
            ax.axhspan(mean - std, mean + std, color="#4c72b0", alpha=0.12, lw=0)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=7)
        ax.set_title(name, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Issue #41, MiniLM, 2,000 training rows, 5 epochs: bases blue (PT's mean ± std shaded), late rows "
                 "red; dots = seeds", fontsize=10)
    fig.tight_layout()
    return png_bytes(fig)


def main(argv=None) -> int:
    header = ("Issue #41 on MiniLM, 2,000 training rows, 5 epochs, test accuracy. "
              "`python benchmarks/late_summary.py`")
    return accuracy.summary_cli(__doc__, "late_table.md", header, build, [f"late_{t}" for t, _ in TASKS], argv,
                                figure=figure)


if __name__ == "__main__":
    sys.exit(main())
