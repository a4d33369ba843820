"""Rebuild the packaged BoolQ sample (openprompt_ipt/data/packaged/superglue/BoolQ/val.jsonl) from a
BoolQ dev file: ``python experiments/make_packaged_data.py ../shared/assets/superglue/BoolQ/val.jsonl``.

A seeded random 400 of the 3,270 labelled dev rows, kept byte-for-byte and in source order, so the
quick start runs on a fresh clone (BoolQ is CC BY-SA 3.0: see LICENSE.md beside the file)."""
from __future__ import annotations

import argparse
import os
import random
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "openprompt_ipt", "data", "packaged",
                   "superglue", "BoolQ", "val.jsonl")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", help="BoolQ dev jsonl (SuperGLUE layout: question, passage, idx, label)")
    p.add_argument("--rows", type=int, default=400)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=OUT, help="where to write (default: the packaged file)")
    args = p.parse_args(argv)
    with open(args.source) as f:
        lines = [line for line in f if line.strip()]
    if args.rows > len(lines):
        print(f"error: --rows {args.rows} > the {len(lines)} rows of {args.source}", file=sys.stderr)
        return 2
    keep = sorted(random.Random(args.seed).sample(range(len(lines)), args.rows))
    tmp = args.out + ".tmp"  # nothing half-written: replace the file only once it is complete
    with open(tmp, "w") as f:
        f.writelines(lines[i] for i in keep)
    os.replace(tmp, args.out)
    print(f"wrote {args.rows} rows to {os.path.normpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
