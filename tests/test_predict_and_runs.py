"""End to end on a tiny local BERT: predict round-trip, --resume through the runner, its errors."""
import json
import os

import pytest

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


def tiny_cfg(model_dir, data_dir, **train):
    from openprompt_ipt.runner.config import DEFAULTS, merge_config

    raw = {"dataset": {"name": "cb", "path": data_dir, "dev_from_train": 0.25},
           "plm": {"model_path": model_dir, "freeze": True, "max_seq_length": 64},
           "template": "instance_wise",
           "instance_wise": {"text": '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .',
                             "strategy": "random", "prompt_length": 2},
           "soft_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]},
           "train": {"epochs": 2, "batch_size": 4, "lr_prompt": 0.05, "lr_head": 0.05, "device": "cpu", **train},
           "test": {"batch_size": 4}, "seed": 3}
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

    # the CLI writes the same predictions; unknown fields and empty input are one clear error
    cli = load_script("predict")
    outfile = tmp_path / "preds.jsonl"
    assert cli.main(["--run", out, "--input", os.path.join(data, "val.jsonl"), "--output", str(outfile)]) == 0
    assert [json.loads(line) for line in open(outfile)] == preds
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"premise": "a cat", "hypothesis": "a dog", "colour": "red"}) + "\n")
    with pytest.raises(ValueError, match=r"fields \['colour'\] that task 'cb' does not use"):
        load_run(out).predict([json.loads(bad.read_text())])
    assert cli.main(["--run", out, "--input", str(bad)]) == 2
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="has no rows"):
        from openprompt_ipt.runner.predict import read_jsonl
        read_jsonl(str(tmp_path / "empty.jsonl"))
    with pytest.raises(ValueError, match="no input rows"):
        load_run(out).predict([])


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
    assert "resumed at step 5" in text and "predict.py --run" in text and len(text.splitlines()) < 25
