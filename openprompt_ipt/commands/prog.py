"""The console command's name, and what the user ran, for messages that name it (a module of its own: the
commands import it, and the package imports the commands)."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

PROG = "openprompt-ipt"


def invoked_as(argv: Optional[List[str]], prog: Optional[str], command: str) -> str:
    """What the user ran, for messages that name it: the console command ``openprompt-ipt <command>`` (also in a
    clone: an editable install's command is still that command), else the script (``experiments/<command>.py``, or
    a peer runner) when it ran as one, or is called from Python in a clone."""
    if (prog or "").startswith(PROG):
        return prog
    if argv is None and os.path.basename(sys.argv[0]).endswith(".py") and os.path.basename(sys.argv[0]) != "__main__.py":
        return sys.argv[0]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", f"{command}.py")
    if argv is not None and os.path.isfile(script):  # called from Python in a clone (the script's main)
        return os.path.relpath(os.path.normpath(script))
    return f"{PROG} {command}"


def sibling(argv: Optional[List[str]], prog: Optional[str], command: str, other: str) -> str:
    """How the user runs ``other`` where they ran ``command``: ``openprompt-ipt <other>`` after the console command,
    ``experiments/<other>.py`` beside the script they ran (``experiments/predict.py`` -> ``experiments/run.py``); for
    messages of the runner, which cannot import this (``predict`` tells the user to train a run again)."""
    ran = invoked_as(argv, prog, command)
    if not ran.startswith(PROG) and os.path.basename(ran) == f"{command}.py":
        script = os.path.join(os.path.dirname(ran), f"{other}.py")
        if os.path.isfile(script):  # beside the script run; called from Python in a clone: the docs' name for it
            return script if argv is None else os.path.join("experiments", f"{other}.py")
    return f"{PROG} {other}"
