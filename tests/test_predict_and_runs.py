"""End to end on a tiny local BERT: predict round-trip, --resume through the runner, its errors."""
import json
import os
import re

import pytest
import torch

from helpers import interrupt_at_eval
from test_training import write_cb


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    import torch

    from conftest import _bert

    d = str(tmp_path_factory.mktemp("plm"))
    torch.manual_seed(0)
    model, _ = _bert(d)
    model.save_pretrained(os.path.join(d, "bert"))
    return os.path.join(d, "bert")


def tiny_raw(model_dir, data_dir, **train):
    """The sections of a tiny CB run as a YAML would hold them."""
    return {"dataset": {"name": "cb", "path": data_dir, "dev_from_train": 0.25},
            "plm": {"model_path": model_dir, "freeze": True, "max_seq_length": 64},
            "template": "instance_wise",
            "instance_wise": {"text": '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .',
                              "strategy": "random", "prompt_length": 2},
            "soft_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]},
            "train": {"epochs": 2, "batch_size": 4, "lr_prompt": 0.05, "lr_head": 0.05, "device": "cpu", **train},
            "test": {"batch_size": 4}, "seed": 3}


def tiny_cfg(model_dir, data_dir, **train):
    from openprompt_ipt.runner.config import DEFAULTS, merge_config

    raw = tiny_raw(model_dir, data_dir, **train)
    return merge_config(DEFAULTS, raw, "", {"instance_wise": raw["instance_wise"], "soft_verbalizer": raw["soft_verbalizer"]})


def test_predict_round_trip_matches_evaluate(tiny_model_dir, tmp_path):
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    data = write_cb(tmp_path / "CB")
    out = str(tmp_path / "run")
    result = run_experiment(tiny_cfg(tiny_model_dir, data), output_dir=out, show_progress=False)
    rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
    preds = load_run(out).predict(rows)
    assert len(preds) == len(rows)
    assert all(abs(sum(p["probabilities"].values()) - 1) < 1e-4 for p in preds)
    accuracy = sum(p["label"] == r["label"] for p, r in zip(preds, rows)) / len(rows)
    assert accuracy == pytest.approx(result["test"]["accuracy"])

    # the CLI writes the same predictions; extra fields are carried; empty input is one clear error
    cli = load_script("predict")
    outfile = tmp_path / "preds.jsonl"
    assert cli.main(["--run", out, "--input", os.path.join(data, "val.jsonl"), "--output", str(outfile)]) == 0
    assert [json.loads(line) for line in open(outfile)] == preds
    # a finished predictions file, or the input itself, is never replaced unless told (it was, silently)
    val = os.path.join(data, "val.jsonl")
    kept, rows_text = outfile.read_text(), open(val).read()
    assert cli.main(["--run", out, "--input", val, "--output", str(outfile)]) == 2
    assert cli.main(["--run", out, "--input", val, "--output", val, "--overwrite"]) == 2
    assert outfile.read_text() == kept and open(val).read() == rows_text
    assert cli.main(["--run", out, "--input", val, "--output", str(outfile), "--overwrite"]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"premise": "a cat", "hypothesis": "a dog", "colour": "red"}) + "\n")
    assert load_run(out).predict([json.loads(bad.read_text())])[0]["colour"] == "red"  # carried (issue #43 item 4)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="has no rows"):
        from openprompt_ipt.runner.predict import read_jsonl
        read_jsonl(str(tmp_path / "empty.jsonl"))
    with pytest.raises(ValueError, match="no input rows"):
        load_run(out).predict([])


def test_predict_refuses_a_run_whose_weights_hold_nan(tiny_model_dir, tmp_path, capsys):
    """A run saved by a diverged training (NaN prompt): predict wrote a confident label per row (the argmax of NaN
    logits, always the first class) with "probabilities": {..: NaN}, invalid JSON, and exit 0."""
    from safetensors.torch import load_file, save_file

    from openprompt_ipt.runner.experiment import run_experiment

    data, out = write_cb(tmp_path / "CB"), str(tmp_path / "run")
    run_experiment(tiny_cfg(tiny_model_dir, data), output_dir=out, show_progress=False)
    weights = os.path.join(out, "best.safetensors")
    state = load_file(weights)
    name = next(k for k in state if "generator" in k)
    state[name][:] = float("nan")
    save_file(state, weights)
    outfile = tmp_path / "preds.jsonl"
    capsys.readouterr()
    assert load_script("predict").main(["--run", out, "--input", os.path.join(data, "val.jsonl"),
                                        "--output", str(outfile)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: '{weights}': {name} holds NaN / inf values (the training that saved it diverged): train the run "
        "again (experiments/run.py ... --overwrite) or use another run"]
    assert not outfile.exists()


def test_a_test_split_the_selected_model_scores_nan_on_is_not_reported(tiny_model_dir, tmp_path, monkeypatch):
    """The dev check keeps a non-finite model from being selected; a selected model whose outputs are non-finite
    only on test reported the argmax of NaN logits as its test scores (a metrics.json that looks real)."""
    import openprompt_ipt.training as training
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.training import NonFiniteLoss

    real = training.evaluate

    def nan_on_test(*a, **k):
        out = real(*a, **k)
        return {**out, "loss": float("nan")} if k.get("desc") == "test" else out

    monkeypatch.setattr(training, "evaluate", nan_on_test)
    data, out = write_cb(tmp_path / "CB"), tmp_path / "run"
    with pytest.raises(NonFiniteLoss, match=r"^test loss is nan: the selected model \(epoch \d\) gives non-finite "
                                            r"outputs on the test split, so its test scores are not reported"):
        run_experiment(tiny_cfg(tiny_model_dir, data), output_dir=str(out), show_progress=False)
    assert not (out / "metrics.json").exists()


def test_a_bf16_run_predicts_under_the_autocast_it_evaluated_with(tiny_model_dir, tmp_path):
    """`train.mixed_precision: bf16`: dev / test were scored under bf16 autocast; predict ran in fp32, so its
    probabilities (and a close call's label) were not the run's."""
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    data = write_cb(tmp_path / "CB")
    out = str(tmp_path / "run")
    cfg = tiny_cfg(tiny_model_dir, data)
    cfg["train"]["mixed_precision"] = "bf16"
    run_experiment(cfg, output_dir=out, show_progress=False)
    rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
    predictor = load_run(out)
    preds = predictor.predict(rows)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what the runner's evaluation does
        assert predictor.predict(rows) == preds
    predictor.cfg["train"]["mixed_precision"] = "no"
    assert predictor.predict(rows) != preds  # fp32 gives other probabilities: the check above can fail


def load_script(name):
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "experiments", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"experiments_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runner_resume_equals_uninterrupted_and_rejects_changed_config(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from openprompt_ipt.runner.experiment import run_experiment

    data = write_cb(tmp_path / "CB")
    cfg = tiny_cfg(tiny_model_dir, data, checkpoint_every=1)
    full = run_experiment(cfg, output_dir=str(tmp_path / "full"), show_progress=False)

    restore = interrupt_at_eval(monkeypatch, 2)  # killed at the second dev evaluation (end of epoch 2, before its checkpoint)
    out = str(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, output_dir=out, show_progress=False)
    restore()
    changed = tiny_cfg(tiny_model_dir, data, checkpoint_every=1, lr_prompt=0.01)
    with pytest.raises(ValueError, match=r"config differs .* at train.lr_prompt: 0.05 -> 0.01 \("):
        run_experiment(changed, output_dir=out, show_progress=False, resume=True)
    resumed = run_experiment(cfg, output_dir=out, show_progress=False, resume=True)
    assert resumed["training"]["resumed_from_step"] == 5  # epoch 2, after 2 of its 3 batches
    for key in ("best_dev", "test", "history"):
        assert resumed[key] == full[key]
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        run_experiment(cfg, output_dir=str(tmp_path / "new"), show_progress=False, resume=True)
    # the one-screen summary of the CLI
    from openprompt_ipt.training.logs import format_summary

    text = format_summary(resumed, out)
    assert "resumed at step 5" in text and "openprompt-ipt predict --run" in text and len(text.splitlines()) < 25


def write_tiny_yaml(tmp_path, model_dir, data_dir, name="tiny"):
    import yaml

    raw = tiny_raw(model_dir, data_dir)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def snapshot(folder):
    """Every file under ``folder`` with its bytes: 'nothing touched' compares two of these."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for fn in files:
            p = os.path.join(dirpath, fn)
            out[os.path.relpath(p, folder)] = open(p, "rb").read()
    return out


def test_a_new_run_never_replaces_a_finished_one(tiny_model_dir, tmp_path, capsys):
    run = load_script("run")
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out, seed_dir = str(tmp_path / "runs"), str(tmp_path / "runs" / "tiny" / "seed3")
    assert run.main(["--config", config, "--output-dir", out, "--quiet"]) == 0
    before = snapshot(out)
    assert {"tiny/seed3/metrics.json", "tiny/seed3/best.safetensors", "tiny/summary.json"} <= set(before)
    capsys.readouterr()
    # the same command with another setting: one line, nothing in the directory touched
    for extra in (["--set", "train.epochs=1"], ["--seeds", "3,4", "--set", "train.epochs=1"]):
        assert run.main(["--config", config, "--output-dir", out, "--quiet", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"error: directory '{seed_dir}' already holds a finished run (metrics.json): --overwrite replaces it "
                       "(--resume keeps it and runs only what is missing), or choose another --output-dir")
        assert snapshot(out) == before
    # --resume keeps the finished run (a changed config is refused, naming the key)
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--resume", "--set", "train.epochs=1"]) == 2
    assert "train.epochs: 2 -> 1" in capsys.readouterr().err and snapshot(out) == before
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--resume"]) == 0
    assert f"resume: {seed_dir} is finished (metrics.json): kept" in capsys.readouterr().out
    assert snapshot(out)["tiny/seed3/metrics.json"] == before["tiny/seed3/metrics.json"]
    # a truncated best.safetensors: predict names the file and what to do
    best = os.path.join(seed_dir, "best.safetensors")
    data = open(best, "rb").read()
    open(best, "wb").write(data[:100])
    predict = load_script("predict")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"premise": "a cat", "hypothesis": "a dog"}) + "\n")
    assert predict.main(["--run", seed_dir, "--input", str(rows)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the PLM's loading bar
    assert err.startswith(f"error: file '{best}' is damaged or truncated (") and "--overwrite" in err
    # --overwrite replaces it whole: no file of the old run survives beside the new one
    open(os.path.join(seed_dir, "old_note.txt"), "w").write("from the old run")
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--overwrite", "--set", "train.epochs=1"]) == 0
    assert not os.path.exists(os.path.join(seed_dir, "old_note.txt"))
    assert len(json.load(open(os.path.join(seed_dir, "metrics.json")))["history"]) == 1
    assert "--overwrite: removed the previous run in" in capsys.readouterr().out
    assert run.main(["--config", config, "--output-dir", out, "--resume", "--overwrite"]) == 2


def test_an_unfinished_run_is_refused_and_resume_says_where_it_starts(tiny_model_dir, tmp_path, monkeypatch, capsys):
    run = load_script("run")
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out, seed_dir = str(tmp_path / "runs"), str(tmp_path / "runs" / "tiny" / "seed3")
    restore = interrupt_at_eval(monkeypatch, 2)  # killed at the end of epoch 2
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--set", "train.checkpoint_every=1"]) == 130
    restore()
    before = snapshot(out)
    capsys.readouterr()
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--set", "train.checkpoint_every=1"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: directory '{seed_dir}' already holds an unfinished run (checkpoint step-0000005): --resume continues it, "
        "--overwrite replaces it, or choose another --output-dir")
    assert snapshot(out) == before
    # --quiet still says what the run resumed from (the checkpoint schedule may change on resume)
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--resume"]) == 0
    printed = capsys.readouterr().out
    assert f"resuming from {seed_dir}/checkpoints/step-0000005: optimizer step 5, epoch 2 after 2 of 3 batches" in printed
    # killed before any checkpoint: --resume says there was nothing to resume
    os.makedirs(str(tmp_path / "early" / "tiny" / "seed3"))
    open(str(tmp_path / "early" / "tiny" / "seed3" / "log.csv"), "w").write("step,epoch,name,value\n")
    early = str(tmp_path / "early")
    assert run.main(["--config", config, "--output-dir", early, "--quiet"]) == 2
    assert "holds an unfinished run (no checkpoint yet)" in capsys.readouterr().err
    assert run.main(["--config", config, "--output-dir", early, "--quiet", "--resume"]) == 0
    assert (f"resume: nothing to resume in {early}/tiny/seed3 (no checkpoint): training from the start"
            in capsys.readouterr().out)
    # a truncated checkpoint: one line naming the file, on --resume
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--overwrite",
                     "--set", "train.epochs=1"]) == 0
    ckpt = os.path.join(seed_dir, "checkpoints", open(os.path.join(seed_dir, "checkpoints", "latest")).read())
    os.remove(os.path.join(seed_dir, "metrics.json"))  # as if killed after the last checkpoint
    state = os.path.join(ckpt, "training_state.pt")
    open(state, "wb").write(open(state, "rb").read()[:200])
    capsys.readouterr()
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--resume", "--set", "train.epochs=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the PLM's loading bar
    assert err.startswith(f"error: file '{state}' is damaged or truncated (") and "--overwrite" in err


def test_a_seed_reproduces_bit_for_bit_in_a_new_process_and_inside_a_seed_group(tiny_model_dir, tmp_path):
    """docs/training.md (Seeds): seed 3 run alone and seed 3 run second in a `--seeds 4,3` group, in two processes
    with other PYTHONHASHSEEDs (set order, dict-of-set order), end at the same weights and metrics; seed 4 not."""
    import subprocess
    import sys

    from safetensors.torch import load_file

    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    script = os.path.join(os.path.dirname(__file__), "..", "experiments", "run.py")
    for hash_seed, seeds in (("1", "3"), ("2", "4,3")):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, OMP_NUM_THREADS="1")
        done = subprocess.run([sys.executable, script, "--config", config, "--seeds", seeds, "--quiet",
                               "--output-dir", str(tmp_path / f"runs{hash_seed}")], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]

    def run_of(hash_seed, seed):
        folder = tmp_path / f"runs{hash_seed}" / "tiny" / f"seed{seed}"
        metrics = json.loads((folder / "metrics.json").read_text())
        metrics.pop("seconds")
        return metrics, load_file(str(folder / "best.safetensors"))

    (alone, weights), (grouped, group_weights), (other, other_weights) = run_of(1, 3), run_of(2, 3), run_of(2, 4)
    assert alone == grouped
    assert weights.keys() == group_weights.keys() and all(torch.equal(weights[k], group_weights[k]) for k in weights)
    assert not all(torch.equal(weights[k], other_weights[k]) for k in weights)


def test_predict_refuses_weights_that_lack_a_trained_tensor(tiny_model_dir, tmp_path):
    """best.safetensors without one of the tensors the run trained (a file from another config or release, a hand
    edit): that tensor kept its untrained start and predict scored with it without a word; now one line naming it."""
    from safetensors.torch import load_file, save_file

    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    out = str(tmp_path / "run")
    run_experiment(tiny_cfg(tiny_model_dir, write_cb(tmp_path / "CB"), epochs=1), output_dir=out, show_progress=False)
    load_run(out)  # the whole file: loads
    weights = os.path.join(out, "best.safetensors")
    state = load_file(weights)
    dropped = next(k for k in state if k.startswith("verbalizer."))
    del state[dropped]
    save_file(state, weights)
    with pytest.raises(ValueError, match=rf"lacks 1 trained tensor\(s\) of this model \({re.escape(dropped)}\): they "
                                         r"would predict from their untrained start") as e:
        load_run(out)
    assert "\n" not in str(e.value)


def test_predict_loads_a_fine_tuned_run_of_a_saved_template(tiny_model_dir, tmp_path):
    """plm.freeze: false with a saved template (instance_wise) and a soft_verbalizer: the run skips the masked LM's
    vocabulary head (the verbalizer reads hidden states), so best.safetensors holds none of it, but predict built
    the backbone with it and refused the run ("lacks 5 trained tensor(s) ... cls.predictions"). It predicts now, as
    the run evaluated."""
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    data = write_cb(tmp_path / "CB")
    cfg = tiny_cfg(tiny_model_dir, data, epochs=1)
    cfg["plm"]["freeze"] = False
    out = str(tmp_path / "run")
    result = run_experiment(cfg, output_dir=out, show_progress=False)
    rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
    preds = load_run(out).predict(rows)
    accuracy = sum(p["label"] == r["label"] for p, r in zip(preds, rows)) / len(rows)
    assert accuracy == pytest.approx(result["test"]["accuracy"])
