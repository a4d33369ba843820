"""PPT-style prompt pre-training (Gu et al., "PPT: Pre-trained Prompt Tuning"; IPT Table 2's PPT row).

PPT pre-trains the soft prompt on a self-supervised task shaped like the downstream one; for
sentence-pair tasks (CB, RTE) it is next-sentence prediction with three answers: the second sentence
follows the first (``yes``), comes from the same document but not next (``maybe``), or from another
document (``no``). Here: sentence pairs from the offline Wikipedia articles (``corpora/wiki_vital``),
the downstream experiment's own template (Prompt Tuning's task prompt, Prefix Tuning's prefix and
its MLP) on the frozen PLM, and a 3-way head that is thrown away: only the template's trained weights
are exported, for ``init_prompt_from:`` (``runner/init_prompt.py``).

Export folder (atomic and resumable like the category pretraining, ``export.py``):
``prompt.safetensors`` (the template's trained tensors + metadata: backbone, tokenizer fingerprint,
vocab / hidden size, template and its settings), ``ppt.json`` (config, corpus summary, metrics),
``config.yaml`` and ``DONE``; the interrupted run's pairs and trainer checkpoints live in
``<out>.partial/`` and the same command with ``--resume`` continues mid-epoch.
"""
from __future__ import annotations

import copy
import json
import os
import random
import re
import time
from typing import Dict, List, Optional, Sequence, Tuple

from ..runner.config import load_config, merge_config, read_yaml_with_overrides
from ..runner.init_prompt import FORMAT, PROMPT_FILE
from ..runner.run_dirs import RUN_COMMAND
from ..runner.schema import PPT, check_values
from ..serialization import iter_jsonl, write_text_atomic

INFO_FILE, PAIRS_FILE = "ppt.json", "pairs.json"
# label id -> answer word, in the order CB's verbalizer uses (entailment / contradiction / neutral)
LABELS = ("next", "other_document", "same_document")
LABEL_WORDS = [["yes"], ["no"], ["maybe"]]

DEFAULTS: Dict = {
    "name": "ppt",
    "seed": 42,
    "output_dir": None,
    # the downstream YAML whose template and backbone the prompt is pre-trained for (its text, prompt
    # length, generator; its train/dataset sections are not used)
    "experiment": "yamls/cb_prompt_tuning.yaml",
    "plm": {"model_path": None},  # None: the experiment's backbone
    "corpus": {"path": "corpora/wiki_vital/articles.jsonl", "pairs": 3000, "min_words": 5, "max_words": 40,
               "dev_fraction": 0.1, "test_fraction": 0.1},
    "train": {"epochs": 1, "batch_size": 16, "lr_prompt": 3e-3, "lr_head": 1e-3, "max_seq_length": 96,
              "checkpoint_every": 25, "device": "cpu"},
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def load_ppt_config(path: str, overrides: Sequence[str] = (), run_command: str = RUN_COMMAND) -> Dict:
    """``run_command``: what trains a run where the user is (another kind of config given here names it)."""
    raw = read_yaml_with_overrides(path, overrides, hint=" (see yamls/pretrain_ppt.yaml)", expect="ppt",
                                   run_command=run_command)
    cfg = merge_config(DEFAULTS, raw, "", {})
    check_values(cfg, schema=PPT)  # types and ranges: one table in runner/schema.py
    split_sizes(cfg["corpus"])
    return cfg


MIN_SPLIT = 3  # pairs per split at least: one per answer


def _sizes(total: int, dev_fraction: float, test_fraction: float) -> Dict[str, int]:
    dev, test = (max(MIN_SPLIT, round(total * float(f))) for f in (dev_fraction, test_fraction))
    return {"train": max(MIN_SPLIT, total - dev - test), "dev": dev, "test": test}


def split_sizes(corpus: Dict) -> Dict[str, int]:
    """Pairs per split for ``corpus.pairs`` in all; a total the splits cannot hold (each takes at least 3) was
    raised to 3 per split without a word: refused in one line with the smallest total that works."""
    total, dev, test = int(corpus["pairs"]), corpus["dev_fraction"], corpus["test_fraction"]
    sizes = _sizes(total, dev, test)
    if sum(sizes.values()) != total:
        least = next(n for n in range(total, total + 100_000) if sum(_sizes(n, dev, test).values()) == n)
        raise ValueError(f"corpus.pairs = {total} is too few: the train, dev and test splits take at least "
                         f"{MIN_SPLIT} pairs each (one per answer; dev_fraction {dev}, test_fraction {test}): "
                         f"give corpus.pairs >= {least}")
    return sizes


def experiment_config(cfg: Dict) -> Dict:
    """The downstream experiment's config with the PPT task in place of its data and training."""
    from .pipeline import resolve_mapping_path

    exp = load_config(resolve_mapping_path(cfg["experiment"]))
    if cfg["plm"]["model_path"]:
        exp["plm"]["model_path"] = cfg["plm"]["model_path"]
    if exp["template"] not in ("instance_wise", "generated_prefix"):
        raise ValueError(f"experiment '{cfg['experiment']}' uses template '{exp['template']}': PPT pre-trains "
                         "instance_wise (Prompt Tuning) or generated_prefix (Prefix Tuning) prompts")
    exp["verbalizer"] = "soft_verbalizer"
    exp["soft_verbalizer"] = {"label_words": copy.deepcopy(LABEL_WORDS)}
    t = cfg["train"]
    exp["train"].update(epochs=int(t["epochs"]), batch_size=int(t["batch_size"]), lr_prompt=float(t["lr_prompt"]),
                        lr_head=float(t["lr_head"]), checkpoint_every=int(t["checkpoint_every"]), device=t["device"],
                        metric="accuracy")
    exp["plm"]["max_seq_length"] = int(t["max_seq_length"])
    exp["seed"] = int(cfg["seed"])
    for key in ("init_from", "init_prompt_from"):
        exp[key] = None
    return exp


# ------------------------------------------------------------------------------------- the pairs
def sentences(text: str, min_words: int, max_words: int) -> List[str]:
    return [s.strip() for s in _SENTENCE_END.split(text or "") if min_words <= len(s.split()) <= max_words]


def read_documents(path: str, min_words: int, max_words: int) -> List[List[str]]:
    """Each article's usable sentences, in order; articles with fewer than 3 are left out (no 'same
    document, not next' pair)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"PPT corpus '{path}' not found: set corpus.path (under the data root) or "
                                "--data-root / IPT_ASSETS to the assets folder")
    docs = []
    with open(path) as f:
        for n, row in iter_jsonl(f, path, numbered=True):
            text = row.get("text") if isinstance(row, dict) else None
            if not isinstance(row, dict) or not isinstance(text, (str, type(None))):  # was an AttributeError / TypeError
                what = (f"its 'text' is {type(text).__name__}, not a string" if isinstance(row, dict)
                        else f"it is a {type(row).__name__}, not a JSON object")
                raise ValueError(f"PPT corpus '{path}' line {n}: {what}: write one JSON object per line with the "
                                 "article as a string under 'text'")
            sents = sentences(text or "", min_words, max_words)
            if len(sents) >= 3:
                docs.append(sents)
    if len(docs) < 2:
        raise ValueError(f"PPT corpus '{path}' has {len(docs)} articles with 3+ sentences of {min_words}-{max_words} "
                         "words: PPT needs at least 2 (check corpus.min_words / max_words)")
    return docs


def make_pairs(docs: List[List[str]], n: int, rng: random.Random) -> List[Tuple[str, str, int]]:
    """``n`` pairs, the three answers in turn (balanced): (s_i, s_i+1) -> next; (s_i, s_j), |i - j| >= 2,
    same article -> same_document; (s_i, a sentence of another article) -> other_document."""
    pairs = []
    for k in range(n):
        label = k % 3
        d = rng.randrange(len(docs))
        doc = docs[d]
        if label == 0:
            i = rng.randrange(len(doc) - 1)
            pairs.append((doc[i], doc[i + 1], 0))
        elif label == 2:
            i = rng.randrange(len(doc) - 2)
            j = rng.randrange(i + 2, len(doc))
            pairs.append((doc[i], doc[j], 2) if rng.random() < 0.5 else (doc[j], doc[i], 2))  # either order
        else:
            other = rng.randrange(len(docs) - 1)
            other += other >= d  # any article but d
            pairs.append((doc[rng.randrange(len(doc))], rng.choice(docs[other]), 1))
    rng.shuffle(pairs)
    return pairs


def build_pairs(cfg: Dict, corpus_path: str) -> Dict[str, List]:
    """train / dev / test pairs from disjoint article sets (dev picks the epoch, test reports the
    pretext accuracy; chance is 1/3)."""
    c = cfg["corpus"]
    docs = read_documents(corpus_path, int(c["min_words"]), int(c["max_words"]))
    rng = random.Random(int(cfg["seed"]))
    rng.shuffle(docs)
    n_dev = max(2, round(len(docs) * float(c["dev_fraction"])))
    n_test = max(2, round(len(docs) * float(c["test_fraction"])))
    if len(docs) - n_dev - n_test < 2:
        raise ValueError(f"PPT corpus has {len(docs)} usable articles: too few to hold out dev and test articles")
    parts = {"dev": docs[:n_dev], "test": docs[n_dev:n_dev + n_test], "train": docs[n_dev + n_test:]}
    sizes = split_sizes(c)
    out = {name: make_pairs(parts[name], sizes[name], rng) for name in ("train", "dev", "test")}
    out["summary"] = {"articles": {k: len(v) for k, v in parts.items()}, "pairs": {k: len(out[k]) for k in parts},
                      "labels": list(LABELS), "label_words": LABEL_WORDS, "source": corpus_path}
    return out


def as_examples(pairs) -> List:
    from openprompt.data_utils import InputExample

    return [InputExample(guid=str(i), text_a=a, text_b=b, label=y) for i, (a, b, y) in enumerate(pairs)]


# ------------------------------------------------------------------------------------- training + export
def default_output_dir(cfg: Dict, exp: Dict) -> str:
    from .config import backbone_alias

    return os.path.join("exports", f"{cfg['name']}-{backbone_alias(exp['plm']['model_path'])}-{exp['template']}")


def export_metadata(model, tokenizer, exp: Dict) -> Dict[str, str]:
    from ..generators import tokenizer_fingerprint

    section = {k: v for k, v in (exp.get(exp["template"]) or {}).items() if k != "text"}
    conf = model.plm.config
    return {"format": FORMAT, "backbone": str(exp["plm"]["model_path"]), "tokenizer": type(tokenizer).__name__,
            "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer), "vocab_size": str(conf.vocab_size),
            "hidden_size": str(conf.hidden_size), "template": exp["template"], "template_settings": json.dumps(section)}


def run_ppt(cfg: Dict, data_root: Optional[str] = None, output_dir: Optional[str] = None, overwrite: bool = False,
            show_progress: bool = True, log=print, resume: bool = False) -> Dict:
    """Pre-train, export, return the info written to ``ppt.json``."""
    import torch
    from safetensors.torch import save_file

    from ..data import encode_examples, make_loader
    from ..injection import max_positions
    from ..runner.experiment import build_model, data_root as resolve_root
    from ..serialization import trainable_state
    from ..training import Trainer, TrainConfig, evaluate, set_seed
    from ..training.checkpoint import latest_checkpoint
    from .export import finalize, prepare_output

    started = time.time()
    split_sizes(cfg["corpus"])  # before anything is written
    exp = experiment_config(cfg)
    out = output_dir or cfg.get("output_dir") or default_output_dir(cfg, exp)
    corpus_path = os.path.join(resolve_root(data_root), cfg["corpus"]["path"])
    if os.path.isabs(cfg["corpus"]["path"]):
        corpus_path = cfg["corpus"]["path"]
    if not os.path.isfile(corpus_path):  # before anything is written
        read_documents(corpus_path, 1, 1)
    work = prepare_output(out, {"ppt": cfg, "experiment": exp}, overwrite=overwrite, log=log, resume=resume)
    pairs_path = os.path.join(work, PAIRS_FILE)
    if os.path.isfile(pairs_path):  # a resumed run trains on the very pairs it started with
        from ..serialization import read_json

        pairs = read_json(pairs_path, "delete it (--resume then draws the pairs again) or rerun with --overwrite")
    else:
        pairs = build_pairs(cfg, corpus_path)
        write_text_atomic(pairs_path, json.dumps(pairs))
    log(f"PPT pairs: {pairs['summary']['pairs']} from {pairs['summary']['articles']} articles")
    set_seed(int(cfg["seed"]))
    splits = {k: as_examples(pairs[k]) for k in ("train", "dev", "test")}
    model, tokenizer, wrapper_class = build_model(exp, splits["train"], len(LABELS), list(LABELS))
    max_len = min(int(exp["plm"]["max_seq_length"]), max_positions(model.plm.config) - getattr(model.template, "n_prefix", 0))
    wrapper = wrapper_class(max_seq_length=max_len, tokenizer=tokenizer, truncate_method="balanced")
    feats = {k: encode_examples(v, model.template, wrapper, desc=k) for k, v in splits.items()}
    pad = tokenizer.pad_token_id or 0
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    t = exp["train"]
    loaders = {"train": make_loader(feats["train"], t["batch_size"], pad, shuffle=True, generator=gen),
               "dev": make_loader(feats["dev"], exp["test"]["batch_size"], pad, sort_by_length=True),
               "test": make_loader(feats["test"], exp["test"]["batch_size"], pad, sort_by_length=True)}
    tcfg = TrainConfig(**{k: v for k, v in t.items() if k in TrainConfig.__dataclass_fields__},
                       seed=int(cfg["seed"]), show_progress=show_progress)
    trainer = Trainer(model, tcfg, output_dir=work, run_config=exp)
    checkpoint = latest_checkpoint(work)
    if checkpoint:
        log(f"resuming PPT pre-training from {checkpoint}")
    best_dev = trainer.fit(loaders["train"], loaders["dev"], resume=checkpoint)
    test = evaluate(model, loaders["test"], trainer.device, desc="test", show_progress=show_progress)
    state = trainable_state(model.template, skip=("raw_embedding",))
    save_file(state, os.path.join(work, PROMPT_FILE), metadata=export_metadata(model, tokenizer, exp))
    info = {"config": cfg, "experiment": exp, "corpus": pairs["summary"], "best_dev": best_dev, "test": test,
            "history": tcfg.history, "tensors": {k: list(v.shape) for k, v in state.items()},
            "seconds": round(time.time() - started, 1)}
    with open(os.path.join(work, INFO_FILE), "w") as f:
        json.dump(info, f, indent=2)
    import yaml

    with open(os.path.join(work, "config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    for name in (PAIRS_FILE, "best.safetensors"):
        if os.path.exists(os.path.join(work, name)):
            os.remove(os.path.join(work, name))
    from ..training.checkpoint import remove_checkpoints

    remove_checkpoints(work)
    finalize(work, out)
    info["output_dir"] = out
    return info


def format_info(info: Dict) -> str:
    d, t = info["best_dev"], info["test"]
    return (f"PPT export -> {info['output_dir']} | {info['experiment']['template']} on {info['experiment']['plm']['model_path']} "
            f"| pairs {info['corpus']['pairs']} | dev acc {d['accuracy']:.4f} | test acc {t['accuracy']:.4f} "
            f"(chance 0.3333) | tensors {info['tensors']} | {info['seconds']}s")
