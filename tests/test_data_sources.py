"""Where a run's data comes from: dataset.path, the data root (--data-root / IPT_ASSETS /
../shared/assets), the packaged BoolQ sample, the hub when online; and that the sample ships."""
import configparser
import glob
import json
import os

import pytest

from openprompt_ipt.data import sources
from openprompt_ipt.data.tasks import TASKS
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.runner.experiment import data_source, load_task
from test_tasks import cfg_for, write_task

REPO = os.path.join(os.path.dirname(__file__), "..")
QUICKSTART = os.path.join(REPO, "yamls", "quickstart.yaml")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(sources, "hub_online", lambda: False)
    monkeypatch.delenv("IPT_ASSETS", raising=False)


def test_dataset_path_then_data_root_then_packaged(tmp_path, offline):
    root = tmp_path / "root"
    write_task(root, "boolq")
    # the data root holds superglue/BoolQ: it wins over the packaged copy
    src = data_source(cfg_for("boolq"), str(root))
    assert (src.kind, src.path) == ("data root", os.path.join(str(root), "superglue/BoolQ"))
    assert "data root from --data-root" in src.describe("boolq")
    # an existing dataset.path folder wins over the data root
    other = write_task(tmp_path / "elsewhere", "boolq")
    assert data_source(cfg_for("boolq", path=other), str(root)).kind == "path"
    # an empty data root: the packaged sample
    (tmp_path / "empty").mkdir()
    src = data_source(cfg_for("boolq"), str(tmp_path / "empty"))
    assert src.kind == "packaged" and src.path == os.path.join(sources.PACKAGED_ROOT, "superglue", "BoolQ")
    assert "packaged sample" in src.describe("boolq") and "CC BY-SA 3.0" in src.describe("boolq")


def test_root_precedence_data_root_flag_then_env_then_default(tmp_path, monkeypatch, offline):
    flag, env = tmp_path / "flag", tmp_path / "env"
    write_task(flag, "cb")
    write_task(env, "cb")
    monkeypatch.setenv("IPT_ASSETS", str(env))
    assert data_source(cfg_for("cb"), sources.data_root(str(flag))).path.startswith(str(flag))
    src = data_source(cfg_for("cb"), sources.data_root())
    assert src.path.startswith(str(env)) and "IPT_ASSETS" in src.describe("cb")
    monkeypatch.delenv("IPT_ASSETS")
    monkeypatch.chdir(tmp_path)  # no ../shared/assets beside a fresh clone: the packaged copy, silently
    assert sources.data_root() == sources.DEFAULT_DATA_ROOT
    assert data_source(cfg_for("boolq"), None).kind == "packaged"


def test_hub_only_when_online_else_one_line_naming_the_fix(tmp_path, monkeypatch, offline):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as e:
        data_source(cfg_for("cb"), str(tmp_path / "empty"))
    msg = str(e.value)
    assert "\n" not in msg and "has no superglue/CB" in msg and "superglue/BoolQ" in msg
    assert "hub is unreachable" in msg and "--data-root / IPT_ASSETS" in msg
    monkeypatch.setattr(sources, "hub_online", lambda: True)
    src = data_source(cfg_for("cb"), str(tmp_path / "empty"))
    assert (src.kind, src.path) == ("hub", "hub") and "hub" in src.describe("cb")
    # a bare name is a hub dataset, as before
    assert data_source(cfg_for("cb", path="super_glue", hub_name="cb"), str(tmp_path / "empty")).kind == "hub"


def test_offline_flag_means_no_hub(monkeypatch):
    sources.hub_online.cache_clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        assert sources.hub_online() is False
    finally:
        sources.hub_online.cache_clear()


@pytest.mark.parametrize("case", ["named_root_missing", "named_folder_missing"])
def test_no_silent_fallback_when_the_user_named_a_place(tmp_path, case, offline):
    (tmp_path / "empty").mkdir()
    if case == "named_root_missing":  # a typo in --data-root / IPT_ASSETS must not train on the sample
        call, match = (lambda: data_source(cfg_for("boolq"), str(tmp_path / "typo"))), \
            r"data root '.*typo' does not exist \(named by --data-root\)"
    else:  # a folder the YAML names is that folder, not the packaged copy
        call, match = (lambda: data_source(cfg_for("boolq", path="my/boolq"), str(tmp_path / "empty"))), \
            r"boolq data folder 'my/boolq' not found .*point dataset.path at an existing folder"
    with pytest.raises(FileNotFoundError, match=match):
        call()


def test_quickstart_trains_from_the_packaged_sample(tmp_path, offline):
    (tmp_path / "empty").mkdir()
    cfg = load_config(QUICKSTART)
    train, dev, test, labels = load_task(cfg, str(tmp_path / "empty"))
    assert labels == list(TASKS["boolq"].labels)
    assert (len(train), len(dev), len(test)) == (224, 56, 120)  # 400 rows: 30% test, 20% of the rest dev
    assert not {e.guid for e in train} & {e.guid for e in test}
    assert {e.label for e in train} == {0, 1} and all(e.text_a and e.text_b for e in train)


def test_the_sample_ships_with_its_license():
    folder = os.path.join(sources.PACKAGED_ROOT, "superglue", "BoolQ")
    rows = [json.loads(line) for line in open(os.path.join(folder, "val.jsonl"))]
    assert len(rows) == 400 and {"question", "passage", "idx", "label"} <= set(rows[0])
    assert os.path.getsize(os.path.join(folder, "val.jsonl")) < 400_000
    license_text = open(os.path.join(folder, "LICENSE.md")).read()
    assert "CC BY-SA 3.0" in license_text and "Clark" in license_text
    # setup.cfg's package_data globs must cover both files, or a wheel ships without them
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(REPO, "setup.cfg"))
    globs = [g.strip() for g in cfg["options.package_data"]["openprompt_ipt"].split(",")]
    pkg = os.path.join(REPO, "openprompt_ipt")
    shipped = {os.path.normpath(f) for g in globs for f in glob.glob(os.path.join(pkg, g))}
    for name in ("val.jsonl", "LICENSE.md"):
        assert os.path.normpath(os.path.join(folder, name)) in shipped
    assert sources.packaged_tasks() == ["superglue/BoolQ"]


def test_the_readme_quick_start_runs_from_the_packaged_data(tmp_path, offline):
    import re

    readme = open(os.path.join(REPO, "README.md")).read()
    section = readme[readme.index("## Quick start"):]
    config = re.search(r"python experiments/run.py --config (\S+)", section).group(1)
    (tmp_path / "empty").mkdir()
    assert data_source(load_config(os.path.join(REPO, config)), str(tmp_path / "empty")).kind == "packaged"


def test_the_sample_script_keeps_rows_unchanged_in_source_order(tmp_path, capsys):
    from test_predict_and_runs import load_script

    source = tmp_path / "val.jsonl"
    source.write_text("".join(json.dumps({"idx": i, "question": f"q {i}", "label": i % 2 == 0}) + "\n" for i in range(30)))
    make = load_script("make_packaged_data")
    out = tmp_path / "sample.jsonl"
    assert make.main([str(source), "--rows", "10", "--out", str(out)]) == 0
    lines = out.read_text().splitlines(keepends=True)
    assert len(lines) == 10 and set(lines) <= set(source.read_text().splitlines(keepends=True))
    assert [json.loads(x)["idx"] for x in lines] == sorted(json.loads(x)["idx"] for x in lines)
    assert make.main([str(source), "--rows", "10", "--out", str(tmp_path / "again.jsonl")]) == 0
    assert (tmp_path / "again.jsonl").read_text() == out.read_text()  # seeded
    assert make.main([str(source), "--rows", "31", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "--rows 31 > the 30 rows" in capsys.readouterr().err and not (tmp_path / "x.jsonl").exists()
