"""SuperGLUE premise/hypothesis tasks (CB, RTE): thin wrappers over the task registry (``tasks.py``).

Local layout (as in ``../shared/assets/superglue/CB``): ``train.jsonl``, ``val.jsonl`` with fields
``premise``, ``hypothesis``, ``label`` (a string), ``idx``. Offline, point ``path`` at that folder;
online, ``path: super_glue`` (+ ``name: cb`` / ``rte``) or ``path: hub`` loads the hub copy.
"""
from __future__ import annotations

from typing import List

from openprompt.data_utils import InputExample

from .tasks import TASKS

CB_LABELS = list(TASKS["cb"].labels)
RTE_LABELS = list(TASKS["rte"].labels)
PAIR_TASKS = {"cb": CB_LABELS, "rte": RTE_LABELS}


def load_cb(path: str, split: str, name: str = "cb") -> List[InputExample]:
    """Rows of one CB split. ``path`` is a local directory or a hub dataset name."""
    return load_pair_task("cb", path, split, name)


def load_pair_task(task: str, path: str, split: str, name: str | None = None) -> List[InputExample]:
    """Rows of one split of ``task`` (cb | rte); unlabelled rows get ``label=None``."""
    if task not in PAIR_TASKS:
        raise ValueError(f"unknown pair task '{task}': choose one of {sorted(PAIR_TASKS)}")
    return TASKS[task].load(path, split, hub_name=name, labelled=False)
