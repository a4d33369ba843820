"""Seeds x sweep points x protocol: ``run_seeds`` runs one configuration under its data protocol for
each seed, picks the best sweep point per seed on dev (few-shot: mean k-fold CV score over the 2K
examples), and writes

    <output_dir>/<config name>/summary.json                  mean ± std over seeds
    <output_dir>/<config name>/seed<k>/metrics.json          the selected run of seed k ("level": "seed")
    <output_dir>/<config name>/seed<k>/<point>/metrics.json  each sweep point (full / low-resource)
    <output_dir>/<config name>/seed<k>/cv/<point>/...        each point's CV folds (few-shot)
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..data.features import shared_features
from ..data.prepare import Splits, prepare_splits
from ..data.protocols import cv_folds
from ..serialization import write_text_atomic
from .local_paths import record_local_paths, recorded_config
from .run_dirs import RUN_COMMAND, command_beside
from .schema import check_value
from .selection import label_result, split_with_cap
from .sweep import apply_point, expand_grid, point_name, select_best

TrainFn = Callable[[Dict, Splits, Optional[str], bool], Dict]


def default_train(cfg: Dict, splits: Splits, output_dir: Optional[str], show_progress: bool) -> Dict:
    from .experiment import run_experiment

    return run_experiment(cfg, None, output_dir, show_progress=show_progress, splits=splits.as_tuple())


def mean_std(values: Sequence[float]) -> Dict:
    """Mean, sample standard deviation (n - 1; 0 for one value) and n."""
    vals = [float(v) for v in values]
    if not vals:
        return {"mean": float("nan"), "std": float("nan"), "n": 0}
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return {"mean": mean, "std": std, "n": len(vals)}


def protocol_label(cfg: Dict) -> str:
    proto = cfg["protocol"]
    if proto["name"] == "few_shot":
        src = f", train={proto['train_source']}" if proto.get("train_source") else ""
        per = " total" if proto.get("k_per") == "total" else "/label"
        return f"few_shot K={proto['k']}{per}{src}"
    if proto["name"] == "low_resource":
        return f"low_resource K={proto['k']}"
    return "full"


def write_json(path: str, obj) -> None:
    if int(os.environ.get("RANK", "0")) != 0:  # several processes (torchrun / accelerate): rank 0 writes
        return
    write_text_atomic(path, json.dumps(obj, indent=2))


def _tqdm(items, desc: str, show: bool, total: int | None = None):
    from ..progress import bar

    return bar(items, show, desc=desc, leave=False, total=total)


def _label(result: Dict, cfg: Dict, name: str, level: str) -> Dict:
    result = dict(result)
    result.update({"level": level, "config_name": name, "seed": cfg["seed"], "protocol": protocol_label(cfg),
                   "protocol_config": dict(cfg["protocol"]), "selection_metric": cfg["train"]["metric"]})
    return label_result(result, cfg["selection"])


def seed_data(cfg: Dict, root: str) -> Tuple[Splits, Callable[[Dict], Splits]]:
    """(the seed's splits, sweep point -> its splits): a point that sets a ``dataset.*`` key gets its own (a sweep
    over dataset.max_train is a learning curve: every point ran on the seed's data). All prepared now, so a bad
    point fails before any run is written."""
    def key(point):
        return json.dumps(apply_point(cfg, point)["dataset"], sort_keys=True, default=str)

    prepared: Dict[str, Splits] = {}
    for point in [{}] + expand_grid(cfg.get("sweep") or {}):
        if key(point) not in prepared:
            prepared[key(point)] = prepare_splits(apply_point(cfg, point), root)
    return prepared[key({})], lambda point: prepared[key(point)]


def run_one_seed(cfg: Dict, name: str, splits: Splits, seed_dir: Optional[str], train_fn: TrainFn,
                 show_progress: bool = True, data: Callable[[Dict], Splits] | None = None) -> Dict:
    """``data``: a sweep point's splits (``seed_data``); default ``splits`` for every point."""
    metric = cfg["train"]["metric"]
    data = data or (lambda point: splits)
    points = expand_grid(cfg.get("sweep") or {})
    sub = (lambda *p: os.path.join(seed_dir, *p)) if seed_dir else (lambda *p: None)
    if not cfg.get("sweep"):
        return _label(train_fn(cfg, splits, seed_dir, show_progress), cfg, name, "seed")
    rows: List[Dict] = []
    # few-shot: pick the point by k-fold CV over the 2K examples; under on_eval_set dev is the reported split,
    # which CV would train on, so there the point is picked on it like the epoch (the notebook's protocol)
    if cfg["protocol"]["name"] == "few_shot" and cfg["selection"] != "on_eval_set":
        # one tick a fold: the folds run quietly (their epochs would be folds x points screens), a point's
        # folds are minutes, and a bar ticking per point stood still for all of them
        bar = _tqdm(None, f"seed {cfg['seed']}: CV folds over sweep points", show_progress,
                    total=len(points) * int(cfg["protocol"]["cv_folds"]))
        for point in points:
            pcfg, own = apply_point(cfg, point), data(point)
            folds = cv_folds(own.train + own.dev, int(cfg["protocol"]["cv_folds"]), int(cfg["seed"]))
            scores = []
            for i, (tr, held) in enumerate(folds):
                fold_dir = sub("cv", point_name(point), f"fold{i}")
                bar.set_postfix_str(f"{point_name(point)} fold {i + 1}/{len(folds)}")
                r = train_fn(pcfg, Splits(tr, held, held, own.labels), fold_dir, False)
                bar.update()
                scores.append(r["best_dev"][metric])
                if fold_dir:  # a fold's "test" is its held-out part: never a seed-level result
                    write_json(os.path.join(fold_dir, "metrics.json"),
                               {**_label(r, pcfg, name, "cv_fold"), "sweep_point": point, "fold": i})
            row = {"level": "cv_point", "config_name": name, "seed": cfg["seed"], "sweep_point": point,
                   "score": mean_std(scores)["mean"], "cv": {"metric": metric, "folds": scores, **mean_std(scores)}}
            if seed_dir:
                write_json(sub("cv", point_name(point), "metrics.json"), row)
            rows.append(row)
        bar.close()
        best = select_best([r["score"] for r in rows])
        result = train_fn(apply_point(cfg, points[best]), data(points[best]), seed_dir, show_progress)
    else:  # best point on dev
        results = []
        bar = _tqdm(points, f"seed {cfg['seed']}: sweep points", show_progress)
        for point in bar:
            bar.set_postfix_str(point_name(point))  # which point the epochs below belong to
            pcfg = apply_point(cfg, point)
            # each point shows its own tokenizing, epochs and evaluation: on a large split one is minutes, and
            # quiet it left the terminal at "sweep points 0/N" for all of them
            r = _label(train_fn(pcfg, data(point), sub(point_name(point)), show_progress), pcfg, name, "sweep_point")
            r["sweep_point"] = point
            if seed_dir:
                write_json(sub(point_name(point), "metrics.json"), r)
            rows.append({"sweep_point": point, "score": r["best_dev"][metric], "test": r["test"]})
            results.append(r)
        best = select_best([r["score"] for r in rows])
        result = results[best]
        if seed_dir:
            write_json(os.path.join(seed_dir, "config.json"), apply_point(cfg, points[best]))
    result = _label(result, apply_point(cfg, points[best]), name, "seed")
    result["selected_point"] = points[best]
    result["sweep"] = [{k: v for k, v in r.items() if k in ("sweep_point", "score", "test", "cv")} for r in rows]
    return result


def summarize(name: str, results: List[Dict]) -> Dict:
    first = results[0]
    metrics = first.get("metrics") or list(first["test"])
    return {"config_name": name, "dataset": first.get("dataset"), "method": first.get("method") or first.get("strategy"),
            "protocol": first.get("protocol"), "selection": first.get("selection"),
            "test_split": first.get("test_split"), "selection_metric": first.get("selection_metric"),
            **({"test_cap": first["test_cap"]} if first.get("test_cap") else {}),
            "metrics": metrics, "seeds": [r["seed"] for r in results],
            "test": {m: mean_std([r["test"][m] for r in results]) for m in metrics},
            "best_dev": {m: mean_std([r["best_dev"][m] for r in results if m in r["best_dev"]]) for m in metrics},
            "per_seed": [{"seed": r["seed"], "selected_point": r.get("selected_point"), "best_dev": r["best_dev"],
                          "test": r["test"]} for r in results]}


def run_seeds(cfg: Dict, name: str, output_dir: Optional[str], seeds: Sequence[int] | None = None,
              root: str | None = None, train_fn: TrainFn | None = None, show_progress: bool = True,
              resume: bool = False, overwrite: bool = False, notes: Sequence[str] = (),
              run_command: str = RUN_COMMAND) -> Dict:
    """Run ``cfg`` for each seed (default: ``cfg['seed']``); returns the summary (also written to
    ``<output_dir>/<name>/summary.json`` with each seed's metrics.json under ``seed<k>/``). ``notes``: the
    config keys this setup never reads (``load_config``'s ``unused``), kept as ``unused_keys`` in both.
    A seed directory that already holds a run is refused (``training/run_dir.py``) unless ``resume``
    (``train_fn`` continues it) or ``overwrite`` (cleared once every seed's data is ready). ``run_command``: what
    the user ran (``openprompt-ipt run``, ``experiments/run.py``), for the hints that name a command."""
    from ..training.run_dir import holding
    from .experiment import data_root

    train_fn = train_fn or default_train
    root = data_root(root)
    seeds = [check_value("seed", s) for s in seeds] if seeds else [int(cfg["seed"])]  # before any seed trains
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds lists a seed twice: {seeds}")
    expand_grid(cfg.get("sweep") or {})  # bad sweeps fail before anything runs
    top = os.path.join(output_dir, name) if output_dir else None
    if resume and overwrite:
        raise ValueError("--resume continues the runs in the run directory, --overwrite replaces them: pass one")
    with holding([os.path.join(top, f"seed{s}") for s in seeds] if top else []):  # one process per run directory
        return _run_seeds(cfg, name, top, seeds, root, train_fn, show_progress, resume, overwrite, list(notes),
                          run_command)


def config_key(cfg: Dict) -> str:
    """The group's config without its seed: commands summarise each other's seeds only when these match."""
    body = json.dumps({k: v for k, v in cfg.items() if k != "seed"}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def concurrent_results(top: str, seen: Optional[str], key: str, seeds: Sequence[int]) -> List[Dict]:
    """The seeds another command of the same config summarised while this one ran: summary.json is no longer
    the one this command ``seen`` at its start. Their seed metrics.json, so this summary keeps them (a summary
    from before this command started is replaced: the latest command's seeds, docs/training.md)."""
    now = _read(os.path.join(top, "summary.json"))
    if now is None or now == seen:
        return []
    try:
        other = json.loads(now)
    except ValueError:
        return []
    if not isinstance(other, dict) or other.get("config_key") != key:
        return []
    results = []
    for seed in other.get("seeds") or []:
        if seed in seeds:
            continue
        try:
            with open(os.path.join(top, f"seed{seed}", "metrics.json")) as f:
                results.append(json.load(f))
        except (OSError, ValueError):  # removed since (--overwrite of that seed): nothing to keep
            continue
    return results


def write_summary(top: str, name: str, cfg: Dict, seen: Optional[str], results: List[Dict],
                  notes: Sequence[str], run_command: str = RUN_COMMAND) -> Dict:
    """summary.json, read-modified-written under the group's lock: a command started beside this one
    (``--seeds 1`` and ``--seeds 2`` at once) finishing first keeps its seeds in it instead of being replaced."""
    from ..training.run_dir import holding

    path = os.path.join(top, "summary.json")
    with holding([path], wait=True):
        beside = concurrent_results(top, seen, config_key(cfg), [r["seed"] for r in results])
        summary = summarize(name, sorted(beside + results, key=lambda r: r["seed"]) if beside else results)
        summary["config_key"] = config_key(cfg)
        if notes:
            summary["unused_keys"] = list(notes)
        if beside and int(os.environ.get("RANK", "0")) == 0:
            kept = [str(r["seed"]) for r in beside]
            print(f"note: {path} also keeps seed{'s' if len(kept) > 1 else ''} {', '.join(kept)}, run by another "
                  "command of this config while this one ran", flush=True)
        say_replaced_summary(path, summary["seeds"], run_command)
        write_json(path, summary)
    return summary


def say_replaced_summary(path: str, seeds: Sequence[int], run_command: str = RUN_COMMAND) -> None:
    """summary.json describes the seeds of the latest command (docs/training.md): when that drops seeds the
    previous one summarised (``--seeds 3`` after ``--seeds 1,2``), one line says so and where all of them are."""
    try:
        with open(path) as f:
            earlier = json.load(f).get("seeds") or []
    except (OSError, ValueError, AttributeError):
        return
    dropped = [s for s in earlier if s not in seeds]
    if dropped and int(os.environ.get("RANK", "0")) == 0:
        print(f"note: {path} summarised seeds {', '.join(map(str, earlier))}; it now summarises this command's seeds "
              f"{', '.join(map(str, seeds))} (seed{'s' if len(dropped) > 1 else ''} {', '.join(map(str, dropped))} "
              f"left out): {command_beside(run_command, 'aggregate')} {os.path.dirname(path)} averages every seed",
              flush=True)


def _run_seeds(cfg, name, top, seeds, root, train_fn, show_progress, resume, overwrite, notes=(),
               run_command=RUN_COMMAND) -> Dict:
    from ..training.run_dir import check_new_runs, clear_runs

    taken = check_new_runs([os.path.join(top, f"seed{s}") for s in seeds] if top else [], resume, overwrite)
    plans = []
    # every seed's data first: a bad protocol (K too large) fails before any run is written; a bar, as each seed
    # reads its files again (IMDB: ~1.5 s a seed, all before the first line)
    for seed in _tqdm(seeds, "preparing each seed's data", show_progress and len(seeds) > 1):
        scfg = copy.deepcopy(cfg)
        scfg["seed"] = int(seed)
        seed_dir = os.path.join(top, f"seed{seed}") if top else None  # its model / data folders: those it recorded
        record_local_paths(scfg, recorded_config(seed_dir) if resume else None, seed_dir)
        plans.append((scfg, *seed_data(scfg, root)))
    if overwrite and taken and int(os.environ.get("RANK", "0")) == 0:
        clear_runs(taken + [os.path.join(top, "summary.json")])  # the old group's summary goes with its runs
        print(f"--overwrite: removed the previous run{'s' if len(taken) > 1 else ''} in {', '.join(taken)}", flush=True)
    seen = _read(os.path.join(top, "summary.json")) if top else None  # what a command beside this one changes
    if int(os.environ.get("RANK", "0")) == 0:
        for line in dict.fromkeys(s.source for _, s, _ in plans if s.source):  # each run says where its data came from
            print(line, flush=True)
        cap = next((s.test_cap for _, s, _ in plans if s.test_cap), None)
        if cap:  # a sampled test split: said before any score, and next to the test row
            print(f"test: {cap['kept']:,} of the reported split's {cap['of']:,} rows, a seeded sample "
                  f"(dataset.max_eval = {cap['max_eval']})", flush=True)
        from .experiment import encoder_start

        start = encoder_start(cfg, run_command)
        if start and start.get("note"):  # Encoder IPT without its pretraining export: said first, kept in metrics.json
            print(start["note"], flush=True)
    results = []
    with shared_features():  # each split tokenized once for the group, not once per seed and sweep point
        for scfg, splits, data in _tqdm(plans, "seeds", show_progress and len(plans) > 1):
            results.append(_finish_seed(scfg, name, top, splits, data, train_fn, show_progress, notes))
    if top:
        summary = write_summary(top, name, cfg, seen, results, notes, run_command)
    else:
        summary = summarize(name, results)
        if notes:
            summary["unused_keys"] = list(notes)
    summary["results"] = results
    return summary


def _finish_seed(scfg, name, top, splits, data, train_fn, show_progress, notes) -> Dict:
    """One seed of the group: its run(s), labelled and written to ``seed<k>/metrics.json``."""
    seed_dir = os.path.join(top, f"seed{scfg['seed']}") if top else None
    result = run_one_seed(scfg, name, splits, seed_dir, train_fn, show_progress, data)
    splits = data(result.get("selected_point") or {})  # the reported run's data (a swept dataset.* key)
    result["data_source"] = splits.source
    if splits.test_cap:  # dataset.max_eval sampled the reported split: said next to its label
        result["test_cap"] = splits.test_cap
    if notes:
        result["unused_keys"] = list(notes)
    if seed_dir:
        write_json(os.path.join(seed_dir, "metrics.json"), result)
    return result


def format_summary(summary: Dict) -> str:
    """One screen: each seed's selected point, dev and test scores, then mean ± std."""
    metrics = summary["metrics"]
    head = (f"{summary['config_name']}: {summary['dataset']} | {summary['method']} | protocol {summary['protocol']} "
            f"| selection {summary['selection']} | test = {split_with_cap(summary['test_split'], summary.get('test_cap'))}")
    rows = [("seed", "selected point", f"dev {summary['selection_metric']}", *(f"test {m}" for m in metrics))]
    for r in summary["per_seed"]:
        point = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in (r["selected_point"] or {}).items()) or "-"
        dev = r["best_dev"].get(summary["selection_metric"])
        rows.append((str(r["seed"]), point, f"{dev:.4f}" if dev is not None else "-",
                     *(f"{r['test'][m]:.4f}" for m in metrics)))
    d = summary["best_dev"].get(summary["selection_metric"], {"mean": float("nan"), "std": 0.0})
    rows.append((f"mean ± std (n={len(summary['per_seed'])})", "", f"{d['mean']:.4f} ± {d['std']:.4f}",
                 *(f"{summary['test'][m]['mean']:.4f} ± {summary['test'][m]['std']:.4f}" for m in metrics)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return head + "\n" + "\n".join(lines)
