"""The two pretraining commands: ``openprompt-ipt pretrain categories`` (IPT §4.2: the 13-category corpus,
a TextCNN / LSTM / MLP classifier, its embedding table and classifier exported) and ``openprompt-ipt
pretrain ppt`` (PPT prompt pre-training on 3-way next-sentence prediction, exported for init_prompt_from).
docs/pretraining.md."""
from __future__ import annotations

import argparse
from typing import List, Optional

from ..config_files import config_search_dirs
from ..pretraining.cli import run_pretraining_cli

CATEGORIES_DOC = """Category pretraining (IPT §4.2): build the 13-category corpus, train a TextCNN / LSTM / MLP
classifier, and export the embedding table (strategy: pretrained) and the classifier (strategy: encoder).

    openprompt-ipt pretrain categories --config pretrain_textcnn.yaml [--set train.epochs=3]
"""

PPT_DOC = """PPT prompt pre-training (Gu et al.; IPT Table 2's PPT row): pre-train the downstream experiment's soft
prompt / prefix on 3-way next-sentence prediction over offline Wikipedia, export it for init_prompt_from.

    openprompt-ipt pretrain ppt --config pretrain_ppt.yaml [--set train.epochs=2]

After an interruption the same command with --resume continues (state in <output>.partial/); docs/pretraining.md.
"""


def _config(args) -> str:
    from ..runner.config import find_config

    return find_config(args.config, config_search_dirs())  # a bare shipped name works from any directory


def _trains(args, command: str) -> str:
    """What trains a run where the user ran ``command`` (``openprompt-ipt run``, or a clone's experiments/run.py)."""
    from .prog import sibling

    return sibling(getattr(args, "argv", None), getattr(args, "prog", None), command, "run")


def run_categories(args: argparse.Namespace) -> str:
    from ..pretraining.config import load_pretrain_config
    from ..pretraining.pipeline import format_metrics, run_pretraining

    cfg = load_pretrain_config(_config(args), args.overrides, _trains(args, "pretrain_categories"))
    return format_metrics(run_pretraining(cfg, args.data_root, args.output_dir, overwrite=args.overwrite,
                                          resume=args.resume, show_progress=not args.quiet))


def run_ppt(args: argparse.Namespace) -> str:
    from ..pretraining.ppt import format_info, load_ppt_config, run_ppt as run

    cfg = load_ppt_config(_config(args), args.overrides, _trains(args, "pretrain_ppt"))
    return format_info(run(cfg, args.data_root, args.output_dir, overwrite=args.overwrite,
                           resume=args.resume, show_progress=not args.quiet))


def categories(argv: Optional[List[str]] = None, prog: Optional[str] = None, doc: str = CATEGORIES_DOC) -> int:
    return run_pretraining_cli(argv, doc, "pretraining YAML (pretrain_{textcnn,lstm,mlp}.yaml)",
                               "train.epochs=3", "export folder (default: exports/<name>-<backbone>)",
                               run_categories, prog=prog)


def ppt(argv: Optional[List[str]] = None, prog: Optional[str] = None, doc: str = PPT_DOC) -> int:
    return run_pretraining_cli(argv, doc, "PPT YAML (pretrain_ppt.yaml, pretrain_ppt_prefix.yaml)",
                               "corpus.pairs=600", "export folder (default: exports/<name>-<backbone>-<template>)",
                               run_ppt, prog=prog)
