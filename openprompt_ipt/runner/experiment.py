"""One configuration end to end: data (one call: ``data/prepare.py``) -> PLM -> template/verbalizer (via
OpenPrompt's registry) -> train with best-on-dev selection -> report on a split not used for selection.
"""
from __future__ import annotations

import json
import math
import os
import time
from typing import Dict

import torch

from ..data.sources import data_root  # the lookup order: data/sources.py
from .build import build_model, check_label_words
from .config import DEFAULTS, check_head
from .peer_config import LABELS as PEER_LABELS
from .run_dirs import RUN_COMMAND, command_beside
from .selection import split_with_cap


def epochs_for_steps(max_steps: int, batches_per_epoch: int, accumulation: int = 1) -> int:
    """``train.max_steps`` optimizer steps as whole epochs, rounded up (at least one)."""
    if int(max_steps) < 1:
        raise ValueError(f"train.max_steps must be a positive integer (got {max_steps!r}); null trains train.epochs")
    per_epoch = max(1, math.ceil(batches_per_epoch / max(1, int(accumulation))))
    return max(1, math.ceil(int(max_steps) / per_epoch))


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


def encoder_start(cfg: Dict, run_command: str = RUN_COMMAND) -> Dict | None:
    """Encoder IPT's encoder: where its weights start (issue #43 item 6). ``None`` for other methods;
    else ``{"encoder", "weights": "random" | <encoder_path>, "note"}`` (``note``: the line a run
    without its pretraining export prints first, naming the pretrain command beside ``run_command``;
    ``metrics.json`` keeps the dict as ``encoder_init``)."""
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
    pretrain = command_beside(run_command, "pretrain categories")
    yaml = f"{'yamls/' if pretrain.startswith('python ') else ''}pretrain_{encoder}.yaml"  # shipped: any directory
    note = (f"note: Encoder IPT ({encoder}) starts from random encoder weights: no {key} (the papers' Encoder IPT "
            f"starts from the category pretraining: {pretrain} --config "
            f"{yaml} --set plm.model_path={cfg['plm']['model_path']}, then --set "
            f"{key}=exports/{encoder}-{backbone})")
    return {"encoder": encoder, "weights": "random", "note": note}


def run_experiment(cfg: Dict, root: str | None = None, output_dir: str | None = None,
                   show_progress: bool = True, splits=None, resume: bool = False,
                   build=None, method: str | None = None, run_command: str = RUN_COMMAND) -> Dict:
    """``splits`` = (train, dev, test, labels) already prepared; default ``data.prepare.prepare_splits`` (the
    configuration's protocol). ``resume``: continue from the newest checkpoint in
    ``output_dir`` (same config required). ``build``: a ``build_model``-like callable, so a peer method
    (PEFT, ``benchmarks/peft_run.py``) gets the same data, loop, selection and report; ``method``
    names it in the result (default: from the config). ``run_command``: what trains a run where the user is, for
    messages (``init_from``'s)."""
    from ..data import encode_examples, get_task, make_loader
    from ..data.prepare import examples_digest, prepare_splits
    from ..data.tasks import SPLIT_ALIASES
    from ..injection import max_positions
    from ..training import NonFiniteLoss, Runtime, TrainConfig, Trainer, evaluate, set_seed
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
        from .backbones import ensure_available  # offline without the backbone: one line before the data loads

        ensure_available(cfg["plm"]["model_path"])
    train, dev, test, labels = splits if splits is not None else prepare_splits(cfg, root).as_tuple()
    if build is None and (cfg.get("peer") or {}).get("method"):  # a `peer:` section: Adapter, Compacter, LoRA
        from .peers import build_peer as build
    n_outputs = 1 if task.regression else len(labels)
    model, tokenizer, wrapper_class = (build or build_model)(cfg, train, n_outputs, labels)
    started_from = {}
    if cfg.get("init_prompt_from"):  # PPT: the task-level prompt / prefix from a pre-training export
        from .init_prompt import init_prompt_from

        started_from["init_prompt_from"] = init_prompt_from(model, cfg, tokenizer, run_command)
    if cfg.get("init_from"):  # a finished run's prompt (+ head), before training and before any resume
        from .init_from import init_from_run

        started_from["init_from"] = init_from_run(model, cfg, labels, run_command=run_command)
    n_prefix = getattr(model.template, "n_prefix", 0)
    max_len = min(int(cfg["plm"]["max_seq_length"]), max_positions(model.plm.config) - n_prefix)
    wrapper = wrapper_class(max_seq_length=max_len, tokenizer=tokenizer, truncate_method="balanced")  # head / tail: the OpenPrompt cli
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
    trainer = Trainer(model, train_cfg, output_dir=output_dir, runtime=runtime, run_config=cfg,
                      data_digest=examples_digest(train, dev, test, [labels]))
    best_dev = trainer.fit(train_loader, dev_loader, resume=checkpoint)
    test_metrics = evaluate(model, test_loader, trainer.device, desc="test", show_progress=show_progress,
                            runtime=runtime)
    if not math.isfinite(test_metrics.get("loss", 0.0)):  # finite on dev, not here: argmax of NaN is no score
        raise NonFiniteLoss(f"test loss is {test_metrics['loss']}: the selected model (epoch "
                            f"{trainer.info.get('best_epoch')}) gives non-finite outputs on the test split, so its test "
                            "scores are not reported (lower train.lr_prompt / train.lr_head)")
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
              # a local backbone's folder as an absolute path: predict finds it from any directory (runner/predict.py)
              "backbone_dir": os.path.abspath(cfg["plm"]["model_path"]) if os.path.isdir(cfg["plm"]["model_path"]) else None,
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
            (f"test ({split_with_cap(result.get('test_split', 'official val'), result.get('test_cap'))})",
             *(f"{t[m]:.4f}" for m in names),
             str(result["sizes"]["test"]))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    head = (f"{result['dataset']} | {result.get('method', result['strategy'])} | backbone={result['backbone']} "
            f"| trainable prompt={tr['prompt']:,} head={tr['head']:,} plm={tr['plm']:,} | {result['seconds']}s")
    return head + "\n" + "\n".join(lines)
