"""PPT prompt pre-training (Gu et al.; IPT Table 2's PPT row): pre-train the downstream experiment's soft
prompt / prefix on 3-way next-sentence prediction over offline Wikipedia, export it for init_prompt_from.

    python experiments/pretrain_ppt.py --config yamls/pretrain_ppt.yaml [--set train.epochs=2]

Rerunning the same command after an interruption resumes (state in <output>.partial/); docs/pretraining.md.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="PPT YAML (yamls/pretrain_ppt.yaml, yamls/pretrain_ppt_prefix.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set corpus.pairs=600 (repeatable)")
    p.add_argument("--data-root", default=None, help="folder holding corpora/wiki_vital (default: $IPT_ASSETS or ../shared/assets)")
    p.add_argument("--output-dir", default=None, help="export folder (default: exports/<name>-<backbone>-<template>)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished export / discard an interrupted run")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    try:
        import torch

        from openprompt_ipt.pretraining.ppt import format_info, load_ppt_config, run_ppt

        if args.threads:
            torch.set_num_threads(args.threads)
        cfg = load_ppt_config(args.config, args.overrides)
        info = run_ppt(cfg, args.data_root, args.output_dir, overwrite=args.overwrite, show_progress=not args.quiet)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume (state is kept in <output>.partial)", file=sys.stderr)
        return 130
    print(format_info(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
