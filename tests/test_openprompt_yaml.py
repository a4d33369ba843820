"""OpenPrompt's experiment-YAML schema through our runner (docs/openprompt.md) and ``--config NAME``
lookup under yamls/."""
import glob
import importlib.util
import os

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _run_cli():
    spec = importlib.util.spec_from_file_location("run_cli", os.path.join(ROOT, "experiments", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bare_config_name_is_found_under_yamls(monkeypatch, capsys):
    cli = _run_cli()
    monkeypatch.chdir(ROOT)  # the design card's command, from the repo root
    # an unknown key stops it right after loading: the lookup ran and said which file it used
    assert cli.main(["--config", "cb_prefix_ipt.yaml", "--set", "train.nope=1"]) == 2
    out, err = capsys.readouterr()
    assert f"config: {os.path.join('yamls', 'cb_prefix_ipt.yaml')}" in out
    assert "unknown config key 'train.nope'" in err


def test_bare_config_name_from_another_folder(tmp_path, monkeypatch, capsys):
    cli = _run_cli()
    monkeypatch.chdir(tmp_path)  # no ./yamls here: this checkout's yamls/ is the fallback
    assert cli.main(["--config", "cb_random_ipt", "--set", "train.nope=1"]) == 2
    assert f"config: {os.path.join(ROOT, 'yamls', 'cb_random_ipt.yaml')}" in capsys.readouterr().out


def test_missing_config_lists_where_it_looked(tmp_path, monkeypatch, capsys):
    cli = _run_cli()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--config", "no_such.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "config file 'no_such.yaml' not found (looked in: no_such.yaml, " in err
    assert os.path.join("yamls", "no_such.yaml") in err and os.path.join(ROOT, "yamls", "no_such.yaml") in err


def test_existing_path_wins_over_lookup(tmp_path):
    from openprompt_ipt.runner.config import find_config

    (tmp_path / "yamls").mkdir()
    (tmp_path / "yamls" / "a.yaml").write_text("seed: 1\n")
    (tmp_path / "a.yaml").write_text("seed: 2\n")
    assert find_config(str(tmp_path / "a.yaml"), [str(tmp_path / "yamls")]) == str(tmp_path / "a.yaml")
    assert find_config("a.yaml", [str(tmp_path / "yamls")]) == str(tmp_path / "yamls" / "a.yaml")
    with pytest.raises(FileNotFoundError, match="looked in"):
        find_config(str(tmp_path / "nope.yaml"), [str(tmp_path / "yamls")])  # absolute: no lookup
