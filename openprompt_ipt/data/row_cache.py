"""A data file's rows read once per process: every seed of a group (and a sweep point with its own ``dataset.*``
keys) read its files again (IMDB: ~1.4 s a seed, before its first line).

The key is the file's path, the reader's options (its file spec: columns, header, encoding, ...) and the sha256
of its bytes: a file edited or replaced since, even by one of the same size and mtime (``cp -p``), is read again.
A read that fails is not kept: it fails again, with the same message. Each caller gets its own list."""
from __future__ import annotations

import os
from collections import OrderedDict
from typing import Callable, List, Tuple

from ..serialization import file_sha256

KEEP = 8  # files kept (a group reads train / dev / test, a few-shot source besides): the oldest goes first
_rows: "OrderedDict[tuple, Tuple[tuple, tuple]]" = OrderedDict()


def read_once(spec, folder: str, read: Callable[[List[str]], list]) -> Tuple[list, List[str]]:
    """(rows, bad-row lines) of ``spec``'s file in ``folder``; ``read(bad)`` reads it, appending to ``bad``."""
    file = os.path.abspath(os.path.join(folder, spec.name))
    key = (file, type(spec), spec, file_sha256(file))
    if key not in _rows:
        for old in [k for k in _rows if k[0] == file]:  # an older content of this file: never read again
            del _rows[old]
        bad: List[str] = []
        rows = read(bad)
        _rows[key] = (tuple(rows), tuple(bad))
        while len(_rows) > KEEP:
            _rows.popitem(last=False)
    _rows.move_to_end(key)
    rows, bad = _rows[key]
    return list(rows), list(bad)


def clear() -> None:
    _rows.clear()
