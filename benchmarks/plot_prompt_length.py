"""IPT Figure 5's two curves in one figure: test accuracy vs the number of prompt vectors before the
text, for an IPT sweep and its Prompt Tuning baseline swept to the same sizes.

    python benchmarks/plot_prompt_length.py results/sweeps/cb_prompt_length_sweep \
        results/sweeps/cb_prompt_length_sweep_pt --out docs/prompt_length/pt_vs_ipt --overwrite

The two sweeps vary different keys (``instance_wise.prompt_length`` = L instance vectors after 4 task
vectors; ``instance_wise.task_prompt_length`` = 4 + L task vectors), so ``experiments/aggregate.py``
plots them apart. Here each run's x is read from its own config.json: task vectors + instance vectors,
i.e. the prompt positions the PLM sees. Writes ``<out>.md`` (table, with the IPT − PT difference of the
means) and ``<out>.png``; existing ones only with ``--overwrite`` (the line above regenerates the
committed figure).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import OrderedDict
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from openprompt_ipt.runner.aggregate import fmt, find_metrics, load_records, method_label, primary_metric  # noqa: E402
from openprompt_ipt.runner.runs import mean_std  # noqa: E402


def prompt_positions(config: Dict, where: str) -> int:
    """Prompt vectors an instance_wise run puts before the text: task vectors + (instance vectors unless
    the strategy is 'none', i.e. plain Prompt Tuning)."""
    iw = config.get("instance_wise")
    if config.get("template") != "instance_wise" or not isinstance(iw, dict):
        raise ValueError(f"{where} is not an instance_wise run (template {config.get('template')!r}); "
                         "this plot compares InstanceWiseTemplate sweeps")
    n = int(iw.get("task_prompt_length") or 0)
    if iw.get("strategy", "none") != "none":
        n += int(iw.get("prompt_length") or 0)
    return n


def collect(paths: List[str]) -> Tuple[Dict[str, Dict[int, List[float]]], str]:
    """series label -> {prompt positions -> test scores over seeds}; and the metric's name."""
    series: Dict[str, Dict[int, List[float]]] = OrderedDict()
    metrics = set()
    for rec in load_records(find_metrics(paths)):
        if rec.get("level") != "sweep_point" or "test" not in rec:
            continue
        cfg_path = os.path.join(os.path.dirname(rec["_file"]), "config.json")
        if not os.path.isfile(cfg_path):
            raise FileNotFoundError(f"no config.json beside {rec['_file']}: the run directory is incomplete")
        with open(cfg_path) as f:
            x = prompt_positions(json.load(f), cfg_path)
        metric = primary_metric(rec)
        metrics.add(metric)
        series.setdefault(method_label(rec), {}).setdefault(x, []).append(rec["test"][metric])
    if not series:
        raise ValueError(f"no sweep points under {paths}: run experiments/run.py on a sweep YAML first")
    if len(metrics) > 1:
        raise ValueError(f"the sweeps report different metrics {sorted(metrics)}: compare runs of one task")
    return series, metrics.pop()


def table(series: Dict[str, Dict[int, List[float]]], metric: str) -> str:
    xs = sorted({x for pts in series.values() for x in pts})
    lines = [f"test {metric} (×100, mean ± std over seeds) vs prompt positions before the text", "",
             "| series | " + " | ".join(str(x) for x in xs) + " |", "|---|" + "---:|" * len(xs)]
    stats = {label: {x: mean_std(v) for x, v in pts.items()} for label, pts in series.items()}
    for label, by_x in stats.items():
        lines.append(f"| {label} | " + " | ".join(fmt(by_x[x]) if x in by_x else "-" for x in xs) + " |")
    if len(stats) == 2:  # the question of Figure 5: does the instance part beat more task vectors?
        (a, sa), (b, sb) = stats.items()
        diff = [f"{100 * (sa[x]['mean'] - sb[x]['mean']):+.1f}" if x in sa and x in sb else "-" for x in xs]
        lines.append(f"| {a} − {b} | " + " | ".join(diff) + " |")
    return "\n".join(lines) + "\n"


def plot(series: Dict[str, Dict[int, List[float]]], metric: str) -> bytes:
    from openprompt_ipt.runner.plotting import png_bytes, pyplot

    fig, ax = pyplot().subplots(figsize=(6, 4))
    for i, (label, pts) in enumerate(series.items()):
        xs = sorted(pts)
        stats = [mean_std(pts[x]) for x in xs]
        dodge = 1 + 0.03 * (i - (len(series) - 1) / 2)  # side by side, so error bars at one x do not overlap
        ax.errorbar([x * dodge for x in xs], [100 * s["mean"] for s in stats], yerr=[100 * s["std"] for s in stats], marker="o",
                    capsize=3, label=f"{label} (n={max(s['n'] for s in stats)})")
    ax.set_xscale("log")  # 9 … 104 positions: equal steps per doubling, as the sweep is laid out
    ticks = sorted({x for pts in series.values() for x in pts})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("prompt vectors before the text")
    ax.set_ylabel(f"test {metric} (%)")
    ax.set_title("test score vs prompt length (cf. IPT Figure 5)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return png_bytes(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="sweep run directories (results/sweeps/<config name>)")
    p.add_argument("--out", required=True, help="output stem: writes <out>.md and <out>.png (existing ones need "
                   "--overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace <out>.md / <out>.png if they exist")
    args = p.parse_args(argv)
    from openprompt_ipt.runner.plotting import check_stem, write_table_and_plot

    try:
        check_stem(args.out, overwrite=args.overwrite)  # another figure there: kept unless told
        series, metric = collect(args.runs)
        write_table_and_plot(args.out, table(series, metric), plot(series, metric), args.overwrite)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
