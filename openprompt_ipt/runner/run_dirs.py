"""Find a finished run's files from any directory the runner printed (issue #32).

``experiments/run.py --output-dir DIR`` writes ``DIR/<config name>/seed<k>/`` (``runs.py``); a sweep's
selected point trains in ``seed<k>/<point>/``. ``find_run(path)`` accepts a seed directory, a config
directory holding one seed, or a sweep's seed directory, and otherwise says in one line which
directory to give (the seeds or configs it found there, or that the run did not finish).
"""
from __future__ import annotations

import json
import os
import re
from typing import List

RUN_FILES = ("config.json", "best.safetensors")
_SEED = re.compile(r"seed(-?\d+)$")


def is_finished(path: str) -> bool:
    return all(os.path.isfile(os.path.join(path, f)) for f in RUN_FILES)


def seed_dirs(path: str) -> List[str]:
    """The ``seed<k>`` folders of a config directory, in seed order."""
    names = [n for n in os.listdir(path) if _SEED.match(n) and os.path.isdir(os.path.join(path, n))]
    return sorted(names, key=lambda n: int(_SEED.match(n).group(1)))


def _selected_point(seed_dir: str):
    """A sweep's seed directory -> the folder of the point it selected (its metrics.json says which)."""
    from .sweep import point_name

    try:
        with open(os.path.join(seed_dir, "metrics.json")) as f:
            point = json.load(f).get("selected_point")
    except (OSError, ValueError, AttributeError):
        return None
    return os.path.join(seed_dir, point_name(point)) if isinstance(point, dict) else None


def logged_run(path: str) -> str:
    """The folder of a run's ``log.csv``: ``path``, or the point a sweep's seed directory selected (its
    points trained in their own folders; the seed directory holds only the result)."""
    if not os.path.isfile(os.path.join(path, "log.csv")):
        point = _selected_point(path)
        if point and os.path.isfile(os.path.join(point, "log.csv")):
            return point
    return path


def check_output_folder(path: str, flag: str, given: str = "") -> None:
    """A ValueError naming ``flag`` when the folder ``path`` cannot be made: it, or a folder above it, is a file.
    Checked before the work starts, so a typo costs one line, not a traceback after the training or the
    predictions (os.makedirs fails only when the first file is written). ``given``: the flag's value, when
    ``path`` is the folder it names (a file's folder)."""
    found = os.path.normpath(path) if path else ""
    while found and not os.path.exists(found):  # the nearest part of the path that exists
        found = os.path.dirname(found)
    if found and not os.path.isdir(found):
        raise ValueError(f"{flag} '{given or path}': '{found}' is a file, not a folder: give another {flag}")


# the command that trains a run, as messages name it: the console command (a clone's scripts, which the runner cannot
# know of, pass their own: commands.prog.sibling)
RUN_COMMAND = "openprompt-ipt run"


def command_beside(run_command: str, other: str) -> str:
    """How the user runs the command ``other`` (``aggregate``, ``pretrain categories``) where ``run_command`` trains
    a run, as a line to paste: ``openprompt-ipt <other>`` after the console command, the script beside a clone's
    run.py (``python experiments/aggregate.py``) after ``python experiments/run.py``."""
    script = os.path.join(os.path.dirname(run_command), other.replace(" ", "_") + ".py")
    if os.path.basename(run_command) == "run.py" and os.path.isfile(script):
        return f"python {script}"
    return f"openprompt-ipt {other}"


def launch_target(run_command: str) -> str:
    """What ``accelerate launch`` / ``torchrun`` runs for ``run_command``: a clone's script, else the console
    command's module (``-m openprompt_ipt run``)."""
    return run_command if run_command.endswith(".py") else "-m openprompt_ipt run"


def find_run(path: str, run_command: str = RUN_COMMAND) -> str:
    """The directory holding the run's ``config.json`` + ``best.safetensors``; ``run_command`` is what trains a run
    where the user is (``openprompt-ipt run``, or ``experiments/run.py`` beside ``experiments/predict.py``)."""
    if not os.path.isdir(path):
        what = f"'{path}' is a file, not a run directory" if os.path.exists(path) else f"run directory '{path}' not found"
        raise FileNotFoundError(f"{what}: give the directory {run_command} printed (<output dir>/<config name>, "
                                "or its seed<k>)")
    if is_finished(path):
        return path
    point = _selected_point(path)
    if point and is_finished(point):
        return point
    seeds = seed_dirs(path)
    if len(seeds) == 1:
        return find_run(os.path.join(path, seeds[0]), run_command)
    if seeds:
        raise ValueError(f"'{path}' holds the runs of {len(seeds)} seeds ({', '.join(seeds)}): pick one, "
                         f"e.g. {os.path.join(path, seeds[0])}")
    configs = sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)) and seed_dirs(os.path.join(path, n)))
    if configs:
        raise ValueError(f"'{path}' is an output directory holding the runs of {', '.join(configs)}: "
                         f"give one config's directory, e.g. {os.path.join(path, configs[0])}")
    missing = [f for f in RUN_FILES if not os.path.isfile(os.path.join(path, f))]
    missing = f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing"
    if os.path.isdir(os.path.join(path, "checkpoints")):
        raise FileNotFoundError(f"'{path}' is not a finished run ({missing}) but has checkpoints: "
                                f"finish it with the same {run_command} command + --resume")
    raise FileNotFoundError(f"'{path}' holds no run ({missing}): give the directory {run_command} printed "
                            "(<output dir>/<config name>, or its seed<k>)")
