"""The experiment YAML's defaults and section names: the bottom of the runner's imports (config,
the OpenPrompt-schema mapping and the checks all read them; this module reads none of them)."""
from __future__ import annotations

import difflib
from typing import Dict, Iterable

DEFAULTS: Dict = {
    "seed": 42,
    "output_dir": None,
    "dataset": {"name": "cb", "path": None, "hub_name": None, "train_from": None, "dev_from_train": 0.2,
                "test_from_train": None, "max_train": None, "max_eval": None,
                # your own data: columns, labels, files, encoding (data/custom.py). skip_bad_rows (any task):
                # skip rows with a null / number / empty text or a wrong field count, and say how many
                "columns": None, "labels": None, "files": None, "skip_bad_rows": False, "encoding": "utf-8"},
    # model_name (optional, OpenPrompt's plm.model_name): must match the checkpoint's model_type
    "plm": {"model_path": "minilm", "model_name": None, "freeze": True, "max_seq_length": 256, "frozen_dropout": False},
    "template": "instance_wise",
    "verbalizer": "soft_verbalizer",
    "train": {"epochs": 10, "batch_size": 16, "lr_prompt": 3e-3, "lr_head": 1e-3, "lr_plm": 1e-5,
              "lr_instance": None,  # the instance-wise generator's rate (IPT table/encoder, IDPG); null: lr_prompt
              "weight_decay": 0.0, "adam_betas": [0.9, 0.999], "adam_eps": 1e-8, "scheduler": "linear",
              "warmup_steps": 0, "warmup_ratio": 0.06, "gradient_accumulation_steps": 1,
              "max_grad_norm": 1.0, "metric": "accuracy", "device": "auto", "vocab_rows": "all",
              "checkpoint_every": 500, "checkpoint_minutes": 5.0, "keep_checkpoints": 1, "mixed_precision": "no",
              "max_steps": None},  # optimizer steps, rounded up to whole epochs; set: wins over epochs
    "test": {"batch_size": 32},
    # data protocol (docs/protocols.md): full | few_shot (IPT §5.1) | low_resource (IDPG §4.4)
    "protocol": {"name": "full", "k": None, "k_per": "label", "dev_k": None, "cv_folds": 4, "train_source": None, "dev_size": 1000},
    # held_out: select on dev, report on a split not used for selection. on_eval_set: the authors'
    # notebook protocol (best-on-val checkpoint's val score reported) - never the default, always labelled
    "selection": "held_out",
    # start from a finished run's prompt (+ head when labels match; init_head: auto|true|false), IDPG A.4
    "init_from": None, "init_head": "auto",
    # start the task-level prompt / prefix from a PPT export (experiments/pretrain_ppt.py, docs/pretraining.md)
    "init_prompt_from": None,
    "sweep": {},  # grid: {"section.key": [values, ...]}; best point on dev (few-shot: k-fold CV) per seed
}
PROTOCOLS = ("full", "few_shot", "low_resource")
SELECTIONS = ("held_out", "on_eval_set")


def did_you_mean(key: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``valid``, else empty."""
    match = difflib.get_close_matches(key, list(valid), n=1)
    return f" (did you mean '{match[0]}'?)" if match else ""


def nearest_or_valid(key, valid: Iterable) -> str:
    """``did_you_mean``, else `` (valid: [...])``; keys of any type (a YAML may write ``1:``)."""
    valid = [str(v) for v in valid]
    return did_you_mean(str(key), valid) or f" (valid: {sorted(valid)})"


def flat_keys(node: Dict, prefix: str = "") -> Dict:
    """``{"train": {"lr_prompt": x}}`` -> ``{"train.lr_prompt": x}`` (nested mappings to dotted keys)."""
    flat: Dict = {}
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flat_keys(value, path + "."))
        else:
            flat[path] = value
    return flat
