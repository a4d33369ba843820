"""Category pretraining end to end: mapping -> corpus -> classifier -> exports (IPT §4.2)."""
from __future__ import annotations

import json
import os
import time
from typing import Callable, Dict, Optional

import torch

from .classifier import CategoryClassifier, ClassifierConfig
from .config import default_output_dir
from .corpus import build_corpus, format_histogram, load_mapping
from .export import (CLASSIFIER_FILE, TABLE_FILE, abandon_if_empty, finalize, plot_confusion, prepare_output,
                     write_classifier)
from .train import PretrainConfig, train_classifier

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def resolve_mapping_path(path: str) -> str:
    """``path`` as given, else the repository's file of that relative path (the shipped mappings and
    YAMLs, from any working directory; an installed wheel's copy of yamls/ too)."""
    from ..config_files import shipped_file

    if os.path.isfile(path) or os.path.isabs(path):
        return path
    candidate = os.path.join(REPO_ROOT, path)
    return candidate if os.path.isfile(candidate) else shipped_file(path)


def load_tokenizer(model_path: str):
    """(tokenizer, path) of ``plm.model_path``; a missing folder, an uncached hub name offline or a folder
    holding no tokenizer is one line naming the key (transformers' own errors are tracebacks or paragraphs)."""
    from transformers import AutoTokenizer

    from ..runner.backbones import FIX, ensure_available
    from ..runner.plm import resolve_backbone

    path = resolve_backbone(model_path)
    ensure_available(model_path)  # a missing folder; a hub name ('org/name' too) not cached while offline
    try:
        return AutoTokenizer.from_pretrained(path), path
    except (OSError, ValueError, KeyError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ValueError(f"plm.model_path '{model_path}': no tokenizer could be loaded from '{path}' "
                         f"({type(e).__name__}: {first}): {FIX}, or a hub name") from None


def initial_embedding(init: str, path: str, dim: Optional[int], vocab: int):
    """(weight or None, dim): the PLM's own input embeddings, or a random start of ``dim`` columns."""
    from transformers.utils import logging as hf_logging

    if init == "plm":
        from transformers import AutoModel

        verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()  # transformers 5 draws a bar per checkpoint load
        try:
            weight = AutoModel.from_pretrained(path).get_input_embeddings().weight.detach().float().clone()
        finally:  # the caller's settings back: bars a notebook switched off stay off
            hf_logging.set_verbosity(verbosity)
            if bars:  # the caller's choice, as it was: bars a caller had turned off stay off
                hf_logging.enable_progress_bar()
        if dim and int(dim) != weight.shape[1]:
            raise ValueError(f"classifier.dim={dim} but the PLM's embeddings are {weight.shape[1]}-d: leave dim unset "
                             "with embedding_init: plm, or use embedding_init: random")
        if weight.shape[0] < vocab:  # tokens added to the tokenizer after the PLM was trained
            extra = torch.randn(vocab - weight.shape[0], weight.shape[1]) * weight.std()
            weight = torch.cat([weight, extra])
        return weight, weight.shape[1]
    if not dim:
        from transformers import AutoConfig

        try:
            dim = AutoConfig.from_pretrained(path).hidden_size
        except Exception as e:
            raise ValueError(f"cannot read the hidden size of '{path}' ({type(e).__name__}): set classifier.dim") from None
    return None, int(dim)


def run_pretraining(cfg: Dict, root: Optional[str] = None, output_dir: Optional[str] = None, overwrite: bool = False,
                    show_progress: bool = True, cache_dir: Optional[str] = None, log: Callable = print,
                    resume: bool = False) -> Dict:
    from ..runner.experiment import data_root
    from ..generators.vocab_table import save_table, tokenizer_fingerprint
    from ..training.trainer import set_seed

    started = time.time()
    root = data_root(root)
    out = output_dir or cfg.get("output_dir") or default_output_dir(cfg)
    mapping = load_mapping(resolve_mapping_path(cfg["corpus"]["mapping"]))
    tokenizer, tok_path = load_tokenizer(cfg["plm"]["model_path"])
    work = prepare_output(out, cfg, overwrite, log, resume=resume)
    set_seed(cfg["seed"])

    corpus_file = os.path.join(work, "corpus.pt")
    if os.path.isfile(corpus_file):
        from ..serialization import read_torch

        corpus = read_torch(corpus_file, "delete it (--resume then rebuilds the corpus) or rerun with --overwrite")
    else:
        c = cfg["corpus"]
        log(f"building the corpus from {mapping.path} (data root {root})")
        try:
            corpus = build_corpus(mapping, tokenizer, root, seed=cfg["seed"], max_length=int(c["max_length"]),
                                  min_tokens=int(c["min_tokens"]), max_per_category=c["max_per_category"],
                                  balance=c["balance"], dev_fraction=float(c["dev_fraction"]),
                                  test_fraction=float(c["test_fraction"]), cache_dir=cache_dir, log=log)
        except BaseException:
            abandon_if_empty(work, out)
            raise
        torch.save(corpus, corpus_file + ".tmp")
        os.replace(corpus_file + ".tmp", corpus_file)
    log(format_histogram(corpus.summary))

    cc = cfg["classifier"]
    try:
        weight, dim = initial_embedding(cc["embedding_init"], tok_path, cc["dim"], len(tokenizer))
        vocab = weight.shape[0] if weight is not None else len(tokenizer)
        ccfg = ClassifierConfig(encoder=cc["encoder"], vocab_size=vocab, dim=dim, hidden=int(cc["hidden"]),
                                kernel_sizes=tuple(cc["kernel_sizes"]), dropout=float(cc["dropout"]), pool=cc["pool"],
                                num_classes=len(corpus.categories), sparse=bool(cc["sparse"]))
        model = CategoryClassifier(ccfg, weight)
        tcfg = PretrainConfig(**cfg["train"], seed=cfg["seed"], show_progress=show_progress)
        log(f"training a {cc['encoder']} classifier: {sum(p.numel() for p in model.parameters()):,} parameters "
            f"({vocab} x {dim} embedding), {len(corpus.train)} train / {len(corpus.dev)} dev / {len(corpus.test)} test")
        result = train_classifier(model, corpus, tcfg, state_path=os.path.join(work, "train_state.pt"), log=log)
    except Exception:  # a bad value found only now (classifier.pool, train.device, ...): no epoch saved, the
        abandon_if_empty(work, out, disposable=("corpus.pt",))  # corrected command must not meet an "interrupted run"
        raise

    fingerprint = tokenizer_fingerprint(tokenizer)
    short = {s: {"accuracy": result[s]["accuracy"], "macro_f1": result[s]["macro_f1"], "n": result[s]["n"]}
             for s in ("dev", "test")}
    corpus_short = {"sizes": corpus.summary["sizes"], "sources": corpus.summary["sources"],
                    "per_category": {c: r["kept"] for c, r in corpus.summary["categories"].items()}}
    identity = {"tokenizer": str(cfg["plm"]["model_path"]), "tokenizer_path": tok_path,
                "tokenizer_fingerprint": fingerprint, "vocab_size": vocab, "dim": dim,
                "categories": corpus.categories}
    save_table(os.path.join(work, TABLE_FILE), model.embedding.weight.detach(),
               {**{k: v if isinstance(v, str) else json.dumps(v) for k, v in identity.items()},
                "encoder": cc["encoder"], "corpus": json.dumps(corpus_short), "metrics": json.dumps(short),
                "format": "openprompt_ipt.vocab_table"})
    write_classifier(work, model, {**identity, "metrics": short})
    png = plot_confusion(result["test"]["confusion_matrix"], corpus.categories, os.path.join(work, "confusion_matrix.png"),
                         f"{cc['encoder']} on {cfg['plm']['model_path']} vocab: test acc {short['test']['accuracy']:.3f}, "
                         f"macro-F1 {short['test']['macro_f1']:.3f}")
    metrics = {**result, "categories": corpus.categories, "corpus": corpus.summary, "out": out,
               "seconds_total": round(time.time() - started, 1), "confusion_png": os.path.basename(png) if png else None}
    with open(os.path.join(work, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    with open(os.path.join(work, "corpus.json"), "w") as f:
        json.dump(corpus.summary, f, indent=2)
    with open(os.path.join(work, "heldout_test.jsonl"), "w") as f:
        for e in corpus.test:
            f.write(json.dumps({"text": e.text, "category": corpus.categories[e.label], "label": e.label,
                                "source": e.source}) + "\n")
    import yaml

    with open(os.path.join(work, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    finalize(work, out)
    return metrics


def format_metrics(metrics: Dict) -> str:
    cats = metrics["categories"]
    rows = [f"best epoch {metrics['best_epoch']} | training {metrics['train_seconds']}s | total {metrics['seconds_total']}s"]
    for split in ("dev", "test"):
        m = metrics[split]
        rows.append(f"{split}: accuracy {m['accuracy']:.4f} | macro-F1 {m['macro_f1']:.4f} | n {m['n']}")
    w = max(len(c) for c in cats)
    rows.append("test per-category F1: " + ", ".join(f"{c} {f:.2f}" for c, f in zip(cats, metrics["test"]["per_class_f1"])))
    rows.append("test confusion matrix (rows true, columns predicted, in category order):")
    for c, r in zip(cats, metrics["test"]["confusion_matrix"]):
        rows.append(f"  {c.ljust(w)} " + " ".join(f"{x:>3}" for x in r))
    rows.append(f"export: {metrics['out']}  ({TABLE_FILE}, {CLASSIFIER_FILE}, classifier.json, metrics.json, "
                f"{metrics['confusion_png'] or 'no PNG: matplotlib missing'})")
    return "\n".join(rows)
