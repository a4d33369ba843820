"""Category pretraining (IPT §4.2): the same as ``openprompt-ipt pretrain categories``
(openprompt_ipt/commands/pretrain.py, where the code is).

    python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml [--set train.epochs=3]
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.commands.pretrain import categories, run_categories as run  # noqa: E402,F401


def main(argv=None) -> int:
    return categories(argv, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
