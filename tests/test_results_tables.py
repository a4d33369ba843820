"""The committed group tables (docs/results/<group>.md / .csv) say what the committed runs
(results/accuracy/<group>/) say. A table is written when its own group runs; one whose rows reuse another
group's runs (``from_group``) goes stale when those runs change, which no command run for the other group
catches. No training here: the tables are rebuilt from the runs' metrics.json."""
import os

import pytest
import yaml
from test_glue_study import _accuracy  # benchmarks/accuracy.py, loaded by path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs", "results")
RUNS = os.path.join(ROOT, "results", "accuracy")


def documented_groups():
    with open(os.path.join(ROOT, "benchmarks", "accuracy_groups.yaml")) as f:
        names = list(yaml.safe_load(f))
    return [g for g in names if os.path.exists(os.path.join(DOCS, f"{g}.md")) and os.path.isdir(os.path.join(RUNS, g))]


def table_rows(text):
    """The rows of a group table and the note on rows made otherwise, without its header line (that names the
    command, whose --workers a --report-only rebuild cannot know)."""
    return [line for line in text.splitlines() if line.startswith(("| ", "† "))]


def stale_tables(groups, docs=DOCS, runs=RUNS):
    accuracy, stale = _accuracy(), []
    for name in groups:
        group = accuracy.load_group(name)
        _, notes = accuracy.made_with(group, os.path.join(runs, name))  # rows made otherwise: marked, as the CLI does
        built = accuracy.report(name, group, accuracy.collect(group, os.path.join(runs, name)), "", notes)
        with open(os.path.join(docs, f"{name}.md"), encoding="utf-8") as f:
            md_stale = table_rows(f.read()) != table_rows(built[f"{name}.md"])
        with open(os.path.join(docs, f"{name}.csv"), encoding="utf-8", newline="") as f:
            csv_stale = f.read() != built[f"{name}.csv"]
        if md_stale or csv_stale:
            stale.append(name)
    return stale


def test_every_group_table_matches_the_committed_runs():
    groups = documented_groups()
    if not groups:
        pytest.skip("no committed runs under results/accuracy")
    assert len(groups) >= 30
    # a stale table: rebuild it with `python benchmarks/accuracy.py --group G --report-only`
    assert stale_tables(groups) == []


def test_a_table_missing_a_seed_the_runs_have_is_found(tmp_path):
    if "cb_ppt" not in documented_groups():
        pytest.skip("no committed cb_ppt runs")
    assert stale_tables(["cb_ppt"]) == []
    for ext in ("md", "csv"):
        text = open(os.path.join(DOCS, f"cb_ppt.{ext}"), encoding="utf-8", newline="").read()
        if ext == "md":
            text = text.replace("| 5 |", "| 4 |", 1)  # one seed fewer than the runs hold
        (tmp_path / f"cb_ppt.{ext}").write_text(text, encoding="utf-8", newline="")
    assert stale_tables(["cb_ppt"], docs=str(tmp_path)) == ["cb_ppt"]
