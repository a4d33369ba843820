"""Train and evaluate one configuration: ``python experiments/run.py --config yamls/cb_random_ipt.yaml``.

The same as ``openprompt-ipt run`` (openprompt_ipt/commands/run.py, where the code is): ``--seeds``,
``sweep:``, ``protocol:``, ``--resume`` and the rest are documented there and in docs/training.md."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.commands.run import build_parser, main, parse_seeds, training  # noqa: E402,F401
from openprompt_ipt.config_files import config_search_dirs  # noqa: E402,F401

if __name__ == "__main__":
    sys.exit(main())
