"""Tables (markdown + CSV) and sweep plots from run directories:
``python experiments/aggregate.py runs/cb_* [--out tables]``, the same as ``openprompt-ipt aggregate``
(openprompt_ipt/commands/aggregate.py, where the code is)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.commands.aggregate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
