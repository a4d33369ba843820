"""The ``openprompt-ipt`` console command (also ``python -m openprompt_ipt``): one subcommand per
script of experiments/, which stay as thin callers of these modules."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

from .prog import PROG

USAGE = f"""usage: {PROG} [--version] <command> [options]

commands:
  run --config NAME.yaml        train and evaluate one configuration (runs go to ./runs)
  predict --run RUN --input F   predict JSONL rows with a trained run
  pretrain categories|ppt ...   category pretraining (IPT §4.2) / PPT prompt pre-training
  aggregate RUN_DIR ...         tables (markdown + CSV) and sweep plots from run directories
  list                          the shipped configs that --config NAME accepts from any directory

'{PROG} <command> --help' shows a command's options.
"""


def _list(argv: List[str]) -> int:
    from ..config_files import list_configs, shipped_yamls

    if argv in (["-h"], ["--help"]):  # asked as any other command is asked
        print(f"usage: {PROG} list\n\nThe shipped configs that 'run --config NAME' accepts from any directory, one a line.")
        return 0
    if argv:
        print(f"error: '{PROG} list' takes no arguments, got {' '.join(argv)}", file=sys.stderr)
        return 2
    names = list_configs()
    if not names:
        print("error: no shipped configs found (a clone's yamls/ or an installed wheel's copy): reinstall the package",
              file=sys.stderr)
        return 2
    print("\n".join(names))
    print(f"{len(names)} configs in {shipped_yamls()}", file=sys.stderr)
    return 0


def _pretrain(argv: List[str]) -> int:
    from . import pretrain

    kinds = {"categories": pretrain.categories, "ppt": pretrain.ppt}
    if argv[:1] in (["-h"], ["--help"]):  # help on the group: what each kind does, and how to ask for its options
        print(f"usage: {PROG} pretrain categories|ppt [options]\n\n{pretrain.CATEGORIES_DOC}\n{pretrain.PPT_DOC}\n"
              f"'{PROG} pretrain categories --help' (or ppt) shows its options.")
        return 0
    if not argv or argv[0] not in kinds:
        got = f", got '{argv[0]}'" if argv else ""
        print(f"error: '{PROG} pretrain' needs 'categories' or 'ppt'{got}", file=sys.stderr)
        return 2
    return kinds[argv[0]](argv[1:], prog=f"{PROG} pretrain {argv[0]}")


def main(argv: Optional[List[str]] = None) -> int:
    try:
        return _dispatch(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:
        # The reader left early (`... --help | head`): that is not an error of ours, so no traceback. Point stdout
        # at devnull so the interpreter's own flush at exit does not raise the same error again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a process ended by SIGPIPE


def _dispatch(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "--version":
        from .. import __version__

        print(f"{PROG} {__version__}")
        return 0
    if command == "run":
        from . import run

        return run.main(rest, parser=run.build_parser(prog=f"{PROG} run"))
    if command == "predict":
        from . import predict

        return predict.main(rest, prog=f"{PROG} predict")
    if command == "aggregate":
        from . import aggregate

        return aggregate.main(rest, prog=f"{PROG} aggregate")
    if command == "pretrain":
        return _pretrain(rest)
    if command == "list":
        return _list(rest)
    print(f"error: unknown command '{command}': use run, predict, pretrain, aggregate or list ({PROG} --help)",
          file=sys.stderr)
    return 2
