"""A run's local folders, recorded as the absolute folders it used.

A relative ``plm.model_path`` (``models/bert``) or ``dataset.path`` (``data/mine``) names a folder in the directory
the command runs in. The runner records it absolute in the run's config.json (and every checkpoint's), so that
``--resume`` from another directory continues on the same model and data (it loaded whatever the relative path
named there: another model of the same shapes without a word), and ``init_from`` compares backbones by folder.
A recorded folder that is gone is one line. Hub names, aliases (``minilm``) and paths under the data root stay
as written.
"""
from __future__ import annotations

import json
import os
from typing import Dict, Optional

PATH_KEYS = (("plm", "model_path"), ("dataset", "path"))


def recorded_config(run_dir: Optional[str]) -> Optional[Dict]:
    """The config a run in ``run_dir`` saved (finished, a checkpoint's, or a sweep point's: they share the
    paths), or None; a damaged file is left to the resume check, which names it."""
    for dirpath, dirnames, files in os.walk(run_dir) if run_dir and os.path.isdir(run_dir) else ():
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))  # .tmp-step-*: being written
        if "config.json" in files:
            try:
                with open(os.path.join(dirpath, "config.json")) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
    return None


def _written_as(recorded: str, given: str) -> bool:
    """``recorded`` (absolute) is where ``given`` (relative) pointed: it ends with it."""
    return os.path.normpath(recorded).endswith(os.sep + os.path.normpath(given))


def record_local_paths(cfg: Dict, saved: Optional[Dict] = None, run_dir: str = "") -> None:
    """Make ``cfg``'s relative local folders absolute (in place). ``saved``: the config the run in ``run_dir``
    recorded (``--resume``): a path written as it was then is the folder recorded then, from any directory."""
    for section, key in PATH_KEYS:
        node = cfg.get(section) or {}
        given = node.get(key)
        if not isinstance(given, str) or not given or os.path.isabs(given):
            continue
        recorded = ((saved or {}).get(section) or {}).get(key)
        if recorded == given:  # recorded relative, by a release before this one: as it was
            continue
        if isinstance(recorded, str) and os.path.isabs(recorded) and _written_as(recorded, given):
            if not os.path.isdir(recorded):
                raise FileNotFoundError(f"--resume: the run in '{run_dir}' used {section}.{key} '{given}' as the folder "
                                        f"'{recorded}', which is gone: put it back there, or start a new run "
                                        "(--overwrite, or another --output-dir)")
            node[key] = recorded
        elif os.path.isdir(given):
            node[key] = os.path.abspath(given)


def same_backbone(source_path: str, source_dir: Optional[str], model_path: str) -> bool:
    """Is the backbone a run recorded (its ``plm.model_path``, and ``backbone_dir`` from its metrics.json) the one
    ``model_path`` names here? Local folders compare by where they are, not by how they were written."""
    here = os.path.abspath(model_path) if os.path.isdir(model_path) else model_path
    there = source_dir or (source_path if os.path.isabs(source_path) else None)
    if there is None:  # a hub name or alias, or a run from before backbone_dir: by name
        return str(source_path) == str(model_path)
    return os.path.realpath(there) == os.path.realpath(here)
