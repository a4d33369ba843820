"""Accuracy study on real data, one group of methods at a time (issue #6, docs/results/README.md).

    python benchmarks/accuracy.py --group cb_pt_family --workers 2

Groups live in ``benchmarks/accuracy_groups.yaml``. Each (method, seed) is one
``experiments/run.py`` subprocess (a method with ``runner: peft_prompt|peft_prefix``: the PEFT peer,
``benchmarks/peft_run.py``) with one thread (2 workers = the 2 cores of CI-class machines);
a pair whose ``metrics.json`` exists is skipped, so an interrupted group resumes where it stopped, and a
run cut off mid-way continues from its newest checkpoint (``run.py --resume``); ``--overwrite`` redoes the
whole group (its own runs are removed first, never those of a ``from_group`` row). A finished run made with
other settings (its ``config.json`` against the config this command builds for it) is refused, never
skipped as this command's (``--report-only``: a note, and the table says what its runs were made with).
At the end (and with ``--report-only``) the group's table is written to
``docs/results/<group>.md`` / ``.csv`` (with another ``--out``: in that folder, unless ``--docs``):
mean ± std over seeds of the test metrics, dev accuracy, trainable prompt parameters, the paper's number and the gap to the row's base method.
Per-run ``metrics.json``, ``config.json`` and ``log.csv`` stay under ``results/accuracy/<group>/``
(committed; weights and checkpoints are not).
Two-stage runs (IDPG A.4): a method with ``init_from_group: <group>`` starts each seed from that group's
run of the same label (or ``init_from_label``) and seed (``--set init_from=...``) and waits until it has
finished; a stage-1 group with ``keep: [template, best.safetensors]`` keeps what ``init_from`` reads.
"""
from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Dict, List, Optional

import yaml
from tqdm.auto import tqdm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from openprompt_ipt.commands.run import parse_seeds  # noqa: E402
from openprompt_ipt.runner.runs import mean_std  # noqa: E402
from openprompt_ipt.serialization import write_files_atomic  # noqa: E402
from openprompt_ipt.training.metrics import METRICS  # noqa: E402
from openprompt_ipt.training.run_dir import clear_runs, run_state  # noqa: E402

GROUPS_FILE = os.path.join(ROOT, "benchmarks", "accuracy_groups.yaml")
# `runner:` of a method -> (script, its extra arguments); default experiments/run.py. A peer runner takes
# run.py's options and writes the same layout, so skipping, resuming and the table work unchanged.
RUNNERS = {"peft_prompt": ("benchmarks/peft_run.py", ["--peft", "prompt"]),
           "peft_prefix": ("benchmarks/peft_run.py", ["--peft", "prefix"])}


def slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def load_group(name: str, path: str = GROUPS_FILE) -> Dict:
    with open(path) as f:
        groups = yaml.safe_load(f)
    if name not in groups:
        raise SystemExit(f"error: unknown group {name!r}; known: {', '.join(groups)}")
    group = groups[name]
    if group.get("score", "accuracy") not in METRICS:
        raise SystemExit(f"error: group {name}: score {group['score']!r} is not a metric; known: {', '.join(METRICS)}")
    labels = [m["label"] for m in group["methods"]]
    shared = list(group.get("set") or [])  # the group's own overrides (e.g. a few-shot protocol) come first
    for m in group["methods"]:
        if shared and m.get("from_group"):
            raise SystemExit(f"error: {m['label']}: from_group reuses runs made without this group's set: {shared}; "
                             "drop one of them")
        m["set"] = shared + list(m.get("set") or [])
        if m.get("runner") and m["runner"] not in RUNNERS:
            raise SystemExit(f"error: {m['label']}: unknown runner {m['runner']!r}; known: {', '.join(RUNNERS)}")
        if m.get("init_from_group"):
            source_method(m, path)  # the stage-1 group and method must exist
        if m.get("base") and m["base"] not in labels:
            raise SystemExit(f"error: {m['label']}: base {m['base']!r} is not a method of group {name}")
    return group


def source_method(method: Dict, path: str = GROUPS_FILE) -> Dict:
    """The stage-1 method of ``init_from_group`` (same label unless ``init_from_label``)."""
    src, label = method["init_from_group"], method.get("init_from_label", method["label"])
    with open(path) as f:
        groups = yaml.safe_load(f)
    if src not in groups:
        raise SystemExit(f"error: {method['label']}: init_from_group {src!r} is not a group of {os.path.basename(path)}")
    found = [m for m in groups[src]["methods"] if m["label"] == label]
    if not found:
        raise SystemExit(f"error: {method['label']}: group {src} has no method {label!r} (set init_from_label)")
    return found[0]


def init_dir(out: str, method: Dict, seed: int) -> Optional[str]:
    """Two-stage runs: the stage-1 run this (method, seed) starts from (``init_from_group: <group>`` =
    that group's run of the same label and seed, under the same results folder), else None."""
    if not method.get("init_from_group"):
        return None
    src_out = os.path.join(os.path.dirname(os.path.abspath(out)), method["init_from_group"])
    return run_dir(src_out, source_method(method), seed)


def method_folder(out: str, method: Dict) -> str:
    """Where a row's runs live. A method marked ``from_group: <group>`` reuses that group's runs (same YAML
    and overrides; same label unless ``from_label`` names the row there)."""
    if method.get("from_group"):
        return os.path.join(os.path.dirname(out), method["from_group"], slug(method.get("from_label", method["label"])))
    return os.path.join(out, slug(method["label"]))


def run_dir(out: str, method: Dict, seed: int) -> str:
    stem = os.path.splitext(os.path.basename(method["yaml"]))[0]
    return os.path.join(method_folder(out, method), stem, f"seed{seed}")


def overrides(method: Dict, seed: int, out: str, extra: List[str]) -> List[str]:
    """The ``--set`` items of a run: the group's and the method's, its stage-1 run, then the command's."""
    start = init_dir(out, method, seed)
    return list(method.get("set") or []) + ([f"init_from={start}"] if start else []) + list(extra)


def command(method: Dict, seed: int, out: str, extra: List[str]) -> List[str]:
    script, script_args = RUNNERS[method["runner"]] if method.get("runner") else ("experiments/run.py", [])
    cmd = [sys.executable, os.path.join(ROOT, *script.split("/"))] + script_args + ["--config", method["yaml"],
           "--seeds", str(seed), "--output-dir", method_folder(out, method), "--quiet"]
    for item in overrides(method, seed, out, extra):
        cmd += ["--set", item]
    if run_state(run_dir(out, method, seed)) == "unfinished":
        cmd.append("--resume")  # a run cut off mid-way (a session's end, a kill) continues, not restarts
    return cmd


def run_job(cmd: List[str], log_path: str, threads: int) -> int:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="false")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        return subprocess.call(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)


def pending(group: Dict, out: str) -> List:
    """(method, seed) pairs without a metrics.json: a finished run is never redone. Seed-major, so a
    group stopped part-way has every method at the same number of seeds."""
    return [(m, s) for s in group["seeds"] for m in group["methods"]
            if not os.path.exists(os.path.join(run_dir(out, m, s), "metrics.json"))]


def clear_group(group: Dict, out: str) -> int:
    """``--overwrite``: remove the group's own runs, finished or not, before any new one starts (old and new
    runs never mix in one table); a ``from_group`` row's runs belong to that group and stay. Returns how many."""
    own = [run_dir(out, m, s) for m in group["methods"] if not m.get("from_group") for s in group["seeds"]]
    taken = [d for d in own if run_state(d)]
    clear_runs(taken)
    return len(taken)


# --- the settings a finished run was made with (its config.json) against this command's -----------------------
# Where and how a run ran, not what it computed: a GPU run (train.device=cuda), the checkpoint schedule.
NOT_RESULT_KEYS = ("seed", "output_dir", "train.device", "train.checkpoint_every", "train.checkpoint_minutes",
                   "train.keep_checkpoints")
# what tells two backbones apart (a local copy of minilm in /tmp/minilm is minilm)
BACKBONE_SHAPE = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                  "vocab_size")


def run_config(method: Dict, seed: int, out: str, extra: List[str]) -> Dict:
    """The config this command's run of (method, seed) gets: what run.py builds from the same YAML and --set."""
    from openprompt_ipt.runner.config import load_config

    cfg = load_config(os.path.join(ROOT, method["yaml"]), overrides(method, seed, out, extra))
    cfg["seed"] = seed
    return json.loads(json.dumps(cfg, default=str))  # tuples as lists, as config.json has them


def _folder(path) -> Optional[str]:
    """A local folder as run.py (cwd = the repo) resolves it, else None (a hub name, a folder that is gone)."""
    if not isinstance(path, str) or not path:
        return None
    try:
        from openprompt_ipt.runner.backbones import backbone_path

        path = backbone_path(path)  # the minilm alias
    except ImportError:
        pass
    full = path if os.path.isabs(path) else os.path.join(ROOT, path)
    return os.path.realpath(full) if os.path.isdir(full) else None


def _backbone_shape(folder: str) -> Optional[Dict]:
    """The checkpoint's shape from its config.json."""
    if not os.path.isfile(os.path.join(folder, "config.json")):
        return None
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    return {k: cfg[k] for k in BACKBONE_SHAPE if k in cfg}


@functools.lru_cache(maxsize=None)
def _weights_digest(folder: str) -> Optional[str]:
    """sha256 of a local checkpoint's weights file: a copy of the same model matches, weights rounded to fp16
    (benchmarks/prepare_device_carry.sh --local) do not, though their shape does."""
    from openprompt_ipt.serialization import file_sha256

    path = next((p for p in (os.path.join(folder, n) for n in ("model.safetensors", "pytorch_model.bin"))
                 if os.path.isfile(p)), None)
    return file_sha256(path) if path else None


def same_backbone(recorded, now) -> bool:
    """Two local folders holding the same checkpoint: its shape and its weights file's bytes. A folder since
    removed (or a hub name) cannot be checked, so only the same name is the same backbone: the table then
    states the path the runs were made with, whichever machine rebuilds it."""
    old, new = _folder(recorded), _folder(now)
    if not (old and new):
        return False
    shape, digest = _backbone_shape(old), _weights_digest(old)
    return shape is not None and digest is not None and shape == _backbone_shape(new) and \
        digest == _weights_digest(new)


def result_differences(saved: Dict, now: Dict) -> Dict[str, tuple]:
    """{key: (recorded, now)} for the keys that change results. Not compared: ``NOT_RESULT_KEYS``; keys only the
    recorded config has (renamed or dropped since, a peer runner's own ``peer.*``) and section keys only this
    one has; the value a sweep kept; the same folder or backbone named another way; the same stage-1 run
    (``init_from``) under another checkout. A key added to the defaults since counts as its default (what the
    older release did, as for ``--resume``)."""
    from openprompt_ipt.runner.config import DEFAULTS
    from openprompt_ipt.training.checkpoint import config_leaves

    a, b = config_leaves(saved), config_leaves(now)
    default = config_leaves(json.loads(json.dumps(DEFAULTS, default=str)))
    swept = now.get("sweep") or {}
    diff = {}
    for k in sorted(b):
        if k not in a and k not in default:  # a section the run did not have (another verbalizer's): what
            continue                           # chose it (``verbalizer``) is compared
        old, new = a.get(k, default.get(k)), b[k]  # a key added since: the run had what its default keeps
        if old == new or k in NOT_RESULT_KEYS:
            continue
        if k in swept and old in swept[k]:  # a seed's config.json holds the sweep point it kept
            continue
        if k in ("plm.model_path", "dataset.path") and _folder(old) and _folder(old) == _folder(new):
            continue
        if k == "plm.model_path" and same_backbone(old, new):
            continue
        if k == "init_from" and isinstance(old, str) and isinstance(new, str) and \
                old.split(os.sep)[-4:] == new.split(os.sep)[-4:]:  # <group>/<label>/<yaml>/seed<k>
            continue
        diff[k] = (old, new)
    return diff


def settings_differences(group: Dict, out: str, extra: List[str]) -> Dict[tuple, Dict[str, tuple]]:
    """(label, seed) -> result_differences, for each finished run of ``group`` (with its config.json) made
    with other settings than the config this command (group YAMLs and set + ``extra``) builds for it."""
    found = {}
    for m in group["methods"]:
        for s in group["seeds"]:
            d = run_dir(out, m, s)
            if not (os.path.isfile(os.path.join(d, "metrics.json")) and os.path.isfile(os.path.join(d, "config.json"))):
                continue
            with open(os.path.join(d, "config.json")) as f:
                saved = json.load(f)
            try:
                now = run_config(m, s, out, extra)
            except (KeyError, ValueError, FileNotFoundError) as e:
                why = e.args[0] if isinstance(e, KeyError) and e.args else e
                raise SystemExit(f"error: {m['label']}: {m['yaml']} with --set "
                                 f"{' '.join(overrides(m, s, out, extra))}: {why}") from None
            diff = result_differences(saved, now=now)
            if diff:
                found[(m["label"], s)] = diff
    return found


def _value(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))  # as --set takes it


def describe(found: Dict[tuple, Dict[str, tuple]]) -> str:
    """'A seeds 1, 2 (train.epochs 1 → 20); B seed 1 (...)': runs with the same differences together."""
    parts: Dict[tuple, List] = {}
    for (label, seed), diff in found.items():
        keys = tuple((k, _value(o), _value(n)) for k, (o, n) in sorted(diff.items()))
        parts.setdefault((label, keys), []).append(seed)
    return "; ".join(f"{label} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} ("
                     + ", ".join(f"{k} {o} → {n}" for k, o, n in keys) + ")"
                     for (label, keys), seeds in parts.items())


def made_with(group: Dict, out: str) -> tuple:
    """What the finished runs were made with, against what the group builds today without a --set: the
    ``key=value`` every run shares (the table's command line) and, per row, the runs made otherwise."""
    found = settings_differences(group, out, [])
    finished = [(m["label"], s) for m in group["methods"] for s in group["seeds"]
                if os.path.isfile(os.path.join(run_dir(out, m, s), "config.json"))
                and os.path.isfile(os.path.join(run_dir(out, m, s), "metrics.json"))]
    pairs = [{(k, _value(o)) for k, (o, _) in found.get(run, {}).items()} for run in finished]
    shared = set.intersection(*pairs) if pairs else set()
    rest = {run: {k: v for k, v in diff.items() if (k, _value(v[0])) not in shared} for run, diff in found.items()}
    notes: Dict[str, str] = {}
    for (label, seed), diff in rest.items():
        if diff:
            notes[label] = describe({r: d for r, d in rest.items() if r[0] == label and d})
    return [f"{k}={v}" for k, v in sorted(shared)], notes


NOT_STARTED = None  # run_job's result for a run that --stop-after kept from starting
WAITING = "waiting"  # ... for a two-stage run whose stage-1 run has not finished


def run_group(name: str, group: Dict, out: str, workers: int, threads: int, extra: List[str],
              stop_after: Optional[float] = None) -> List[str]:
    """``stop_after``: minutes after which no further run starts (runs in flight finish), so a group
    that spans sessions stops between runs instead of losing the ones a hard stop would kill."""
    jobs = pending(group, out)
    failures, skipped, waiting = [], 0, 0
    done = len(group["methods"]) * len(group["seeds"]) - len(jobs)
    print(f"group {name}: {len(jobs)} runs to do, {done} already finished", flush=True)
    deadline = time.time() + 60 * stop_after if stop_after is not None else None

    def job(cmd, log, start):
        if deadline is not None and time.time() >= deadline:
            return NOT_STARTED
        if start and not os.path.exists(os.path.join(start, "metrics.json")):
            return WAITING
        return run_job(cmd, log, threads)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {}
        for m, s in jobs:
            log = os.path.join(out, "logs", f"{slug(m['label'])}_seed{s}.log")
            futures[pool.submit(job, command(m, s, out, extra), log, init_dir(out, m, s))] = (m, s, log)
        for fut in tqdm(as_completed(futures), total=len(futures), desc=name):
            m, s, log = futures[fut]
            if fut.result() is NOT_STARTED:
                skipped += 1
            elif fut.result() is WAITING:
                waiting += 1
            elif fut.result() != 0:
                failures.append(f"{m['label']} seed {s}: exit {fut.result()} (see {log})")
                tqdm.write(f"FAILED {failures[-1]}")
    if skipped:
        print(f"group {name}: --stop-after {stop_after:g} min reached, {skipped} runs not started "
              "(rerun the same command to resume)", flush=True)
    if waiting:
        print(f"group {name}: {waiting} runs wait for their stage-1 run (init_from_group) to finish; rerun this "
              "command after it", flush=True)
    return failures


def collect(group: Dict, out: str) -> List[Dict]:
    """Per method: mean ± std over the finished seeds. The group's ``score`` (default accuracy; e.g.
    acc_and_f1 for MRPC / QQP, pearson_spearman for STS-B) is the headline column, the dev column and
    what Δ vs base compares."""
    score = group.get("score", "accuracy")
    rows = []
    for m in group["methods"]:
        recs, seeds = [], []
        for s in group["seeds"]:
            path = os.path.join(run_dir(out, m, s), "metrics.json")
            if os.path.exists(path):
                with open(path) as f:
                    recs.append(json.load(f))
                seeds.append(s)
        metrics = recs[0]["metrics"] if recs else []
        row = {"method": m["label"], "base": m.get("base"), "paper": m.get("paper"), "n": len(recs),
               "prompt_params": recs[0]["trainable"]["prompt"] if recs else None,
               "plm_params": recs[0]["trainable"]["plm"] if recs else None,
               "seconds": mean_std([r["seconds"] for r in recs])["mean"] if recs else None,
               "dev_score": mean_std([r["best_dev"][score] for r in recs])}
        for key in metrics:
            row[f"test_{key}"] = mean_std([r["test"][key] for r in recs])
        row["test_score"] = row.get(f"test_{score}") or mean_std([])
        row["test_per_seed"] = [round(100 * r["test"][score], 1) for r in recs]
        row["score_by_seed"] = {s: 100 * r["test"][score] for s, r in zip(seeds, recs)}  # for paired Δs
        # over-fitting at a glance: how far training loss fell, and which epoch dev selection kept
        losses = [r["history"][-1]["train_loss"] for r in recs if r.get("history")]
        row["final_train_loss"] = mean_std(losses)["mean"] if losses else None
        row["best_epochs"] = [r.get("training", {}).get("best_epoch") for r in recs]
        rows.append(row)
    return rows


def pct(stats: Dict) -> str:
    if not stats or not stats.get("n"):
        return "–"
    if stats["n"] == 1:  # one seed has no spread: "± 0.0" would claim one
        return f"{100 * stats['mean']:.1f}"
    return f"{100 * stats['mean']:.1f} ± {100 * stats['std']:.1f}"


def report(name: str, group: Dict, rows: List[Dict], command_line: str,
           notes: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """``notes``: label -> the runs of that row made with other settings than the command line says (``made_with``):
    the row is marked † and they are listed under the table (and in the CSV's made_with column)."""
    notes = notes or {}
    by_label = {r["method"]: r for r in rows}
    score = group.get("score", "accuracy")
    shown = "acc" if score == "accuracy" else score  # the CSV's and the table's name for the headline
    extra = [k for k in rows[0] if k.startswith("test_") and k not in ("test_score", f"test_{score}", "test_per_seed")]
    head = ["method", "trainable prompt params", f"test {shown} (mean ± std)"] + \
           [f"test {k[5:]}" for k in extra] + [f"dev {shown}", f"Δ {shown} vs base", "target", "paper", "seeds",
                                                f"per-seed test {shown}", "final train loss", "best epochs"]
    lines = [f"## {group['title']}", "",
             f"`{command_line}` — {len(group['seeds'])} seed{'s' if len(group['seeds']) != 1 else ''} {group['seeds']}; paper column: "
             f"{group['paper_source']}." + (f" Every run: `--set {' --set '.join(group['set'])}`." if group.get("set") else ""), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    csv_buf = io.StringIO()
    writer = csv.writer(csv_buf)
    writer.writerow(["method", "prompt_params", f"test_{shown}_mean", f"test_{shown}_std"] +
                    [f"{k}_mean" for k in extra] + [f"dev_{shown}_mean", "delta_vs_base", "paper", "n", "made_with"])
    for r in rows:
        delta, target = "", ""
        base = by_label.get(r["base"]) if r["base"] else None
        if base and r["n"] and base["n"]:
            d = 100 * (r["test_score"]["mean"] - base["test_score"]["mean"])
            delta = f"{d:+.1f}"
            # a verdict needs a spread on both sides; a partial group (one seed so far) gets none
            target = ("met" if d >= 0 else "missed") if min(r["n"], base["n"]) > 1 else "n = 1"
            if group.get("verdict") == "within_one_std" and min(r["n"], base["n"]) > 1:
                # issue #33's bar: no worse than the base by more than one std (the larger of the two rows')
                spread = 100 * max(r["test_score"]["std"], base["test_score"]["std"])
                target = f"{'met' if d >= -spread else 'missed'} (≥ −{spread:.1f})"
        params = f"{r['prompt_params']:,}" if r["prompt_params"] is not None else "–"
        if r["plm_params"]:
            params += f" (+ PLM {r['plm_params']:,})"
        paper = f"{r['paper']:.1f}" if r["paper"] is not None else "–"
        marked = r["method"] + (" †" if r["method"] in notes else "")
        cells = [marked, params, pct(r.get("test_score"))] + [pct(r.get(k)) for k in extra] + \
                [pct(r["dev_score"]), delta, target, paper, str(r["n"]),
                 " ".join(f"{v:.1f}" for v in r["test_per_seed"]),
                 f"{r['final_train_loss']:.3f}" if r.get("final_train_loss") is not None else "–",
                 ", ".join(str(e) for e in r.get("best_epochs") or [])]
        lines.append("| " + " | ".join(cells) + " |")
        head_stats = r.get("test_score") or {}
        writer.writerow([r["method"], r["prompt_params"], head_stats.get("mean"), head_stats.get("std")] +
                        [(r.get(k) or {}).get("mean") for k in extra] +
                        [r["dev_score"].get("mean"), delta, r["paper"], r["n"], notes.get(r["method"], "")])
    if notes:
        lines += ["", "† made with other settings than the command line above (the runs' config.json; "
                  "recorded → this group's today): " + "; ".join(notes.values()) + "."]
    return {f"{name}.md": "\n".join(lines) + "\n", f"{name}.csv": csv_buf.getvalue()}


def prune_weights(out: str, keep=()) -> None:
    """Keep what the table needs (metrics, config, log); weights are re-creatable and large. A group's
    ``keep: [template, best.safetensors]`` keeps those (what a later stage's ``init_from`` reads)."""
    keep = set([keep] if isinstance(keep, str) else keep or ())
    for dirpath, dirnames, filenames in os.walk(out):
        if os.path.basename(dirpath) in keep:
            continue
        for fn in filenames:
            if fn in keep:
                continue
            if fn.endswith(".safetensors") or fn.endswith(".pt") or fn.startswith("events.out"):
                os.remove(os.path.join(dirpath, fn))


def check_peer_libraries(group: Dict, out: str) -> None:
    """Rows whose YAML has a ``peer:`` section (Adapter, Compacter, LoRA) need their library in this venv:
    one line before any run starts, not one failure per run."""
    from openprompt_ipt.runner.peers import require

    for m, _ in pending(group, out):
        with open(os.path.join(ROOT, m["yaml"])) as f:
            peer = (yaml.safe_load(f) or {}).get("peer") or {}
        if peer.get("method"):
            from openprompt_ipt.runner.peers import METHODS
            try:
                require(METHODS[peer["method"]][0])
            except ImportError as e:
                raise SystemExit(f"error: {m['label']}: {e}") from None


def summary_cli(doc: str, default_out: str, header: str, build, groups: List[str], argv=None, figure=None) -> int:
    """The command line of the cross-group summaries (glue_summary.py, generalise_summary.py): read the
    groups' finished runs, write the tables under docs/results/ and print them. ``figure(results) -> PNG
    bytes``, when given, goes beside the table (same name, ``.png``)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=os.path.join(ROOT, "results", "accuracy"), help="the groups' run folders")
    p.add_argument("--out", default=None, help=f"the table (default: docs/results/{default_out} with the default "
                   "--results, else in the --results folder, so a trial never replaces a committed table)")
    args = p.parse_args(argv)
    if args.out is None:
        repo = os.path.abspath(args.results) == os.path.join(ROOT, "results", "accuracy")
        args.out = os.path.join(ROOT, "docs", "results", default_out) if repo else \
            os.path.join(args.results, default_out)
    # a mistyped --results would otherwise overwrite the finished table with empty cells
    if not any(os.path.isdir(os.path.join(args.results, g)) for g in groups):
        raise SystemExit(f"error: --results {args.results}: none of {', '.join(groups)} is a folder there; "
                         "point it at the folder benchmarks/accuracy.py wrote (default results/accuracy)")
    text = header + "\n\n" + build(args.results)
    png = os.path.splitext(args.out)[0] + ".png"
    files = {png: figure(args.results)} if figure is not None else {}  # both made before either is written
    write_files_atomic({**files, args.out: text})  # one set: a kill never leaves a new table beside an old figure
    print(text)
    if files:
        print(f"wrote {png}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--group", required=True, help="a group of benchmarks/accuracy_groups.yaml")
    p.add_argument("--workers", type=int, default=2, help="runs in parallel (one process each)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--out", default=None, help="run folder (default results/accuracy/<group>)")
    p.add_argument("--docs", default=None,
                   help="where the table goes (default: docs/results with the default --out, else the --out folder, "
                        "so a trial run never replaces a committed table)")
    p.add_argument("--set", dest="extra", action="append", default=[], help="override for every run")
    p.add_argument("--report-only", action="store_true", help="only rebuild the table from finished runs")
    p.add_argument("--keep-weights", action="store_true", help="keep best.safetensors / checkpoints")
    p.add_argument("--overwrite", action="store_true",
                   help="remove this group's finished and unfinished runs first and redo them all")
    p.add_argument("--seeds", default=None, metavar="1,2", type=parse_seeds,
                   help="run only these of the group's seeds now (the table still reads every finished seed), so "
                        "seed 1 of several groups can finish before seed 2 of any")
    p.add_argument("--methods", default=None, metavar="LABEL;LABEL",
                   help="run only these of the group's methods now, by label, ';'-separated (the table still reads "
                        "every finished run)")
    p.add_argument("--stop-after", type=float, default=None, metavar="MINUTES",
                   help="start no run after this many minutes (runs in flight finish); rerun to resume")
    args = p.parse_args(argv)
    if args.stop_after is not None and args.stop_after < 0:
        p.error(f"--stop-after must be >= 0 minutes, got {args.stop_after:g}")
    group = load_group(args.group)
    run_seeds = group["seeds"]
    if args.seeds is not None:
        run_seeds = args.seeds
        unknown = [x for x in run_seeds if x not in group["seeds"]]
        if unknown:
            p.error(f"--seeds {','.join(map(str, args.seeds))}: {unknown} not among group {args.group}'s seeds {group['seeds']}")
    run_methods = group["methods"]
    if args.methods is not None:
        wanted = [x.strip() for x in args.methods.split(";") if x.strip()]
        labels = [m["label"] for m in group["methods"]]
        unknown = [x for x in wanted if x not in labels]
        if unknown:
            p.error(f"--methods: {unknown} not among group {args.group}'s methods {labels}")
        run_methods = [m for m in group["methods"] if m["label"] in wanted]
    default_out = os.path.join(ROOT, "results", "accuracy", args.group)
    out = args.out or default_out
    docs = args.docs or (os.path.join(ROOT, "docs", "results") if os.path.abspath(out) == default_out else out)
    failures = []
    # --overwrite redoes the group's own runs: only a from_group row's finished runs would be taken as they are
    kept = [m for m in run_methods if not (args.overwrite and not m.get("from_group"))]
    now = dict(group, seeds=run_seeds, methods=kept)
    found = settings_differences(now, out, args.extra)  # the finished runs this command would take as its own
    if found:
        were = "runs were" if len(found) > 1 else "run was"
        line = (f"group {args.group}: {len(found)} finished {were} made with other settings than this command's "
                f"(recorded → now): {describe(found)}")
        if not args.report_only:
            print(f"error: {line}; rerun with the --set they were made with, or --overwrite to redo them (a from_group "
                  "row's runs: in their own group)", file=sys.stderr)
            return 2
        print(f"note: {line}; the table states the settings they were made with", flush=True)
    if not args.report_only:
        check_peer_libraries(group, out)
        if args.overwrite:
            try:
                print(f"group {args.group}: --overwrite removed {clear_group(group, out)} previous runs under {out}",
                      flush=True)
            except ValueError as e:  # training/run_dir.RunDirBusy: a run of the group is running now
                print(f"error: {e}", file=sys.stderr)
                return 2
        start = time.time()
        failures = run_group(args.group, dict(group, seeds=run_seeds, methods=run_methods), out, args.workers, args.threads, args.extra,
                             args.stop_after)
        print(f"group {args.group}: {(time.time() - start) / 60:.1f} min", flush=True)
        if not args.keep_weights:
            prune_weights(out, group.get("keep"))
    rows = collect(group, out)
    if not any(r["n"] for r in rows):
        print(f"error: no finished runs under {out}", file=sys.stderr)
        return 2
    shared, notes = made_with(group, out)  # the settings of the runs themselves, not this command line's
    cmd = f"python benchmarks/accuracy.py --group {args.group} --workers {args.workers}" + \
          "".join(f" --set {shlex.quote(e)}" for e in shared)
    tables = report(args.group, group, rows, cmd, notes)
    write_files_atomic({os.path.join(docs, fname): text for fname, text in tables.items()})  # .md and .csv agree
    print(tables[f"{args.group}.md"])
    if docs != os.path.join(ROOT, "docs", "results"):
        print(f"wrote {os.path.join(docs, args.group + '.md')} (and .csv)", flush=True)
    for f in failures:
        print(f"FAILED {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
