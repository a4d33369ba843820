"""PPT prompt pre-training (Gu et al.; IPT Table 2's PPT row): the same as ``openprompt-ipt pretrain ppt``
(openprompt_ipt/commands/pretrain.py, where the code is).

    python experiments/pretrain_ppt.py --config yamls/pretrain_ppt.yaml [--set train.epochs=2]

After an interruption the same command with --resume continues (state in <output>.partial/); docs/pretraining.md.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from openprompt_ipt.commands.pretrain import ppt, run_ppt as run  # noqa: E402,F401


def main(argv=None) -> int:
    return ppt(argv, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
