"""PPT prompt pre-training (Gu et al.; IPT Table 2's PPT row): pre-train the downstream experiment's soft
prompt / prefix on 3-way next-sentence prediction over offline Wikipedia, export it for init_prompt_from.

    python experiments/pretrain_ppt.py --config yamls/pretrain_ppt.yaml [--set train.epochs=2]

After an interruption the same command with --resume continues (state in <output>.partial/); docs/pretraining.md.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.pretraining.cli import run_pretraining_cli  # noqa: E402


def run(args) -> str:
    from openprompt_ipt.pretraining.ppt import format_info, load_ppt_config, run_ppt

    cfg = load_ppt_config(args.config, args.overrides)
    return format_info(run_ppt(cfg, args.data_root, args.output_dir, overwrite=args.overwrite,
                               resume=args.resume, show_progress=not args.quiet))


def main(argv=None) -> int:
    return run_pretraining_cli(argv, __doc__, "PPT YAML (yamls/pretrain_ppt.yaml, yamls/pretrain_ppt_prefix.yaml)",
                               "corpus.pairs=600", "export folder (default: exports/<name>-<backbone>-<template>)", run)


if __name__ == "__main__":
    sys.exit(main())
