"""The export directory: atomic, resumable, never half-written-as-complete.

A run works in ``<out>.partial/`` (the corpus and per-epoch training state live there, so an
interrupted run resumes with ``--resume`` and the same configuration); the files are written there, a ``DONE``
marker last, and only then is the folder renamed to ``<out>`` (replacing an old export only with
``overwrite``). Layout of a finished export:

* ``embedding.safetensors`` — tensor ``embedding`` (vocab x dim) + string metadata (tokenizer name,
  path and vocabulary fingerprint, vocab size, dim, categories, corpus summary, metrics): what
  ``strategy: pretrained`` (and ``strategy: encoder``'s frozen table) reads via ``pretrained_path``;
* ``classifier.safetensors`` + ``classifier.json`` — the whole classifier (``embedding.weight``,
  ``body.*``, ``head.*``) and its config (``EncoderConfig`` under ``"encoder"``): what
  ``strategy: encoder`` reads via ``encoder_path`` (this folder);
* ``metrics.json``, ``confusion_matrix.png``, ``corpus.json``, ``heldout_test.jsonl``, ``config.yaml``, ``DONE``.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Callable, Dict, Optional

from ..runner.init_prompt import DONE  # noqa: F401  (the finished-export marker init_prompt_from checks)

RUN_CONFIG = "run_config.json"
REPLACES = "REPLACES_EXPORT"  # in <out>.partial: begun with --overwrite, so finishing it may replace the export
TABLE_FILE, CLASSIFIER_FILE, CLASSIFIER_CONFIG = "embedding.safetensors", "classifier.safetensors", "classifier.json"


def partial_dir(out: str) -> str:
    return os.path.normpath(out) + ".partial"


def is_finished(out: str) -> bool:
    return os.path.isfile(os.path.join(out, DONE))


def prepare_output(out: str, run_config: Dict, overwrite: bool = False, log: Callable = print,
                   resume: bool = False) -> str:
    """The work folder for this run, under the runner's rule (``training/run_dir.py``): a finished export
    or an interrupted run (``<out>.partial``) is refused in one line unless ``overwrite`` (start over; the
    old export is replaced only when the new one is complete) or ``resume`` (the interrupted run, with the
    same configuration)."""
    from ..training.run_dir import hold, refusal, release

    if resume and overwrite:
        raise ValueError("--resume continues the interrupted run, --overwrite replaces it: pass one")
    newly = hold(out)  # one process per export, until finalize (or this process ends)
    try:
        return _prepare(out, run_config, overwrite, log, resume, refusal)
    except BaseException:
        if newly:
            release(out)
        raise


def _only_config(work: str, disposable: tuple = ()) -> bool:
    """The work folder holds nothing but what ``_prepare`` wrote (and ``disposable`` caches): nothing to resume."""
    return os.path.isdir(work) and RUN_CONFIG in os.listdir(work) and \
        set(os.listdir(work)) <= {RUN_CONFIG, REPLACES, *disposable}


def abandon_if_empty(work: str, out: str, disposable: tuple = ()) -> None:
    """A run that failed before writing anything but its configuration (a wrong data root, say) or a cache it
    rebuilds in seconds (``disposable``: the corpus, before any epoch was saved) has nothing to resume: remove
    its work folder and lock, so that the corrected command is not refused as an interrupted run."""
    from ..training.run_dir import release

    if _only_config(work, disposable):
        shutil.rmtree(work)
        release(out)


def _prepare(out: str, run_config: Dict, overwrite: bool, log: Callable, resume: bool, refusal) -> str:
    work = partial_dir(out)
    recover(out, log)
    if _only_config(work):  # left by a failed start (older versions): empty
        shutil.rmtree(work)
    pending = os.path.isfile(os.path.join(work, REPLACES))  # an interrupted --overwrite run
    replacing = resume and pending
    if is_finished(out) and not overwrite and not replacing:
        if pending:  # say that --resume continues it: --overwrite alone would discard its epochs
            raise refusal(work, "unfinished", "an interrupted --overwrite pretraining run")
        raise refusal(out, "finished", f"export, {DONE} marker", resumable=False)
    if os.path.isdir(out) and os.listdir(out) and not is_finished(out) and not overwrite:
        raise ValueError(f"output directory '{out}' exists and is not a finished export (no {DONE} marker): remove "
                         "it, pass --overwrite, or choose another --output-dir")
    run_config = json.loads(json.dumps(run_config, sort_keys=True))  # compare as it reads back
    if os.path.isdir(work) and os.listdir(work):
        try:
            with open(os.path.join(work, RUN_CONFIG)) as f:
                previous = json.load(f)
        except (OSError, ValueError):
            previous = None
        if overwrite:
            log(f"--overwrite: discarding the interrupted run in {work}")
            shutil.rmtree(work)
        elif not resume:
            raise refusal(work, "unfinished", "an interrupted pretraining run")
        elif previous != run_config:
            raise ValueError(f"'{work}' holds an interrupted run with a different configuration: rerun with the same "
                             "configuration to resume it, or pass --overwrite to discard it and start over")
        else:
            log(f"resuming the interrupted run in {work}" + (f" (begun with --overwrite: '{out}' is replaced when it "
                                                             "finishes)" if replacing else ""))
    elif resume:
        log(f"nothing to resume in {work}: training from the start")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, RUN_CONFIG), "w") as f:
        json.dump(run_config, f, indent=2, sort_keys=True)
    if overwrite and is_finished(out):  # the consent to replace it outlives an interruption (--resume keeps it)
        open(os.path.join(work, REPLACES), "w").close()
    return work


def finalize(work: str, out: str) -> None:
    """Write ``DONE`` last, then move the folder into place (an old export is replaced only now)."""
    for name in ("train_state.pt", "corpus.pt", REPLACES):
        path = os.path.join(work, name)
        if os.path.exists(path):
            os.remove(path)
    with open(os.path.join(work, DONE), "w") as f:
        f.write("complete\n")
    _move_into_place(work, out)
    from ..training.run_dir import release

    release(out)


def _move_into_place(work: str, out: str) -> None:
    """Rename the finished ``work`` folder to ``out``; an old export goes to ``<out>.old`` first and is removed
    last. A kill between the renames leaves ``<out>.old`` and a finished ``work``: ``recover`` completes it."""
    old = os.path.normpath(out) + ".old"
    if os.path.exists(out):
        if os.path.exists(old):
            shutil.rmtree(old)
        os.replace(out, old)
    else:
        parent = os.path.dirname(os.path.normpath(out))
        if parent:
            os.makedirs(parent, exist_ok=True)
    os.replace(work, out)
    if os.path.exists(old):
        shutil.rmtree(old)


def recover(out: str, log: Callable = print) -> None:
    """Finish what a run killed inside ``finalize`` left (under the export's lock): a work folder holding ``DONE``
    is a complete export whose move was cut short (``<out>`` maybe gone, the old one in ``<out>.old``): it is moved
    into place now, never discarded by ``--overwrite`` or trained again by ``--resume``. An ``<out>.old`` left
    beside a finished ``<out>`` (a kill while removing it) goes; one left without ``<out>`` is put back."""
    work, old = partial_dir(out), os.path.normpath(out) + ".old"
    if is_finished(work):
        _move_into_place(work, out)
        log(f"the interrupted run had finished: its export is now in {out}")
    elif os.path.isdir(old) and is_finished(out):
        shutil.rmtree(old)
    elif os.path.isdir(old) and not os.path.exists(out) and is_finished(old):
        os.replace(old, out)
        log(f"put the previous export back in {out} (an interrupted run had moved it to {old})")


def write_classifier(work: str, model, info: Dict) -> None:
    from safetensors.torch import save_file

    from ..serialization import usual_mode

    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    tmp = os.path.join(work, CLASSIFIER_FILE + ".tmp")
    save_file(state, tmp, metadata={"format": "openprompt_ipt.category_classifier"})
    usual_mode(tmp)  # safetensors creates 0600: an export is shared like the rest of the folder
    os.replace(tmp, os.path.join(work, CLASSIFIER_FILE))
    config = {"encoder": model.config.encoder_config().to_dict(), "classifier": model.config.to_dict(), **info}
    with open(os.path.join(work, CLASSIFIER_CONFIG), "w") as f:
        json.dump(config, f, indent=2)


def plot_confusion(matrix, categories, path: str, title: str) -> Optional[str]:
    """A confusion-matrix PNG (rows = true category, columns = predicted), or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    import numpy as np

    m = np.asarray(matrix)
    fig, ax = plt.subplots(figsize=(9, 8))
    norm = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            if m[i, j]:
                ax.text(j, i, str(m[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if norm[i, j] > 0.5 else "black")
    ax.set_xticks(range(len(categories)), categories, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(categories)), categories, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
