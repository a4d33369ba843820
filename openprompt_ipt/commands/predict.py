"""Predict with a trained run: ``openprompt-ipt predict --run runs/cb_random_ipt --input rows.jsonl``
(``--run``: the directory the run printed; one seed's, e.g. ``runs/cb_random_ipt/seed42``, when it ran several).

Rows are JSON objects in the task's own format (CB: premise, hypothesis; an optional label/idx).
Writes one JSON line per example: guid, predicted label and the probability of every label, then the
row's own fields the task does not read (an id, a source: named once on stderr). A row whose
text is null, a number or empty (or a regression score that is not a number) is never scored: each is one error
line (--skip-bad-rows: the others are predicted and each bad row is named on stderr). An --output file that
exists is kept unless --overwrite says to replace it; the input file itself is never an output.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from .prog import invoked_as, sibling
from ..runner.run_dirs import check_output_folder


def check_output(output, input_path, overwrite: bool, what: str = "predictions") -> None:
    """The output (``what``: predictions, a report) never replaces the input rows, nor an existing file unless
    ``--overwrite`` (a finished result is kept unless the user says so): a ValueError naming the file and the fix."""
    if not output:
        return
    if os.path.exists(input_path) and os.path.exists(output) and os.path.samefile(output, input_path):
        raise ValueError(f"--output '{output}' is the --input file: the {what} would replace its rows; "
                         "give another --output file")
    if os.path.isdir(output):
        raise ValueError(f"--output '{output}' is a directory: give a file name, e.g. {os.path.join(output, 'preds.jsonl')}")
    check_output_folder(os.path.dirname(output), "--output", output)  # a file named as its folder
    if os.path.exists(output) and not overwrite:
        raise ValueError(f"--output '{output}' already exists: --overwrite replaces it, or give another --output file")


def main(argv=None, prog=None) -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__)
    p.add_argument("--run", required=True,
                   help="the run directory the run printed: <output dir>/<config> (one seed) or its seed<k>")
    p.add_argument("--input", required=True, help="JSONL file of rows in the task's format")
    p.add_argument("--output", default=None,
                   help="JSONL file for the predictions (default: stdout); an existing file needs --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an --output file that already exists")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="predict the other rows when some have a null / number / empty / missing text or a non-numeric score "
                        "(each is named on stderr)")
    args = p.parse_args(argv)
    # torch / OpenPrompt load after the arguments and the run directory are checked (issue #32)
    from openprompt_ipt.runner.run_dirs import find_run

    skipped = []

    def skip(line):
        skipped.append(line)
        print(f"skipped: {line}", file=sys.stderr)

    try:
        check_output(args.output, args.input, args.overwrite)  # before the run loads: seconds, not a minute
        trains = sibling(argv, p.prog, "predict", "run")  # what trains a run, as the user runs commands
        run_dir = find_run(args.run, trains)
        from openprompt_ipt.runner.predict import load_run, read_jsonl
        from openprompt_ipt.serialization import emit_text

        rows = read_jsonl(args.input)
        predictor = load_run(run_dir, device=args.device, run_command=trains)
        predictor.skip_hint = f"{invoked_as(argv, p.prog, 'predict')} --skip-bad-rows"  # the command the user ran
        predictions = predictor.predict(rows, on_bad_row=skip if args.skip_bad_rows else None)
        if predictor.precision_note():
            print(predictor.precision_note(), file=sys.stderr)
        if predictor.extra_note():  # an id, a source column: kept in the output rows, named once
            print(predictor.extra_note(), file=sys.stderr)
        lines = "".join(json.dumps(r) + "\n" for r in predictions)
        note = f"{len(predictions)} predictions" + (f" ({len(skipped)} bad rows skipped)" if skipped else "")
        emit_text(lines, args.output, note, args.overwrite)  # a file another process wrote meanwhile: kept
    except (ValueError, FileNotFoundError, KeyError, ImportError) as e:
        if hasattr(e, "lines"):  # data.rows.BadRows: one line per bad row, then what to do; nothing is written
            for line in e.lines + [e.summary]:
                print(f"error: {line}", file=sys.stderr)
        else:
            print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    return 0
