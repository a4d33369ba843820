"""Experiment YAML: OpenPrompt's sections (dataset, plm, template, verbalizer, train, test) + ours.

``load_config`` reads the YAML, applies ``section.key=value`` overrides and rejects unknown keys
with the nearest valid name, because OpenPrompt's ``from_config`` silently drops them.
"""
from __future__ import annotations

import copy
import difflib
import inspect
from typing import Dict, Iterable, List

import yaml

DEFAULTS: Dict = {
    "seed": 42,
    "output_dir": None,
    "dataset": {"name": "cb", "path": None, "hub_name": None, "train_from": None, "dev_from_train": 0.2,
                "test_from_train": None, "max_train": None, "max_eval": None},
    "plm": {"model_path": "minilm", "freeze": True, "max_seq_length": 256},
    "template": "instance_wise",
    "verbalizer": "soft_verbalizer",
    "train": {"epochs": 10, "batch_size": 16, "lr_prompt": 3e-3, "lr_head": 1e-3, "lr_plm": 1e-5,
              "weight_decay": 0.0, "warmup_steps": 0, "warmup_ratio": 0.06, "gradient_accumulation_steps": 1,
              "max_grad_norm": 1.0, "metric": "accuracy", "device": "auto", "vocab_rows": "all",
              "checkpoint_every": 500, "keep_checkpoints": 1, "mixed_precision": "no"},
    "test": {"batch_size": 32},
}
FREE_SECTIONS = {"template", "verbalizer"}  # their values name the section holding the class arguments


def _nearest(key: str, valid: Iterable[str]) -> str:
    match = difflib.get_close_matches(key, list(valid), n=1)
    return f" (did you mean '{match[0]}'?)" if match else f" (valid: {sorted(valid)})"


def _merge(base: Dict, update: Dict, where: str, strict_sections: Dict) -> Dict:
    out = copy.deepcopy(base)
    for key, value in (update or {}).items():
        if where == "" and key not in base and key not in strict_sections:
            raise KeyError(f"unknown config key '{key}'{_nearest(key, list(base) + list(strict_sections))}")
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            for sub in value:
                if sub not in base[key]:
                    raise KeyError(f"unknown config key '{key}.{sub}'{_nearest(sub, base[key])}")
            out[key] = {**base[key], **value}
        else:
            out[key] = value
    return out


def class_arguments(cls) -> List[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "model", "tokenizer")]


def parse_override(text: str):
    if "=" not in text:
        raise ValueError(f"override '{text}' must look like section.key=value")
    path, value = text.split("=", 1)
    return path.split("."), yaml.safe_load(value)


def load_config(path: str, overrides: Iterable[str] = ()) -> Dict:
    import os

    if not os.path.isfile(path):
        raise FileNotFoundError(f"config file '{path}' not found")
    with open(path) as f:
        raw = yaml.safe_load(f) or {}
    for item in overrides:
        keys, value = parse_override(item)
        node = raw
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    template_name = raw.get("template", DEFAULTS["template"])
    verbalizer_name = raw.get("verbalizer", DEFAULTS["verbalizer"])
    sections = {template_name: raw.get(template_name, {}), verbalizer_name: raw.get(verbalizer_name, {})}
    config = _merge(DEFAULTS, raw, "", sections)
    _check_class_section(config, "template", template_name)
    _check_class_section(config, "verbalizer", verbalizer_name)
    return config


def _check_class_section(config: Dict, kind: str, name: str) -> None:
    import openprompt_ipt  # noqa: F401  (registers our templates)
    from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS

    registry = TEMPLATE_CLASS if kind == "template" else VERBALIZER_CLASS
    if name not in registry:
        raise KeyError(f"unknown {kind} '{name}'{_nearest(name, registry)}")
    valid = class_arguments(registry[name]) + ["file_path", "choice"]
    for key in config.get(name) or {}:
        if key not in valid:
            raise KeyError(f"unknown key '{name}.{key}' for {registry[name].__name__}{_nearest(key, valid)}")
