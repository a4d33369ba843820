"""Messages name the command the user ran: ``openprompt-ipt run`` (the console command) or, in a clone,
``python experiments/run.py``; the hints that name another command name it the same way (``openprompt-ipt
aggregate`` / ``python experiments/aggregate.py``). The runner cannot import commands/: the name is passed down."""
import json
import os

import pytest

from test_predict_and_runs import load_script, tiny_model_dir, write_tiny_yaml  # noqa: F401  (fixture)
from test_training import write_cb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = {"dataset": "cb", "strategy": "random", "method": "Random IPT", "backbone": "tiny",
          "template": "instance_wise", "metrics": ["accuracy", "macro_f1"], "test_split": "official val",
          "best_dev": {"accuracy": 0.5, "macro_f1": 0.4}, "test": {"accuracy": 0.5, "macro_f1": 0.4},
          "sizes": {"train": 4, "dev": 2, "test": 3}, "trainable": {"prompt": 1, "head": 1, "plm": 0},
          "training": {}, "seconds": 0.1}


@pytest.fixture(autouse=True)
def in_the_clone(monkeypatch):
    monkeypatch.chdir(ROOT)  # where a clone's user runs experiments/*.py from


def console(*argv):
    from openprompt_ipt.commands import main

    return main(["run", *argv])


def script(*argv):
    return load_script("run").main(list(argv))


# (how the user ran it, the run command its messages name, the other commands' names)
WAYS = [(console, "openprompt-ipt run", "openprompt-ipt aggregate", "openprompt-ipt predict",
         "openprompt-ipt pretrain categories --config pretrain_textcnn.yaml"),
        (script, "experiments/run.py", "python experiments/aggregate.py", "python experiments/predict.py",
         "python experiments/pretrain_categories.py --config yamls/pretrain_textcnn.yaml")]


def fake_runs(monkeypatch, seen):
    """run_experiment without the training: a result written as a finished run's, and the name it was given."""
    import openprompt_ipt.runner.experiment as experiment

    def run(cfg, root, output_dir, show_progress=True, splits=None, resume=False, run_command=None, **kw):
        seen.append(run_command)
        os.makedirs(output_dir, exist_ok=True)
        with open(os.path.join(output_dir, "metrics.json"), "w") as f:
            json.dump({**RESULT, "seed": cfg["seed"]}, f)
        return {**RESULT, "seed": cfg["seed"]}
    monkeypatch.setattr(experiment, "run_experiment", run)


@pytest.mark.parametrize("ran, run_cmd, aggregate, predict, pretrain", WAYS, ids=["console", "script"])
def test_the_hints_after_a_run_name_the_commands_as_the_user_runs_them(
        ran, run_cmd, aggregate, predict, pretrain, tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    """The Encoder IPT note, the summary.json note and the predict line named `python experiments/*.py` (or
    `openprompt-ipt predict`) whatever the user ran."""
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out, seen = str(tmp_path / "runs"), []
    fake_runs(monkeypatch, seen)
    encoder = ["--set", "instance_wise.strategy=encoder"]
    assert ran("--config", config, "--output-dir", out, "--quiet", "--seeds", "1,2", *encoder) == 0
    printed = capsys.readouterr().out
    assert f"starts from the category pretraining: {pretrain} --set plm.model_path=" in printed
    assert seen == [run_cmd, run_cmd]  # init_from's / init_prompt_from's messages get it
    assert ran("--config", config, "--output-dir", out, "--quiet", "--seeds", "3") == 0
    printed = capsys.readouterr().out
    assert f"left out): {aggregate} {os.path.join(out, 'tiny')} averages every seed" in printed
    assert f"  predict: {predict} --run {os.path.join(out, 'tiny', 'seed3')} --input FILE.jsonl" in printed
    assert ("experiments/" in printed) == (ran is script)


@pytest.mark.parametrize("ran, run_cmd", [w[:2] for w in WAYS], ids=["console", "script"])
def test_init_from_errors_name_the_run_command_the_user_ran(ran, run_cmd, tiny_model_dir, tmp_path,
                                                            capsys):  # noqa: F811
    """init_from a run whose config.json is damaged: the fix named `experiments/run.py` under the console command."""
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    source = tmp_path / "stage1" / "seed3"
    (source / "template").mkdir(parents=True)
    (source / "template" / "template.safetensors").write_bytes(b"")
    (source / "config.json").write_text("{not json")
    assert ran("--config", config, "--output-dir", str(tmp_path / "runs"), "--quiet", "--init-from", str(source)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"train the run '{source}' again ({run_cmd} ... --overwrite)"), err


def openprompt_yaml(tmp_path, data_dir, model_dir):
    import yaml

    raw = {"dataset": {"name": "cb", "path": data_dir},
           "plm": {"model_name": "bert", "model_path": model_dir},
           "template": "instance_wise",
           "instance_wise": {"text": '{"placeholder":"text_a"} ? {"mask"} .', "prompt_length": 2},
           "verbalizer": "manual_verbalizer",
           "manual_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]},
           "environment": {"num_gpus": 2}}
    path = tmp_path / "op.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.mark.parametrize("ran, target", [(console, "-m openprompt_ipt run"), (script, "experiments/run.py")],
                         ids=["console", "script"])
def test_openprompt_num_gpus_note_names_what_accelerate_launches(ran, target, tiny_model_dir, tmp_path, monkeypatch,
                                                                 capsys):  # noqa: F811
    """OpenPrompt's environment.num_gpus: 2 is one process here; the note told the console command's user to
    launch `experiments/run.py`, a file an installed package does not have."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    fake_runs(monkeypatch, [])
    config = openprompt_yaml(tmp_path, write_cb(tmp_path / "CB"), tiny_model_dir)
    ran("--config", config, "--output-dir", str(tmp_path / "runs"), "--quiet")
    printed = capsys.readouterr()
    printed = printed.out + printed.err
    assert (f"note (OpenPrompt schema): environment.num_gpus 2: one process uses one GPU; for 2 run accelerate "
            f"launch --num_processes 2 {target} ...") in printed


def test_experiments_analysis_scripts_name_the_clones_run_script(tmp_path, capsys):
    """experiments/nearest_tokens.py and sts_cosine.py called load_run without a name: under the clone they said
    `openprompt-ipt run`; now `experiments/run.py`, beside them."""
    run_dir = tmp_path / "half"  # a run that never finished: no config.json / best.safetensors
    (run_dir / "checkpoints").mkdir(parents=True)
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"premise": "a", "hypothesis": "b"}\n')
    assert load_script("nearest_tokens").main(["--run", str(run_dir), "--input", str(rows)]) == 2
    err = capsys.readouterr().err
    assert "finish it with the same experiments/run.py command + --resume" in err, err
    assert load_script("sts_cosine").main(["--run", str(run_dir), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "finish it with the same experiments/run.py command + --resume" in err, err


@pytest.mark.parametrize("ran, categories, ppt", [
    (console, "openprompt-ipt pretrain categories", "openprompt-ipt pretrain ppt"),
    (script, "python experiments/pretrain_categories.py", "python experiments/pretrain_ppt.py")],
    ids=["console", "script"])
def test_a_pretraining_config_given_to_run_names_the_pretrain_command_the_user_runs(ran, categories, ppt, capsys):
    """`python experiments/run.py --config yamls/pretrain_lstm.yaml` was told to run `openprompt-ipt pretrain ...`."""
    assert ran("--config", "pretrain_lstm.yaml") == 2
    assert f"not an experiment config: run it with {categories} --config " in capsys.readouterr().err
    assert ran("--config", "pretrain_ppt.yaml") == 2
    assert f"not an experiment config: run it with {ppt} --config " in capsys.readouterr().err
    assert ran("--config", "corpus_13cat.yaml") == 2
    assert f"run one, e.g. {categories} --config pretrain_textcnn.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("way", ["console", "script"])
def test_an_experiment_config_given_to_pretrain_names_the_run_command_the_user_runs(way, capsys):
    """`python experiments/pretrain_categories.py --config yamls/cb_random_ipt.yaml` was told to run it with
    `openprompt-ipt run`; the console command still is."""
    from openprompt_ipt.commands import main

    for kind in ("categories", "ppt"):
        if way == "console":
            code, run = main(["pretrain", kind, "--config", "cb_random_ipt.yaml"]), "openprompt-ipt run"
        else:
            code = load_script(f"pretrain_{kind}").main(["--config", "cb_random_ipt.yaml"])
            run = "python experiments/run.py"
        what = "category-pretraining" if kind == "categories" else "PPT pre-training"
        assert code == 2
        assert f"not a {what} config: run it with {run} --config " in capsys.readouterr().err
