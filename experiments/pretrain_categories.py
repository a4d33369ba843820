"""Category pretraining (IPT §4.2): build the 13-category corpus, train a TextCNN / LSTM / MLP
classifier, and export the embedding table (strategy: pretrained) and the classifier (strategy: encoder).

    python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml [--set train.epochs=3]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.pretraining.cli import run_pretraining_cli  # noqa: E402


def run(args) -> str:
    from openprompt_ipt.pretraining.config import load_pretrain_config
    from openprompt_ipt.pretraining.pipeline import format_metrics, run_pretraining

    cfg = load_pretrain_config(args.config, args.overrides)
    return format_metrics(run_pretraining(cfg, args.data_root, args.output_dir, overwrite=args.overwrite,
                                          resume=args.resume, show_progress=not args.quiet))


def main(argv=None) -> int:
    return run_pretraining_cli(argv, __doc__, "pretraining YAML (yamls/pretrain_{textcnn,lstm,mlp}.yaml)",
                               "train.epochs=3", "export folder (default: exports/<name>-<backbone>)", run)


if __name__ == "__main__":
    sys.exit(main())
