"""Train and evaluate one configuration: ``openprompt-ipt run --config cb_random_ipt.yaml``
(or ``python experiments/run.py --config yamls/cb_random_ipt.yaml`` in a clone).

``--seeds 1,2,3,4,5`` runs each seed and reports mean ± std; a ``sweep:`` section picks the best point
per seed on dev; ``protocol:`` chooses full / few_shot / low_resource data (docs/protocols.md).
Several processes / machines: ``accelerate launch`` (GPUs) or ``torchrun`` (CPU); ``--resume``
continues killed runs from their newest checkpoint (docs/training.md)."""
from __future__ import annotations

import argparse
import os
import sys

# only the config reader here: --help and a config error answer before torch / OpenPrompt load (issue #32)
from ..config_files import config_search_dirs
from ..runner.config import find_config, load_config
from ..runner.schema import ConfigValueError, check_value
from ..runner.run_dirs import check_output_folder, command_beside


def parse_seeds(text):
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds must be comma-separated integers, got '{text}'")
    if not seeds:
        raise argparse.ArgumentTypeError("--seeds lists no seed")
    try:  # every seed checked now: a bad one was found only after the seeds before it had trained
        return [check_value("seed", s) for s in seeds]
    except ConfigValueError as e:
        raise argparse.ArgumentTypeError(f"--seeds {text}: {e}")


def training(run=None, resume: bool = False, run_command: str = None):
    """The train_fn of ``run_seeds`` around ``run`` (default ``run_experiment``, or a peer's, e.g. PEFT's);
    with --resume each run (seed / sweep point / fold) continues from its own newest checkpoint, keeps its
    result when it finished (same config required), or starts from scratch, and says which in one line.
    ``run_command``: what the user ran, for the messages of the run (``init_from``'s); ``run`` then takes it as a
    keyword."""
    if run is None:
        from openprompt_ipt.runner.experiment import run_experiment as run

    def train(cfg, splits, output_dir, show_progress):
        from openprompt_ipt.training.checkpoint import check_resume_config, latest_checkpoint

        main = int(os.environ.get("RANK", "0")) == 0  # several processes: rank 0 speaks
        done = os.path.join(output_dir, "metrics.json") if output_dir else None
        if resume and done and os.path.isfile(done) and os.path.isfile(os.path.join(output_dir, "config.json")):
            from openprompt_ipt.serialization import read_json

            from openprompt_ipt.runner.config import DEFAULTS

            check_resume_config(output_dir, cfg, what="keep the finished run in", defaults=DEFAULTS)
            from openprompt_ipt.serialization import check_safetensors  # "kept" only when its weights read back

            check_safetensors(os.path.join(output_dir, "best.safetensors"),
                              f"the finished run in '{output_dir}' cannot be kept: rerun with --overwrite")
            if main:
                print(f"resume: {output_dir} is finished (metrics.json): kept", flush=True)
            return read_json(done, f"delete '{output_dir}' or rerun with --overwrite")
        again = resume and bool(output_dir) and latest_checkpoint(output_dir) is not None
        if resume and output_dir and not again and main:
            print(f"resume: nothing to resume in {output_dir} (no checkpoint): training from the start", flush=True)
        named = {"run_command": run_command} if run_command else {}
        return run(cfg, None, output_dir, show_progress=show_progress, splits=splits.as_tuple(), resume=again, **named)
    return train


def _script_name(argv, prog=None) -> str:
    """What the user ran, for the --resume line and the runner's messages: experiments/run.py (or a peer runner) in a
    clone, else the console command ``openprompt-ipt run``."""
    from .prog import invoked_as

    return invoked_as(argv, prog, "run")


def main(argv=None, parser=None, run_for=None) -> int:
    """``parser`` / ``run_for(args) -> run`` let a peer runner (``benchmarks/peft_run.py``) add its
    options and swap the model while keeping this CLI, its output layout and its report."""
    try:
        return _main(argv, parser, run_for)
    finally:
        distributed = sys.modules.get("openprompt_ipt.training.distributed")
        if distributed is not None:  # only a run that got that far can have joined a process group
            distributed.shutdown()


def build_parser(description=__doc__.split("\n")[0], prog=None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--config", required=True,
                   help="experiment YAML: a path, or a shipped name (e.g. cb_prefix_ipt.yaml; `openprompt-ipt list`); ours or "
                        "OpenPrompt's experiment schema (docs/openprompt.md)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set train.epochs=5 (repeatable)")
    p.add_argument("--data-root", default=None, help="folder holding superglue/CB etc. (default: $IPT_ASSETS or ../shared/assets; a task not "
                   "found there comes from its pip-installed copy or the hub: docs/data.md)")
    p.add_argument("--output-dir", default=None,
                   help="runs folder: <dir>/<config name>/seed<k>/ (default: output_dir of the config, else runs)")
    p.add_argument("--seeds", type=parse_seeds, default=None, metavar="1,2,3",
                   help="run each seed and report mean ± std (default: the config's seed)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    p.add_argument("--resume", action="store_true",
                   help="continue each run directory from its newest checkpoint; finished runs are kept")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the runs already in the run directory (without it, a run directory that holds a "
                        "run is refused)")
    p.add_argument("--init-from", default=None, metavar="RUN_DIR",
                   help="start from a finished run's prompt (+ head when labels match): same as --set init_from=RUN_DIR")
    p.add_argument("--mixed-precision", choices=["no", "bf16", "fp16"], default=None,
                   help="autocast precision (same as --set train.mixed_precision=...)")
    p.add_argument("--gradient-accumulation-steps", type=int, default=None,
                   help="same as --set train.gradient_accumulation_steps=N")
    return p


def start_line(config: str, seeds) -> str:
    """The command's first line, before the config check and the run load torch, transformers and OpenPrompt
    (5-7 s of silence before): which config, and which seeds when given."""
    name = os.path.splitext(os.path.basename(config))[0]
    which = "" if not seeds else f" (seed {seeds[0]})" if len(seeds) == 1 else f" (seeds {', '.join(map(str, seeds))})"
    return f"run: {name}{which}: checking the config, then loading torch, transformers and OpenPrompt"


def _main(argv=None, parser=None, run_for=None) -> int:
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "init_from", None):
        args.overrides.append(f"init_from={args.init_from}")
    if args.mixed_precision:
        args.overrides.append(f"train.mixed_precision={args.mixed_precision}")
    if args.gradient_accumulation_steps:
        args.overrides.append(f"train.gradient_accumulation_steps={args.gradient_accumulation_steps}")
    try:
        path = find_config(args.config, config_search_dirs())
        if path != args.config:
            print(f"config: {path} (found for --config {args.config})")
        args.config = path
        if int(os.environ.get("RANK", "0")) == 0:  # at once: checking the config loads torch and OpenPrompt (seconds)
            print(start_line(path, args.seeds), flush=True)
        notes, unused = [], []
        ran = _script_name(argv, parser.prog)  # messages name the command the user ran
        cfg = load_config(args.config, args.overrides, notes, unused, run_command=ran)
        for note in notes:
            print(f"note (OpenPrompt schema): {note}")
        for note in unused if int(os.environ.get("RANK", "0")) == 0 else ():  # keys this setup never reads
            print(f"note: {note}", flush=True)
    except (KeyError, ValueError, FileNotFoundError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    from openprompt_ipt.runner.experiment import format_result
    from openprompt_ipt.runner.quiet import interrupted_exit_code, interrupted_line, quiet_libraries, sigterm_interrupts
    from openprompt_ipt.runner.runs import format_summary, run_seeds
    from openprompt_ipt.training.logs import format_summary as format_run_summary

    name = os.path.splitext(os.path.basename(args.config))[0]
    out = args.output_dir or cfg.get("output_dir") or "runs"
    try:
        check_output_folder(os.path.join(out, name), "--output-dir" if args.output_dir else "output_dir (config)", out)
        if args.resume and not os.path.isdir(os.path.join(out, name)):
            raise FileNotFoundError(f"--resume: no runs of '{name}' under '{out}' (train without --resume first)")
        with quiet_libraries(args.quiet), sigterm_interrupts():  # 🤗 datasets' / transformers' own bars too
            summary = run_seeds(cfg, name, out, args.seeds, args.data_root, show_progress=not args.quiet,
                                train_fn=training(run_for(args) if run_for else None, args.resume, ran),
                                resume=args.resume, overwrite=args.overwrite, notes=unused, run_command=ran)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM (a scheduler's pre-emption): one line, not a traceback
        if int(os.environ.get("RANK", "0")) == 0:
            argv = list(sys.argv[1:] if argv is None else argv)
            print(interrupted_line(os.path.join(out, name), ran, argv), file=sys.stderr, flush=True)
        return interrupted_exit_code(e)  # 130, or 143 for SIGTERM: what a scheduler expects
    except (ValueError, FileNotFoundError, KeyError, ImportError, FloatingPointError) as e:  # DamagedFile, RunDirExists too
        lines = e.lines + [e.summary] if hasattr(e, "lines") else [e.args[0] if isinstance(e, KeyError) and e.args else e]
        for line in lines:  # data.rows.BadRows: every bad row, then what to do
            print(f"error: {line}", file=sys.stderr)
        return 2
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    if len(summary["results"]) == 1 and not cfg["sweep"]:
        result = summary["results"][0]
        print(format_result(result))
        print(format_run_summary(result, os.path.join(out, name, f"seed{(args.seeds or [cfg['seed']])[0]}"),
                                 command_beside(ran, "predict")))
    else:
        print(format_summary(summary))
    print(f"run directory: {os.path.join(out, name)}")
    return 0
