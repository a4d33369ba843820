"""Category pretraining (IPT §4.2): build the 13-category corpus, train a TextCNN / LSTM / MLP
classifier, and export the embedding table (strategy: pretrained) and the classifier (strategy: encoder).

    python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml [--set train.epochs=3]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="pretraining YAML (yamls/pretrain_{textcnn,lstm,mlp}.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set train.epochs=3 (repeatable)")
    p.add_argument("--data-root", default=None, help="folder holding corpora/, agnews/ ... (default: $IPT_ASSETS or ../shared/assets)")
    p.add_argument("--output-dir", default=None, help="export folder (default: exports/<name>-<backbone>)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished export / discard an interrupted run")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    try:
        import torch

        from openprompt_ipt.pretraining.config import load_pretrain_config
        from openprompt_ipt.pretraining.pipeline import format_metrics, run_pretraining

        if args.threads:
            torch.set_num_threads(args.threads)
        cfg = load_pretrain_config(args.config, args.overrides)
        metrics = run_pretraining(cfg, args.data_root, args.output_dir, overwrite=args.overwrite,
                                  show_progress=not args.quiet)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as e:
        print(f"error: {str(e).strip(chr(39) + chr(34))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume (state is kept in <output>.partial)", file=sys.stderr)
        return 130
    print(format_metrics(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
