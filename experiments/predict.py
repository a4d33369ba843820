"""Predict with a trained run: ``python experiments/predict.py --run runs/cb_random_ipt/seed42 --input rows.jsonl``.

Rows are JSON objects in the task's own format (CB: premise, hypothesis; an optional label/idx).
Writes one JSON line per example: guid, predicted label and the probability of every label. A row whose
text is null, a number or empty is never scored: each is one error line (--skip-bad-rows: the others are
predicted and each bad row is named on stderr).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import openprompt_ipt  # noqa: E402,F401  (compat shims before openprompt)
from openprompt_ipt.data.rows import BadRows  # noqa: E402
from openprompt_ipt.runner.predict import load_run, read_jsonl  # noqa: E402
from openprompt_ipt.serialization import emit_text  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--run", required=True, help="run directory written by experiments/run.py")
    p.add_argument("--input", required=True, help="JSONL file of rows in the task's format")
    p.add_argument("--output", default=None, help="JSONL file for the predictions (default: stdout)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="predict the other rows when some have a null / number / empty text (each is named on stderr)")
    args = p.parse_args(argv)
    skipped = []

    def skip(line):
        skipped.append(line)
        print(f"skipped: {line}", file=sys.stderr)

    try:
        rows = read_jsonl(args.input)
        predictions = load_run(args.run, device=args.device).predict(rows, on_bad_row=skip if args.skip_bad_rows else None)
    except BadRows as e:  # one line per bad row, then what to do; nothing is written
        for line in e.lines + [e.summary]:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, KeyError, ImportError) as e:
        print(f"error: {str(e).strip(chr(39) + chr(34))}", file=sys.stderr)
        return 2
    lines = "".join(json.dumps(r) + "\n" for r in predictions)
    emit_text(lines, args.output, f"{len(predictions)} predictions" + (f" ({len(skipped)} bad rows skipped)" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
