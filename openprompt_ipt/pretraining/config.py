"""Pretraining YAML (``yamls/pretrain_*.yaml``): defaults, ``section.key=value`` overrides, and
unknown keys rejected with the nearest valid name (same rules as the experiment YAMLs)."""
from __future__ import annotations

import os
from typing import Dict, Iterable

from ..runner.config import merge_config, read_yaml_with_overrides
from ..runner.run_dirs import RUN_COMMAND

DEFAULTS: Dict = {
    "name": "textcnn",          # export folder: exports/<name>-<backbone>
    "seed": 42,
    "output_dir": None,
    "plm": {"model_path": "minilm"},  # whose tokenizer (and input embeddings) the table lines up with
    "corpus": {"mapping": "yamls/corpus_13cat.yaml", "max_length": 64, "min_tokens": 3, "max_per_category": 800,
               "balance": "cap", "dev_fraction": 0.1, "test_fraction": 0.1},
    "classifier": {"encoder": "textcnn", "dim": None, "hidden": 128, "kernel_sizes": [3, 5, 7], "dropout": 0.3,
                   "pool": "max", "embedding_init": "plm", "sparse": True},
    "train": {"epochs": 6, "batch_size": 32, "lr": 1e-3, "lr_embedding": 1e-3, "weight_decay": 0.0, "patience": 2,
              "max_grad_norm": 5.0, "max_minutes": None, "metric": "macro_f1", "device": "cpu"},
}
EMBEDDING_INITS = ("plm", "random")
POOLINGS = ("max", "mean")  # the classifier's token poolings (here, import-light, for the early check)


def load_pretrain_config(path: str, overrides: Iterable[str] = (), run_command: str = RUN_COMMAND) -> Dict:
    """``run_command``: what trains a run where the user is (an experiment config given here names it)."""
    raw = read_yaml_with_overrides(path, overrides, hint=" (see yamls/pretrain_textcnn.yaml)", expect="categories",
                                   run_command=run_command)
    return validate(merge_config(DEFAULTS, raw, "", {}))


def validate(cfg: Dict) -> Dict:
    from ..runner.schema import PRETRAIN, check_values

    check_values(cfg, schema=PRETRAIN)  # types and ranges: one table in runner/schema.py
    c = cfg["classifier"]
    if c["embedding_init"] not in EMBEDDING_INITS:
        raise ValueError(f"classifier.embedding_init must be one of {list(EMBEDDING_INITS)}, got '{c['embedding_init']}'")
    if cfg["train"]["metric"] not in ("accuracy", "macro_f1"):
        raise ValueError(f"train.metric must be 'accuracy' or 'macro_f1', got '{cfg['train']['metric']}'")
    if c["pool"] not in POOLINGS:  # checked here too: before the corpus is built, not after
        raise ValueError(f"classifier.pool must be one of {list(POOLINGS)}, got '{c['pool']}'")
    from ..training.distributed import resolve_device

    resolve_device(cfg["train"]["device"])
    return cfg


def backbone_alias(model_path: str) -> str:
    return os.path.basename(os.path.normpath(str(model_path))) or str(model_path)


def default_output_dir(cfg: Dict) -> str:
    return os.path.join("exports", f"{cfg['name']}-{backbone_alias(cfg['plm']['model_path'])}")
