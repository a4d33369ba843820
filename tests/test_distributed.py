"""Two CPU processes (torchrun, gloo) train to the same weights and metrics as one process with the
same global batch; settings the machine cannot satisfy are one clear error."""
import json
import os
import sys

import pytest
import yaml

from helpers import run_process_group
from test_predict_and_runs import tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_training import write_cb

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def test_two_processes_match_one(tiny_model_dir, tmp_path):  # noqa: F811
    from safetensors.torch import load_file

    from openprompt_ipt.runner.experiment import run_experiment

    data = write_cb(tmp_path / "CB", n_train=22)
    # 16 training examples in global batches of 5: the last batch has one row, so one process gets none;
    # 2 batches per optimizer step, a checkpoint every step (all kept, to resume from a mid-epoch one below)
    cfg = tiny_cfg(tiny_model_dir, data, batch_size=5, gradient_accumulation_steps=2, checkpoint_every=1,
                   keep_checkpoints=20)
    one = run_experiment(cfg, output_dir=str(tmp_path / "one"), show_progress=False)
    assert one["sizes"]["train"] == 16
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": "1"}

    def torchrun(*extra):
        proc = run_process_group([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                                  "2", os.path.join(ROOT, "experiments", "run.py"), "--config", str(config),
                                  "--output-dir", str(tmp_path / "two"), "--quiet", *extra],
                                 env=env, timeout=300)  # seconds when idle; a shared
        # 2-core machine under a parallel suite runs it several times slower (test_hf_trainer's runs allow 300 s too)
        ranks = [line for line in proc.stderr.splitlines() if line.startswith("[rank")]  # each rank's traceback
        assert proc.returncode == 0, "\n".join(ranks[:60]) + "\n...\n" + proc.stderr[-1500:]
        return proc

    proc = torchrun()
    assert "2 process(es)" in proc.stdout and proc.stdout.count("run summary") == 1  # printed by rank 0 only
    run_dir = tmp_path / "two" / "tiny" / f"seed{cfg['seed']}"  # <output-dir>/<config name>/seed<k>
    two = json.load(open(run_dir / "metrics.json"))
    assert two["training"]["processes"] == 2
    for key in ("best_dev", "test"):
        assert two[key] == pytest.approx(one[key], abs=1e-5)
    for a, b in zip(one["history"], two["history"]):
        assert b == pytest.approx(a, abs=1e-5)
    wa, wb = load_file(str(tmp_path / "one" / "best.safetensors")), load_file(str(run_dir / "best.safetensors"))
    assert wa.keys() == wb.keys()
    assert max((wa[k] - wb[k]).abs().max().item() for k in wa) < 1e-4

    # resuming the 2-process run from a mid-epoch checkpoint (epoch 2, after 2 of its 4 batches) is exact
    (run_dir / "checkpoints" / "latest").write_text("step-0000003")
    (run_dir / "metrics.json").unlink()  # as if killed there: --resume keeps a finished run as it is
    torchrun("--resume")
    again = json.load(open(run_dir / "metrics.json"))
    assert again["training"]["resumed_from_step"] == 3
    assert all(again[k] == two[k] for k in ("best_dev", "test", "history"))
    wc = load_file(str(run_dir / "best.safetensors"))
    assert all(wb[k].equal(wc[k]) for k in wb)


def test_unsatisfiable_accelerate_settings_are_one_clear_error():
    from openprompt_ipt.training.distributed import Runtime

    with pytest.raises(ValueError, match="'fp16' needs a CUDA GPU and this run is on CPU"):
        Runtime.create("cpu", "fp16")
    with pytest.raises(ValueError, match="is not one of"):
        Runtime.create("cpu", "fp8")


def test_one_process_runs_one_run_after_another_at_different_precisions():
    """accelerate keeps one process-wide state: a second run (a sweep, a notebook, a test session) at
    another precision was refused ("AcceleratorState has already been initialized")."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    from openprompt_ipt.training.distributed import Runtime

    AcceleratorState._reset_state(reset_partial_state=True)  # whatever an earlier test in this process left
    try:
        Accelerator(cpu=True, mixed_precision="no")  # the previous run's (or the user's own)
        assert Runtime.create("cpu", "bf16").accelerator.mixed_precision == "bf16"
        assert Runtime.create("cpu", "no").accelerator is None
        assert Runtime.create("cpu", "bf16").mixed_precision == "bf16"
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
