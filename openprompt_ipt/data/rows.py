"""Rows of a user's file checked before they become examples: texts that are null, numbers or empty
(``str()`` would train / score them as "None" or "3"), and the line each row came from, so every
message names the file, the line and the column (docs/bad_input.md)."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence


class Row(dict):
    """A file row (column -> value) that remembers its file and 1-based line."""
    line: int = 0
    file: str = ""

    @classmethod
    def at(cls, values: dict, line: int, file: str = "") -> "Row":
        row = cls(values)
        row.line, row.file = line, file
        return row


def row_name(row, i: int, default: str = "input row") -> str:
    """'rows.jsonl line 3' for a Row read from a file, else '<default> <i>' (0-based)."""
    line, file = getattr(row, "line", 0), getattr(row, "file", "")
    return f"{file} line {line}" if line and file else f"{default} {i}"


class BadRows(ValueError):
    """Rows that cannot be used; ``lines`` holds one message per row (``str`` joins them)."""

    def __init__(self, lines: List[str], summary: str = ""):
        super().__init__("\n".join(lines + ([summary] if summary else [])))
        self.lines, self.summary = lines, summary


def text_problem(value) -> Optional[str]:
    """Why ``value`` is not a usable text ('is null', 'is a number (3)', 'is empty'), or None."""
    if value is None:
        return "is null"
    if isinstance(value, bool):
        return f"is {str(value).lower()}, not text"
    if isinstance(value, (int, float)):
        return f"is a number ({value!r}), not text"
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not text"
    if not value.strip():
        return "is empty"
    return None


def misspelling(row: dict, keys: Sequence[str], known: Sequence[str] = ()) -> str:
    """`` (its field 'hypothesys': did you mean 'hypothesis'?)`` when a field of ``row`` that is not in
    ``known`` is close to one of ``keys`` (the column the row lacks), else ''."""
    import difflib

    for key in keys:
        near = difflib.get_close_matches(key, [k for k in row if isinstance(k, str) and k not in known], n=1)
        if near:
            return f" (its field '{near[0]}': did you mean '{key}'?)"
    return ""


def row_problems(row: dict, fields: Dict[str, Sequence[str]], required: bool = True) -> List[str]:
    """'column 'premise' (text_a) is null' for each role whose column (the first of ``fields[role]``
    present in ``row``) is not a usable text; with ``required`` a role with none of its columns too
    (naming a field of the row that looks like a misspelling of it)."""
    problems = []
    used = [k for keys in fields.values() for k in keys]
    for role, keys in fields.items():
        present = [k for k in keys if k in row]
        if not present:
            if required and keys:
                problems.append((f"has no column '{keys[0]}' ({role})" if len(keys) == 1
                                 else f"has none of the columns {list(keys)} ({role})") + misspelling(row, keys, used))
            continue
        why = text_problem(row[present[0]])
        if why:
            problems.append(f"column '{present[0]}' ({role}) {why}")
    return problems


SKIP_HINT = "fix the row, or set dataset.skip_bad_rows: true to skip such rows"
MAX_LISTED = 20  # bad rows named one by one; the rest are counted


def listed(lines: List[str]) -> List[str]:
    """At most ``MAX_LISTED`` lines, then 'and N more'."""
    more = len(lines) - MAX_LISTED
    return lines[:MAX_LISTED] + ([f"and {more} more"] if more > 0 else [])


def refuse_rows(bad: List[str], file: str) -> None:
    """Every bad row of ``file`` at once (issue #43 item 5): one bad row is one line (+ the fix); several
    are a ``BadRows`` with a line per row (up to ``MAX_LISTED``, then 'and N more') and the fix."""
    if len(bad) == 1:
        raise ValueError(f"{bad[0]}: {SKIP_HINT}")
    if bad:
        raise BadRows(listed(bad), f"{len(bad)} bad rows in {file}: fix them, or set dataset.skip_bad_rows: true to "
                                   "skip such rows")


def report_skipped(file: str, skipped: List[str]) -> None:
    """The one line a run prints when dataset.skip_bad_rows left rows out of ``file``."""
    if skipped:
        print(f"note: skipped {len(skipped)} bad row(s) of {file} (dataset.skip_bad_rows): "
              f"{'; '.join(skipped[:3])}{'; ...' if len(skipped) > 3 else ''}")
