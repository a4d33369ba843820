"""IDPG Table 1's GLUE columns from the four study groups, beside the paper's numbers (issue #30).

    python benchmarks/glue_summary.py            # writes docs/results/glue_table1.md and prints it

Reads the finished runs of glue_mrpc / glue_stsb / glue_qnli / glue_qqp (benchmarks/accuracy_groups.yaml):
each cell is the group's score (MRPC / QQP mean of accuracy and F1, STS-B mean of Pearson and Spearman,
QNLI accuracy), mean ± std over the finished seeds, with n; the paper's roberta-large value follows in
brackets. A second table says, per task, whether the paper's two orderings hold here: S-IDPG-PHM vs Prompt
Tuning and M-IDPG-PHM vs P-tuning v2, and LPT's (issue #41): LPT-MPPG vs Prompt Tuning (each needs n >= 2 on both
rows, else "n < 2"). The LPT row has no paper number (IDPG Table 1 has no LPT row).
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import accuracy  # noqa: E402

TASKS = [("glue_mrpc", "MRPC"), ("glue_stsb", "STS-B"), ("glue_qnli", "QNLI"), ("glue_qqp", "QQP")]
ORDERINGS = [("S-IDPG-PHM", "Prompt Tuning (t = 5)"), ("M-IDPG-PHM", "P-tuning v2"),
             ("LPT-MPPG", "Prompt Tuning (t = 5)")]  # the last: LPT's claim (Liu et al. 2022), issue #41


def cell(row) -> str:
    s = row["test_score"]
    if not s.get("n"):
        return "–"
    spread = f" ± {100 * s['std']:.1f}" if s["n"] > 1 else ""
    return f"{100 * s['mean']:.1f}{spread} (n={s['n']})"


def ordering(rows, method: str, base: str) -> str:
    a, b = rows[method]["test_score"], rows[base]["test_score"]
    if min(a.get("n", 0), b.get("n", 0)) < 2:
        return "n < 2" if a.get("n") and b.get("n") else "not run"
    d = 100 * (a["mean"] - b["mean"])
    spread = 100 * max(a["std"], b["std"])
    word = "holds" if d > spread else ("reversed" if d < -spread else "within one std")
    return f"{d:+.1f} ({word})"


def build(results_root: str) -> str:
    tables = {}
    for group_name, _ in TASKS:
        group = accuracy.load_group(group_name)
        tables[group_name] = (group, {r["method"]: r for r in accuracy.collect(group, os.path.join(results_root, group_name))})
    methods = [m["label"] for m in tables[TASKS[0][0]][0]["methods"]]
    lines = ["| method | " + " | ".join(t for _, t in TASKS) + " |", "|---|" + "---|" * len(TASKS)]
    for m in methods:
        cells = []
        for group_name, _ in TASKS:
            row = tables[group_name][1][m]
            cells.append(cell(row) + (f" [{row['paper']:.1f}]" if row.get("paper") is not None else ""))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "| the paper's ordering | " + " | ".join(t for _, t in TASKS) + " |", "|---|" + "---|" * len(TASKS)]
    for method, base in ORDERINGS:
        lines.append(f"| {method} > {base} | " + " | ".join(ordering(tables[g][1], method, base) for g, _ in TASKS) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    header = ("Ours: MiniLM, 5 epochs, mean ± std (n seeds); [the paper: roberta-large, IDPG Table 1]. "
              "`python benchmarks/glue_summary.py`")
    return accuracy.summary_cli(__doc__, "glue_table1.md", header, build, [g for g, _ in TASKS], argv)


if __name__ == "__main__":
    sys.exit(main())
