"""The ``openprompt-ipt`` console command and the shipped configs (issue #44): each subcommand answers,
a bare shipped name resolves from any directory, and a built, non-editable wheel carries the YAMLs and
the entry point. (CI's wheel job also runs the quick start from a fresh venv: .ci/wheel_quickstart.)"""
import glob
import os
import subprocess
import sys
import zipfile

import pytest

from openprompt_ipt import __version__
from openprompt_ipt.commands import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_version_and_usage(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"openprompt-ipt {__version__}"
    assert main([]) == 2
    assert "usage: openprompt-ipt" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "pretrain categories|ppt" in capsys.readouterr().out
    for group_help in (["pretrain", "--help"], ["pretrain", "-h"]):  # asked at the group, as one asks any command
        assert main(group_help) == 0
        out = capsys.readouterr().out
        assert out.startswith("usage: openprompt-ipt pretrain categories|ppt") and "pretrain ppt --config" in out
    assert main(["list", "--help"]) == 0  # it said "error: 'openprompt-ipt list' takes no arguments, got --help"
    assert capsys.readouterr().out.startswith("usage: openprompt-ipt list\n")


@pytest.mark.parametrize("argv,starts", [
    (["train"], "error: unknown command 'train'"),
    (["pretrain"], "error: 'openprompt-ipt pretrain' needs 'categories' or 'ppt'"),
    (["pretrain", "bert"], "error: 'openprompt-ipt pretrain' needs 'categories' or 'ppt', got 'bert'"),
    (["list", "x"], "error: 'openprompt-ipt list' takes no arguments"),
])
def test_bad_command_is_one_line(capsys, argv, starts):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(starts) and err.count("\n") == 1


def test_list_names_the_shipped_configs(capsys):
    assert main(["list"]) == 0
    names = capsys.readouterr().out.split()
    assert {"quickstart.yaml", "cb_prefix_ipt.yaml", "pretrain_textcnn.yaml"} <= set(names)
    assert any(n.startswith("generalise/") for n in names)  # sub-folders too, by their relative path
    assert len(names) == len(glob.glob(os.path.join(ROOT, "yamls", "**", "*.yaml"), recursive=True))


@pytest.mark.parametrize("argv,line", [
    (["run", "--config", "pretrain_lstm.yaml"],
     "is a category-pretraining config, not an experiment config: run it with openprompt-ipt pretrain categories --config "),
    (["run", "--config", "pretrain_ppt.yaml"], "is a PPT pre-training config, not an experiment config: run it with "
                                               "openprompt-ipt pretrain ppt --config "),
    (["run", "--config", "corpus_13cat.yaml"], "is a pretraining corpus mapping, not an experiment config: a "
                                               "category-pretraining config reads it (corpus.mapping)"),
    (["pretrain", "categories", "--config", "cb_random_ipt.yaml"],
     "is an experiment config, not a category-pretraining config: run it with openprompt-ipt run --config "),
    (["pretrain", "ppt", "--config", "pretrain_textcnn.yaml"],
     "is a category-pretraining config, not a PPT pre-training config: run it with openprompt-ipt pretrain categories"),
])
def test_a_shipped_yaml_given_to_the_wrong_command_names_the_right_one(tmp_path, monkeypatch, capsys, argv, line):
    """Every name `list` shows is accepted by --config, but a pretraining YAML given to `run` (or the other way
    round) was "unknown config key 'name' (valid: [...])"."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: config file '") and line in err and err.count("\n") == 1
    assert not (tmp_path / "runs").exists() and not (tmp_path / "exports").exists()


def test_bare_names_resolve_outside_the_clone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # an unknown key stops each right after the config was found and read
    assert main(["run", "--config", "quickstart.yaml", "--set", "train.nope=1"]) == 2
    out, err = capsys.readouterr()
    assert f"config: {os.path.join(ROOT, 'yamls', 'quickstart.yaml')} (found for --config quickstart.yaml)" in out
    assert "unknown config key 'train.nope'" in err
    assert main(["pretrain", "categories", "--config", "pretrain_textcnn.yaml", "--set", "nope.x=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "nope" in err and "not found" not in err
    assert main(["run", "--config", "no_such.yaml"]) == 2
    assert "config file 'no_such.yaml' not found" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_subcommands_are_the_scripts(tmp_path, capsys):
    """``predict`` / ``aggregate`` refuse bad input as experiments/ always did, under their new name."""
    assert main(["predict", "--run", str(tmp_path / "none"), "--input", "x.jsonl"]) == 2
    assert capsys.readouterr().err.startswith("error:")
    assert main(["aggregate", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith("error:")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert capsys.readouterr().out.startswith("usage: openprompt-ipt run")


def test_python_dash_m_is_the_same_command(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "openprompt_ipt", "--version"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == f"openprompt-ipt {__version__}"


@pytest.mark.parametrize("argv", [["pretrain", "--help"], ["run", "--help"], ["list"]])
def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path, argv):
    # `openprompt-ipt pretrain --help | head -2`: head may close the pipe before we finish writing. Closing the
    # read end before the command starts makes that race certain.
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = dict(os.environ, PYTHONPATH=ROOT)
    try:
        out = subprocess.run([sys.executable, "-m", "openprompt_ipt", *argv], cwd=tmp_path, env=env,
                             stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr
    assert out.returncode in (0, 141)  # argparse swallows the error in its own help; ours says SIGPIPE


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), ROOT]
    # this venv's setuptools when it can build wheels (offline, fast); else pip's isolated build (fetches setuptools)
    if subprocess.run(build + ["--no-build-isolation"], capture_output=True, timeout=300).returncode != 0:
        done = subprocess.run(build, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    (path,) = glob.glob(str(out / "*.whl"))
    return path


def test_wheel_carries_the_yamls_and_the_command(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    shipped = {n[len("openprompt_ipt/yamls/"):] for n in names if n.startswith("openprompt_ipt/yamls/")}
    in_repo = {os.path.relpath(p, os.path.join(ROOT, "yamls")).replace(os.sep, "/")
               for p in glob.glob(os.path.join(ROOT, "yamls", "**", "*"), recursive=True) if os.path.isfile(p)}
    assert {"quickstart.yaml", "cb_prefix_ipt.yaml", "openprompt/cb_template.txt"} <= shipped
    assert shipped == in_repo
    assert "openprompt-ipt = openprompt_ipt.commands:main" in entry


def test_installed_wheel_finds_shipped_configs_from_any_directory(wheel, tmp_path):
    """Installed non-editable into a fresh venv (dependencies borrowed from this one: CI installs them)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = glob.glob(str(venv / "lib" / "python*" / "site-packages"))
    borrowed = [p for p in sys.path if p.endswith("site-packages")]
    # a .pth line adds the folder only (no editable finder from it), after the venv's own site-packages
    with open(os.path.join(site, "zz_deps.pth"), "w") as f:
        f.write("\n".join(borrowed) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", wheel], check=True, capture_output=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def command(*argv):
        return subprocess.run([str(venv / "bin" / "openprompt-ipt"), *argv], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)

    out = command("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"openprompt-ipt {__version__}", out.stderr
    out = command("run", "--config", "cb_prefix_ipt.yaml", "--set", "train.nope=1")
    installed = os.path.join(site, "openprompt_ipt", "yamls", "cb_prefix_ipt.yaml")
    assert out.returncode == 2 and f"config: {installed} (found" in out.stdout, out.stdout + out.stderr
    # a pretraining YAML's own reference (experiment: yamls/cb_prompt_tuning.yaml) resolves in the wheel's copy
    code = ("from openprompt_ipt.pretraining.ppt import load_ppt_config\n"
            "from openprompt_ipt.pretraining.pipeline import resolve_mapping_path\n"
            "print(resolve_mapping_path(load_ppt_config(resolve_mapping_path('yamls/pretrain_ppt.yaml'))['experiment']))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=work, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith(os.path.join(site, "openprompt_ipt", "yamls")), out.stdout
    assert not (work / "runs").exists()


@pytest.mark.parametrize("argv,flag", [
    (["run", "--config", "quickstart.yaml", "--output-dir", "{f}/runs"], "--output-dir"),
    (["predict", "--run", "runs/x", "--input", "{f}", "--output", "{f}/preds.jsonl"], "--output"),
    (["aggregate", "runs/x", "--out", "{f}"], "--out"),
    (["pretrain", "categories", "--config", "pretrain_textcnn.yaml", "--output-dir", "{f}/export"], "--output-dir"),
])
def test_an_output_folder_that_is_a_file_is_one_line_before_any_work(tmp_path, capsys, argv, flag):
    """A file where the output folder should go (a typo, a file of the same name): one line naming the flag and the
    file, before training / predicting / pretraining starts (it was a traceback from os.makedirs, after the work)."""
    taken = tmp_path / "taken"
    taken.write_text("keep me\n")
    assert main([a.format(f=taken) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag} '{taken}") and f"'{taken}' is a file, not a folder" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert taken.read_text() == "keep me\n"


def test_predict_names_the_command_that_trains_as_the_user_runs_commands(tmp_path, capsys):
    """``openprompt-ipt predict`` with a bad ``--run`` told the user to give "the directory experiments/run.py
    printed", a script a pip install does not have and this user did not run: the console command names
    ``openprompt-ipt run``; ``experiments/predict.py`` still names its neighbour ``experiments/run.py``."""
    from test_predict_and_runs import load_script

    killed = tmp_path / "killed"
    (killed / "checkpoints").mkdir(parents=True)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{}\n")
    for argv, trains in ((["predict"], "openprompt-ipt run"), (None, "experiments/run.py")):
        for run, line in ((tmp_path / "typo", f"run directory '{tmp_path / 'typo'}' not found: give the directory "
                                              f"{trains} printed (<output dir>/<config name>, or its seed<k>)"),
                          (killed, f"'{killed}' is not a finished run (config.json and best.safetensors are missing) "
                                   f"but has checkpoints: finish it with the same {trains} command + --resume")):
            args = ["--run", str(run), "--input", str(rows)]
            assert (main(argv + args) if argv else load_script("predict").main(args)) == 2
            assert capsys.readouterr().err == f"error: {line}\n"
