"""Run logs: a CSV of scalars per run (always) and TensorBoard scalars when tensorboard is installed.

``<run>/log.csv`` has one row per scalar: ``step,epoch,name,value`` with names ``train/loss``, ``train/lr`` and
``train/lr_<group>`` (every optimizer step: the mean loss of its micro-batches, the prompt's rate and each parameter
group's: ``training/optim.py``'s ``group_rates``) and ``train/epoch_loss``,
``dev/<metric>`` (every epoch end). On resume, rows past the checkpoint's step are dropped first so
the file reads as if the run had never stopped. TensorBoard event files go to ``<run>/tensorboard``.
"""
from __future__ import annotations

import csv
import io
import json
import os
from typing import Dict, Optional

CSV_FILE = "log.csv"
FIELDS = ("step", "epoch", "name", "value")


class RunLogger:
    def __init__(self, run_dir: Optional[str], resume_step: Optional[int] = None, tensorboard: bool = True,
                 verbose: bool = True):
        self.path = os.path.join(run_dir, CSV_FILE) if run_dir else None
        self._file = self._writer = self._tb = None
        if not self.path:
            return
        os.makedirs(run_dir, exist_ok=True)
        kept = []
        if resume_step is not None and os.path.isfile(self.path):
            with open(self.path, newline="") as f:
                kept = [r for r in _rows(f, self.path) if int(r["step"]) <= resume_step]
        # the kept rows go to a new file that replaces the old one whole, and the run appends to it: a kill while
        # they are written leaves the old log as it was, not a truncated one the next --resume would keep
        with open(self.path + ".tmp", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(kept)
        os.replace(self.path + ".tmp", self.path)
        self._file = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=FIELDS)
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                if verbose:
                    print("tensorboard is not installed: scalars go to log.csv only (pip install tensorboard)")
            else:
                self._tb = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=resume_step)

    def log(self, step: int, epoch: int, scalars: Dict[str, float]) -> None:
        if self._writer is None:
            return
        for name, value in scalars.items():
            self._writer.writerow({"step": step, "epoch": epoch, "name": name, "value": f"{float(value):.8g}"})
            if self._tb is not None:
                self._tb.add_scalar(name, float(value), step)
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = self._writer = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _rows(f, path: str):
    """The rows of a log.csv; a last line without its line end (cut short by a kill: power loss, a full disk) is
    left out, any other bad row is one ValueError naming the file and line."""
    text = f.read()
    if not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    for n, r in enumerate(csv.DictReader(io.StringIO(text, newline="")), 2):
        try:
            int(r["step"]), int(r["epoch"]), float(r["value"])
        except (TypeError, ValueError):
            raise ValueError(f"'{path}' line {n} is not step,epoch,name,value: {dict(r)} (the file was edited or "
                             "damaged): delete the line") from None
        yield r


def read_log(path: str):
    with open(path, newline="") as f:
        return [{"step": int(r["step"]), "epoch": int(r["epoch"]), "name": r["name"], "value": float(r["value"])}
                for r in _rows(f, path)]


def _peft_run(run_dir: str) -> bool:
    """A run of benchmarks/peft_run.py (its config's ``peer`` names the library): predict cannot rebuild it."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            peer = json.load(f).get("peer")
    except (OSError, ValueError):
        return False
    return isinstance(peer, dict) and bool(peer.get("library"))


def format_summary(result: Dict, run_dir: Optional[str], predict_command: str = "openprompt-ipt predict") -> str:
    """One screen at the end of a run: where things are and what came out (``predict_command``: how the user
    predicts with it, as they run commands: ``python experiments/predict.py`` in a clone)."""
    t = result.get("training", {})
    best_epoch = t.get("best_epoch")
    lines = ["=" * 72,
             f"run summary: {result['dataset']} | {result.get('method') or result.get('strategy')} | {result['backbone']}",
             f"  steps {t.get('optimizer_steps', '?')} over {t.get('epochs', '?')} epochs | best epoch "
             f"{best_epoch} | {t.get('processes', 1)} process(es) | mixed precision {t.get('mixed_precision', 'no')}"
             f"{' | resumed at step ' + str(t['resumed_from_step']) if t.get('resumed_from_step') is not None else ''}",
             "  dev (selection): " + " ".join(f"{k} {v:.4f}" for k, v in result["best_dev"].items() if k != "loss"),
             "  test: " + " ".join(f"{k} {v:.4f}" for k, v in result["test"].items() if k != "loss"),
             f"  time {result.get('seconds', '?')}s"]
    if run_dir:
        template = os.path.isdir(os.path.join(run_dir, "template"))
        lines += [f"  run dir {run_dir}: config.json metrics.json best.safetensors {'template/ ' if template else ''}"
                  f"log.csv checkpoints/{' tensorboard/' if os.path.isdir(os.path.join(run_dir, 'tensorboard')) else ''}"]
        if not _peft_run(run_dir):  # predict rebuilds every other run, template/ or not (runner/predict.py)
            lines.append(f"  predict: {predict_command} --run {run_dir} --input FILE.jsonl")
    lines.append("=" * 72)
    return "\n".join(lines)
