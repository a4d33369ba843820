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
