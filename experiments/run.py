"""Train and evaluate one configuration: ``python experiments/run.py --config yamls/cb_random_ipt.yaml``.

Several processes / machines: ``accelerate launch [--num_processes N] [--cpu] experiments/run.py ...``
(see docs/training.md)."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.config import load_config  # noqa: E402
from openprompt_ipt.experiment import format_result, run_experiment  # noqa: E402
from openprompt_ipt.training.logs import format_summary  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", required=True, help="experiment YAML (see yamls/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set train.epochs=5 (repeatable)")
    p.add_argument("--data-root", default=None, help="folder holding superglue/CB etc. (default: $IPT_ASSETS or ../shared/assets)")
    p.add_argument("--output-dir", default=None, help="run directory (default: runs/<config name>/seed<seed>)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in the run directory")
    p.add_argument("--mixed-precision", choices=["no", "bf16", "fp16"], default=None,
                   help="autocast precision (same as --set train.mixed_precision=...)")
    p.add_argument("--gradient-accumulation-steps", type=int, default=None,
                   help="same as --set train.gradient_accumulation_steps=N")
    args = p.parse_args(argv)
    if args.mixed_precision:
        args.overrides.append(f"train.mixed_precision={args.mixed_precision}")
    if args.gradient_accumulation_steps:
        args.overrides.append(f"train.gradient_accumulation_steps={args.gradient_accumulation_steps}")
    try:
        cfg = load_config(args.config, args.overrides)
    except (KeyError, ValueError, FileNotFoundError) as e:
        p.error(str(e).strip("'\""))
    name = os.path.splitext(os.path.basename(args.config))[0]
    out = args.output_dir or cfg.get("output_dir") or os.path.join("runs", name, f"seed{cfg['seed']}")
    try:
        result = run_experiment(cfg, args.data_root, out, show_progress=not args.quiet, resume=args.resume)
    except (ValueError, FileNotFoundError, KeyError, ImportError, FloatingPointError) as e:
        print(f"error: {str(e).strip(chr(39) + chr(34))}", file=sys.stderr)
        return 2
    if int(os.environ.get("RANK", "0")) == 0:
        print(format_result(result))
        print(format_summary(result, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
