"""Tables (markdown + CSV) and sweep plots from run directories:
``openprompt-ipt aggregate runs/cb_* [--out tables]`` (docs/protocols.md)."""
from __future__ import annotations

import argparse
import os
import sys

from ..runner.aggregate import aggregate
from ..runner.run_dirs import check_output_folder


def main(argv=None, prog=None) -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__)
    p.add_argument("runs", nargs="+", help="run directories or globs (runs/<config name>, runs/cb_*)")
    p.add_argument("--out", default=None, help="folder for results.md/.csv and sweep_<key>.md/.csv/.png")
    args = p.parse_args(argv)
    try:
        if args.out:
            check_output_folder(args.out, "--out")  # before the tables are computed
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
