"""What ``--quiet`` and Ctrl-C print (issue #43 item 7).

``quiet_libraries()``: 🤗 datasets' "Generating train split" bars and transformers' loading bars are off
for the block (they ignore our ``show_progress``). ``interrupted_line``: the one line a run stopped by
Ctrl-C prints instead of a traceback, naming its newest checkpoint and the ``--resume`` command.
``sigterm_interrupts()``: for the block, SIGTERM (``kill``, a scheduler's pre-emption) takes Ctrl-C's path
(``Terminated``, a KeyboardInterrupt), so a pre-empted run releases its lock and prints that line too.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from typing import List, Optional

_ENV = ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS")


@contextlib.contextmanager
def quiet_libraries(quiet: bool = True):
    if not quiet:
        yield
        return
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update({k: "1" for k in _ENV})  # read when the libraries are first imported
    restore = []
    if "datasets" in sys.modules:  # already imported: switch its bars off directly
        import importlib

        try:  # datasets >= 2.14
            bars = importlib.import_module("datasets.utils.tqdm")
            off, on, disabled = bars.disable_progress_bars, bars.enable_progress_bars, bars.are_progress_bars_disabled
        except (ImportError, AttributeError):
            bars = importlib.import_module("datasets.utils.logging")
            off, on, disabled = bars.disable_progress_bar, bars.enable_progress_bar, lambda: not bars.is_progress_bar_enabled()
        if not disabled():
            off()
            restore.append(on)
    if "transformers" in sys.modules:
        from transformers.utils import logging as tf_logging

        if tf_logging.is_progress_bar_enabled():
            tf_logging.disable_progress_bar()
            restore.append(tf_logging.enable_progress_bar)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for fn in restore:
            fn()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be; the command exits with ``exit_code`` (128 + 15),
    which schedulers read as "terminated"."""
    exit_code = 128 + signal.SIGTERM


def interrupted_exit_code(error: KeyboardInterrupt) -> int:
    return getattr(error, "exit_code", 130)  # Ctrl-C: 128 + SIGINT


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM raises ``Terminated`` in the block, as SIGINT raises KeyboardInterrupt; the previous handler is back
    after it. Only a single process's main thread: signal handlers live there, and under torchrun /
    accelerate the launcher forwards SIGTERM to every rank, where an unwinding rank would wait on dead peers."""
    single = int(os.environ.get("WORLD_SIZE", "1")) <= 1
    if not single or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)  # None: set outside Python


def newest_checkpoint(folder: str) -> Optional[str]:
    """The newest checkpoint of an unfinished run under ``folder`` (any seed, sweep point or fold), or None. A
    finished run keeps its last checkpoint, but --resume keeps that run: it is not where the stopped one goes on."""
    from ..training.checkpoint import latest_checkpoint

    found = []
    for dirpath, dirnames, filenames in os.walk(folder) if os.path.isdir(folder) else ():
        if "checkpoints" in dirnames and "metrics.json" not in filenames:
            ckpt = latest_checkpoint(dirpath)
            if ckpt:
                found.append(ckpt)
    return max(found, key=os.path.getmtime) if found else None


def resume_command(script: str, argv: List[str]) -> str:
    """The command that continues this run: the same arguments, --overwrite dropped, --resume added."""
    args = [a for a in argv if a != "--overwrite"]
    if "--resume" not in args:
        args.append("--resume")
    head = script.split() if script.startswith("openprompt-ipt") else ["python", script]  # the console command as is
    return " ".join(shlex.quote(a) for a in head + args)


def interrupted_line(run_folder: str, script: str, argv: List[str]) -> str:
    ckpt = newest_checkpoint(run_folder)
    where = f"last checkpoint {ckpt}" if ckpt else f"no checkpoint yet in {run_folder} (--resume starts it again)"
    return f"interrupted: {where}; continue with: {resume_command(script, argv)}"
