"""SIGTERM (``kill``, a SLURM / Kubernetes pre-emption) takes Ctrl-C's path: the one interrupted line naming the
--resume command, the run directory's lock given back, exit code 143; --resume then ends where an uninterrupted
run does. The handler lives only for the run: the previous one is back after it."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_predict_and_runs import load_script, tiny_model_dir, write_tiny_yaml  # noqa: F401  (fixture)
from test_training import write_cb

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# the runner in a child process that pauses (sleeps) right after its 4th checkpoint (epoch 2, after 1 of its 3
# batches) and says so in a marker file, so that SIGTERM lands mid-epoch, in the middle of training
PAUSING_RUN = """
import os, sys, time
sys.path.insert(0, {root!r})
from openprompt_ipt.training import trainer
saves, real = [0], trainer.save_checkpoint
def pausing(*a, **k):
    path = real(*a, **k)
    saves[0] += 1
    if saves[0] == 4:
        open({marker!r}, "w").write(path)
        time.sleep(120)
    return path
trainer.save_checkpoint = pausing
from openprompt_ipt.commands.run import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_mid_training_is_ctrl_c_with_exit_code_143_and_resume_ends_like_an_uninterrupted_run(
        tiny_model_dir, tmp_path, capsys):  # noqa: F811
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out, seed_dir = str(tmp_path / "runs"), str(tmp_path / "runs" / "tiny" / "seed3")
    argv = ["--config", config, "--output-dir", out, "--quiet", "--set", "train.checkpoint_every=1"]
    marker = str(tmp_path / "paused")
    child = subprocess.Popen([sys.executable, "-c", PAUSING_RUN.format(root=ROOT, marker=marker), *argv], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # this process's threads:
    # the same sums as the in-process runs below, so that the resumed run can equal the uninterrupted one exactly
    try:
        deadline = time.time() + 180
        while not os.path.isfile(marker) and child.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert child.poll() is None, f"the run ended before its pause: {child.communicate()}"
        assert os.path.isfile(os.path.join(out, "tiny", ".seed3.lock"))  # held while it runs
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 143  # 128 + SIGTERM, as a scheduler expects (it was -15: killed by the signal)
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("interrupted:")]
    assert lines == [f"interrupted: last checkpoint {seed_dir}/checkpoints/step-0000004; continue with: "
                     f"python experiments/run.py {' '.join(argv)} --resume"]
    assert not os.path.exists(os.path.join(out, "tiny", ".seed3.lock"))  # given back, not left behind
    assert not os.path.exists(os.path.join(seed_dir, "metrics.json"))

    run = load_script("run")
    capsys.readouterr()
    assert run.main(argv + ["--resume"]) == 0
    assert "resuming from" in capsys.readouterr().out
    full = str(tmp_path / "full")
    assert run.main(["--config", config, "--output-dir", full, "--quiet", "--set", "train.checkpoint_every=1"]) == 0
    resumed, uninterrupted = (json.load(open(os.path.join(d, "tiny", "seed3", "metrics.json"))) for d in (out, full))
    assert resumed["training"]["resumed_from_step"] == 4
    for key in ("best_dev", "test", "history"):  # the killed half ran in a subprocess: its thread count may sum
        assert_close(resumed[key], uninterrupted[key], key)  # a loss in another order (1e-7 apart, seen in CI)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the in-process runs left the handler as it was


def assert_close(a, b, where: str) -> None:
    """Equal structure and values, floats to 1e-6 relative."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-9), where
    else:
        assert a == b, where


def test_the_runner_restores_the_previous_sigterm_handler(tiny_model_dir, tmp_path):  # noqa: F811
    """A program that calls the runner in-process keeps its own SIGTERM handler after the run."""
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))

    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert load_script("run").main(["--config", config, "--output-dir", str(tmp_path / "runs"), "--quiet",
                                        "--set", "train.epochs=1"]) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)


class ReachedTheTestsHandler(Exception):
    pass


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_pretraining_command_sigterm_is_ctrl_c_and_gives_its_export_lock_back(tmp_path, capsys, sig, code):
    """The pretraining commands share the path: one line, exit code 143 (Ctrl-C: 130), and no lock file left
    (the export's lock was kept until the process ended, its file after it)."""
    from openprompt_ipt.pretraining.cli import run_pretraining_cli
    from openprompt_ipt.pretraining.export import prepare_output
    from openprompt_ipt.training.run_dir import lock_path

    out = str(tmp_path / "exports" / "textcnn")

    def interrupted_run(args):
        prepare_output(out, {"a": 1}, log=lambda *_: None)
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the signal's handler raises here
        return "finished"

    def tests_own(signum, frame):  # stands for the default (which would end pytest) and is what must come back
        raise ReachedTheTestsHandler

    previous = signal.signal(signal.SIGTERM, tests_own)
    try:
        assert run_pretraining_cli(["--config", "x.yaml"], "doc", "help", "a=1", "help", interrupted_run) == code
        assert signal.getsignal(signal.SIGTERM) is tests_own
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert capsys.readouterr().err.strip().splitlines() == [
        "interrupted: rerun the same command with --resume to continue (state is kept in <output>.partial)"]
    assert not os.path.exists(lock_path(out))
    from openprompt_ipt.training.run_dir import held

    assert out not in held()
    assert os.path.isdir(out + ".partial")  # what --resume continues
