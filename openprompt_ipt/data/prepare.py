"""A run's data in one call: ``prepare_splits(cfg, root)`` -> ``Splits`` (train, dev, test, labels, and the line
saying where the data came from), under the configuration's protocol (docs/protocols.md):

* ``full`` (``load_task``, docs/data.md): test = the task's reported split; dev = the task's own dev split where
  the source has one, else ``dataset.dev_from_train`` of train; ``max_train`` / ``max_eval`` seeded caps;
* ``few_shot`` (IPT §5.1) and ``low_resource`` (IDPG §4.4): sampled from the original train
  (``data/protocols/``);
* ``selection: on_eval_set``: dev is the reported split itself (the IPT notebook's protocol, labelled by the runner).
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional

from .protocols import few_shot_splits, low_resource_splits
from .splits import cap_examples, held_out_split

FEWGLUE = {"cb": "CB", "rte": "RTE", "multirc": "MultiRC", "boolq": "BoolQ"}


@dataclass
class Splits:
    train: List
    dev: List
    test: List
    labels: List[str]
    source: str = ""  # the line saying where the data came from (data/sources.py)
    # dataset.max_eval sampled the reported split: {"max_eval", "kept", "of"} (rows kept of the split's rows)
    test_cap: Optional[Dict] = None

    def as_tuple(self):
        return self.train, self.dev, self.test, self.labels


def examples_digest(*splits) -> str:
    """A hash of the examples themselves (ids, texts, labels, meta; and the label names): a resumed run compares
    it with its checkpoint's, so it never continues on other data than it started on (another data root from
    another directory, a file edited since)."""
    h = hashlib.sha256()
    for split in splits:
        for e in split:
            row = [getattr(e, k, None) for k in ("guid", "text_a", "text_b", "label", "meta")] if hasattr(e, "guid") else e
            h.update(json.dumps(row, sort_keys=True, default=str).encode())
        h.update(b"\x1e")  # where one split ends: the same rows split differently differ
    return h.hexdigest()[:16]


def resolve_data_path(path: str, root: str) -> str:
    """A path relative to the data root if it exists there; otherwise as given (a dir or a hub name)."""
    candidate = os.path.join(root, path)
    return candidate if not os.path.isabs(path) and os.path.isdir(candidate) else path


def data_source(cfg: Dict, root: str | None = None):
    """Where ``cfg``'s data comes from (``data/sources.py``: path, data root, installed copy, hub)."""
    from .sources import locate
    from .lookup import get_task

    return locate(get_task(cfg["dataset"]["name"], cfg["dataset"]), cfg["dataset"], root)


def load_task(cfg: Dict, root: str | None, source=None, sizes: Dict | None = None):
    """(train, dev, test, label names) under the protocol of ``docs/data.md``:
    dev = the task's own dev split where the source has one, else ``dev_from_train`` of train;
    test = the task's reported split; with ``train_from`` = that split (BoolQ offline),
    ``test_from_train`` of it is held out as test first. ``source``: a ``data_source`` already found.
    ``sizes`` (a dict) gets the dev and test sizes before ``max_eval`` caps them."""
    from .lookup import get_task
    from .tasks import SPLIT_ALIASES

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
    if sizes is not None:
        sizes.update(dev=len(dev), test=len(test))
    dev = cap_examples(dev, ds.get("max_eval"), seed)
    test = cap_examples(test, ds.get("max_eval"), seed)
    for name, exs in (("train", train), ("dev", dev), ("test", test)):
        if not exs:
            raise ValueError(f"the {name} split of {task.name} is empty: check dataset.max_train / "
                             "dev_from_train / test_from_train")
    return train, dev, test, list(task.labels)


def original_train(cfg: Dict, root: str, source=None, sizes: Dict | None = None):
    """(the task's original labelled train, the reported split, labels), with load_task's handling of
    train_from / test_from_train; in a seed-independent order."""
    full = copy.deepcopy(cfg)
    full["dataset"]["max_train"] = full["dataset"]["max_eval"] = None  # max_eval caps test only, never the pool
    train, dev, test, labels = load_task(full, root, source, sizes)
    test = cap_examples(test, cfg["dataset"].get("max_eval"), cfg["seed"])
    return sorted(train + dev, key=lambda ex: str(ex.guid)), test, labels


def load_fewglue(cfg: Dict, root: str) -> List:
    from .lookup import get_task

    name = cfg["dataset"]["name"]
    source = cfg["protocol"]["train_source"]
    if source == "fewglue":
        if name not in FEWGLUE:
            raise ValueError(f"protocol.train_source: fewglue has no {name} (FewGLUE: {sorted(FEWGLUE)})")
        source = os.path.join("fewglue", FEWGLUE[name])
    path = resolve_data_path(source, root)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"protocol.train_source folder '{path}' does not exist (data root '{root}')")
    return get_task(name, cfg["dataset"]).load(path, "train")


def check_scored_splits(task: str, **splits: List) -> None:
    """A regression task's dev / test are scored by Pearson / Spearman, which need two scores that differ: one
    example stopped the run only after training (naming no split), and constant scores made every epoch 0.0,
    a real-looking number (the first epoch always selected)."""
    for name, exs in splits.items():
        scores = {float(e.label) for e in exs}
        if len(exs) < 2:
            raise ValueError(f"the {name} split of {task} has {len(exs)} example: Pearson / Spearman (every "
                             f"regression score) need at least 2 whose scores differ: give a larger {name} split "
                             "(dataset.max_eval / dev_from_train, or more rows in its file)")
        if len(scores) == 1:
            raise ValueError(f"the {name} split of {task} gives all its {len(exs)} examples the same score: "
                             "Pearson / Spearman are undefined there (a model would score 0.0 whatever it "
                             f"predicts): give a {name} split whose scores differ")


def check_dev_labels(task: str, dev: List, labels: List[str]) -> None:
    """A dev split of one label selects nothing: predicting that label everywhere scores 1.0 on accuracy and
    macro-F1, so the epoch (or sweep point) that collapsed onto it won, silently (a held-out test kept its say)."""
    seen = {int(e.label) for e in dev}
    if len(seen) == 1 and len(labels) > 1:
        only = labels[seen.pop()]
        raise ValueError(f"the dev split of {task} labels all its {len(dev)} example(s) '{only}': a model predicting "
                         f"'{only}' everywhere would score 1.0 on it, so it cannot select an epoch: give a dev split with "
                         "at least 2 labels (without a dev file, dataset.dev_from_train draws one from train, stratified by label)")


def prepare_splits(cfg: Dict, root: str) -> Splits:
    """train / dev / test for ``cfg['protocol']`` (default ``full``) and ``cfg['seed']``; dev is the reported
    split itself under ``selection: on_eval_set``."""
    from .lookup import get_task

    proto, seed = cfg.get("protocol") or {"name": "full"}, int(cfg["seed"])
    task = get_task(cfg["dataset"]["name"], cfg["dataset"])
    if proto["name"] == "few_shot" and task.regression:
        raise ValueError(f"protocol few_shot samples K examples per label, and {task.name} is a regression task "
                         "(no labels): use protocol.name: low_resource (K examples at random)")
    where = data_source(cfg, root)
    sizes: Dict = {}
    if proto["name"] == "full":
        train, dev, test, labels = load_task(cfg, root, where, sizes)
    else:
        pool, test, labels = original_train(cfg, root, where, sizes)
        if proto["name"] == "few_shot":
            k = proto["k"]
            dev_k = proto["dev_k"] or k
            source = load_fewglue(cfg, root) if proto["train_source"] else None
            train, dev = few_shot_splits(pool, k, dev_k, seed, labels, train_source=source,
                                         per=proto["k_per"])
        else:
            train, dev = low_resource_splits(pool, int(proto["k"]), int(proto["dev_size"]), seed)
    if cfg.get("selection", "held_out") == "on_eval_set":
        dev = list(test)
    if task.regression:
        check_scored_splits(task.name, dev=dev, test=test)
    else:
        check_dev_labels(task.name, dev, list(labels))
    line = where.describe(cfg["dataset"]["name"]) + (task.offline_note(where.path) if where.is_local else "")
    capped = sizes.get("test", len(test)) > len(test)
    cap = {"max_eval": int(cfg["dataset"]["max_eval"]), "kept": len(test), "of": sizes["test"]} if capped else None
    return Splits(list(train), list(dev), list(test), list(labels), line, cap)
