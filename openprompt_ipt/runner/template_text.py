"""Does the template's text match the dataset's texts? (issue #43 item 2, checked when the config is read)

A ``{"placeholder":"text_b"}`` on a dataset with one text per example (``text_classification``, SST-2,
IMDB, ...) trained and predicted with an empty string in its place: refused, naming the placeholder,
the dataset and the fix. A pair dataset (CB, ``text_pair``) whose template never reads ``text_b`` loses
every example's second text: one warning.
"""
from __future__ import annotations

import re
import warnings
from typing import Dict, Optional

_TEXT_B = re.compile(r"""["']placeholder["']\s*:\s*["']text_b["']|<text_b>""")
PLACEHOLDER = '{"placeholder":"text_b"}'


class UnusedTextBWarning(UserWarning):
    """A pair dataset's second text is never put into the template."""


def uses_text_b(text) -> Optional[bool]:
    """Whether a template ``text`` (OpenPrompt's string or list of parts) reads text_b; None if unknown."""
    if isinstance(text, str):
        return bool(_TEXT_B.search(text))
    if isinstance(text, (list, tuple)):
        return any((isinstance(p, dict) and p.get("placeholder") == "text_b")
                   or (isinstance(p, str) and bool(_TEXT_B.search(p))) for p in text)
    return None


def second_text(ds: Dict) -> Optional[str]:
    """The dataset's text_b columns ('' for a one-text dataset), or None for a name we do not know."""
    from ..data.custom import DEFAULT_COLUMNS, GENERIC
    from ..data.tasks import TASKS

    name = ds.get("name")
    if name in GENERIC:
        return (f"column '{(ds.get('columns') or {}).get('text_b', DEFAULT_COLUMNS['text_b'])}'"
                if "text_b" in GENERIC[name] else "")
    if name in TASKS:
        return f"field '{TASKS[name].text_b[0]}'" if TASKS[name].text_b else ""
    return None


def check_template_text(config: Dict) -> None:
    template = config["template"]
    text = (config.get(template) or {}).get("text")
    used, columns = uses_text_b(text), second_text(config["dataset"])
    if used is None or columns is None:
        return
    name = config["dataset"]["name"]
    if used and not columns:
        pair = ("dataset.name: text_pair with dataset.columns.text_b" if name in ("text_classification", "text_regression")
                else "a two-text dataset")
        raise ValueError(f"{template}.text uses {PLACEHOLDER}, but dataset '{name}' has one text per example "
                         f"(text_a only: text_b would be an empty string): remove {PLACEHOLDER} from {template}.text, "
                         f"or use {pair}")
    if columns and not used:
        warnings.warn(f"{template}.text never uses {PLACEHOLDER}: the second text of every '{name}' example "
                      f"({columns}) is left out; add {PLACEHOLDER} to {template}.text unless that is meant",
                      UnusedTextBWarning, stacklevel=3)
