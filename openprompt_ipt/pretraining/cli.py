"""The command line both pretraining scripts share (experiments/pretrain_categories.py, pretrain_ppt.py):
config + overrides, data root, export folder, resume-or-overwrite, one error line, exit codes."""
from __future__ import annotations

import argparse
import sys
from typing import Callable, List, Optional


def run_pretraining_cli(argv: Optional[List[str]], doc: str, config_help: str, set_example: str,
                        output_help: str, run: Callable[[argparse.Namespace], str], prog: Optional[str] = None) -> int:
    """Parse the shared flags, call ``run(args)`` (returns the text to print) and map failures to one line."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help=f"override a config value, e.g. --set {set_example} (repeatable)")
    p.add_argument("--data-root", default=None, help="folder holding corpora/ ... (default: $IPT_ASSETS or ../shared/assets)")
    p.add_argument("--output-dir", default=None, help=output_help)
    p.add_argument("--overwrite", action="store_true", help="replace a finished export / discard an interrupted run")
    p.add_argument("--resume", action="store_true", help="continue the interrupted run in <output>.partial")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    args.argv, args.prog = argv, p.prog  # what the user ran: ``run`` names commands as they run them
    from ..training.run_dir import held, release

    before = set(held())
    try:
        if args.output_dir:
            from ..runner.run_dirs import check_output_folder

            check_output_folder(args.output_dir, "--output-dir")  # before the corpus is built and trained on
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        from ..runner.quiet import quiet_libraries, sigterm_interrupts

        with quiet_libraries(args.quiet), sigterm_interrupts():  # 🤗 datasets' corpus bars too; SIGTERM as Ctrl-C
            text = run(args)
    except (KeyError, ValueError, FileNotFoundError, ImportError, FloatingPointError) as e:  # NonFiniteLoss too
        # KeyError's str() wraps the message in quotes: print the message itself
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (a scheduler's pre-emption): exit code 143
        from ..runner.quiet import interrupted_exit_code

        print("interrupted: rerun the same command with --resume to continue (state is kept in <output>.partial)", file=sys.stderr)
        return interrupted_exit_code(e)
    finally:
        for path in set(held()) - before:  # the export's lock: a command that has ended holds none (no lock file left)
            release(path)
    print(text)
    return 0
