"""May a new run write into this directory? The one rule every entry point shares: experiments/run.py
(its --seeds groups and sweeps), benchmarks/accuracy.py and the pretraining / PPT scripts.

A directory that holds a run is never replaced silently. A finished run (its result file exists) or an
unfinished one (anything else in the directory: checkpoints, a log) is refused in one line, before
anything in it is touched, unless ``--resume`` continues it or ``--overwrite`` replaces it.
``--overwrite`` clears the old run only once the new one is ready to start (its config read and
checked, its data found), and clears all of it, so a half-finished new run never mixes with old files.
"""
from __future__ import annotations

import os
import shutil
from typing import Iterable, List, Optional

RESULT_FILE = "metrics.json"  # written last by a finished run (runner/experiment.py, runner/runs.py)


class RunDirExists(ValueError):
    """A new run would replace an existing one: one line naming the directory and the three ways on."""


def run_state(path: str, finished_file: str = RESULT_FILE) -> Optional[str]:
    """'finished' (``finished_file`` exists), 'unfinished' (anything else in it) or None (absent / empty)."""
    if not os.path.isdir(path) or not os.listdir(path):
        return None
    return "finished" if os.path.isfile(os.path.join(path, finished_file)) else "unfinished"


def _unfinished_detail(path: str) -> str:
    from .checkpoint import latest_checkpoint

    ckpt = latest_checkpoint(path)
    return f"checkpoint {os.path.basename(ckpt)}" if ckpt else "no checkpoint yet"


def refusal(path: str, state: str, detail: str, more: int = 0, resumable: bool = True) -> RunDirExists:
    """The one line: which directory, finished or not, and what the user can do."""
    others = f" (and {more} more run director{'y' if more == 1 else 'ies'})" if more else ""
    if state == "finished":
        ways = "--overwrite replaces it" + (" (--resume keeps it and runs only what is missing)" if resumable else "")
        what = f"a finished run ({detail})"
    else:
        ways = "--resume continues it, --overwrite replaces it"
        what = f"an unfinished run ({detail})"
    return RunDirExists(f"directory '{path}' already holds {what}{others}: {ways}, or choose another --output-dir")


def check_new_runs(paths: Iterable[str], resume: bool, overwrite: bool) -> List[str]:
    """Raise ``RunDirExists`` for the first of ``paths`` that holds a run, unless ``resume`` or
    ``overwrite``; returns the paths that hold one (what ``--overwrite`` will clear)."""
    taken = [(p, s) for p in paths for s in [run_state(p)] if s]
    if taken and not (resume or overwrite):
        path, state = taken[0]
        detail = RESULT_FILE if state == "finished" else _unfinished_detail(path)
        raise refusal(path, state, detail, more=len(taken) - 1)
    return [p for p, _ in taken]


def clear_runs(paths: Iterable[str]) -> None:
    """``--overwrite``: remove the old runs whole (results, weights, checkpoints, logs, sweep points)."""
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
