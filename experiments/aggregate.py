"""Tables (markdown + CSV) and sweep plots from run directories:
``python experiments/aggregate.py runs/cb_* [--out docs/results]`` (docs/protocols.md)."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.runner.aggregate import aggregate  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("runs", nargs="+", help="run directories or globs (runs/<config name>, runs/cb_*)")
    p.add_argument("--out", default=None, help="folder for results.md/.csv and sweep_<key>.md/.csv/.png")
    args = p.parse_args(argv)
    try:
        files = aggregate(args.runs, args.out)
    except (ValueError, FileNotFoundError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    print(files["results.md"])
    for name, content in files.items():
        if name.startswith("sweep_") and name.endswith(".md"):
            print(content)
    if args.out:
        print(f"wrote {', '.join(os.path.join(args.out, n) for n in files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
