"""One configuration end to end: data -> PLM -> template/verbalizer (via OpenPrompt's registry)
-> train with best-on-dev selection -> report on a split not used for selection.

Protocol (per task in ``docs/data.md``): each task names the labelled split reported as test
(SuperGLUE and SST-2: the official validation set; IMDB, AG News, MR/CR/MPQA/Subj: test). The dev
set that picks the best epoch is the task's own dev split where the source has one (IMDB), else a
seeded, label-stratified part of train (``dataset.dev_from_train``; whole paragraphs for MultiRC).
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from typing import Dict, List, Sequence

import torch

from ..data.sources import DEFAULT_DATA_ROOT, data_root  # noqa: F401  (the lookup order: data/sources.py)
from .build import build_model, check_label_words, seen_vocab_ids  # noqa: F401  (re-exported)
from .config import CLASSIFYING_KEYS, DEFAULTS, check_head  # noqa: F401  (re-exported)
from .peer_config import LABELS as PEER_LABELS


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


def random_split(examples: Sequence, fraction: float, seed: int):
    """(train, dev): a seeded random ``fraction`` to dev (regression scores have no classes to balance)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"dataset.dev_from_train must be in (0, 1), got {fraction}")
    items = list(examples)
    random.Random(seed).shuffle(items)
    n_dev = max(1, round(len(items) * fraction)) if len(items) > 1 else 0
    return items[n_dev:], items[:n_dev]


def epochs_for_steps(max_steps: int, batches_per_epoch: int, accumulation: int = 1) -> int:
    """``train.max_steps`` optimizer steps as whole epochs, rounded up (at least one)."""
    if int(max_steps) < 1:
        raise ValueError(f"train.max_steps must be a positive integer (got {max_steps!r}); null trains train.epochs")
    per_epoch = max(1, math.ceil(batches_per_epoch / max(1, int(accumulation))))
    return max(1, math.ceil(int(max_steps) / per_epoch))


def _group_of(example):
    """The unit that must stay on one side of a split: a MultiRC paragraph, else the example itself."""
    meta = getattr(example, "meta", None) or {}
    return meta.get("paragraph")


def held_out_split(examples: Sequence, fraction: float, seed: int):
    """(rest, held_out): label-stratified by ``seed``; for answer-level tasks (MultiRC) whole
    paragraphs go to one side, so no question is split across train and dev."""
    if isinstance(examples[0].label, float):  # regression scores: no classes to stratify by
        return random_split(examples, fraction, seed)
    if _group_of(examples[0]) is None:
        return stratified_split(examples, fraction, seed)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"held-out fraction must be in (0, 1), got {fraction}")
    groups: Dict[str, List] = {}
    for ex in examples:
        groups.setdefault(_group_of(ex), []).append(ex)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    n_held = max(1, round(len(keys) * fraction)) if len(keys) > 1 else 0
    held = [ex for k in keys[:n_held] for ex in groups[k]]
    rest = [ex for k in keys[n_held:] for ex in groups[k]]
    return rest, held


def cap_examples(examples: Sequence, limit, seed: int) -> List:
    """At most ``limit`` examples, a seeded random choice (whole MultiRC questions), in source order."""
    if not limit or len(examples) <= int(limit):
        return list(examples)
    limit = int(limit)
    units: Dict[str, List[int]] = {}
    for i, ex in enumerate(examples):
        meta = getattr(ex, "meta", None) or {}
        units.setdefault(meta.get("group", str(i)), []).append(i)
    keys = list(units)
    random.Random(seed).shuffle(keys)
    chosen: List[int] = []
    for k in keys:
        if chosen and len(chosen) + len(units[k]) > limit:
            continue
        chosen += units[k]
        if len(chosen) >= limit:
            break
    return [examples[i] for i in sorted(chosen)]


def data_source(cfg: Dict, root: str | None = None):
    """Where ``cfg``'s data comes from (``data/sources.py``: path, data root, installed copy, hub)."""
    from ..data.sources import locate
    from ..data.lookup import get_task

    return locate(get_task(cfg["dataset"]["name"], cfg["dataset"]), cfg["dataset"], root)


def load_task(cfg: Dict, root: str | None, source=None):
    """(train, dev, test, label names) under the protocol of ``docs/data.md``:
    dev = the task's own dev split where the source has one, else ``dev_from_train`` of train;
    test = the task's reported split; with ``train_from`` = that split (BoolQ offline),
    ``test_from_train`` of it is held out as test first. ``source``: a ``data_source`` already found."""
    from ..data.lookup import get_task
    from ..data.tasks import SPLIT_ALIASES

    ds, seed = cfg["dataset"], cfg["seed"]
    task = get_task(ds["name"], ds)
    path = (source or data_source(cfg, root)).path
    hub_name = ds.get("hub_name")
    train_split = SPLIT_ALIASES.get(ds.get("train_from") or "train", ds.get("train_from") or "train")
    if not task.has_split(path, train_split, hub_name):
        hint = (" (no train split offline: set dataset.train_from: validation, see docs/data.md)"
                if task.has_split(path, task.test_split, hub_name) else "")
        raise FileNotFoundError(f"{task.name} has no '{train_split}' split at '{path}'{hint}: "
                                "set dataset.path, --data-root or IPT_ASSETS")
    full_train = task.load(path, train_split, hub_name)
    if train_split == task.test_split:
        if not ds.get("test_from_train"):
            raise ValueError(f"dataset.train_from: {train_split} is the split {task.name} reports as test: "
                             "set dataset.test_from_train (e.g. 0.3) to hold part of it out as test")
        full_train, test = held_out_split(full_train, float(ds["test_from_train"]), seed)
    else:
        test = task.load(path, task.test_split, hub_name)
    separate_dev = task.dev_split and task.dev_split != train_split and task.has_split(path, task.dev_split, hub_name)
    if separate_dev:
        train = cap_examples(full_train, ds.get("max_train"), seed)
        dev = task.load(path, task.dev_split, hub_name)
    else:
        full_train = cap_examples(full_train, ds.get("max_train"), seed)
        train, dev = held_out_split(full_train, float(ds["dev_from_train"]), seed)
    dev = cap_examples(dev, ds.get("max_eval"), seed)
    test = cap_examples(test, ds.get("max_eval"), seed)
    for name, exs in (("train", train), ("dev", dev), ("test", test)):
        if not exs:
            raise ValueError(f"the {name} split of {task.name} is empty: check dataset.max_train / "
                             "dev_from_train / test_from_train")
    return train, dev, test, list(task.labels)



def strategy_of(cfg: Dict) -> str:
    """The configured strategy / generator key, as written in the YAML (the readable name is
    ``paper_method_name``)."""
    section = cfg.get(cfg["template"]) or {}
    return str(section.get("strategy") or section.get("generator") or cfg["template"])


_IPT = {"random": "Random IPT", "pretrained": "Pretrained IPT"}
_ENCODER = {"textcnn": "CNN", "lstm": "RNN", "mlp": "MLP"}


def paper_method_name(cfg: Dict) -> str:
    """The method as the papers' tables name it (IPT Table 2, IDPG Table 1): 'PT + Encoder IPT (CNN)',
    'Prefix + Random IPT', 'P-tuning v2', 'M-IDPG-PHM-GloVe', 'Fine-tuning', ..."""
    if (cfg.get("peer") or {}).get("method"):
        return PEER_LABELS[cfg["peer"]["method"]]
    template = cfg["template"]
    section = cfg.get(template) or {}
    if template != "generated_prefix":
        strategy = section.get("strategy", "none")
        if template != "instance_wise" or strategy == "none":
            base = "Prompt Tuning" if template == "instance_wise" else template
            return "Fine-tuning" if not cfg["plm"].get("freeze", True) else base
        ipt = _IPT.get(strategy) or f"Encoder IPT ({_ENCODER.get(section.get('encoder', 'textcnn'), '?')})"
        return f"PT + {ipt}"
    gen = section.get("generator", "prefix")
    idpg = section.get("idpg") or {}
    default = ("input" if idpg.get("depth") == "single" else "hidden") if gen == "idpg" else "kv"  # the generators' own
    if gen == "lpt":
        default = "late"
    injection = section.get("injection") or default
    if gen == "lpt":
        kind = str((section.get("lpt") or {}).get("kind", "npg"))
        return "Late prompt (LPT, plain)" if kind == "plain" else f"LPT-{kind.upper()}"
    if injection == "late":  # a generator of ours placed late: "Prefix + Random IPT (late)" reads wrong
        name = paper_method_name({**cfg, cfg["template"]: {**section, "injection": None}})
        return f"{name.replace('Prefix + ', '').replace('P-tuning v2', 'Prompt')} (late)"
    if gen == "prefix":
        name = "Prefix Tuning" if (section.get("prefix") or {}).get("reparameterize") else "P-tuning v2"
    elif gen.startswith("ipt_"):
        kind = gen[4:]
        ipt = _IPT.get(kind) or f"Encoder IPT ({_ENCODER.get((section.get('ipt') or {}).get('encoder', 'textcnn'), '?')})"
        name = f"Prefix + {ipt}"
    else:
        name = f"{'S' if idpg.get('depth') == 'single' else 'M'}-IDPG-{str(idpg.get('layer', 'phm')).upper()}"
        encoder = idpg.get("encoder", "plm_cls")
        name += {"plm_cls": "", "glove": "-GloVe"}.get(encoder, f"-{encoder}")
    return name if injection == default else f"{name} ({injection})"


def encoder_start(cfg: Dict) -> Dict | None:
    """Encoder IPT's encoder: where its weights start (issue #43 item 6). ``None`` for other methods;
    else ``{"encoder", "weights": "random" | <encoder_path>, "note"}`` (``note``: the line a run
    without its pretraining export prints first; ``metrics.json`` keeps the dict as ``encoder_init``)."""
    section = cfg.get(cfg["template"]) or {}
    if cfg["template"] == "instance_wise" and section.get("strategy") == "encoder":
        key, node = "instance_wise.encoder_path", section
    elif cfg["template"] == "generated_prefix" and section.get("generator") == "ipt_encoder":
        key, node = "generated_prefix.ipt.encoder_path", section.get("ipt") or {}
    else:
        return None
    encoder = node.get("encoder", "textcnn")
    if node.get("encoder_path"):
        return {"encoder": encoder, "weights": node["encoder_path"]}
    backbone = os.path.basename(os.path.normpath(str(cfg["plm"]["model_path"])))
    note = (f"note: Encoder IPT ({encoder}) starts from random encoder weights: no {key} (the papers' Encoder IPT "
            f"starts from the category pretraining: python experiments/pretrain_categories.py --config "
            f"yamls/pretrain_{encoder}.yaml --set plm.model_path={cfg['plm']['model_path']}, then --set "
            f"{key}=exports/{encoder}-{backbone})")
    return {"encoder": encoder, "weights": "random", "note": note}


def run_experiment(cfg: Dict, root: str | None = None, output_dir: str | None = None,
                   show_progress: bool = True, splits=None, resume: bool = False,
                   build=None, method: str | None = None) -> Dict:
    """``splits`` = (train, dev, test, labels) from a protocol (``openprompt_ipt.protocols``); default
    ``load_task`` (the full-data protocol). ``resume``: continue from the newest checkpoint in
    ``output_dir`` (same config required). ``build``: a ``build_model``-like callable, so a peer method
    (PEFT, ``benchmarks/peft_run.py``) gets the same data, loop, selection and report; ``method``
    names it in the result (default: from the config)."""
    from ..data import encode_examples, get_task, make_loader
    from ..data.tasks import SPLIT_ALIASES
    from ..injection import max_positions
    from ..training import Runtime, TrainConfig, Trainer, evaluate, set_seed
    from ..training.checkpoint import check_resume_config, latest_checkpoint
    from ..training.optim import split_counts

    started = time.time()
    root = data_root(root)
    checkpoint = None
    if resume:
        checkpoint = latest_checkpoint(output_dir) if output_dir else None
        if checkpoint is None:
            raise FileNotFoundError(f"--resume: no checkpoint in '{output_dir}/checkpoints' (train without --resume first)")
        check_resume_config(checkpoint, cfg, defaults=DEFAULTS)
    runtime = Runtime.create(cfg["train"].get("device", "auto"), cfg["train"].get("mixed_precision", "no"))
    show_progress = show_progress and runtime.is_main
    set_seed(cfg["seed"])
    task = get_task(cfg["dataset"]["name"], cfg["dataset"])
    if cfg["train"]["metric"] not in task.metrics:
        raise ValueError(f"train.metric '{cfg['train']['metric']}' is not reported for {task.name}: "
                         f"choose one of {list(task.metrics)}")
    check_head(cfg)
    if not task.regression:
        check_label_words(cfg, task.labels)
    if build is None and not (cfg.get("peer") or {}).get("method"):
        from ..backbones import ensure_available  # offline without the backbone: one line before the data loads

        ensure_available(cfg["plm"]["model_path"])
    train, dev, test, labels = splits if splits is not None else load_task(cfg, root)
    if build is None and (cfg.get("peer") or {}).get("method"):  # a `peer:` section: Adapter, Compacter, LoRA
        from .peers import build_peer as build
    n_outputs = 1 if task.regression else len(labels)
    model, tokenizer, wrapper_class = (build or build_model)(cfg, train, n_outputs, labels)
    started_from = {}
    if cfg.get("init_prompt_from"):  # PPT: the task-level prompt / prefix from a pre-training export
        from .init_prompt import init_prompt_from

        started_from["init_prompt_from"] = init_prompt_from(model, cfg, tokenizer)
    if cfg.get("init_from"):  # a finished run's prompt (+ head), before training and before any resume
        from .init_from import init_from_run

        started_from["init_from"] = init_from_run(model, cfg, labels)
    n_prefix = getattr(model.template, "n_prefix", 0)
    max_len = min(int(cfg["plm"]["max_seq_length"]), max_positions(model.plm.config) - n_prefix)
    wrapper = wrapper_class(max_seq_length=max_len, tokenizer=tokenizer, truncate_method="balanced")  # OpenPrompt's "tail" crashes when a part empties
    feats = {name: encode_examples(exs, model.template, wrapper, desc=name, show_progress=show_progress)
             for name, exs in (("train", train), ("dev", dev), ("test", test))}
    tcfg = cfg["train"]
    gen = torch.Generator().manual_seed(cfg["seed"])
    pad = tokenizer.pad_token_id or 0
    train_loader = make_loader(feats["train"], tcfg["batch_size"], pad, shuffle=True, generator=gen)
    eval_bs = cfg["test"]["batch_size"]
    dev_loader = make_loader(feats["dev"], eval_bs, pad, sort_by_length=True)
    test_loader = make_loader(feats["test"], eval_bs, pad, sort_by_length=True)
    fields = {k: v for k, v in tcfg.items() if k in TrainConfig.__dataclass_fields__}
    if tcfg.get("max_steps"):  # OpenPrompt's num_training_steps, as whole epochs: we select on dev per epoch
        fields["epochs"] = epochs_for_steps(tcfg["max_steps"], len(train_loader), tcfg["gradient_accumulation_steps"])
    train_cfg = TrainConfig(**fields, seed=cfg["seed"], show_progress=show_progress)
    trainer = Trainer(model, train_cfg, output_dir=output_dir, runtime=runtime, run_config=cfg)
    best_dev = trainer.fit(train_loader, dev_loader, resume=checkpoint)
    test_metrics = evaluate(model, test_loader, trainer.device, desc="test", show_progress=show_progress,
                            runtime=runtime)
    prompt_n, head_n, plm_n = split_counts(model)
    train_from = cfg["dataset"].get("train_from") or "train"
    reported = (f"{train_from} held out" if SPLIT_ALIASES.get(train_from, train_from) == task.test_split  # load_task
                else {"validation": "official val", "test": "test"}[task.test_split])
    carved = (test[0].meta or {}).get("carved_from") if test else None
    if carved:  # QQP offline: no official dev (Task.carved_test)
        reported = f"{len(test):,} rows carved from {carved} (no official {task.test_split} offline)"
    result = {"dataset": cfg["dataset"]["name"], "template": cfg["template"], "test_split": reported,
              "metrics": list(task.metrics),
              "strategy": strategy_of(cfg), "method": method or paper_method_name(cfg), "backbone": cfg["plm"]["model_path"],
              "backbone_shape": {"hidden_size": model.plm.config.hidden_size, "vocab_size": model.plm.config.vocab_size},
              **started_from,
              "sizes": {k: len(v) for k, v in feats.items()}, "max_seq_length": max_len,
              "trainable": {"prompt": prompt_n, "head": head_n, "plm": plm_n},
              "best_dev": best_dev, "test": test_metrics, "history": train_cfg.history,
              "training": trainer.info, "seconds": round(time.time() - started, 1)}
    start = encoder_start(cfg)
    if start:  # Encoder IPT: random or pretrained encoder weights, in every metrics.json
        result["encoder_init"] = {k: v for k, v in start.items() if k != "note"}
    if output_dir and runtime.is_main:
        os.makedirs(output_dir, exist_ok=True)
        if hasattr(model.template, "save_pretrained"):
            model.template.save_pretrained(os.path.join(output_dir, "template"))
        from ..serialization import write_text_atomic

        write_text_atomic(os.path.join(output_dir, "config.json"), json.dumps(cfg, indent=2))
        write_text_atomic(os.path.join(output_dir, "metrics.json"), json.dumps(result, indent=2))
    return result


def format_result(result: Dict) -> str:
    t, d = result["test"], result["best_dev"]
    tr = result["trainable"]
    names = result.get("metrics", ["accuracy", "macro_f1"])
    titles = {"accuracy": "accuracy", "macro_f1": "macro-F1", "f1a": "F1a", "em": "EM", "f1": "F1",
              "acc_and_f1": "mean(acc, F1)", "pearson_spearman": "mean(Pearson, Spearman)", "pearson": "Pearson",
              "spearman": "Spearman"}
    rows = [("split", *(titles.get(m, m) for m in names), "n"),
            ("dev (selection)", *(f"{d[m]:.4f}" for m in names), str(result["sizes"]["dev"])),
            (f"test ({result.get('test_split', 'official val')})", *(f"{t[m]:.4f}" for m in names),
             str(result["sizes"]["test"]))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    head = (f"{result['dataset']} | {result.get('method', result['strategy'])} | backbone={result['backbone']} "
            f"| trainable prompt={tr['prompt']:,} head={tr['head']:,} plm={tr['plm']:,} | {result['seconds']}s")
    return head + "\n" + "\n".join(lines)
