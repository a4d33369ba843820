"""Train and evaluate one configuration: ``python experiments/run.py --config yamls/cb_random_ipt.yaml``."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.config import load_config  # noqa: E402
from openprompt_ipt.experiment import format_result, run_experiment  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", required=True, help="experiment YAML (see yamls/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set train.epochs=5 (repeatable)")
    p.add_argument("--data-root", default=None, help="folder holding superglue/CB etc. (default: $IPT_ASSETS or ../shared/assets)")
    p.add_argument("--output-dir", default=None, help="run directory (default: runs/<config name>/seed<seed>)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except (KeyError, ValueError, FileNotFoundError) as e:
        p.error(str(e).strip("'\""))
    name = os.path.splitext(os.path.basename(args.config))[0]
    out = args.output_dir or cfg.get("output_dir") or os.path.join("runs", name, f"seed{cfg['seed']}")
    try:
        result = run_experiment(cfg, args.data_root, out, show_progress=not args.quiet)
    except (ValueError, FileNotFoundError, KeyError, ImportError) as e:
        print(f"error: {str(e).strip(chr(39) + chr(34))}", file=sys.stderr)
        return 2
    print(format_result(result))
    print(f"run directory: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
