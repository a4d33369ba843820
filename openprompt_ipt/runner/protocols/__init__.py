"""Data protocols (docs/protocols.md): ``full`` (train / dev held out of train / report on the task's
test split), ``few_shot`` (IPT §5.1) and ``low_resource`` (IDPG §4.4); selection ``held_out`` or the
explicitly labelled ``on_eval_set``."""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Dict, List

from .few_shot import cv_folds, few_shot_splits, sample_per_label  # noqa: F401
from .low_resource import low_resource_splits  # noqa: F401
from .selection import ON_EVAL_SET_LABEL, label_result  # noqa: F401

FEWGLUE = {"cb": "CB", "rte": "RTE", "multirc": "MultiRC", "boolq": "BoolQ"}


@dataclass
class Splits:
    train: List
    dev: List
    test: List
    labels: List[str]
    source: str = ""  # the line saying where the data came from (data/sources.py)

    def as_tuple(self):
        return self.train, self.dev, self.test, self.labels


def original_train(cfg: Dict, root: str, source=None):
    """(the task's original labelled train, the reported split, labels), with load_task's handling of
    train_from / test_from_train; in a seed-independent order."""
    from ..experiment import load_task

    full = copy.deepcopy(cfg)
    full["dataset"]["max_train"] = None
    train, dev, test, labels = load_task(full, root, source)
    return sorted(train + dev, key=lambda ex: str(ex.guid)), test, labels


def load_fewglue(cfg: Dict, root: str) -> List:
    from ...data.lookup import get_task
    from ..experiment import resolve_data_path

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


def make_splits(cfg: Dict, root: str) -> Splits:
    """train / dev / test for ``cfg['protocol']`` and ``cfg['seed']``; dev is the reported split
    itself under ``selection: on_eval_set``."""
    from ..experiment import data_source, load_task

    from ...data.lookup import get_task

    proto, seed = cfg["protocol"], int(cfg["seed"])
    task = get_task(cfg["dataset"]["name"], cfg["dataset"])
    if proto["name"] == "few_shot" and task.regression:
        raise ValueError(f"protocol few_shot samples K examples per label, and {task.name} is a regression task "
                         "(no labels): use protocol.name: low_resource (K examples at random)")
    where = data_source(cfg, root)
    if proto["name"] == "full":
        train, dev, test, labels = load_task(cfg, root, where)
    else:
        pool, test, labels = original_train(cfg, root, where)
        if proto["name"] == "few_shot":
            k = proto["k"]
            dev_k = proto["dev_k"] or k
            source = load_fewglue(cfg, root) if proto["train_source"] else None
            train, dev = few_shot_splits(pool, k, dev_k, seed, labels, train_source=source,
                                         per=proto["k_per"])
        else:
            train, dev = low_resource_splits(pool, int(proto["k"]), int(proto["dev_size"]), seed)
    if cfg["selection"] == "on_eval_set":
        dev = list(test)
    line = where.describe(cfg["dataset"]["name"]) + (task.offline_note(where.path) if where.is_local else "")
    return Splits(list(train), list(dev), list(test), list(labels), line)
