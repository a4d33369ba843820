"""One configuration end to end: data -> PLM -> template/verbalizer (via OpenPrompt's registry)
-> train with best-on-dev selection -> report on a split not used for selection.

Protocol: SuperGLUE's official validation set is the only labelled evaluation set, so a seeded,
label-stratified part of *train* (``dataset.dev_from_train``) is the dev set that picks the best
epoch, and the official validation set is reported as test.
"""
from __future__ import annotations

import json
import os
import random
import time
from typing import Dict, List, Sequence

import torch

DEFAULT_DATA_ROOT = os.path.join("..", "shared", "assets")


def data_root(explicit: str | None = None) -> str:
    return explicit or os.environ.get("IPT_ASSETS") or DEFAULT_DATA_ROOT


def resolve_data_path(path: str, root: str) -> str:
    """A path relative to the data root if it exists there; otherwise as given (a dir or a hub name)."""
    candidate = os.path.join(root, path)
    return candidate if not os.path.isabs(path) and os.path.isdir(candidate) else path


def stratified_split(examples: Sequence, fraction: float, seed: int):
    """(train, dev): ``fraction`` of each label's examples go to dev, chosen by ``seed``."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"dataset.dev_from_train must be in (0, 1), got {fraction}")
    by_label: Dict[int, List] = {}
    for ex in examples:
        by_label.setdefault(ex.label, []).append(ex)
    rng = random.Random(seed)
    train, dev = [], []
    for label in sorted(by_label, key=str):
        group = by_label[label][:]
        rng.shuffle(group)
        n_dev = max(1, round(len(group) * fraction)) if len(group) > 1 else 0
        dev += group[:n_dev]
        train += group[n_dev:]
    rng.shuffle(train)
    return train, dev


def seen_vocab_ids(examples: Sequence, tokenizer) -> List[int]:
    ids = set()
    for ex in examples:
        for text in (ex.text_a, ex.text_b):
            if text:
                ids.update(tokenizer(text, add_special_tokens=False)["input_ids"])
    return sorted(ids)


def load_task(cfg: Dict, root: str):
    from .data import PAIR_TASKS, load_pair_task

    ds = cfg["dataset"]
    if ds["name"] not in PAIR_TASKS:
        raise ValueError(f"unknown dataset '{ds['name']}': this version ships {sorted(PAIR_TASKS)} "
                         "(more tasks come with the runner)")
    path = resolve_data_path(ds["path"], root)
    full_train = load_pair_task(ds["name"], path, "train", ds.get("hub_name"))
    test = load_pair_task(ds["name"], path, "validation", ds.get("hub_name"))
    if ds.get("max_train"):
        full_train = full_train[: int(ds["max_train"])]
    train, dev = stratified_split(full_train, float(ds["dev_from_train"]), cfg["seed"])
    return train, dev, test, PAIR_TASKS[ds["name"]]


def build_model(cfg: Dict, train_examples, num_classes: int):
    from openprompt import PromptForClassification
    from openprompt.prompts import load_template, load_verbalizer
    from yacs.config import CfgNode

    from .plm import load_backbone

    model, tokenizer, wrapper_class = load_backbone(cfg["plm"]["model_path"])
    section = dict(cfg.get(cfg["template"]) or {})
    if cfg["train"].get("vocab_rows") == "seen":  # restrict vocab tables to ids the training text uses
        if cfg["template"] == "instance_wise":
            section["vocab_rows"] = seen_vocab_ids(train_examples, tokenizer)
        elif str(section.get("generator", "")).startswith("ipt_"):
            section["ipt"] = {**(section.get("ipt") or {}), "vocab_rows": seen_vocab_ids(train_examples, tokenizer)}
    verb_section = {"num_classes": num_classes, **(cfg.get(cfg["verbalizer"]) or {})}
    node = CfgNode({"template": cfg["template"], cfg["template"]: section,
                    "verbalizer": cfg["verbalizer"], cfg["verbalizer"]: verb_section}, new_allowed=True)
    template = load_template(node, model=model, tokenizer=tokenizer)
    verbalizer = load_verbalizer(node, model=model, tokenizer=tokenizer)
    freeze = bool(cfg["plm"]["freeze"])
    prompt_model = PromptForClassification(model, template, verbalizer, freeze_plm=freeze, plm_eval_mode=freeze)
    return prompt_model, tokenizer, wrapper_class


def method_name(cfg: Dict) -> str:
    """A short readable name of the configured prompt method."""
    section = cfg.get(cfg["template"]) or {}
    if cfg["template"] != "generated_prefix":
        return str(section.get("strategy", cfg["template"]))
    gen = section.get("generator", "prefix")
    if gen == "idpg":
        idpg = section.get("idpg") or {}
        depth = "S" if idpg.get("depth") == "single" else "M"
        return f"{depth}-IDPG-{idpg.get('layer', 'phm').upper()}-{idpg.get('encoder', 'plm_cls')}"
    return f"{gen}/{section.get('injection') or 'kv'}"


def run_experiment(cfg: Dict, root: str | None = None, output_dir: str | None = None,
                   show_progress: bool = True) -> Dict:
    from .data import encode_examples, make_loader
    from .injection import max_positions
    from .training import TrainConfig, Trainer, evaluate, set_seed
    from .training.optim import split_counts

    started = time.time()
    root = data_root(root)
    set_seed(cfg["seed"])
    train, dev, test, labels = load_task(cfg, root)
    model, tokenizer, wrapper_class = build_model(cfg, train, len(labels))
    n_prefix = getattr(model.template, "n_prefix", 0)
    max_len = min(int(cfg["plm"]["max_seq_length"]), max_positions(model.plm.config) - n_prefix)
    wrapper = wrapper_class(max_seq_length=max_len, tokenizer=tokenizer, truncate_method="balanced")  # OpenPrompt's "tail" crashes when a part empties
    feats = {name: encode_examples(exs, model.template, wrapper, desc=name)
             for name, exs in (("train", train), ("dev", dev), ("test", test))}
    tcfg = cfg["train"]
    gen = torch.Generator().manual_seed(cfg["seed"])
    pad = tokenizer.pad_token_id or 0
    train_loader = make_loader(feats["train"], tcfg["batch_size"], pad, shuffle=True, generator=gen)
    eval_bs = cfg["test"]["batch_size"]
    dev_loader = make_loader(feats["dev"], eval_bs, pad, sort_by_length=True)
    test_loader = make_loader(feats["test"], eval_bs, pad, sort_by_length=True)
    train_cfg = TrainConfig(**{k: v for k, v in tcfg.items() if k in TrainConfig.__dataclass_fields__},
                            seed=cfg["seed"], show_progress=show_progress)
    trainer = Trainer(model, train_cfg, output_dir=output_dir)
    best_dev = trainer.fit(train_loader, dev_loader)
    test_metrics = evaluate(model, test_loader, trainer.device, desc="test", show_progress=show_progress)
    prompt_n, head_n, plm_n = split_counts(model)
    result = {"dataset": cfg["dataset"]["name"], "template": cfg["template"],
              "strategy": method_name(cfg), "backbone": cfg["plm"]["model_path"],
              "sizes": {k: len(v) for k, v in feats.items()}, "max_seq_length": max_len,
              "trainable": {"prompt": prompt_n, "head": head_n, "plm": plm_n},
              "best_dev": best_dev, "test": test_metrics, "history": train_cfg.history,
              "seconds": round(time.time() - started, 1)}
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        if hasattr(model.template, "save_pretrained"):
            model.template.save_pretrained(os.path.join(output_dir, "template"))
        with open(os.path.join(output_dir, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        with open(os.path.join(output_dir, "metrics.json"), "w") as f:
            json.dump(result, f, indent=2)
    return result


def format_result(result: Dict) -> str:
    t, d = result["test"], result["best_dev"]
    tr = result["trainable"]
    rows = [("split", "accuracy", "macro-F1", "n"),
            ("dev (selection)", f"{d['accuracy']:.4f}", f"{d['macro_f1']:.4f}", str(result["sizes"]["dev"])),
            ("test (official val)", f"{t['accuracy']:.4f}", f"{t['macro_f1']:.4f}", str(result["sizes"]["test"]))]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    head = (f"{result['dataset']} | {result['template']} strategy={result['strategy']} | backbone={result['backbone']} "
            f"| trainable prompt={tr['prompt']:,} head={tr['head']:,} plm={tr['plm']:,} | {result['seconds']}s")
    return head + "\n" + "\n".join(lines)
