"""What the runner prints (issue #43 item 7): --quiet silences 🤗 datasets' / transformers' own bars;
Ctrl-C is one line naming the last checkpoint and the --resume command, not a traceback."""
import os

import pytest

from helpers import interrupt_at_eval
from test_predict_and_runs import load_script, tiny_model_dir, write_tiny_yaml  # noqa: F401  (fixture)
from test_training import write_cb


def test_quiet_prints_no_library_bars_and_ctrl_c_is_one_line_with_the_resume_command(
        tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    run = load_script("run")
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))  # a new file: datasets generates its split
    out, seed_dir = str(tmp_path / "runs"), str(tmp_path / "runs" / "tiny" / "seed3")
    capsys.readouterr()
    restore = interrupt_at_eval(monkeypatch, 2)  # Ctrl-C at the end of epoch 2
    argv = ["--config", config, "--output-dir", out, "--quiet", "--set", "train.checkpoint_every=1"]
    try:
        code = run.main(argv)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped run.main as a traceback")
    assert code == 130
    restore()
    err = capsys.readouterr().err
    assert "Generating train split" not in err and "it/s]" not in err and "Traceback" not in err
    assert err.strip().splitlines() == [
        f"interrupted: last checkpoint {seed_dir}/checkpoints/step-0000005; continue with: python experiments/run.py "
        f"--config {config} --output-dir {out} --quiet --set train.checkpoint_every=1 --resume"]
    # the command it names continues the run
    assert run.main(argv + ["--resume"]) == 0
    assert os.path.isfile(os.path.join(seed_dir, "metrics.json"))
    assert "resuming from" in capsys.readouterr().out


def test_ctrl_c_under_the_console_command_names_the_console_command(
        tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    """`openprompt-ipt run` (the README's command; in a clone too, an editable install) was told to continue with
    `python <path>/experiments/run.py ...`, a command it never typed: the line names the command it ran."""
    from openprompt_ipt.commands import main

    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out = str(tmp_path / "runs")
    capsys.readouterr()
    restore = interrupt_at_eval(monkeypatch, 1)
    assert main(["run", "--config", config, "--output-dir", out, "--quiet"]) == 130
    restore()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        f"continue with: openprompt-ipt run --config {config} --output-dir {out} --quiet --resume")


def test_ctrl_c_names_no_checkpoint_of_a_seed_that_had_finished(tmp_path):
    """Seeds 1,2: Ctrl-C in seed 2 before its first checkpoint said `last checkpoint .../seed1/checkpoints/...`,
    the finished seed's (which --resume keeps), as if seed 2 would go on from there."""
    from openprompt_ipt.runner.quiet import interrupted_line

    def checkpoint(run_dir, finished):
        step = tmp_path / "runs" / "q" / run_dir / "checkpoints" / "step-0000002"
        step.mkdir(parents=True)
        (step / "training_state.pt").write_bytes(b"")
        (step.parent / "latest").write_text("step-0000002")
        if finished:
            (step.parent.parent / "metrics.json").write_text("{}")
        return str(step)

    checkpoint("seed1", finished=True)
    (tmp_path / "runs" / "q" / "seed2").mkdir()
    folder = str(tmp_path / "runs" / "q")
    assert interrupted_line(folder, "openprompt-ipt run", ["--seeds", "1,2"]).startswith(
        f"interrupted: no checkpoint yet in {folder}")
    unfinished = checkpoint("seed2", finished=False)
    assert interrupted_line(folder, "openprompt-ipt run", []).startswith(f"interrupted: last checkpoint {unfinished};")
