"""Per-epoch learning curves of runs: train loss, dev loss and dev score, as a table and a PNG.

    python experiments/plot_curves.py RUN_DIR [RUN_DIR ...] [--labels A B ...] --out docs/curves/x

RUN_DIR is one seed's run directory (the folder with ``log.csv``; it may still be training; a sweep's
seed directory: the point it selected). Each run is
labelled by its method and seed from ``metrics.json`` once finished, by its folder otherwise. The dev score
shown is the one the runs selected their best epoch by (``train.metric``), when they share it. Writes
``<out>.md`` and ``<out>.png`` (existing ones only with ``--overwrite``); on any error nothing is written.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.runner.aggregate import method_label  # noqa: E402
from openprompt_ipt.runner.run_dirs import logged_run  # noqa: E402
from openprompt_ipt.analysis.curves import curves_figure, curves_table, dev_metric, epoch_curve, run_metric  # noqa: E402


def default_label(run_dir: str) -> str:
    path = os.path.join(run_dir, "metrics.json")
    if os.path.isfile(path):
        with open(path) as f:
            rec = json.load(f)
        return f"{method_label(rec)}, seed {rec['seed']}" if "seed" in rec else method_label(rec)
    parts = os.path.normpath(run_dir).split(os.sep)
    return "/".join(parts[-2:])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run directories of one seed each (with log.csv)")
    p.add_argument("--labels", nargs="+", default=None, help="one label per run (default: method, seed)")
    p.add_argument("--title", default="", help="figure title")
    p.add_argument("--out", required=True, help="output stem: writes <out>.md and <out>.png (existing ones need "
                   "--overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace <out>.md / <out>.png if they exist")
    args = p.parse_args(argv)
    from openprompt_ipt.runner.plotting import check_stem, write_table_and_plot

    try:
        check_stem(args.out, overwrite=args.overwrite)  # another run's figure: kept unless told
        if args.labels is not None and len(args.labels) != len(args.runs):
            raise ValueError(f"{len(args.labels)} labels for {len(args.runs)} runs: give one label per run")
        labels = args.labels or [default_label(r) for r in args.runs]
        if len(set(labels)) != len(labels):
            raise ValueError(f"two runs share a label ({labels}): name them with --labels")
        logged = [logged_run(r) for r in args.runs]  # a sweep: its point
        curves = {label: epoch_curve(r) for label, r in zip(labels, logged)}
        selected = {run_metric(r) for r in logged}  # the score the runs picked their best epoch by, if one
        metric = dev_metric(curves, selected.pop() if len(selected) == 1 else None)
        md, png = curves_table(curves, metric), curves_figure(curves, args.title, metric)
        write_table_and_plot(args.out, md, png, args.overwrite)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
