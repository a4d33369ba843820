"""Nearest vocabulary tokens of a trained run's prompt vectors (IPT §5.4 / Table 4 case study):

    python experiments/nearest_tokens.py --run runs/cb_random_ipt/seed42 --input rows.jsonl --top-k 5

Rows are JSON objects in the task's own format (CB: premise, hypothesis; an optional label/idx). For
each example and each prompt vector the run puts into the input (instance_wise: task prompt + instance
prompt; generated_prefix with injection: input; then the text's {"soft"} tokens, soft 1..), prints the top-k tokens whose input word embeddings
are nearest by cosine similarity (special and [unused*] tokens skipped). Markdown to stdout by
default; --output writes .md (markdown) or .json (an existing file is kept unless --overwrite; the --input
file never).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import openprompt_ipt  # noqa: E402,F401  (compat shims before openprompt)
from openprompt_ipt.analysis.nearest_tokens import format_markdown, nearest_tokens_for_run  # noqa: E402
from openprompt_ipt.commands.predict import check_output  # noqa: E402
from openprompt_ipt.commands.prog import sibling  # noqa: E402
from openprompt_ipt.runner.predict import load_run, read_jsonl  # noqa: E402
from openprompt_ipt.serialization import emit_text  # noqa: E402


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def rows_with_idx(rows, text: str, where: str):
    """The rows whose ``idx`` is in the comma-separated ``text``, in its order (every row with that idx).
    An idx may be written as a number or a string in the file: 12 and "12" both match."""
    wanted = [t.strip() for t in text.split(",")]
    if not all(t.lstrip("-").isdigit() for t in wanted):
        raise ValueError(f"--idx '{text}' must be comma-separated integers, e.g. 0,1,12")
    by_idx = {}
    for row in rows:
        if isinstance(row, dict) and row.get("idx") is not None:
            by_idx.setdefault(str(row["idx"]), []).append(row)
    if not by_idx:
        raise ValueError(f"--idx: the rows of {where} have no 'idx' field: use --max-examples, or add idx to the rows")
    missing = [int(t) for t in wanted if str(int(t)) not in by_idx]
    if missing:
        ints = sorted(int(k) for k in by_idx if k.lstrip("-").isdigit())
        known = f"idx values {ints[0]}..{ints[-1]}" if ints else f"no integer idx (e.g. '{next(iter(by_idx))}')"
        raise ValueError(f"--idx {missing} not found in {where}: its rows carry {known}")
    return [row for t in wanted for row in by_idx[str(int(t))]]


@contextlib.contextmanager
def quiet_loading():
    """No weight-loading progress bars or label-word warnings: the output is the report, or one error line."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="run directory written by experiments/run.py")
    p.add_argument("--input", required=True, help="JSONL file of rows in the task's format")
    p.add_argument("--top-k", type=positive_int, default=5, help="tokens per prompt vector (default 5)")
    p.add_argument("--idx", default=None, help="only the rows whose 'idx' is in this comma-separated list, e.g. 0,1,12 "
                   "(read official rows straight from the data root)")
    p.add_argument("--max-examples", type=positive_int, default=None, help="only the first N rows of --input")
    p.add_argument("--output", default=None, help="write here instead of stdout: .md (markdown) or .json; an existing "
                   "file needs --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an --output file that already exists")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    args = p.parse_args(argv)
    try:
        if args.output and os.path.splitext(args.output)[1].lower() not in (".md", ".json"):
            raise ValueError(f"--output '{args.output}' must end in .md or .json")
        check_output(args.output, args.input, args.overwrite, "report")  # a finished report, or the rows, kept unless told
        if not os.path.isdir(args.run):
            raise FileNotFoundError(f"run directory '{args.run}' not found")
        rows = read_jsonl(args.input)
        if args.idx:
            rows = rows_with_idx(rows, args.idx, args.input)
        if args.max_examples:
            rows = rows[:args.max_examples]
        with quiet_loading():
            trains = sibling(argv, p.prog, "nearest_tokens", "run")  # experiments/run.py, beside this script
            predictor = load_run(args.run, device=args.device, run_command=trains)
            report = nearest_tokens_for_run(predictor, rows, top_k=args.top_k)
        as_json = bool(args.output) and args.output.lower().endswith(".json")
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n" if as_json else format_markdown(report)
        emit_text(text, args.output, f"{len(report['examples'])} examples", args.overwrite)  # another's: kept
    except (ValueError, FileNotFoundError, KeyError, ImportError) as e:
        for line in (e.lines + [e.summary] if hasattr(e, "lines") else [str(e).strip(chr(39) + chr(34))]):
            print(f"error: {line}", file=sys.stderr)  # data.rows.BadRows: a line per bad row, then what to do
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
