"""A relative plm.model_path / dataset.path is the folder the run used, from whichever directory a later command
runs in: ``--resume`` continues on the recorded model and data, ``init_from`` compares backbones by folder. Two
model folders of the same shapes with other weights, one per directory: a load by the relative path alone picks
the wrong one without a word."""
import json
import os
import shutil

import pytest

from helpers import interrupt_at_eval
from test_predict_and_runs import load_script, tiny_model_dir  # noqa: F401  (fixture)
from test_predict_run_dirs import tiny_yaml
from test_training import write_cb


@pytest.fixture
def two_projects(tiny_model_dir, tmp_path):  # noqa: F811
    """project/ (the run's directory) and elsewhere/, each with models/bert (same shapes, other weights) and
    data/CB (other rows), and the config c.yaml naming both by relative paths."""
    import torch

    from conftest import _bert

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    shutil.copytree(tiny_model_dir, project / "models" / "bert")
    torch.manual_seed(123)
    model, _ = _bert(str(elsewhere / "models"))
    model.save_pretrained(str(elsewhere / "models" / "bert"))
    write_cb(project / "data" / "CB")
    write_cb(elsewhere / "data" / "CB", n_train=16)
    config = str(project / "c.yaml")
    tiny_yaml(config, "models/bert", "data/CB")
    return project, elsewhere, config


def metrics(run_dir):
    return json.load(open(os.path.join(run_dir, "metrics.json")))


def test_resume_from_another_directory_uses_the_recorded_model_and_data(two_projects, tmp_path, monkeypatch,
                                                                        capsys):
    project, elsewhere, config = two_projects
    run = load_script("run")
    argv = ["--config", config, "--quiet", "--set", "train.epochs=2", "--set", "train.checkpoint_every=1"]
    monkeypatch.chdir(project)
    assert run.main(argv + ["--output-dir", str(tmp_path / "full")]) == 0
    killed = str(tmp_path / "killed")
    restore = interrupt_at_eval(monkeypatch, 2)
    assert run.main(argv + ["--output-dir", killed]) == 130
    restore()
    saved = json.load(open(os.path.join(killed, "c", "seed42", "checkpoints", "step-0000005", "config.json")))
    assert saved["plm"]["model_path"] == str(project / "models" / "bert")  # recorded as the folder it used
    assert saved["dataset"]["path"] == str(project / "data" / "CB")

    monkeypatch.chdir(elsewhere)  # its models/bert and data/CB are others
    capsys.readouterr()
    assert run.main(argv + ["--output-dir", killed, "--resume"]) == 0
    assert f"data: cb from {project / 'data' / 'CB'}" in capsys.readouterr().out
    resumed, full = metrics(os.path.join(killed, "c", "seed42")), metrics(tmp_path / "full" / "c" / "seed42")
    assert resumed["training"]["resumed_from_step"] == 5
    for key in ("best_dev", "test", "history", "sizes"):
        assert resumed[key] == full[key]


def test_resume_refuses_in_one_line_when_the_recorded_folder_is_gone(two_projects, tmp_path, monkeypatch, capsys):
    project, elsewhere, config = two_projects
    run = load_script("run")
    argv = ["--config", config, "--quiet", "--output-dir", str(tmp_path / "runs"), "--set", "train.epochs=2",
            "--set", "train.checkpoint_every=1"]
    monkeypatch.chdir(project)
    restore = interrupt_at_eval(monkeypatch, 2)
    assert run.main(argv) == 130
    restore()
    shutil.move(str(project / "models"), str(tmp_path / "moved"))
    monkeypatch.chdir(elsewhere)
    before = sorted(os.listdir(tmp_path / "runs" / "c" / "seed42" / "checkpoints"))
    capsys.readouterr()
    assert run.main(argv + ["--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: --resume: the run in '{tmp_path / 'runs' / 'c' / 'seed42'}' used plm.model_path "
                   f"'models/bert' as the folder '{project / 'models' / 'bert'}', which is gone: put it back there, or "
                   "start a new run (--overwrite, or another --output-dir)")
    assert sorted(os.listdir(tmp_path / "runs" / "c" / "seed42" / "checkpoints")) == before


def test_init_from_compares_backbones_by_folder_not_by_how_the_path_is_written(two_projects, tmp_path, monkeypatch,
                                                                              capsys):
    project, elsewhere, config = two_projects
    run = load_script("run")
    monkeypatch.chdir(project)
    stage1 = str(tmp_path / "stage1")
    assert run.main(["--config", config, "--quiet", "--output-dir", stage1]) == 0
    source = os.path.join(stage1, "c", "seed42")
    # the same relative path in another directory is another model (same shapes: it loaded without a word)
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert run.main(["--config", config, "--quiet", "--output-dir", str(tmp_path / "wrong"), "--init-from", source]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: init_from '{source}' was trained on backbone '{project / 'models' / 'bert'}' but this run "
                   f"uses '{elsewhere / 'models' / 'bert'}': start from a run of the same backbone")
    assert not os.path.exists(tmp_path / "wrong" / "c" / "seed42" / "metrics.json")
    # the same folder written another way (absolute, from anywhere) is the same backbone
    assert run.main(["--config", config, "--quiet", "--output-dir", str(tmp_path / "right"), "--init-from", source,
                     "--set", f"plm.model_path={project / 'models' / 'bert'}",
                     "--set", f"dataset.path={project / 'data' / 'CB'}"]) == 0
    assert metrics(tmp_path / "right" / "c" / "seed42")["init_from"]["run"] == source


def test_init_from_a_run_that_recorded_a_relative_path_uses_its_backbone_dir(two_projects, tmp_path,
                                                                             monkeypatch):
    """A run made by run_experiment (Python) keeps plm.model_path as written; its metrics.json's backbone_dir
    says which folder that was."""
    from openprompt_ipt.runner.experiment import run_experiment
    from test_predict_and_runs import tiny_cfg

    project, elsewhere, _ = two_projects
    monkeypatch.chdir(project)
    source = str(tmp_path / "stage1")
    run_experiment(tiny_cfg("models/bert", "data/CB", epochs=1), output_dir=source, show_progress=False)
    assert json.load(open(os.path.join(source, "config.json")))["plm"]["model_path"] == "models/bert"
    monkeypatch.chdir(elsewhere)
    stage2 = {**tiny_cfg("models/bert", "data/CB", epochs=1), "init_from": source}
    with pytest.raises(ValueError, match=r"was trained on backbone 'models/bert' \(.*project/models/bert\) but this "
                                         r"run uses 'models/bert' \(.*elsewhere/models/bert\)"):
        run_experiment(stage2, output_dir=str(tmp_path / "x"), show_progress=False)


def test_predict_of_a_run_whose_recorded_backbone_is_gone_is_one_line(two_projects, tmp_path, monkeypatch, capsys):
    """config.json now holds the absolute folder: predict names it when it is gone (as for backbone_dir)."""
    project, elsewhere, config = two_projects
    monkeypatch.chdir(project)
    assert load_script("run").main(["--config", config, "--quiet", "--output-dir", str(tmp_path / "runs")]) == 0
    open("rows.jsonl", "w").write(json.dumps({"premise": "a cat", "hypothesis": "a dog"}) + "\n")
    shutil.move(str(project / "models"), str(tmp_path / "moved"))
    capsys.readouterr()
    assert load_script("predict").main(["--run", str(tmp_path / "runs" / "c"), "--input", "rows.jsonl"]) == 2
    run = tmp_path / "runs" / "c" / "seed42"
    assert capsys.readouterr().err.strip() == (
        f"error: the backbone run '{run}' trained on, '{project / 'models' / 'bert'}' (plm.model_path: "
        f"{project / 'models' / 'bert'}), is gone: put the model back there, or train the run again")


def test_resume_refuses_other_data_found_under_the_default_data_root_from_another_directory(
        tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    """The default data root ../shared/assets is relative: resumed from another directory it can name another
    copy of the task (other rows). The checkpoint keeps a hash of the data; other data is one line, not a run."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_cb(first / "shared" / "assets" / "superglue" / "CB")
    write_cb(second / "shared" / "assets" / "superglue" / "CB", n_train=16)
    config = str(tmp_path / "c.yaml")
    tiny_yaml(config, tiny_model_dir, None)
    cfg = json.load(open(config))
    del cfg["dataset"]["path"]  # the task's own folder under the data root
    json.dump(cfg, open(config, "w"))
    monkeypatch.delenv("IPT_ASSETS", raising=False)
    run = load_script("run")
    argv = ["--config", config, "--quiet", "--output-dir", str(tmp_path / "runs"), "--set", "train.epochs=2",
            "--set", "train.checkpoint_every=1"]
    (first / "work").mkdir()
    monkeypatch.chdir(first / "work")
    restore = interrupt_at_eval(monkeypatch, 2)
    assert run.main(argv) == 130
    restore()
    seed_dir = tmp_path / "runs" / "c" / "seed42"
    before = sorted(os.listdir(seed_dir / "checkpoints"))
    (second / "work").mkdir()
    monkeypatch.chdir(second / "work")
    capsys.readouterr()
    assert run.main(argv + ["--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: cannot resume from {seed_dir / 'checkpoints'}") and len(err.splitlines()) == 1
    assert "the data found now differs from the data it trained on" in err
    assert sorted(os.listdir(seed_dir / "checkpoints")) == before and not (seed_dir / "metrics.json").exists()
    monkeypatch.chdir(first / "work")  # where it started: the same data, so it resumes
    assert run.main(argv + ["--resume"]) == 0
