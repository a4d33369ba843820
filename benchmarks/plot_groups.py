"""Finished accuracy groups in one figure: a panel per group, test accuracy mean ± std per method as a
point with error bars, the paper's number as a marker beside it.

    python benchmarks/plot_groups.py --groups sst2_table5 agnews_table5 imdb_table5 \
        --out docs/img/table5.png --overwrite

Reads the tables ``benchmarks/accuracy.py`` wrote (``docs/results/<group>.csv``), so it plots exactly
what the markdown tables say. An existing ``--out`` is replaced only with ``--overwrite`` (the line above
regenerates the committed figure).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import textwrap
from typing import Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # accuracy.py's load_group


def read_table(path: str) -> List[Dict]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no table {path}: run python benchmarks/accuracy.py --group "
                                f"{os.path.splitext(os.path.basename(path))[0]} first")
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["test_acc_mean"]]
    if not rows:
        raise ValueError(f"{path} has no finished runs")
    return rows


def plot(tables: Dict[str, List[Dict]], out: str, titles: Dict[str, str], overwrite: bool = True) -> None:
    from openprompt_ipt.runner.plotting import png_bytes, pyplot, write_new_files

    fig, axes = pyplot().subplots(1, len(tables), figsize=(4.2 * len(tables), 4.0), squeeze=False)
    for ax, (name, rows) in zip(axes[0], tables.items()):
        xs = list(range(len(rows)))
        means = [100 * float(r["test_acc_mean"]) for r in rows]
        stds = [100 * float(r["test_acc_std"] or 0) for r in rows]
        # points with error bars, not bars: the y axis does not start at 0
        ax.errorbar(xs, means, yerr=stds, fmt="o", capsize=4, color="#4c72b0", label="ours (mean ± std)")
        paper = [(x, float(r["paper"])) for x, r in zip(xs, rows) if r.get("paper")]
        if paper:
            ax.scatter([x + 0.15 for x, _ in paper], [p for _, p in paper], marker="D", color="#dd8452", zorder=3,
                       label="paper (roberta-large)")
        for x, m, r in zip(xs, means, rows):
            ax.annotate(f"{m:.1f} (n={r['n']})", (x, m), xytext=(6, 0), textcoords="offset points",
                        va="center", fontsize=7)
        ax.set_xlim(-0.5, len(rows) - 0.3)
        ax.set_xticks(xs)
        ax.set_xticklabels([r["method"] for r in rows], rotation=25, ha="right", fontsize=8)
        ax.set_title(textwrap.fill(titles.get(name, name), 45), fontsize=9)
        ax.set_ylabel("test accuracy (%)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="best")
    write_new_files({out: png_bytes(fig)}, overwrite=overwrite)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", nargs="+", required=True, help="groups of benchmarks/accuracy_groups.yaml")
    p.add_argument("--tables", default=os.path.join(ROOT, "docs", "results"), help="where the group tables are")
    p.add_argument("--out", required=True, help="PNG to write (an existing one needs --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    args = p.parse_args(argv)
    from accuracy import load_group
    from openprompt_ipt.runner.plotting import check_new_file
    from openprompt_ipt.runner.run_dirs import check_output_folder

    try:
        if os.path.isdir(args.out):
            raise ValueError(f"--out '{args.out}' is a folder: give a file name in it, e.g. "
                             f"{os.path.join(args.out, 'groups.png')}")
        check_output_folder(os.path.dirname(args.out), "--out", args.out)
        if not args.overwrite:
            check_new_file([args.out])  # another figure there: kept unless told
        tables = {g: read_table(os.path.join(args.tables, f"{g}.csv")) for g in args.groups}
        titles = {g: load_group(g)["title"] for g in args.groups}
        plot(tables, args.out, titles, args.overwrite)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
