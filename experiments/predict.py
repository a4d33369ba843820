"""Predict with a trained run: ``python experiments/predict.py --run runs/cb_random_ipt --input rows.jsonl``.

The same as ``openprompt-ipt predict`` (openprompt_ipt/commands/predict.py, where the code is)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.commands.predict import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
