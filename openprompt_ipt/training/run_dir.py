"""May a new run write into this directory? The one rule every entry point shares: experiments/run.py
(its --seeds groups and sweeps), benchmarks/accuracy.py and the pretraining / PPT scripts.

A directory that holds a run is never replaced silently. A finished run (its result file exists) or an
unfinished one (anything else in the directory: checkpoints, a log) is refused in one line, before
anything in it is touched, unless ``--resume`` continues it or ``--overwrite`` replaces it.
``--overwrite`` clears the old run only once the new one is ready to start (its config read and
checked, its data found), and clears all of it, so a half-finished new run never mixes with old files.
A run holds its directory while it runs (``hold`` / ``holding``: an OS file lock); a second process is
refused in one line naming the first, with or without ``--resume`` / ``--overwrite``.
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
    """``--overwrite``: remove the old runs whole (results, weights, checkpoints, logs, sweep points); a run
    another process is running in is refused first (``RunDirBusy``), nothing removed."""
    paths = list(paths)
    for path in paths:
        check_not_busy(path)
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


# ---------------------------------------------------------------- one process per run directory (issue #43)
# An OS lock (fcntl.flock) on '<parent>/.<name>.lock', beside the directory so that --overwrite's rmtree and
# an export's rename never remove it while held. The kernel drops it when the process dies, so a killed
# run leaves no stale lock; the file holds the pid only to name the holder. Several ranks of one run
# (torchrun / accelerate) share the directory: only rank 0 takes the lock.
_HELD: dict = {}  # lock path -> (open file, parent folders we created)


class RunDirBusy(RunDirExists):
    """Another live process holds the run directory: one line naming it (pid, command)."""


def lock_path(path: str) -> str:
    path = os.path.abspath(path)
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock")


def _holder(lock_file: str) -> str:
    try:
        with open(lock_file) as f:
            pid = f.read().strip()
    except OSError:
        pid = ""
    if not pid.isdigit():
        return "another process"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = " ".join(a.decode(errors="replace") for a in f.read().split(b"\0") if a)
    except OSError:
        cmd = ""
    if len(cmd) > 120:
        cmd = cmd[:117] + "..."
    return f"process {pid}" + (f" ({cmd})" if cmd else "")


def _main_rank() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def hold(path: str, wait: bool = False) -> bool:
    """Take the lock of run directory ``path`` for this process (until ``release`` or the process ends);
    ``RunDirBusy`` when another process holds it (``wait``: wait for it instead, for a short critical section
    such as a group's summary.json). False when this process already held it."""
    import fcntl

    lock = lock_path(path)
    if lock in _HELD or not _main_rank():
        return False
    for _ in range(20):  # the file may be unlinked by its releasing holder between our open and flock
        parent, made = os.path.dirname(lock), []
        walk = parent
        while not os.path.isdir(walk):
            made.append(walk)
            walk = os.path.dirname(walk)
        os.makedirs(parent, exist_ok=True)
        try:
            f = open(lock, "a+")
        except FileNotFoundError:  # a releasing holder removed the empty parent just now
            continue
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            f.close()
            raise RunDirBusy(f"directory '{path}' is in use by {_holder(lock)}, which is running in it now: wait for it "
                             "to finish (or stop it), or choose another --output-dir; --resume and --overwrite "
                             "wait for it too") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(f.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # we locked a file its holder had already removed: take the current one
            f.close()
            continue
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        _HELD[lock] = (f, made)
        return True
    raise RunDirBusy(f"directory '{path}': could not take its lock {lock}")


def release(path: str) -> None:
    """Give the lock back: the lock file (and the empty folders ``hold`` made for it) go first."""
    lock = lock_path(path)
    f, made = _HELD.pop(lock, (None, []))
    if f is None:
        return
    try:
        os.remove(lock)
    except OSError:
        pass
    f.close()
    for folder in made:  # innermost first; a folder that holds anything (the run) stays
        try:
            os.rmdir(folder)
        except OSError:
            break


def held() -> List[str]:
    """The run directories this process holds now."""
    return [os.path.join(os.path.dirname(lock), os.path.basename(lock)[1:-len(".lock")]) for lock in _HELD]


class holding:
    """``with holding(paths):`` each run directory locked for the block (``hold``), released after it."""

    def __init__(self, paths: Iterable[str], wait: bool = False):
        self.paths, self.taken, self.wait = sorted(set(paths)), [], wait

    def __enter__(self):
        try:
            for p in self.paths:
                if hold(p, self.wait):
                    self.taken.append(p)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in reversed(self.taken):
            release(p)
        self.taken = []
        return False


def check_not_busy(path: str) -> None:
    """``RunDirBusy`` when another process holds ``path`` (this process's own locks pass)."""
    if lock_path(path) in _HELD or not os.path.exists(lock_path(path)):
        return
    with holding([path]):
        pass
