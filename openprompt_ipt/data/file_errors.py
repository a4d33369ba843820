"""A malformed local json / jsonl / csv file read through 🤗 datasets: its loaders log their own error line to
stderr before raising, and the error names an Arrow batch's row, not the file's line. ``datasets_quiet`` silences
that logger around a load; ``json_problem`` finds the line to name once a load failed (files that load are never
read twice)."""
from __future__ import annotations

import contextlib
import gzip
import json
import logging


@contextlib.contextmanager
def datasets_quiet():
    """🤗 datasets logs nothing inside (its errors still raise: the caller's one line says what went wrong)."""
    from datasets.utils import logging as ds_logging

    level = ds_logging.get_verbosity()
    ds_logging.set_verbosity(logging.CRITICAL + 1)
    try:
        yield
    finally:
        ds_logging.set_verbosity(level)


def json_problem(path: str) -> str:
    """Where the JSON document or JSON-lines file ``path`` is malformed ('line N is not JSON (...)', 'line N is a
    list, not a JSON object'), or '' when it parses (the failure was elsewhere)."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return ""
    try:
        json.loads(text)  # one document (a list of rows, a dict): fine
        return ""
    except json.JSONDecodeError as whole:
        document = whole
    lines = text.splitlines()
    first = next((n for n, line in enumerate(lines, 1) if line.strip()), None)
    if first is not None and _parses(lines[first - 1]) is None:  # not JSON lines either: the document's own error
        return f"line {document.lineno} is not JSON ({document.msg})"
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        value = _parses(line)
        if value is None:
            try:
                json.loads(line)
            except json.JSONDecodeError as e:
                return f"line {n} is not JSON ({e.msg})"
        elif not isinstance(value[0], dict):
            return f"line {n} is a {type(value[0]).__name__}, not a JSON object"
    return ""


def _parses(line: str):
    """``(value,)`` when ``line`` is one JSON value, else None."""
    try:
        return (json.loads(line),)
    except json.JSONDecodeError:
        return None
