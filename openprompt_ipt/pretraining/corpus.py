"""The category corpus: a declarative mapping (YAML) from datasets to Wikipedia's 13 categories.

Each source names a dataset — a file or folder under the data root, a local path, or a 🤗 hub
name — its text field(s), and either one ``category`` for the whole dataset (IPT labels data by
the dataset's description) or a ``label_map`` from the dataset's own labels to categories
(``null`` drops a label). Everything loads through 🤗 ``datasets`` (json/jsonl(.gz), csv, tsv,
parquet locally; any hub dataset when online). ``build_corpus`` then tokenises with the target
PLM's tokenizer (so the exported table lines up with its vocabulary), drops too-short texts and
duplicates, caps every category at ``max_per_category`` and splits each category train/dev/test
by seed (stratified, so every split holds every category).
"""
from __future__ import annotations

import contextlib
import os
import random
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..runner.defaults import nearest_or_valid as _nearest
from .categories import canonical_category, resolve_categories

SOURCE_KEYS = {"name", "path", "config", "split", "files", "format", "column_names", "csv_options", "text",
               "label", "label_map", "category", "max_examples"}
MAPPING_KEYS = {"categories", "sources"}
FORMATS = {".jsonl": "json", ".json": "json", ".jsonl.gz": "json", ".json.gz": "json", ".csv": "csv",
           ".csv.gz": "csv", ".tsv": "csv", ".tsv.gz": "csv", ".parquet": "parquet"}


@dataclass
class SourceSpec:
    name: str
    path: str
    text: List[str]
    label: Optional[str] = None
    label_map: Optional[Dict[str, Optional[str]]] = None
    category: Optional[str] = None
    config: Optional[str] = None
    split: str = "train"
    files: Optional[List[str]] = None
    format: Optional[str] = None
    column_names: Optional[List[str]] = None
    csv_options: Dict = field(default_factory=dict)
    max_examples: Optional[int] = None


@dataclass
class Mapping:
    categories: List[str]
    sources: List[SourceSpec]
    path: str = "<mapping>"


def parse_mapping(raw: Dict, where: str = "<mapping>") -> Mapping:
    """Validate a mapping (already read from YAML); every error names the source and the fix."""
    if not isinstance(raw, dict) or not raw.get("sources"):
        raise ValueError(f"{where}: a corpus mapping needs a non-empty 'sources:' list")
    for key in raw:
        if key not in MAPPING_KEYS:
            raise ValueError(f"{where}: unknown key '{key}'{_nearest(key, MAPPING_KEYS)}")
    cats = raw.get("categories")
    categories = resolve_categories(None if cats in (None, "all") else cats)
    if len(categories) < 2:  # one class: cross-entropy is 0 whatever the input, nothing trains, accuracy reads 1.0
        raise ValueError(f"{where}: 'categories:' lists {len(categories)} category ({categories}): the classifier "
                         "needs at least 2 to learn anything; list more, or 'all'")
    sources, names = [], set()
    for i, s in enumerate(raw["sources"]):
        label = f"{where}: source #{i + 1}" + (f" '{s.get('name')}'" if isinstance(s, dict) and s.get("name") else "")
        if not isinstance(s, dict):
            raise ValueError(f"{label}: must be a mapping with at least path, text and category/label_map")
        for key in s:
            if key not in SOURCE_KEYS:
                raise ValueError(f"{label}: unknown key '{key}'{_nearest(key, SOURCE_KEYS)}")
        for key in ("path", "text"):
            if not s.get(key):
                raise ValueError(f"{label}: '{key}' is required")
        name = str(s.get("name") or s["path"])
        if name in names:
            raise ValueError(f"{label}: duplicate source name '{name}'")
        names.add(name)
        if (s.get("category") is None) == (s.get("label_map") is None):
            raise ValueError(f"{label}: give exactly one of 'category' (whole dataset) or 'label_map' (+ 'label')")
        prefix = f"{label}: "
        category = canonical_category(s["category"], where=prefix) if s.get("category") is not None else None
        label_map = None
        if s.get("label_map") is not None:
            if not s.get("label"):
                raise ValueError(f"{label}: 'label_map' needs 'label' (the dataset's label field)")
            label_map = {str(k): (None if v is None else canonical_category(v, where=prefix))
                         for k, v in dict(s["label_map"]).items()}
        for c in [category] + list((label_map or {}).values()):
            if c is not None and c not in categories:
                raise ValueError(f"{label}: category '{c}' is not in this mapping's 'categories:' list")
        text = s["text"] if isinstance(s["text"], list) else [s["text"]]
        files = s.get("files")
        max_ex = s.get("max_examples")
        if max_ex is not None and int(max_ex) <= 0:
            raise ValueError(f"{label}: max_examples must be positive, got {max_ex}")
        sources.append(SourceSpec(
            name=name, path=str(s["path"]), text=[str(t) for t in text], label=s.get("label"), label_map=label_map,
            category=category, config=s.get("config"), split=s.get("split", "train"),
            files=[files] if isinstance(files, str) else files, format=s.get("format"),
            column_names=s.get("column_names"), csv_options=dict(s.get("csv_options") or {}),
            max_examples=int(max_ex) if max_ex is not None else None))
    return Mapping(categories=categories, sources=sources, path=where)


def load_mapping(path: str) -> Mapping:
    from ..runner.config import load_yaml

    if not os.path.isfile(path):
        raise FileNotFoundError(f"corpus mapping '{path}' not found (see yamls/corpus_13cat.yaml)")
    with open(path) as f:
        return parse_mapping(load_yaml(f), where=path)


# ---- loading one source through 🤗 datasets ----------------------------------------------------
def _format_of(path: str) -> Optional[str]:
    low = path.lower()
    for ext in sorted(FORMATS, key=len, reverse=True):
        if low.endswith(ext):
            return FORMATS[ext]
    return None


def _local_files(spec: SourceSpec, root: str) -> Optional[List[str]]:
    """The data files of a local source, or None when ``path`` is not local (a hub name)."""
    base = None
    for cand in ([spec.path] if os.path.isabs(spec.path) else [os.path.join(root, spec.path), spec.path]):
        if os.path.exists(cand):
            base = cand
            break
    if base is None:
        return None
    if os.path.isfile(base):
        return [base]
    if spec.files:
        files = [os.path.join(base, f) for f in spec.files]
        for f in files:
            if not os.path.isfile(f):
                raise FileNotFoundError(f"source '{spec.name}': file '{f}' not found")
        return files
    files = sorted(os.path.join(base, f) for f in os.listdir(base) if _format_of(f))
    if not files:
        raise FileNotFoundError(f"source '{spec.name}': folder '{base}' holds no json/jsonl/csv/tsv/parquet "
                                "file: list them under 'files:'")
    return files


@contextlib.contextmanager
def _load_quietly():
    """``load_dataset`` without 🤗 datasets' log lines and bars; its bars as they were afterwards (switching them off
    for good also silenced the ``.map()`` bars of a notebook that called the pretraining)."""
    from datasets import load_dataset
    from datasets.utils import logging as ds_logging

    from ..data.file_errors import datasets_quiet

    bars = ds_logging.is_progress_bar_enabled()
    ds_logging.disable_progress_bar()
    try:
        with datasets_quiet():
            yield load_dataset
    finally:
        if bars:
            ds_logging.enable_progress_bar()


def load_source_rows(spec: SourceSpec, root: str, cache_dir: Optional[str] = None):
    """The source as a 🤗 ``Dataset`` (local files offline, or a hub dataset)."""
    from ..data.file_errors import json_problem

    files = _local_files(spec, root)
    if files is None and (_format_of(spec.path) or spec.path.startswith((".", os.sep)) or spec.files):
        raise ValueError(f"source '{spec.name}': unknown dataset '{spec.path}': no such file or folder under the data "
                         f"root '{root}' or the current directory")
    if files is None:
        try:
            with _load_quietly() as load_dataset:  # its own log line would come before ours
                return load_dataset(spec.path, spec.config, split=spec.split, cache_dir=cache_dir)
        except Exception as e:  # offline, unknown name, gated, ...
            reason = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise ValueError(f"source '{spec.name}': unknown dataset '{spec.path}': not a file or folder under the "
                             f"data root '{root}' or the current directory, and the 🤗 hub could not load it "
                             f"({type(e).__name__}: {reason})") from None
    fmt = spec.format or _format_of(files[0])
    if fmt is None:
        raise ValueError(f"source '{spec.name}': cannot tell the format of '{files[0]}': set format: json|csv|parquet")
    empty = [f for f in files if os.path.getsize(f) == 0]
    if empty:  # 🤗 datasets answers an empty file with a StopIteration / DatasetGenerationError traceback
        raise ValueError(f"source '{spec.name}': file '{empty[0]}' is empty: fill it, or remove the source from "
                         "the mapping")
    kwargs = dict(spec.csv_options)
    if fmt == "csv":
        if any(f.lower().endswith((".tsv", ".tsv.gz")) for f in files):
            kwargs.setdefault("sep", "\t")
        if spec.column_names:
            kwargs["column_names"] = list(spec.column_names)
    try:
        with _load_quietly() as load_dataset:  # a malformed file: datasets logs a line of its own before raising
            return load_dataset(fmt, data_files=files, split="train", cache_dir=cache_dir, **kwargs)
    except Exception as e:  # a malformed file: datasets' own error is a chained traceback
        problems = [(f, json_problem(f)) for f in files] if fmt == "json" else []
        bad = next(((f, p) for f, p in problems if p), None)
        if bad:  # the file's line, not an Arrow batch's row
            raise ValueError(f"source '{spec.name}': cannot read '{bad[0]}' as json: {bad[1]}: fix that line (one JSON "
                             "object per line, or one JSON document), or set format: in the mapping") from None
        cause = e.__cause__ or e
        reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:200]
        raise ValueError(f"source '{spec.name}': cannot read {files if len(files) > 1 else repr(files[0])} as {fmt} "
                         f"({type(cause).__name__}: {reason}): fix the file, or set format: / csv_options: in the "
                         "mapping") from None


def _clean(text) -> str:
    return re.sub(r"\s+", " ", str(text if text is not None else "")).strip()


def source_examples(spec: SourceSpec, root: str, seed: int, cache_dir: Optional[str] = None):
    """``[(text, category)]`` of one source: fields checked, labels mapped, ``max_examples`` sampled by seed."""
    ds = load_source_rows(spec, root, cache_dir)
    columns = list(ds.column_names)
    for f in spec.text + ([spec.label] if spec.label_map is not None else []):
        if f not in columns:
            raise ValueError(f"source '{spec.name}': no field '{f}'{_nearest(f, columns)}; "
                             f"its fields are {columns}")
    texts = [" ".join(_clean(v) for v in vals) for vals in zip(*(ds[f] for f in spec.text))]
    if spec.label_map is None:
        cats = [spec.category] * len(texts)
    else:
        labels = [str(v) for v in ds[spec.label]]
        unmapped = sorted(set(labels) - set(spec.label_map), key=lambda x: (len(x), x))
        if unmapped:
            raise ValueError(f"source '{spec.name}': labels {unmapped[:20]} of field '{spec.label}' have no entry in "
                             "label_map: map each to a category, or to null to drop it")
        cats = [spec.label_map[lab] for lab in labels]
    pairs = [(t, c) for t, c in zip(texts, cats) if c is not None and t]
    if spec.max_examples is not None and len(pairs) > spec.max_examples:
        rng = random.Random(f"{seed}:{spec.name}")
        pairs = rng.sample(pairs, spec.max_examples)
    return pairs


# ---- the corpus -------------------------------------------------------------------------------
@dataclass
class Example:
    ids: List[int]
    label: int
    text: str
    source: str


@dataclass
class Corpus:
    categories: List[str]
    train: List[Example]
    dev: List[Example]
    test: List[Example]
    summary: Dict

    def splits(self) -> Dict[str, List[Example]]:
        return {"train": self.train, "dev": self.dev, "test": self.test}


def _split_counts(n: int, dev_fraction: float, test_fraction: float):
    n_dev = max(1, round(n * dev_fraction)) if dev_fraction > 0 else 0
    n_test = max(1, round(n * test_fraction)) if test_fraction > 0 else 0
    return n - n_dev - n_test, n_dev, n_test


def build_corpus(mapping: Mapping, tokenizer, root: str, seed: int = 42, max_length: int = 64,
                 min_tokens: int = 3, max_per_category: Optional[int] = None, balance: str = "cap",
                 dev_fraction: float = 0.1, test_fraction: float = 0.1, cache_dir: Optional[str] = None,
                 log=print) -> Corpus:
    if balance not in ("cap", "min"):
        raise ValueError(f"corpus.balance must be 'cap' (at most max_per_category each) or 'min' (all categories "
                         f"down to the smallest), got '{balance}'")
    if not (0 <= dev_fraction < 1 and 0 <= test_fraction < 1 and dev_fraction + test_fraction < 1):
        raise ValueError(f"dev_fraction + test_fraction must be < 1, got {dev_fraction} + {test_fraction}")
    categories = mapping.categories
    index = {c: i for i, c in enumerate(categories)}
    seen: Dict[tuple, int] = {}
    by_cat: Dict[str, List[Example]] = {c: [] for c in categories}
    per_source: Dict[str, Dict[str, int]] = {}
    dropped = {"too_short": 0, "duplicate": 0, "duplicate_other_category": 0}
    for spec in mapping.sources:
        pairs = source_examples(spec, root, seed, cache_dir)
        enc = tokenizer([t for t, _ in pairs], add_special_tokens=False, truncation=True, max_length=max_length)
        counts = per_source.setdefault(spec.name, {})
        for (text, cat), ids in zip(pairs, enc["input_ids"]):
            if len(ids) < min_tokens:
                dropped["too_short"] += 1
                continue
            key = tuple(ids)
            if key in seen:
                dropped["duplicate" if seen[key] == index[cat] else "duplicate_other_category"] += 1
                continue
            seen[key] = index[cat]
            by_cat[cat].append(Example(list(ids), index[cat], text, spec.name))
            counts[cat] = counts.get(cat, 0) + 1
        log(f"  source {spec.name}: {sum(counts.values())} examples kept of {len(pairs)}")
    for c in categories:
        n = len(by_cat[c])
        if n == 0:
            raise ValueError(f"category '{c}' has no examples after mapping and filtering ({mapping.path}): add a "
                             "source for it, or leave it out of the mapping's 'categories:' list")
        if n < 3:
            raise ValueError(f"category '{c}' has only {n} examples: it needs at least 3 (train/dev/test)")
    cap = max_per_category
    if balance == "min":
        smallest = min(len(v) for v in by_cat.values())
        cap = smallest if cap is None else min(cap, smallest)
    rng = random.Random(seed)
    train, dev, test, rows = [], [], [], {}
    for c in categories:
        group = by_cat[c][:]
        rng.shuffle(group)
        available = len(group)
        if cap is not None:
            group = group[:cap]
        n_tr, n_dev, _ = _split_counts(len(group), dev_fraction, test_fraction)
        if n_tr < 1:  # dev and test take one each first: an empty train split would export an untrained table
            raise ValueError(f"category '{c}' keeps {len(group)} examples (corpus.max_per_category={cap}), too few to "
                             f"train on after {n_dev} dev + {len(group) - n_tr - n_dev} test: raise "
                             "corpus.max_per_category to at least 3 (or null: no cap)")
        train += group[:n_tr]
        dev += group[n_tr:n_tr + n_dev]
        test += group[n_tr + n_dev:]
        rows[c] = {"available": available, "kept": len(group), "train": n_tr, "dev": n_dev,
                   "test": len(group) - n_tr - n_dev,
                   "sources": {s: n for s, cnt in per_source.items() for cat, n in cnt.items() if cat == c}}
    rng.shuffle(train)
    summary = {"categories": rows, "dropped": dropped, "sizes": {"train": len(train), "dev": len(dev), "test": len(test)},
               "sources": [s.name for s in mapping.sources], "max_length": max_length, "min_tokens": min_tokens,
               "max_per_category": cap, "balance": balance, "seed": seed, "mapping": mapping.path}
    return Corpus(categories, train, dev, test, summary)


def format_histogram(summary: Dict, width: int = 30) -> str:
    rows = summary["categories"]
    top = max(r["kept"] for r in rows.values()) or 1
    name_w = max(len(c) for c in rows)
    lines = [f"{'category'.ljust(name_w)}  {'avail':>6} {'kept':>5} {'train':>5} {'dev':>4} {'test':>4}  sources"]
    for c, r in rows.items():
        bar = "#" * max(1, round(width * r["kept"] / top))
        src = ", ".join(f"{s} {n}" for s, n in sorted(r["sources"].items(), key=lambda x: -x[1]))
        lines.append(f"{c.ljust(name_w)}  {r['available']:>6} {r['kept']:>5} {r['train']:>5} {r['dev']:>4} "
                     f"{r['test']:>4}  {bar}  [{src}]")
    s, d = summary["sizes"], summary["dropped"]
    lines.append(f"total: train {s['train']}, dev {s['dev']}, test {s['test']} | dropped: {d['too_short']} shorter "
                 f"than {summary['min_tokens']} tokens, {d['duplicate']} duplicates, "
                 f"{d['duplicate_other_category']} duplicates across categories")
    return "\n".join(lines)
