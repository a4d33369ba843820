"""One process per run directory (issue #43 item 1): a run holds an OS file lock on its directory for
its whole life; a second process is refused in one line naming the first (also with --resume and
--overwrite); a killed run leaves no stale lock."""
import os
import signal
import subprocess
import sys
import time

import pytest

from test_predict_and_runs import load_script, tiny_model_dir, write_tiny_yaml  # noqa: F401  (fixture)
from test_training import write_cb

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def wait_for_run(lock, seed_dir, proc, seconds=180):
    """Until ``proc`` holds the lock and has begun writing its run (log.csv)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.isfile(lock) and open(lock).read().strip() == str(proc.pid) and \
                os.path.isfile(os.path.join(seed_dir, "log.csv")):
            return
        if proc.poll() is not None:
            pytest.fail(f"the first run ended before taking its lock: {proc.communicate()}")
        time.sleep(0.2)
    pytest.fail("the first run never took its lock")


def names_outside_checkpoints(folder):
    """The run's files, less checkpoints/, which the running first process rotates (read while it writes)."""
    return {os.path.relpath(os.path.join(d, f), folder) for d, dirs, files in os.walk(folder)
            if "checkpoints" not in os.path.relpath(d, folder).split(os.sep) for f in files}


def test_a_second_process_is_refused_while_the_first_runs_and_a_killed_run_leaves_no_lock(
        tiny_model_dir, tmp_path, capsys):  # noqa: F811
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out, seed_dir = str(tmp_path / "runs"), str(tmp_path / "runs" / "tiny" / "seed3")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    first = subprocess.Popen([sys.executable, os.path.join(ROOT, "experiments", "run.py"), "--config", config,
                              "--output-dir", out, "--quiet", "--set", "train.epochs=100000"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_run(os.path.join(out, "tiny", ".seed3.lock"), seed_dir, first)
        run = load_script("run")
        before = names_outside_checkpoints(seed_dir)
        for extra in ([], ["--resume"], ["--overwrite"]):  # the refusal's own advice is refused too
            capsys.readouterr()
            assert run.main(["--config", config, "--output-dir", out, "--quiet", *extra]) == 2
            err = capsys.readouterr().err.strip()
            assert err.startswith(f"error: directory '{seed_dir}' is in use by process {first.pid} (")
            assert "experiments/run.py" in err and "\n" not in err
        # --overwrite removed nothing (the running first process rotates its own checkpoints: those may go)
        assert "log.csv" in before and before <= names_outside_checkpoints(seed_dir)
        assert first.poll() is None  # still running, untouched
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    # killed: the kernel dropped its lock; the lock file it left is no obstacle
    assert os.path.isfile(os.path.join(out, "tiny", ".seed3.lock"))
    capsys.readouterr()
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--overwrite", "--set", "train.epochs=1"]) == 0
    assert os.path.isfile(os.path.join(seed_dir, "metrics.json"))
    assert not os.path.exists(os.path.join(out, "tiny", ".seed3.lock"))  # released at the end


HOLDER = ("import sys, time; sys.path.insert(0, {folder!r}); import run_dir; run_dir.hold({path!r}); "
          "print('held', flush=True); time.sleep(120)")


def test_exports_and_clearing_respect_the_lock(tmp_path):
    """The pretraining / PPT exports and --overwrite's clearing (benchmarks/accuracy.py) use the same lock."""
    from openprompt_ipt.pretraining.export import prepare_output
    from openprompt_ipt.training.run_dir import RunDirBusy, clear_runs

    out = str(tmp_path / "exports" / "textcnn")
    folder = os.path.join(ROOT, "openprompt_ipt", "training")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(folder=folder, path=out)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for call in (lambda: prepare_output(out, {"a": 1}), lambda: prepare_output(out, {"a": 1}, overwrite=True),
                     lambda: clear_runs([out])):
            with pytest.raises(RunDirBusy, match=rf"directory '{out}' is in use by process {holder.pid} "):
                call()
        assert not os.path.exists(out + ".partial")
    finally:
        holder.kill()
        holder.wait()
    work = prepare_output(out, {"a": 1})  # the holder died: its lock went with it
    assert work.endswith(".partial") and os.path.isdir(work)
