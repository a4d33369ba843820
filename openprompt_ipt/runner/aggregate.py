"""Collect ``metrics.json`` files from run directories into the papers' table shapes.

* results table: method × task, each cell the reported split's mean ± std over seeds (×100) and n,
  on the metric each run selected with (``train.metric``); CSV in long form with every metric.
* sweep tables and line plots: test score against each swept value (prompt length: IPT Figure 5;
  sequence utilization rate: IPT Table 6), one line per method / task / other swept values.
Runs selected on the reported split (``selection: on_eval_set``) are labelled in the method name.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
from collections import OrderedDict
from typing import Dict, List, Sequence, Tuple

from .runs import mean_std
from .selection import split_with_cap
from .sweep import point_name

TASK_TITLES = {"cb": "CB", "rte": "RTE", "boolq": "BoolQ", "multirc": "MultiRC", "sst2": "SST-2", "imdb": "IMDB",
               "agnews": "AG News", "mr": "MR", "cr": "CR", "mpqa": "MPQA", "subj": "Subj", "qnli": "QNLI",
               "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP"}
# IDPG Table 1's ten tasks, in its column order, with the score it reports for each; its "Avg" column is
# the plain mean of these ten.
IDPG_TABLE1 = OrderedDict([("mpqa", "accuracy"), ("subj", "accuracy"), ("cr", "accuracy"), ("mr", "accuracy"),
                           ("sst2", "accuracy"), ("qnli", "accuracy"), ("rte", "accuracy"), ("mrpc", "acc_and_f1"),
                           ("stsb", "pearson_spearman"), ("qqp", "acc_and_f1")])
AVG_TITLE = "Avg (IDPG Table 1's 10 tasks)"
_SEED_DIR = re.compile(r"seed-?\d+$")  # runs.py: <output_dir>/<config name>/seed<k>
def _natural(name: str) -> List:
    """seed2 before seed10: the numbers in a folder name compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _walk(top: str):
    """``os.walk`` in name order: the disk's own order (ext4: a per-disk hash) would order the tables' rows and
    seeds differently on another machine."""
    for dirpath, dirnames, names in os.walk(top):
        dirnames.sort(key=_natural)  # in place: os.walk descends in this order
        yield dirpath, dirnames, sorted(names, key=_natural)


SWEEP_TITLES = {"prompt_length": "prompt length (cf. IPT Figure 5)",
                "sequence_utilization_rate": "sequence utilization rate (cf. IPT Table 6)"}


def find_metrics(paths: Sequence[str]) -> List[str]:
    """Every metrics.json under the given run directories / globs (each one must match something)."""
    files: List[str] = []
    for pattern in paths:
        matches = sorted(glob.glob(pattern), key=_natural) or ([pattern] if os.path.exists(pattern) else [])
        if not matches:
            raise FileNotFoundError(f"no run directory matches '{pattern}'")
        for m in matches:
            if os.path.isfile(m):
                # a glob's other files (runs/cb/* also matches summary.json) are a run folder's files: skipped, as
                # a walked folder's are; a file named alone must be a run's record
                if os.path.basename(m) == "metrics.json":
                    files.append(m)
                elif not glob.has_magic(pattern):
                    raise ValueError(f"'{m}' is not a run's metrics.json: give run directories (runs/<config>) or "
                                     "their metrics.json files")
                continue
            for dirpath, _, names in _walk(m):
                if "metrics.json" in names:
                    files.append(os.path.join(dirpath, "metrics.json"))
    seen, unique = set(), []
    for f in files:
        real = os.path.realpath(f)
        if real not in seen:
            seen.add(real)
            unique.append(f)
    if not unique:
        raise FileNotFoundError(f"no metrics.json under {list(paths)}: point at run directories (runs/<config>)")
    return unique


def unfinished_seeds(paths: Sequence[str]) -> List[str]:
    """The ``seed<k>`` folders under the given run directories / globs without a metrics.json: a seed that
    failed or is still running, which no table counts (said under results.md, never dropped without a word)."""
    found: List[str] = []
    for pattern in paths:
        for m in sorted(glob.glob(pattern), key=_natural) or [pattern]:
            for dirpath, dirnames, names in _walk(m):
                if _SEED_DIR.match(os.path.basename(dirpath)) and "metrics.json" not in names:
                    found.append(dirpath)
                    dirnames[:] = []  # its sweep points / CV folds are part of it
    return list(OrderedDict.fromkeys(found))


def load_records(files: Sequence[str]) -> List[Dict]:
    records = []
    for f in files:
        try:
            with open(f) as fh:
                rec = json.load(fh)
        except json.JSONDecodeError as e:
            raise ValueError(f"{f} is not valid JSON ({e})")
        rec["_file"] = f
        rec.setdefault("level", "seed")  # a single run written by run_experiment alone
        config = os.path.join(os.path.dirname(f), "config.json")
        if os.path.isfile(config):
            with open(config) as fh:
                rec["_config"] = json.load(fh)  # the settings a cell's seeds must share (``_rows``)
        if "method" not in rec and "_config" in rec:  # runs from before metrics.json named the method
            from .experiment import paper_method_name

            rec["method"] = paper_method_name(rec["_config"])
        records.append(rec)
    return records


def method_label(rec: Dict) -> str:
    label = str(rec.get("method") or rec.get("strategy") or rec.get("config_name") or "?")
    proto = rec.get("protocol")
    if proto and proto != "full":
        label += f" [{proto}]"
    if rec.get("selection") == "on_eval_set":
        label += " [selected on eval set]"
    return label


def primary_metric(rec: Dict) -> str:
    metric = rec.get("selection_metric")
    if metric and metric in rec.get("test", {}):
        return metric
    return (rec.get("metrics") or list(rec["test"]))[0]


# keys that may differ between the seeds of one experiment: which seed, where it ran and saved, how often it
# saved (training/checkpoint.py NOT_RESULT_KEYS); a sweep's selected point is left out too (``settings``)
NOT_SETTING_KEYS = ("seed", "output_dir", "train.device", "train.checkpoint_every", "train.checkpoint_minutes",
                    "train.keep_checkpoints")


def settings(rec: Dict) -> Tuple | None:
    """The run's config.json as sorted (dotted key, value) pairs, less ``NOT_SETTING_KEYS`` and the swept keys
    (each seed of a sweep selects its own point); keys a later release added hold their defaults. None
    without a config.json."""
    from .config import flat_keys
    from .defaults import DEFAULTS

    cfg = rec.get("_config")
    if not isinstance(cfg, dict):
        return None
    swept = set(flat_keys(cfg.get("sweep") or {}))
    flat = {**flat_keys(DEFAULTS), **flat_keys(cfg)}
    own = f"seed{cfg.get('seed')}"  # init_from: runs/stage1/seed3 for seed 3 is one setting, runs/stage1/seed{seed}
    return tuple(sorted((k, json.dumps(v.replace(own, "seed{seed}") if isinstance(v, str) else v, sort_keys=True))
                        for k, v in flat.items()
                        if k not in NOT_SETTING_KEYS and k not in swept and k.split(".")[0] != "sweep"))


def _differing(all_settings: List[Tuple], mine: Tuple, limit: int = 3) -> str:
    """``key=value, ...`` of ``mine`` at the keys where the cell's settings differ (``limit`` keys, then ...)."""
    dicts = [dict(s or ()) for s in all_settings]
    keys = sorted(k for k in set().union(*dicts) if len({d.get(k) for d in dicts}) > 1)
    if mine is None:
        return "no config.json"
    own = dict(mine)
    shown = [f"{k}={json.loads(own[k]) if k in own else '<unset>'}" for k in keys[:limit]]
    return ", ".join(shown) + (f", +{len(keys) - limit} more" if len(keys) > limit else "")


def _cell_labels(records: List[Dict]) -> List[str]:
    """Each record's row label: the method label; two configs with the same label are told apart by config
    name, and runs of the same name with other settings (another lr, epochs: another --output-dir) by the
    settings that differ, so a cell or a sweep line only ever averages the seeds of one experiment."""
    configs: Dict[Tuple[str, str], set] = {}
    for r in records:
        configs.setdefault((method_label(r), r.get("dataset", "?")), set()).add(r.get("config_name"))
    named = []
    for r in records:
        label, task = method_label(r), r.get("dataset", "?")
        if len(configs[(label, task)]) > 1:
            label += f" ({r.get('config_name')})"
        named.append(label)
    kinds: Dict[Tuple[str, str], List] = {}
    for r, label in zip(records, named):
        kinds.setdefault((label, r.get("dataset", "?")), []).append(settings(r))
    kinds = {k: list(OrderedDict.fromkeys(v)) for k, v in kinds.items()}
    out = []
    for r, label in zip(records, named):
        group = kinds[(label, r.get("dataset", "?"))]
        out.append(label + (f" [{_differing(group, settings(r))}]" if len(group) > 1 else ""))
    return out


def _count_once(seen: Dict, key: Tuple, r: Dict, what: str) -> None:
    """A seed twice under one ``key`` (the same run in two folders) would be counted twice: a ValueError naming both."""
    twin = seen.setdefault(key, {}).get(r.get("seed"))
    if twin is not None:
        raise ValueError(f"seed {r.get('seed')} of {what} is in two runs, {os.path.dirname(twin['_file'])} and "
                         f"{os.path.dirname(r['_file'])}, with the same settings: a cell is a mean over seeds, so each "
                         "seed counts once: aggregate one of them")
    seen[key][r.get("seed")] = r


def _rows(records: List[Dict]) -> Dict[Tuple[str, str], List[Dict]]:
    """(row label, task) -> records (``_cell_labels``); a seed twice in a cell is an error (``_count_once``)."""
    cells: Dict[Tuple[str, str], List[Dict]] = OrderedDict()
    seen: Dict = {}
    for r, label in zip(records, _cell_labels(records)):
        key = (label, r.get("dataset", "?"))
        _count_once(seen, key, r, f"'{label}' on {key[1]}")
        cells.setdefault(key, []).append(r)
    return cells


def reported_split(rec: Dict) -> str:
    """The reported split as the run said it, with dataset.max_eval's sample where it cut the split."""
    return split_with_cap(rec.get("test_split", "?"), rec.get("test_cap"))


def fmt(stats: Dict, scale: float = 100.0) -> str:
    return f"{stats['mean'] * scale:.1f} ± {stats['std'] * scale:.1f} (n={stats['n']})"


def results_tables(records: List[Dict]) -> Tuple[str, str]:
    """(markdown, csv) of the seed-level runs."""
    seed_level = [r for r in records if r["level"] == "seed"]
    if not seed_level:
        raise ValueError("no seed-level metrics.json found (only sweep points): point at runs/<config> folders")
    cells = _rows(seed_level)
    methods = list(OrderedDict.fromkeys(m for m, _ in cells))
    tasks = sorted({t for _, t in cells}, key=lambda t: list(TASK_TITLES).index(t) if t in TASK_TITLES else 99)
    metric_of = {t: primary_metric(next(r for (m, tt), rs in cells.items() if tt == t for r in rs)) for t in tasks}
    header = ["method"] + [f"{TASK_TITLES.get(t, t)} ({metric_of[t]})" for t in tasks]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    ten = set(IDPG_TABLE1) <= set(tasks)  # the table covers Table 1: its Avg column too
    if ten:
        header.append(AVG_TITLE)
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for m in methods:
        row = [m]
        for t in tasks:
            rs = cells.get((m, t))
            row.append(fmt(mean_std([r["test"][metric_of[t]] for r in rs])) if rs else "-")
        if ten:
            row.append(table1_average(cells, m))
        lines.append("| " + " | ".join(row) + " |")
    splits = sorted({f"{TASK_TITLES.get(r.get('dataset'), r.get('dataset'))}: {reported_split(r)}"
                     for r in seed_level})
    md = "\n".join(lines) + ("\n\nmean ± std over seeds (sample std), ×100; reported split — " + "; ".join(splits) + "\n")
    if ten:
        md += (f"\n{AVG_TITLE}: the mean over MPQA, Subj, CR, MR, SST-2, QNLI, RTE, MRPC, STS-B, QQP of each task's "
               "seed mean, on IDPG Table 1's scores (accuracy; MRPC / QQP mean of accuracy and F1; STS-B mean of "
               "Pearson and Spearman), whatever the cell's selection metric; '-' until a method has all ten.\n")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["method", "task", "protocol", "selection", "test_split", "metric", "mean", "std", "n", "seeds"])
    for (m, t), rs in cells.items():
        for metric in rs[0].get("metrics") or list(rs[0]["test"]):
            s = mean_std([r["test"][metric] for r in rs])
            w.writerow([m, t, rs[0].get("protocol", "full"), rs[0].get("selection", "held_out"),
                        "; ".join(dict.fromkeys(reported_split(r) for r in rs)), metric, f"{s['mean']:.6f}", f"{s['std']:.6f}", s["n"],
                        " ".join(str(r.get("seed", "")) for r in rs)])
    return md, buf.getvalue()


def table1_average(cells: Dict[Tuple[str, str], List[Dict]], method: str) -> str:
    """IDPG Table 1's Avg of ``method``: the mean of its ten task means on the paper's scores ('-' while a
    task or that task's score is missing; then the count found, so a partial row is never read as the Avg)."""
    means = []
    for task, metric in IDPG_TABLE1.items():
        rs = cells.get((method, task)) or []
        if rs and all(metric in r["test"] for r in rs):
            means.append(mean_std([r["test"][metric] for r in rs])["mean"])
    if len(means) < len(IDPG_TABLE1):
        return f"- ({len(means)}/{len(IDPG_TABLE1)} tasks)"
    return f"{100 * sum(means) / len(means):.1f}"


def sweep_series(records: List[Dict]) -> Dict[str, Dict]:
    """swept key -> {series label -> {value -> [test scores over seeds]}} from sweep-point runs; a line is one
    experiment (``_cell_labels``: other settings or configs get their own line) and counts each seed once."""
    points = [r for r in records if r["level"] == "sweep_point" and r.get("sweep_point") and "test" in r]
    out: Dict[str, Dict] = OrderedDict()
    seen: Dict = {}
    for r, row in zip(points, _cell_labels(points)):
        point, metric = r["sweep_point"], primary_metric(r)
        _count_once(seen, (row, r.get("dataset"), json.dumps(point, sort_keys=True)), r,
                    f"'{row}' on {r.get('dataset')} at {point_name(point)}")
        for key, value in point.items():
            others = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in point.items() if k != key)
            label = f"{row} / {TASK_TITLES.get(r.get('dataset'), r.get('dataset'))} ({metric})"
            label += f" [{others}]" if others else ""
            out.setdefault(key, OrderedDict()).setdefault(label, {}).setdefault(value, []).append(r["test"][metric])
    return out


def sweep_outputs(key: str, series: Dict) -> Tuple[str, str, bytes]:
    """(markdown, csv, png bytes) for one swept key."""
    xs = sorted({x for pts in series.values() for x in pts}, key=lambda v: (isinstance(v, str), v))
    short = key.split(".")[-1]
    lines = ["| series | " + " | ".join(f"{short}={x}" for x in xs) + " |", "|---|" + "---|" * len(xs)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["series", key, "mean", "std", "n"])
    for label, pts in series.items():
        lines.append(f"| {label} | " + " | ".join(fmt(mean_std(pts[x])) if x in pts else "-" for x in xs) + " |")
        for x in xs:
            if x in pts:
                s = mean_std(pts[x])
                w.writerow([label, x, f"{s['mean']:.6f}", f"{s['std']:.6f}", s["n"]])
    md = f"test score vs {SWEEP_TITLES.get(short, short)}; mean ± std over seeds, ×100\n\n" + "\n".join(lines) + "\n"
    from .plotting import png_bytes, pyplot

    fig, ax = pyplot().subplots(figsize=(6, 4))
    numeric = all(isinstance(x, (int, float)) for x in xs)
    for label, pts in series.items():
        px = [x for x in xs if x in pts]
        stats = [mean_std(pts[x]) for x in px]
        pos = px if numeric else [xs.index(x) for x in px]
        ax.errorbar(pos, [s["mean"] * 100 for s in stats], yerr=[s["std"] * 100 for s in stats], marker="o",
                    capsize=3, label=label)
    if not numeric:
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_xlabel(short)
    ax.set_ylabel("test score (×100)")
    ax.set_title(f"test score vs {SWEEP_TITLES.get(short, short)}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return md, buf.getvalue(), png_bytes(fig)


# the files an aggregate writes: results.md / .csv, and per swept key sweep_<key>.md / .csv / .png
OUTPUT_NAME = re.compile(r"^(results\.(md|csv)|sweep_.+\.(md|csv|png))$")


def earlier_outputs(out: str) -> List[str]:
    """The files of an earlier aggregate in the folder ``out`` (none when it does not exist)."""
    return sorted(n for n in os.listdir(out) if OUTPUT_NAME.match(n)) if os.path.isdir(out) else []


def aggregate(paths: Sequence[str], out: str | None = None, overwrite: bool = True) -> Dict[str, object]:
    """Everything is computed before anything is written; returns {file name: content} and writes
    them under ``out`` (a folder) when given, as one set that replaces an earlier aggregate's whole: its
    files this one does not write (a sweep table of other runs) are removed, never left beside the new
    results. ``overwrite=False``: an earlier aggregate's files in ``out`` are a ValueError, nothing written."""
    records = load_records(find_metrics(paths))
    md, table_csv = results_tables(records)
    left_out = unfinished_seeds(paths)
    if left_out:
        md += f"\nleft out, no metrics.json (failed or unfinished; --resume finishes them): {', '.join(left_out)}\n"
    files: Dict[str, object] = OrderedDict([("results.md", md), ("results.csv", table_csv)])
    for key, series in sweep_series(records).items():
        s_md, s_csv, png = sweep_outputs(key, series)
        short = key.split(".")[-1]
        files[f"sweep_{short}.md"], files[f"sweep_{short}.csv"], files[f"sweep_{short}.png"] = s_md, s_csv, png
    if out:
        from ..serialization import write_files_atomic
        from ..training.run_dir import holding

        with holding([out], wait=True):  # two aggregates into one --out: each set lands whole, never mixed
            earlier = earlier_outputs(out)
            if earlier and not overwrite:
                raise ValueError(earlier_refusal(out, earlier))
            write_files_atomic({os.path.join(out, name): content for name, content in files.items()})
            for name in set(earlier) - set(files):  # the earlier set's: not this set's, and no longer true
                os.remove(os.path.join(out, name))
    return files


def earlier_refusal(out: str, earlier: List[str]) -> str:
    more = f" and {len(earlier) - 2} more" if len(earlier) > 2 else ""
    return (f"--out '{out}' already holds the tables of an earlier aggregate ({', '.join(earlier[:2])}{more}): "
            "--overwrite replaces them (and removes its sweep files this one does not write), or give another --out")
