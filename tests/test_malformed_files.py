"""A malformed local data file read through 🤗 datasets (a task's jsonl / csv, a pretraining source): one line naming
the file (and its line, for JSON lines), and nothing before it: datasets logged its own 'Failed to load JSON from
file ...' / 'Failed to read file ...' line first, and a task's jsonl said only 'Expected object or value at position
35', naming neither file nor line."""
from __future__ import annotations

import json

import pytest

from openprompt_ipt.data import load_cb
from openprompt_ipt.data.tasks import LocalFile

def _logged(err: str, caplog) -> list:
    """stderr's lines other than 🤗 datasets' progress bars (on unless --quiet: docs/training.md), and what datasets
    logged (pytest's log capture takes its records before its stderr handler sees them)."""
    return ([line for line in err.replace("\r", "\n").splitlines() if line.strip() and not line.startswith("Generating")]
            + [r.getMessage() for r in caplog.records if r.name.startswith("datasets")])


GOOD = {"premise": "the cat sat", "hypothesis": "it sat", "label": "entailment", "idx": 0}


def _cb(folder, bad_line):
    folder.mkdir()
    rows = [json.dumps({**GOOD, "idx": i}) for i in range(5)]
    (folder / "train.jsonl").write_text("\n".join(rows[:3] + [bad_line] + rows[3:]) + "\n")
    return str(folder)


@pytest.mark.parametrize("bad_line,problem", [
    ('{"premise": "broken", "hypothesis": ', r"line 4 is not JSON \(Expecting value\)"),
    ('["the cat sat", "it sat"]', "line 4 is a list, not a JSON object"),
    ("premise: the cat sat", r"line 4 is not JSON \(Expecting value\)"),
])
def test_a_malformed_task_jsonl_names_the_file_and_line_and_nothing_else(tmp_path, capfd, caplog, bad_line, problem):
    folder = _cb(tmp_path / "CB", bad_line)
    capfd.readouterr()
    with pytest.raises(ValueError, match=rf"^data file .*CB/train.jsonl {problem}: write one JSON object per line") as e:
        load_cb(folder, "train")
    assert "\n" not in str(e.value)
    assert _logged(capfd.readouterr().err, caplog) == []


def test_a_malformed_task_csv_or_json_document_is_one_line(tmp_path, capfd, caplog):
    (tmp_path / "train.csv").write_text('"3","a title","some text"\n"1","a title","text","one field too many"\n')
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"^data file .*train.csv cannot be read as csv \(ParserError: .*Expected 3 "
                                         r"fields in line 2, saw 4\): fix the file$"):
        LocalFile("train.csv", columns=("label", "title", "text"), header=False).read(str(tmp_path))
    assert _logged(capfd.readouterr().err, caplog) == []
    (tmp_path / "rows.json").write_text('[{"text": "a"},\n {"text": }]\n')
    with pytest.raises(ValueError, match=r"^data file .*rows.json line 2 is not JSON \(Expecting value\): fix the file$"):
        LocalFile("rows.json").read(str(tmp_path))


def test_a_good_task_jsonl_still_loads(tmp_path, capfd, caplog):
    folder = tmp_path / "CB"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps({**GOOD, "idx": i}) + "\n" for i in range(4)))
    assert len(load_cb(str(folder), "train")) == 4


def test_a_malformed_csv_source_is_one_line(tmp_path, capfd, caplog):
    from openprompt_ipt.pretraining.corpus import SourceSpec, load_source_rows

    (tmp_path / "pets.csv").write_text("text,label\na,1\nb,2,3,4\n")
    capfd.readouterr()
    with pytest.raises(ValueError, match=r"^source 'pets': cannot read '.*pets.csv' as csv \(ParserError: .*line 3, "
                                         r"saw 4\): fix the file"):
        load_source_rows(SourceSpec(name="pets", path=str(tmp_path / "pets.csv"), text=["text"], category="X"),
                         str(tmp_path), cache_dir=str(tmp_path / "cache"))
    assert _logged(capfd.readouterr().err, caplog) == []
