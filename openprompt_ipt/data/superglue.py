"""SuperGLUE premise/hypothesis tasks (CB, RTE) as OpenPrompt ``InputExample``s, from a local jsonl
directory or the 🤗 hub.

Local layout (as in ``../shared/assets/superglue/CB``): ``train.jsonl``, ``val.jsonl`` with fields
``premise``, ``hypothesis``, ``label`` (a string), ``idx``. Offline, point ``path`` at that folder;
online, ``path: super_glue`` + ``name: cb`` / ``rte`` loads the hub copy (integer labels).
"""
from __future__ import annotations

import os
from typing import List, Optional

from openprompt.data_utils import InputExample

CB_LABELS = ["entailment", "contradiction", "neutral"]
RTE_LABELS = ["entailment", "not_entailment"]
PAIR_TASKS = {"cb": CB_LABELS, "rte": RTE_LABELS}
SPLIT_FILES = {"train": "train.jsonl", "validation": "val.jsonl", "val": "val.jsonl", "test": "test.jsonl"}


def load_cb(path: str, split: str, name: str = "cb") -> List[InputExample]:
    """Rows of one CB split. ``path`` is a local directory or a hub dataset name."""
    return load_pair_task("cb", path, split, name)


def load_pair_task(task: str, path: str, split: str, name: str | None = None) -> List[InputExample]:
    """Rows of one split of ``task`` (cb | rte). ``path`` is a local directory or a hub dataset name."""
    import datasets

    labels, name, TASK = PAIR_TASKS[task], name or task, task.upper()

    if os.path.isdir(path):
        file = os.path.join(path, SPLIT_FILES.get(split, f"{split}.jsonl"))
        if not os.path.isfile(file):
            raise FileNotFoundError(f"{TASK} split '{split}' not found at {file}: set dataset.path to a SuperGLUE "
                                    f"{TASK} folder (e.g. ../shared/assets/superglue/{TASK}) or IPT_ASSETS")
        rows = datasets.load_dataset("json", data_files=file, split="train")
    elif os.path.sep in path or path.startswith("."):
        raise FileNotFoundError(f"{TASK} data directory '{path}' does not exist: set dataset.path or IPT_ASSETS")
    else:
        rows = datasets.load_dataset(path, name, split="validation" if split == "val" else split)
    return [_example(r, i, labels, TASK) for i, r in enumerate(rows)]


def _example(row: dict, i: int, labels: List[str], task: str) -> InputExample:
    label: Optional[int] = row.get("label")
    if isinstance(label, str):
        if label not in labels:
            raise ValueError(f"unknown {task} label '{label}' in row {i}: expected one of {labels}")
        label = labels.index(label)
    if label is not None and label < 0:
        label = None  # the hub's unlabelled test split uses -1
    return InputExample(guid=str(row.get("idx", i)), text_a=row["premise"], text_b=row["hypothesis"], label=label)
