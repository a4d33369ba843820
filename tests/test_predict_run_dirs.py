"""``predict --run`` takes the directory the training printed (issue #32): docs/training.md's commands run as
written, and each bad ``--run`` is the line docs/bad_input.md shows."""
import json
import os
import re
import shlex

import pytest

from test_predict_and_runs import load_script, tiny_model_dir  # noqa: F401
from test_training import write_cb

from openprompt_ipt.runner.run_dirs import find_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'


def section(doc, title):
    text = open(os.path.join(ROOT, "docs", doc)).read()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def tiny_yaml(path, model_dir, data_dir):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"dataset": {"name": "cb", "path": data_dir, "dev_from_train": 0.25},
                   "plm": {"model_path": model_dir, "freeze": True, "max_seq_length": 64},
                   "template": "instance_wise", "instance_wise": {"text": TEXT, "strategy": "random", "prompt_length": 2},
                   "soft_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]},
                   "train": {"epochs": 1, "batch_size": 4, "device": "cpu"}, "test": {"batch_size": 4}, "seed": 42}, f)


def test_the_documented_train_then_predict_commands_run(tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    """docs/training.md's Predict block, run as written from a folder whose yamls/cb_random_ipt.yaml is tiny."""
    text = section("training.md", "Predict")
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    commands = [shlex.split(line.split("#")[0]) for line in block]
    printed = re.search(r"# ends: (run directory: \S+)", block[0]).group(1)
    assert [c[1] for c in commands] == ["experiments/run.py", "experiments/predict.py"]

    monkeypatch.chdir(tmp_path)
    data = write_cb(tmp_path / "CB")
    tiny_yaml(commands[0][commands[0].index("--config") + 1], tiny_model_dir, data)
    rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
    with open(commands[1][commands[1].index("--input") + 1], "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))

    capsys.readouterr()
    assert load_script("run").main(commands[0][2:]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == printed  # the directory the docs pass to --run
    assert load_script("predict").main(commands[1][2:]) == 0
    output = commands[1][commands[1].index("--output") + 1]
    preds = [json.loads(line) for line in open(output)]
    assert [p["guid"] for p in preds] == [str(r["idx"]) for r in rows]

    # the Python snippet below it, too: same run, same probabilities
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    scope = {}
    exec(snippet, scope)
    again = scope["predictor"].predict(rows)
    assert [p["probabilities"] for p in again] == [p["probabilities"] for p in preds]


def touch_run(path, finished=True):
    os.makedirs(os.path.join(path, "checkpoints", "step-0000003"))
    if finished:
        for name in ("config.json", "best.safetensors", "metrics.json"):
            open(os.path.join(path, name), "w").write("{}")


# each `--run` of the docs/bad_input.md table -> the folders that make that case
CASES = {
    "runs/cb/cb_random_ipt": lambda: [touch_run(f"runs/cb/cb_random_ipt/seed{k}") for k in (1, 2)],
    "runs/cb": lambda: touch_run("runs/cb/cb_random_ipt/seed42"),
    "runs/cb/cb_random_ipt/seed42": lambda: touch_run("runs/cb/cb_random_ipt/seed42", finished=False),
    "runs/cb/cb_random_ip": lambda: touch_run("runs/cb/cb_random_ipt/seed42"),
    "runs/cb/cb_random_ipt/seed42/best.safetensors": lambda: touch_run("runs/cb/cb_random_ipt/seed42"),
    "yamls": lambda: os.makedirs("yamls"),
}


def test_bad_input_table_is_what_predict_prints(tmp_path, monkeypatch, capsys):
    rows = re.findall(r"^\| `--run (\S+)`[^|]*\| `(error: [^`]+)` \|$", section("bad_input.md", "Predict --run"), re.M)
    assert sorted(run for run, _ in rows) == sorted(CASES)
    predict = load_script("predict")
    for run, line in rows:
        case = tmp_path / run.replace("/", "_")
        case.mkdir()
        monkeypatch.chdir(case)
        CASES[run]()
        open("rows.jsonl", "w").write(json.dumps({"premise": "a cat", "hypothesis": "a dog"}) + "\n")
        capsys.readouterr()
        assert predict.main(["--run", run, "--input", "rows.jsonl", "--output", "preds.jsonl"]) == 2
        assert capsys.readouterr().err.strip() == line
        assert not os.path.exists("preds.jsonl")


def test_find_run_goes_from_a_printed_directory_to_the_run(tmp_path):
    top = tmp_path / "runs" / "c"
    touch_run(str(top / "seed7"))
    assert find_run(str(top)) == str(top / "seed7")  # a config dir with one seed
    assert find_run(str(top / "seed7")) == str(top / "seed7")
    # a sweep: the seed dir has no weights, its metrics.json names the selected point
    sweep = tmp_path / "runs" / "s" / "seed1"
    for point in ("lr_prompt=0.01", "lr_prompt=0.1"):
        touch_run(str(sweep / point))
    (sweep / "metrics.json").write_text(json.dumps({"level": "seed", "selected_point": {"train.lr_prompt": 0.1}}))
    assert find_run(str(sweep)) == str(sweep / "lr_prompt=0.1")
    assert find_run(str(sweep.parent)) == str(sweep / "lr_prompt=0.1")
    with pytest.raises(FileNotFoundError, match="holds no run"):
        find_run(str(sweep / "lr_prompt=0.1" / "checkpoints"))


def test_predict_uses_the_backbone_the_run_trained_on_from_any_directory(tiny_model_dir, tmp_path, monkeypatch,  # noqa: F811
                                                                          capsys):
    """A run whose plm.model_path was relative (models/bert) loaded whatever that path held in the directory
    predict ran in: another model there, without a word; none there, an error telling to --set plm.model_path."""
    import shutil

    import torch

    from conftest import _bert

    train_dir, other_dir = tmp_path / "project", tmp_path / "elsewhere"
    shutil.copytree(tiny_model_dir, train_dir / "models" / "bert")
    torch.manual_seed(123)  # the same name, the same shapes, other weights
    model, _ = _bert(str(other_dir / "models"))
    model.save_pretrained(str(other_dir / "models" / "bert"))
    monkeypatch.chdir(train_dir)
    tiny_yaml(str(train_dir / "c.yaml"), "models/bert", write_cb(train_dir / "CB"))
    open("rows.jsonl", "w").write(json.dumps({"premise": "a cat", "hypothesis": "a dog"}) + "\n")
    assert load_script("run").main(["--config", "c.yaml", "--output-dir", "runs", "--quiet"]) == 0
    predict, run = load_script("predict"), str(train_dir / "runs" / "c")
    capsys.readouterr()
    assert predict.main(["--run", run, "--input", "rows.jsonl"]) == 0
    here = capsys.readouterr().out
    monkeypatch.chdir(other_dir)
    assert predict.main(["--run", run, "--input", str(train_dir / "rows.jsonl")]) == 0
    assert capsys.readouterr().out == here
    monkeypatch.chdir(tmp_path)  # no models/ here at all
    assert predict.main(["--run", run, "--input", str(train_dir / "rows.jsonl")]) == 0
    assert capsys.readouterr().out == here
