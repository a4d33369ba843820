"""A task by name: a registered one (``tasks.py``) or your own files (``custom.py``).

Its own module so that imports point one way: ``custom`` builds on ``tasks``, and this reads both."""
from __future__ import annotations

import dataclasses
import difflib
from typing import Optional

from .custom import GENERIC, custom_task
from .tasks import TASKS, Task


def get_task(name: str, dataset: Optional[dict] = None) -> Task:
    """A registered task, or your own (``text_classification`` / ``text_pair``, described by the
    ``dataset`` section: ``data/custom.py``)."""
    if name in GENERIC:
        if dataset is None:
            raise ValueError(f"dataset '{name}' is described by its YAML: pass the dataset section")
        return custom_task(dataset)
    if name in TASKS and (dataset or {}).get("skip_bad_rows"):
        return dataclasses.replace(TASKS[name], skip_bad_rows=True)
    if name not in TASKS:
        valid = sorted(TASKS) + sorted(GENERIC)
        match = difflib.get_close_matches(str(name), valid, n=1)
        hint = f" (did you mean '{match[0]}'?)" if match else ""
        raise ValueError(f"unknown dataset '{name}'{hint}: valid names are {sorted(TASKS)}, or {sorted(GENERIC)} "
                         "for your own files (docs/data.md)")
    return TASKS[name]
