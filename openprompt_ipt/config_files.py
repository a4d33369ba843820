"""Where the shipped YAMLs are: the clone's top-level ``yamls/`` or, in an installed wheel, the copy
that setup.py's build step puts in the package (``openprompt_ipt/yamls``), so ``--config quickstart.yaml``
works from any directory either way."""
from __future__ import annotations

import os
from typing import List, Optional

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_YAMLS = os.path.normpath(os.path.join(PACKAGE_DIR, "..", "yamls"))  # a clone's (or editable install's)
BUNDLED = "yamls"  # the folder inside the package that a built wheel carries


def shipped_yamls() -> Optional[str]:
    """The shipped YAML folder: a clone's yamls/ first, else the wheel's copy; None if neither exists."""
    if os.path.isdir(REPO_YAMLS):
        return REPO_YAMLS
    from importlib.resources import files

    bundled = files(__package__) / BUNDLED
    # a wheel installs as plain files, so the resource is a real folder
    return str(bundled) if bundled.is_dir() else None


def config_search_dirs() -> List[str]:
    """Where a bare ``--config NAME.yaml`` is looked up: ./yamls of the working directory, then the shipped ones."""
    dirs = ["yamls"]
    shipped = shipped_yamls()
    if shipped and os.path.abspath("yamls") != shipped:
        dirs.append(shipped)
    return dirs


def shipped_file(path: str) -> str:
    """``path`` as given if it is a file (or absolute); else a ``yamls/...`` path found in the shipped
    folder (a pretraining YAML naming ``yamls/corpus_13cat.yaml`` runs from any directory); else ``path``."""
    if os.path.isfile(path) or os.path.isabs(path):
        return path
    head, _, rest = path.replace("\\", "/").partition("/")
    shipped = shipped_yamls()
    if head == "yamls" and rest and shipped:
        candidate = os.path.join(shipped, rest)
        if os.path.isfile(candidate):
            return candidate
    return path


def list_configs() -> List[str]:
    """The shipped experiment / pretraining YAMLs, relative to the shipped folder, sorted."""
    root = shipped_yamls()
    if root is None:
        return []
    names = []
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith((".yaml", ".yml")):
                names.append(os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/"))
    return sorted(names)
