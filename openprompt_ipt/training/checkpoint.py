"""Resumable checkpoints: only what training changed, written so a kill never leaves half a checkpoint.

Layout (``<run>/checkpoints/``)::

    step-0000012/
        trainable.safetensors   trained parameters only (prompt, head; the PLM too when it is fine-tuned)
        best.safetensors        the best-on-dev parameters so far (absent before the first dev evaluation)
        training_state.pt       optimizer + scheduler (+ fp16 grad scaler) state, RNG states (python,
                                numpy, torch, cuda; one set per process), the loader generator's state at
                                the start of the epoch in progress, progress counters, history, best metrics
        config.json             the resolved experiment config (the PLM is named by plm.model_path, not copied)
    latest                      the name of the newest complete checkpoint directory

A checkpoint is written into ``.tmp-step-.../`` and renamed; ``latest`` is replaced atomically after
that, and older directories are removed last. Whatever instant a run dies, ``latest`` names a
complete checkpoint.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np
import torch

LATEST = "latest"
STATE_FILE = "training_state.pt"
TRAINABLE_FILE = "trainable.safetensors"
BEST_FILE = "best.safetensors"
CONFIG_FILE = "config.json"


@dataclass
class Progress:
    """Where to continue: ``epoch`` (1-based) with ``batches_done`` of its batches already trained."""
    epoch: int = 1
    batches_done: int = 0
    global_step: int = 0
    running_loss: float = 0.0  # sum of the optimizer steps' losses of the epoch so far (for the epoch's mean)


def rng_state() -> Dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    restore_cuda_rng(state.get("cuda"))


def restore_cuda_rng(saved_states) -> None:
    """One state per GPU that was visible when saved: a machine with fewer GPUs (or CUDA_VISIBLE_DEVICES)
    restores those it has (set_rng_state_all raised an IndexError); nothing ran on the others."""
    if saved_states is None or not torch.cuda.is_available():
        return
    for index, saved in enumerate(saved_states[:torch.cuda.device_count()]):
        torch.cuda.set_rng_state(saved.cpu(), index)


def checkpoint_root(run_dir: str) -> str:
    return os.path.join(run_dir, "checkpoints")


def latest_checkpoint(run_dir: str) -> Optional[str]:
    root = checkpoint_root(run_dir)
    pointer = os.path.join(root, LATEST)
    if not os.path.isfile(pointer):
        return None
    with open(pointer) as f:
        name = f.read().strip()
    for path in (os.path.join(root, name), os.path.join(root, f".old-{name}")):  # .old-: save_checkpoint cut short
        if os.path.isfile(os.path.join(path, STATE_FILE)):
            return path
    return None


def remove_checkpoints(run_dir: str) -> None:
    """Remove every checkpoint of ``run_dir``, the ``latest`` pointer first: a kill in the middle of the removal
    leaves no checkpoint to resume from, never a pointer to a half-removed one (``--resume`` failing on it)."""
    root = checkpoint_root(run_dir)
    if os.path.isfile(os.path.join(root, LATEST)):
        os.remove(os.path.join(root, LATEST))
    shutil.rmtree(root, ignore_errors=True)


def save_checkpoint(run_dir: str, trainable: Dict[str, torch.Tensor], best: Optional[Dict[str, torch.Tensor]],
                    state: Dict, config: Optional[Dict], keep: int = 1) -> str:
    """Write one checkpoint atomically and point ``latest`` at it; returns its directory."""
    from safetensors.torch import save_file

    from ..serialization import durable, usual_mode

    root = checkpoint_root(run_dir)
    os.makedirs(root, exist_ok=True)
    name = f"step-{state['progress']['global_step']:07d}"
    final, tmp = os.path.join(root, name), os.path.join(root, f".tmp-{name}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    save_file({k: v.detach().contiguous().cpu() for k, v in trainable.items()}, os.path.join(tmp, TRAINABLE_FILE))
    usual_mode(os.path.join(tmp, TRAINABLE_FILE))  # safetensors writes 0600
    if best is not None:
        save_file({k: v.contiguous().cpu() for k, v in best.items()}, os.path.join(tmp, BEST_FILE))
        usual_mode(os.path.join(tmp, BEST_FILE))
    torch.save(state, os.path.join(tmp, STATE_FILE))
    with open(os.path.join(tmp, CONFIG_FILE), "w") as f:
        json.dump(config or {}, f, indent=2)
    durable(*(os.path.join(tmp, f) for f in os.listdir(tmp)), tmp)  # on the disk before it is renamed into place
    stale = os.path.join(root, f".old-{name}")
    if os.path.isdir(final):  # the same step saved twice (epoch end after a step checkpoint): replace it, keeping
        shutil.rmtree(stale, ignore_errors=True)  # the old copy until the new one is in place (latest_checkpoint
        os.replace(final, stale)                  # reads it if an interrupt falls between the two renames)
    os.replace(tmp, final)
    shutil.rmtree(stale, ignore_errors=True)
    durable(root)
    with open(os.path.join(root, LATEST + ".tmp"), "w") as f:
        f.write(name)
    durable(os.path.join(root, LATEST + ".tmp"))
    os.replace(os.path.join(root, LATEST + ".tmp"), os.path.join(root, LATEST))
    durable(root)  # the pointer moved before the older checkpoints are removed
    steps = sorted(d for d in os.listdir(root) if d.startswith("step-") and os.path.isdir(os.path.join(root, d)))
    for old in steps[:-max(1, keep)]:
        if old != name:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)
    return final


def load_checkpoint(path: str) -> Dict:
    """{'trainable', 'best' (or None), 'state', 'config'} of one checkpoint directory; a damaged file
    (a copy cut short, a full disk) is one ``DamagedFile`` line naming it and what to do."""
    from ..serialization import read_json, read_safetensors, read_torch

    if not os.path.isfile(os.path.join(path, STATE_FILE)):
        raise FileNotFoundError(f"'{path}' is not a checkpoint (no {STATE_FILE})")
    fix = (f"delete the checkpoint folder '{path}' (--resume then trains from the start) "
           "or rerun with --overwrite")
    missing = [f for f in (CONFIG_FILE, TRAINABLE_FILE) if not os.path.isfile(os.path.join(path, f))]
    if missing:  # a half-removed or half-copied folder: one line, not a bare 'No such file'
        from ..serialization import DamagedFile

        raise DamagedFile(f"checkpoint '{path}' lacks {' and '.join(missing)} (removed or copied only in part): {fix}")
    best = os.path.join(path, BEST_FILE)
    return {"config": read_json(os.path.join(path, CONFIG_FILE), fix),
            "trainable": read_safetensors(os.path.join(path, TRAINABLE_FILE), fix),
            "best": read_safetensors(best, fix) if os.path.isfile(best) else None,
            "state": read_torch(os.path.join(path, STATE_FILE), fix),
            }


def _names(names: List[str], most: int = 4) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def check_parameter_names(path: str, ckpt: Dict, expected: Dict[str, tuple]) -> None:
    """Before a resume loads anything: the checkpoint's parameters must be this model's (``expected``: name ->
    shape). One written by an older release that named them otherwise (a renamed parameter) is one line naming
    the file, the missing and unexpected names and the fix, not a bare KeyError (and a parameter the file
    lacks is never left at its fresh initialisation without a word)."""
    for file, saved in ((TRAINABLE_FILE, ckpt["trainable"]), (BEST_FILE, ckpt["best"])):
        if saved is None:
            continue
        missing, unexpected = sorted(set(expected) - set(saved)), sorted(set(saved) - set(expected))
        shapes = [f"{k} {tuple(saved[k].shape)} (this model: {tuple(expected[k])})"
                  for k in sorted(set(saved) & set(expected)) if tuple(saved[k].shape) != tuple(expected[k])]
        what = [f"missing {_names(missing)}"] * bool(missing) + [f"unexpected {_names(unexpected)}"] * bool(unexpected)
        what += [f"other shapes {_names(shapes)}"] * bool(shapes)
        if what:
            raise ValueError(f"cannot resume from checkpoint file '{os.path.join(path, file)}': its parameters are not "
                             f"this model's (written by another version of openprompt-ipt?): {'; '.join(what)}; start "
                             "again with --overwrite, or choose a fresh --output-dir")


def config_leaves(d, prefix: str = "") -> Dict[str, object]:
    """``{"train": {"lr": x}}`` -> ``{"train.lr": x}``; an empty mapping stays a leaf (``runner.defaults.flat_keys``
    drops it), so ``{"peer": {}}`` against no ``peer`` is a difference."""
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(config_leaves(v, key + "."))
        else:
            out[key] = v
    return out


# when and how often a run saves changes nothing it computes: a resume may change these
NOT_RESULT_KEYS = ("train.checkpoint_every", "train.checkpoint_minutes", "train.keep_checkpoints")


def config_differences(saved: Dict, current: Dict, defaults: Optional[Dict] = None) -> List[str]:
    """'key: saved -> current' for every leaf that differs (lists and tuples compare by value), except
    the checkpoint schedule (``NOT_RESULT_KEYS``) and keys added to ``defaults`` after the run was saved
    that still hold their default (a run saved by an older release resumes under a newer one)."""
    a, b = config_leaves(json.loads(json.dumps(saved))), config_leaves(json.loads(json.dumps(current)))
    new = config_leaves(json.loads(json.dumps(defaults or {})))
    return [f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}" for k in sorted(set(a) | set(b))
            if a.get(k, "<unset>") != b.get(k, "<unset>") and k not in NOT_RESULT_KEYS
            and not (k not in a and k in new and new[k] == b.get(k))]


def check_resume_config(checkpoint_dir: str, config: Dict, what: str = "resume from",
                        defaults: Optional[Dict] = None) -> None:
    from ..serialization import read_json

    saved = read_json(os.path.join(checkpoint_dir, CONFIG_FILE),
                      f"delete '{checkpoint_dir}' (--resume then trains from the start) or rerun with --overwrite")
    diff = config_differences(saved, config, defaults)
    if diff:
        raise ValueError(f"cannot {what} {checkpoint_dir}: the config differs from the one it was trained "
                         f"with at {'; '.join(diff)} (undo the change, or start a new run with another --output-dir)")
