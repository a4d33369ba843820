"""OpenPrompt's file keys in our YAML schema: ``<template>.file_path`` / ``<verbalizer>.file_path`` (+ ``choice``)
are read into ``text`` / ``label_words`` when the config is read, as ``openprompt_schema.py`` does for OpenPrompt's
schema. The keys passed the key check before, and then crashed after the data had loaded (AttributeError: choice)."""
from __future__ import annotations

from typing import Dict


def read_template_file(config: Dict, base_dir: str) -> None:
    """``<template>.file_path`` (+ ``choice``, OpenPrompt's keys) becomes ``<template>.text`` when the config is read,
    as for OpenPrompt's schema: the template itself never saw a file (AttributeError 'choice' without one)."""
    from .openprompt_schema import read_template_text

    template = config["template"]
    section = config.get(template) or {}
    if section.get("file_path") is not None:
        if section.get("text") is not None:
            raise ValueError(f"{template}: give text or file_path, not both")
        section["text"] = read_template_text(section["file_path"], section.get("choice"), base_dir,
                                             f"{template}.file_path")
    for key in ("file_path", "choice"):
        section.pop(key, None)


def read_verbalizer_file(config: Dict, base_dir: str) -> None:
    """``<verbalizer>.file_path`` (+ ``choice``) becomes ``label_words`` when the config is read, in the task's label
    order (``dataset.labels`` or the registered task's), as for OpenPrompt's schema."""
    from ..data.tasks import TASKS
    from .openprompt_schema import read_label_words

    verbalizer, ds = config["verbalizer"], config["dataset"]
    section = config.get(verbalizer) or {}
    if section.get("file_path") is not None:
        if section.get("label_words") is not None:
            raise ValueError(f"{verbalizer}: give label_words or file_path, not both")
        labels = ds.get("labels") or (TASKS[ds["name"]].labels if ds["name"] in TASKS else None)
        section["label_words"] = read_label_words(section["file_path"], section.get("choice"), base_dir,
                                                  f"{verbalizer}.file_path", labels)
    for key in ("file_path", "choice"):
        section.pop(key, None)
