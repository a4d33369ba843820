"""How long a command takes before its first line, against ``python -c "import torch"`` (issue #32):

    python benchmarks/startup.py --repeats 7
    python benchmarks/startup.py --repeats 7 --root /path/to/other/checkout   # the same commands there

Each command runs in a fresh interpreter (cwd and PYTHONPATH = the checkout), wall time from start to
exit; every repetition runs all commands, in a rotated order so a burst of load on the machine does not
land on one command only. Reports the median and the ratio to ``import torch``'s median.
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COMMANDS = {  # name -> arguments after `python`
    "import torch": ["-c", "import torch"],
    "run.py --help": ["experiments/run.py", "--help"],
    "run.py --config missing.yaml": ["experiments/run.py", "--config", "missing.yaml"],
    "predict.py --help": ["experiments/predict.py", "--help"],
    "import openprompt_ipt": ["-c", "import openprompt_ipt"],
    "import openprompt_ipt, openprompt": ["-c", "import openprompt_ipt, openprompt"],
}
REFERENCE = "import torch"


def time_once(args, root) -> float:
    env = dict(os.environ, PYTHONPATH=root)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(names, repeats: int, root: str):
    times = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            times[name].append(time_once(COMMANDS[name], root))
    return times


def table(times, root: str, repeats: int) -> str:
    ref = statistics.median(times[REFERENCE])
    lines = [f"checkout `{root}`, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
             f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end, {repeats} repetitions (median)", "",
             "| command | median s | min s | × import torch |", "|---|---:|---:|---:|"]
    for name, ts in times.items():
        med = statistics.median(ts)
        lines.append(f"| `{shlex.join(['python', *COMMANDS[name]])}` | {med:.2f} | {min(ts):.2f} | {med / ref:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--root", default=ROOT, help="the checkout whose commands are timed (default: this one)")
    p.add_argument("--only", default=None, help="comma-separated command names (always with import torch); default all")
    args = p.parse_args(argv)
    names = list(COMMANDS) if not args.only else [REFERENCE] + [n for n in args.only.split(",") if n != REFERENCE]
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        print(f"error: unknown command name(s) {unknown}; known: {list(COMMANDS)}", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    print(table(measure(names, args.repeats, root), root, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
