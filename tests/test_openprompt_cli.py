"""``python -m openprompt_ipt.openprompt.cli``: OpenPrompt's experiments/cli.py command line and an unchanged
yamls/openprompt/ file, trained by OpenPrompt's own ClassificationRunner on a tiny BERT, on the CPU
although the command line asks for a GPU (#29). No network: HF_HUB_OFFLINE=1."""
import os
import subprocess
import sys

import pytest

from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)
from test_tasks import write_task

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
YAML = os.path.join(ROOT, "yamls", "openprompt", "cb_instance_wise.yaml")


def test_openprompt_command_line_runs_our_yaml_on_the_cpu(tiny_model_dir, tmp_path):
    write_task(tmp_path / "assets", "cb")
    logs = tmp_path / "logs"  # does not exist: OpenPrompt's script refuses that
    cmd = [sys.executable, "-m", "openprompt_ipt.openprompt.cli", "--config_yaml", YAML, "--data-root", str(tmp_path / "assets"),
           "--plm.model_path", tiny_model_dir, "--train.num_epochs", "1", "--environment.num_gpus", "1",
           "--logging.path_base", str(logs), "--dataloader.max_seq_length", "24"]  # truncates 'head', as the YAML says
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "num_gpus 1 but no CUDA GPU here: running on the CPU" in proc.stdout
    assert "truncate_method" not in proc.stdout  # OpenPrompt's head truncation works on our templates: used as given
    assert f"data: cb from {tmp_path / 'assets' / 'superglue' / 'CB'}" in proc.stdout
    run_dir = proc.stdout.strip().splitlines()[-1].split("run directory: ")[1]
    log = open(os.path.join(run_dir, "log.txt")).read()
    assert "test Performance" in log or "test Performance" in proc.stderr  # OpenPrompt's runner evaluated
    assert os.path.isdir(os.path.join(run_dir, "checkpoints"))


def test_openprompt_command_line_refuses_a_mismatched_model_name_in_one_line(tiny_model_dir, tmp_path):
    cmd = [sys.executable, "-m", "openprompt_ipt.openprompt.cli", "--config_yaml", YAML, "--data-root", str(tmp_path),
           "--plm.model_name", "roberta", "--plm.model_path", tiny_model_dir, "--logging.path_base", str(tmp_path)]
    write_task(tmp_path, "cb")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600)
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert proc.returncode == 2 and len(errors) == 1
    assert "plm.model_name 'roberta' does not match" in errors[0]


def test_reproduce_seed_0_seeds_the_run_and_a_negative_seed_is_one_line(tiny_model_dir, tmp_path):
    """OpenPrompt's set_seed seeds only a truthy seed: `--reproduce.seed 0` seeded nothing, and torch 2.13 seeds
    its generator afresh in every process, so two runs of one command ended at other weights. -1 was numpy's
    traceback after the run's folder was made."""
    import glob

    import torch

    write_task(tmp_path / "assets", "cb")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ROOT, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}

    def run(seed, logs):
        cmd = [sys.executable, "-m", "openprompt_ipt.openprompt.cli", "--config_yaml", YAML, "--data-root",
               str(tmp_path / "assets"), "--plm.model_path", tiny_model_dir, "--train.num_epochs", "1",
               "--logging.path_base", str(tmp_path / logs), "--dataloader.max_seq_length", "24",
               "--reproduce.seed", str(seed)]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=600)

    states = []
    for logs in ("a", "b"):
        proc = run(0, logs)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        (ckpt,) = glob.glob(str(tmp_path / logs / "*" / "checkpoints" / "last.ckpt"))
        states.append(torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"])
    assert states[0].keys() == states[1].keys() and all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    proc = run(-1, "c")
    assert proc.returncode == 2 and not (tmp_path / "c").exists()
    assert proc.stderr.strip().splitlines()[-1] == ("error: reproduce.seed = -1 is not allowed: give an integer in "
                                                     "[0, 4294967295] (or null: unseeded)")


def test_several_gpus_with_a_template_data_parallel_breaks_is_one_line(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """``environment.num_gpus: 2`` on a machine with two GPUs: OpenPrompt's runner would wrap the model in
    nn.DataParallel, whose copies share a generated prefix's hooks (wrong logits without a word). One ``error:``
    line before its runner is built, naming the fix."""
    import torch

    from openprompt_ipt.openprompt import cli

    write_task(tmp_path / "assets", "boolq")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # fix_device keeps num_gpus: 2
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["--config_yaml", os.path.join(ROOT, "yamls", "openprompt", "boolq_generated_prefix.yaml"),
                   "--data-root", str(tmp_path / "assets"), "--plm.model_path", tiny_model_dir,
                   "--environment.num_gpus", "2", "--logging.path_base", str(tmp_path / "logs")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: GeneratedPrefixTemplate (generator 'ipt_random', injection 'kv') "
                                          "does not run under nn.DataParallel"), err[-3:]
    assert "environment.num_gpus: 1, or CUDA_VISIBLE_DEVICES=0" in err[-1]


def test_a_max_seq_length_without_room_for_the_prompt_is_one_line_before_the_loaders(tiny_model_dir, tmp_path,
                                                                                      monkeypatch, capsys):
    """dataloader.max_seq_length = the model's positions (128 here) with a 16 + 4 token prompt at the input layer:
    OpenPrompt's PromptDataLoader pads every example to 128, so every batch was refused at the first training
    forward, after the loaders tokenized every split. Now one line naming the key and the number, before them."""
    import openprompt
    from openprompt_ipt.openprompt import cli

    built = []
    monkeypatch.setattr(openprompt, "PromptDataLoader", lambda *a, **k: built.append(1))
    write_task(tmp_path / "assets", "cb")
    argv = ["--config_yaml", YAML, "--data-root", str(tmp_path / "assets"), "--plm.model_path", tiny_model_dir,
            "--train.num_epochs", "1", "--logging.path_base", str(tmp_path / "logs"), "--environment.num_gpus", "0",
            "--dataloader.max_seq_length", "128"]
    assert cli.main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert err == ["error: dataloader.max_seq_length = 128 + the template's 20 prompt positions exceed the model's 128 "
                   "positions (OpenPrompt pads every example to max_seq_length): set dataloader.max_seq_length <= 108 "
                   "(--dataloader.max_seq_length 108)"]
    assert not built  # refused before any loader tokenized a split


def test_the_command_called_from_python_gives_the_root_logger_back(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """OpenPrompt's init_logger replaces the root logger's handlers (a console handler bound to that moment's
    stderr, a file handler on the run's log.txt) and sets INFO. Called from Python, they stayed after main returned:
    the log file kept open and receiving every later log, and the console handler on a stream pytest had since
    closed, so a later test's stderr began with "--- Logging error ---" (CI failed on it)."""
    import logging

    from openprompt_ipt.openprompt import cli

    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    write_task(tmp_path / "assets", "cb")
    argv = ["--config_yaml", YAML, "--data-root", str(tmp_path / "assets"), "--plm.model_path", tiny_model_dir,
            "--train.num_epochs", "1", "--logging.path_base", str(tmp_path / "logs"), "--environment.num_gpus", "0",
            "--dataloader.max_seq_length", "128"]  # refused after init_logger, in the run (as the test above)
    assert cli.main(argv) == 2
    assert (root.handlers, root.level) == before
    logging.getLogger("a.library").warning("after the run")  # reached the run's log.txt before
    assert not any("after the run" in open(os.path.join(d, f)).read()
                   for d, _, files in os.walk(tmp_path / "logs") for f in files if f == "log.txt")


def test_room_check_allows_exactly_positions_minus_the_prompt():
    from types import SimpleNamespace

    from openprompt_ipt.openprompt.cli import check_room

    template = SimpleNamespace(n_prefix=20, position_limit=128)
    check_room(SimpleNamespace(dataloader=SimpleNamespace(max_seq_length=108)), template)
    with pytest.raises(ValueError, match=r"set dataloader\.max_seq_length <= 108"):
        check_room(SimpleNamespace(dataloader=SimpleNamespace(max_seq_length=109)), template)
    check_room(SimpleNamespace(dataloader=SimpleNamespace(max_seq_length=512)), SimpleNamespace(n_prefix=0,
                                                                                                 position_limit=128))
