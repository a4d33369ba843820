"""Tables (markdown + CSV) and sweep plots from run directories:
``openprompt-ipt aggregate runs/cb_* [--out tables]`` (docs/protocols.md)."""
from __future__ import annotations

import argparse
import os
import sys

from ..runner.aggregate import aggregate, earlier_outputs, earlier_refusal
from ..runner.run_dirs import check_output_folder


def main(argv=None, prog=None) -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__)
    p.add_argument("runs", nargs="+", help="run directories or globs (runs/<config name>, runs/cb_*)")
    p.add_argument("--out", default=None, help="folder for results.md/.csv and sweep_<key>.md/.csv/.png (one an "
                   "earlier aggregate wrote needs --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier aggregate's tables in --out, and "
                   "remove its sweep files this one does not write")
    args = p.parse_args(argv)
    try:
        if args.out:
            check_output_folder(args.out, "--out")  # before the tables are computed
            earlier = earlier_outputs(args.out)
            if earlier and not args.overwrite:  # another set of runs' tables: kept unless told
                raise ValueError(earlier_refusal(args.out, earlier))
        files = aggregate(args.runs, args.out, args.overwrite)
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
