"""Your own dataset with no package code: ``dataset.name: text_classification`` (one text) or
``text_pair`` (two), a folder of jsonl / csv / tsv files, and the YAML naming the columns and labels.

    dataset:
      name: text_pair
      path: data/my_nli            # holds train.jsonl and test.jsonl (+ optional dev.jsonl / val.jsonl)
      columns: {text_a: premise, text_b: hypothesis, label: gold}
      labels: [entailment, contradiction]   # the label values in the files, in class order
    soft_verbalizer:
      label_words: [["yes"], ["no"]]        # or {entailment: ["yes"], contradiction: ["no"]} (then labels may be omitted)

csv / tsv files need a header row naming the columns; tsv quotes are text. Labels are matched as
strings (``1`` in a csv and ``1`` in the YAML are the same label). Split files default to
``train.*``, ``test.*`` and ``dev.*`` / ``val.*`` / ``validation.*`` (``dataset.files`` renames them).
The reported split is ``test``; dev is ``dev`` when present, else ``dataset.dev_from_train`` of train.

Real-valued scores (a similarity, a rating): ``dataset.name: text_regression`` / ``text_pair_regression``,
the label column holding numbers, no ``dataset.labels``, ``verbalizer: regression_head`` (one output, MSE;
Pearson / Spearman reported, ``train.metric: pearson_spearman``).
"""
from __future__ import annotations

import codecs
import csv
import io
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..serialization import iter_jsonl
from .rows import Row, misspelling, refuse_rows, report_skipped, row_problems
from .tasks import SPLIT_ALIASES, SPLITS, Task

GENERIC = {"text_classification": ("text_a", "label"), "text_pair": ("text_a", "text_b", "label"),
           "text_regression": ("text_a", "label"), "text_pair_regression": ("text_a", "text_b", "label")}
REGRESSION = ("text_regression", "text_pair_regression")  # the label column holds a real-valued score
DEFAULT_COLUMNS = {"text_a": "text", "text_b": "text_b", "label": "label"}
STEMS = {"train": ("train",), "validation": ("dev", "val", "validation"), "test": ("test",)}
EXTENSIONS = (".jsonl", ".csv", ".tsv")


def decode_file(file: str, encoding: str = "utf-8", fix: str = "") -> str:
    """The text of ``file``; bytes that are not ``encoding`` are one line naming the file, the line and
    ``fix`` (default: re-save as UTF-8 or set dataset.encoding). A UTF-8 byte-order mark is dropped."""
    with open(file, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8-sig" if encoding.replace("_", "-").lower() in ("utf-8", "utf8") else encoding)
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        fix = fix or ("re-save it as UTF-8, or set dataset.encoding to the encoding it was written in "
                      "(e.g. latin-1, cp1252)")
        raise ValueError(f"data file {file} is not {encoding} text (line {line}: byte {data[e.start]:#04x} cannot be "
                         f"read): {fix}") from None


def read_rows(file: str, encoding: str = "utf-8") -> List[Tuple[int, object]]:
    """(line, row) of a jsonl / csv / tsv file, rows as dicts (csv / tsv: keys from the header row).
    A csv / tsv row with more or fewer fields than the header keeps them under ``None`` / as None
    (``ColumnFile.read`` refuses or skips it)."""
    if os.path.getsize(file) == 0:
        raise ValueError(f"data file {file} is empty")
    text = decode_file(file, encoding)
    if file.endswith(".jsonl"):
        rows = list(iter_jsonl(io.StringIO(text), file, numbered=True))
    else:
        tsv = file.endswith(".tsv")
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t" if tsv else ",",
                                quoting=csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL)
        rows = [(reader.line_num, row) for row in reader]
    if not rows:
        raise ValueError(f"data file {file} has no rows")
    return rows


def field_count_problem(row: dict, tsv: bool) -> str:
    """Why a csv / tsv row does not fit its header ('' when it does): csv.DictReader silently keeps
    extra fields under None and fills missing ones with None."""
    header = len([k for k in row if k is not None])
    extra, missing = len(row.get(None) or []), sum(v is None for k, v in row.items() if k is not None)
    if not extra and not missing:
        return ""
    fields = header + extra - missing
    hint = ("a text holding a tab splits into two fields" if tsv else
            'a text holding a comma must be quoted ("a, b")') if extra else "a field is missing"
    return f"has {fields} fields but the header has {header} ({hint})"


@dataclass(frozen=True)
class ColumnFile:
    """One split's file; ``read`` checks that every column the YAML names is there, that each text is
    a non-empty string and each csv / tsv row has the header's fields (else refuses, or skips and says so)."""
    name: str
    columns: Tuple[Tuple[str, str], ...]  # (role, column in the file)
    label_offset: int = 0
    skip_bad_rows: bool = False
    encoding: str = "utf-8"

    collects_bad = True  # Task._load_split passes ``bad``: these rows and its label problems are listed together

    def read(self, folder: str, bad: Optional[List[str]] = None) -> List[dict]:
        """The usable rows; each bad row's line goes to ``bad`` when given (the caller refuses or skips),
        else they are refused together (or skipped, with dataset.skip_bad_rows)."""
        collect, bad = bad is not None, (bad if bad is not None else [])
        file = os.path.join(folder, self.name)
        texts = {role: (column,) for role, column in self.columns if role != "label"}
        rows, lacking, before = [], {}, len(bad)
        lines = read_rows(file, self.encoding)
        for line, row in lines:
            if not isinstance(row, dict):
                raise ValueError(f"{file} line {line} is {type(row).__name__}, not an object with named columns")
            misfit = field_count_problem(row, file.endswith(".tsv")) if not file.endswith(".jsonl") else ""
            missing = [(role, column) for role, column in self.columns if column not in row]
            for role, column in missing:
                lacking.setdefault((role, column), (line, sorted(k for k in row if k is not None)))
            problems = [misfit] if misfit else [f"has no column '{column}' (dataset.columns.{role})"
                                                 f"{misspelling(row, [column], [c for _, c in self.columns])}"
                                                 for role, column in missing] or row_problems(row, texts)
            if problems:
                bad.append(f"{file} line {line} {problems[0]}")
                continue
            rows.append(Row.at(row, line, file))
        for (role, column), (line, has) in lacking.items():
            if not any(column in row for _, row in lines if isinstance(row, dict)):  # no row has it: the YAML's name
                unlabelled = (", or label the file's rows (an unlabelled file cannot be trained on or scored; new rows "
                              "get their labels from openprompt-ipt predict --run RUN --input FILE)") if role == "label" else ""
                raise ValueError(f"{file} has no column '{column}' (dataset.columns.{role}; line {line} has {has}): "
                                 f"name an existing column in the YAML{unlabelled}")
        if collect:
            return rows
        mine = bad[before:]
        if not self.skip_bad_rows:  # every bad row at once (issue #43 item 5); a row missing a column is one of them
            refuse_rows(mine, file)
        report_skipped(file, [b[len(file) + 1:] for b in mine])
        if not rows:
            raise ValueError(f"{file} has no usable rows (all {len(mine)} skipped as bad)")
        return rows


@dataclass(frozen=True)
class CustomTask(Task):
    columns: Tuple[Tuple[str, str], ...] = ()
    file_names: Tuple[Tuple[str, str], ...] = ()  # dataset.files: split -> file name
    encoding: str = "utf-8"                       # dataset.encoding
    custom = True  # no hub copy, no installed copy: the folder must exist (sources.locate)

    def is_hub(self, path: str, hub_name: Optional[str] = None) -> bool:
        if os.path.isdir(path):
            return False
        raise FileNotFoundError(f"{self.name} data folder '{path}' does not exist: point dataset.path at the folder "
                                "holding your train / test files")

    def file_candidates(self, split: str) -> List[str]:
        """The file names ``split`` may have: the one dataset.files gives, else train.jsonl, dev.csv, ..."""
        given = dict(self.file_names)
        return [given[split]] if split in given else [s + e for s in STEMS.get(split, ()) for e in EXTENSIONS]

    def local_file(self, path: str, split: str) -> Optional[ColumnFile]:
        for name in self.file_candidates(split):
            if os.path.isfile(os.path.join(path, name)):
                return ColumnFile(name, self.columns, skip_bad_rows=self.skip_bad_rows, encoding=self.encoding)
        return None

    def missing_split(self, path: str, split: str) -> str:
        looked = ", ".join(self.file_candidates(split))
        return f"{self.name} folder '{path}' has no {split} file (looked for {looked}): add it, or name it in dataset.files"

    def _fields(self, row: dict, i: int):
        cols = dict(self.columns)
        text_b = row[cols["text_b"]] if "text_b" in cols else None
        return (str(row.get("idx", i)), str(row[cols["text_a"]]), None if text_b is None else str(text_b),
                row.get(cols["label"]), {})

    def label_id(self, raw, offset: int, where: str) -> Optional[int]:
        """Labels match the YAML's label values as strings; an unknown one is one line naming both lists.
        Regression: the number in the label column (``Task.score``)."""
        if self.regression:
            return self.score(raw, where)
        if raw is None or raw == "":
            return None
        key = str(raw)
        if key in self.labels:
            return self.labels.index(key)
        raise ValueError(f"{where}: label {key!r} is not among the labels with label words {list(self.labels)}: "
                         "add it to dataset.labels and the verbalizer's label_words")


def normalise(cfg: Dict) -> None:
    """Checks a generic dataset's YAML and fills ``dataset.labels`` / list-shaped ``label_words``
    in place (label words given as ``{label: words}`` define the labels and their order)."""
    ds = cfg["dataset"]
    name = ds["name"]
    extra = [k for k in ("columns", "labels", "files") if ds.get(k) is not None]
    if ds.get("encoding", "utf-8") != "utf-8":
        extra.append("encoding")
    if name not in GENERIC:
        from .tasks import TASKS

        if "labels" in extra and name in TASKS and TASKS[name].regression:
            raise ValueError(f"dataset.labels is for classification: {name} is a regression task (a numeric score "
                             "per row): remove dataset.labels")
        if extra:
            raise ValueError(f"dataset.{extra[0]} is for your own data (dataset.name: text_classification / text_pair); "
                             f"task '{name}' has its own fields and labels")
        return
    encoding = ds.get("encoding", "utf-8")
    try:
        codecs.lookup(str(encoding))
    except LookupError:
        raise ValueError(f"dataset.encoding {encoding!r} is not an encoding Python knows: give e.g. utf-8, latin-1 "
                         "or cp1252") from None
    if not ds.get("path"):
        raise ValueError(f"dataset.name: {name} needs dataset.path: the folder holding your train / test files")
    roles = GENERIC[name]
    columns = ds.get("columns") or {}
    if not isinstance(columns, dict):
        raise ValueError(f"dataset.columns must map {list(roles)} to column names, got {columns!r}")
    unknown = sorted(set(columns) - set(roles))
    if unknown:
        hint = " (two texts: dataset.name: text_pair)" if unknown == ["text_b"] else ""
        raise ValueError(f"dataset.columns.{unknown[0]} is not a field of {name}{hint}: it maps {list(roles)}")
    files = ds.get("files") or {}
    if not isinstance(files, dict) or set(SPLIT_ALIASES.get(k, k) for k in files) - set(SPLITS):
        raise ValueError(f"dataset.files must map splits {list(SPLITS)} to file names, got {files!r}")
    if name in REGRESSION:  # scores, not labels: the head is checked by runner.experiment.check_head
        if ds.get("labels") is not None:
            raise ValueError(f"dataset.labels is for classification: {name} reads a numeric score per row "
                             f"(column '{columns.get('label', DEFAULT_COLUMNS['label'])}'): remove dataset.labels")
        return
    section = cfg.get(cfg["verbalizer"]) or {}
    words = section.get("label_words")
    labels = ds.get("labels")
    if isinstance(words, dict):
        keys = [str(k) for k in words]
        if labels is None:
            labels = keys
        missing = [str(lab) for lab in labels if str(lab) not in keys]
        if missing:
            raise ValueError(f"label '{missing[0]}' has no label words: add it to {cfg['verbalizer']}.label_words "
                             f"(it names {keys})")
        words_by_key = {str(k): v for k, v in words.items()}
        cfg[cfg["verbalizer"]] = {**section, "label_words": [words_by_key[str(lab)] for lab in labels]}
    if not labels or not isinstance(labels, list) or len(labels) < 2:
        raise ValueError(f"dataset.labels must list the label values in your files (at least 2, in class order), "
                         f"or give {cfg['verbalizer']}.label_words as {{label: [words]}}; got {labels!r}")
    if len({str(lab) for lab in labels}) != len(labels):
        raise ValueError(f"dataset.labels lists a label twice: {labels}")
    ds["labels"] = [str(lab) for lab in labels]


def custom_task(ds: Dict) -> CustomTask:
    """The task a normalised generic ``dataset`` section describes (see ``normalise``)."""
    from ..training.metrics import REGRESSION_METRICS

    name = ds["name"]
    cols = {**{r: DEFAULT_COLUMNS[r] for r in GENERIC[name]}, **(ds.get("columns") or {})}
    files = {SPLIT_ALIASES.get(k, k): v for k, v in (ds.get("files") or {}).items()}
    if name in REGRESSION:
        return CustomTask(name, (), ds.get("path") or "", {}, ("", None), {},
                          text_a=(cols["text_a"],), text_b=(cols["text_b"],) if "text_b" in cols else (),
                          test_split="test", dev_split="validation", label_field=(cols["label"],), regression=True,
                          metrics=REGRESSION_METRICS, columns=tuple(cols.items()), file_names=tuple(sorted(files.items())),
                          skip_bad_rows=bool(ds.get("skip_bad_rows")), encoding=ds.get("encoding") or "utf-8")
    if not ds.get("labels"):
        raise ValueError(f"dataset.name: {name} needs dataset.labels (or label_words as {{label: [words]}})")
    return CustomTask(name, tuple(str(lab) for lab in ds["labels"]), ds.get("path") or "", {}, ("", None), {},
                      text_a=(cols["text_a"],), text_b=(cols["text_b"],) if "text_b" in cols else (),
                      test_split="test", dev_split="validation",
                      columns=tuple(cols.items()), file_names=tuple(sorted(files.items())),
                      skip_bad_rows=bool(ds.get("skip_bad_rows")), encoding=ds.get("encoding") or "utf-8")
