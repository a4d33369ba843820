"""PPT prompt pre-training on a tiny BERT: the pairs, the export, resume, init_prompt_from, bad exports."""
import json
import os
import random

import pytest
import torch

from helpers import interrupt_at_eval
from test_predict_and_runs import tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_training import write_cb

WORDS = "the cat sat on the mat a dog ran fast she said the movie was great they think it is not good".split()


def write_corpus(path, docs=12, sentences=5):
    rng = random.Random(0)
    with open(path, "w") as f:
        for d in range(docs):
            text = " ".join(" ".join(rng.choice(WORDS) for _ in range(6)).capitalize() + f" {d} {s}."
                            for s in range(sentences))
            f.write(json.dumps({"title": f"doc {d}", "text": text}) + "\n")
    return str(path)


def write_experiment(tmp_path, model_dir, template="instance_wise"):
    import yaml

    section = ({"text": '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .', "strategy": "none",
                "task_prompt_length": 3} if template == "instance_wise" else
               {"text": '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .', "prompt_length": 2,
                "generator": "prefix", "injection": "kv", "prefix": {"reparameterize": True, "reparam_hidden": 8}})
    exp = {"plm": {"model_path": model_dir, "max_seq_length": 48}, "template": template, template: section,
           "soft_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]}}
    path = tmp_path / f"exp_{template}.yaml"
    path.write_text(yaml.safe_dump(exp))
    return str(path)


def ppt_cfg(tmp_path, model_dir, template="instance_wise", **corpus):
    from openprompt_ipt.pretraining.ppt import load_ppt_config
    import yaml

    raw = {"experiment": write_experiment(tmp_path, model_dir, template),
           "corpus": {"path": write_corpus(tmp_path / "wiki.jsonl"), "pairs": 30, **corpus},
           "train": {"epochs": 2, "batch_size": 4, "lr_prompt": 0.05, "max_seq_length": 40, "checkpoint_every": 2}}
    path = tmp_path / f"ppt_{template}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_ppt_config(str(path))


def test_pairs_are_balanced_and_labelled_by_position(tmp_path):
    from openprompt_ipt.pretraining.ppt import make_pairs

    docs = [[f"d{d} s{s}" for s in range(5)] for d in range(4)]
    pairs = make_pairs(docs, 300, random.Random(1))
    assert [sum(y == k for _, _, y in pairs) for k in range(3)] == [100, 100, 100]
    where = lambda s: tuple(int(x[1:]) for x in s.split())  # noqa: E731
    for a, b, y in pairs:
        (da, sa), (db, sb) = where(a), where(b)
        assert (y == 0) == (da == db and sb == sa + 1)
        assert (y == 2) == (da == db and abs(sa - sb) >= 2)
        assert (y == 1) == (da != db)


def test_export_resume_and_init_prompt_from(tmp_path, tiny_model_dir, monkeypatch):  # noqa: F811
    from safetensors import safe_open

    from openprompt_ipt.pretraining.ppt import run_ppt

    cfg = ppt_cfg(tmp_path, tiny_model_dir)
    full = run_ppt(cfg, output_dir=str(tmp_path / "full"), show_progress=False, log=lambda *_: None)
    assert {"DONE", "ppt.json", "prompt.safetensors", "config.yaml"} <= set(os.listdir(tmp_path / "full"))
    assert not os.path.exists(tmp_path / "full.partial")
    with safe_open(str(tmp_path / "full" / "prompt.safetensors"), "pt") as f:
        meta, keys = f.metadata(), list(f.keys())
        exported = {k: f.get_tensor(k) for k in keys}
    assert keys == ["task_prompt"] and meta["template"] == "instance_wise" and meta["hidden_size"] == "32"
    assert full["corpus"]["pairs"] == {"train": 24, "dev": 3, "test": 3}

    logs = []
    restore = interrupt_at_eval(monkeypatch, 2)  # killed at the second dev evaluation: epoch 1's checkpoint is on disk
    out = str(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        run_ppt(cfg, output_dir=out, show_progress=False, log=logs.append)
    assert os.path.isdir(out + ".partial") and not os.path.exists(out)
    restore()
    with pytest.raises(ValueError, match="already holds an unfinished run .*: --resume continues it"):
        run_ppt(cfg, output_dir=out, show_progress=False, log=logs.append)
    resumed = run_ppt(cfg, output_dir=out, show_progress=False, log=logs.append, resume=True)
    assert any(str(m).startswith("resuming PPT pre-training from") for m in logs)
    assert resumed["history"] == full["history"]
    with safe_open(os.path.join(out, "prompt.safetensors"), "pt") as f:
        assert torch.equal(f.get_tensor("task_prompt"), exported["task_prompt"])
    with pytest.raises(ValueError, match=r"already holds a finished run \(export"):
        run_ppt(cfg, output_dir=out, show_progress=False, log=logs.append)

    # downstream: Prompt Tuning on (tiny) CB starts from the exported prompt
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.training import Trainer

    run = tiny_cfg(tiny_model_dir, write_cb(tmp_path / "CB"), epochs=1)
    run["instance_wise"] = {**run["instance_wise"], "strategy": "none", "task_prompt_length": 3}
    seen, fit = {}, Trainer.fit

    def spy(self, *a, **k):
        seen["task_prompt"] = self.model.template.task_prompt.detach().clone()
        return fit(self, *a, **k)
    monkeypatch.setattr(Trainer, "fit", spy)
    result = run_experiment({**run, "init_prompt_from": str(tmp_path / "full")}, show_progress=False)
    assert torch.equal(seen["task_prompt"], exported["task_prompt"])
    assert result["init_prompt_from"]["tensors"] == ["task_prompt"]
    run_experiment(run, show_progress=False)
    assert not torch.equal(seen["task_prompt"], exported["task_prompt"])  # without it: another start

    # bad exports: another prompt length, another template, not an export
    longer = {**run, "instance_wise": {**run["instance_wise"], "task_prompt_length": 5}, "init_prompt_from": out}
    with pytest.raises(ValueError, match=r"task_prompt of shape \(3, 32\) but this template's is \(5, 32\).*re-export"):
        run_experiment(longer, show_progress=False)
    with pytest.raises(FileNotFoundError,
                       match="is not a finished PPT export .*: run openprompt-ipt pretrain ppt --config pretrain_ppt.yaml "):
        run_experiment({**run, "init_prompt_from": str(tmp_path)}, show_progress=False)


def test_export_for_another_tokenizer_is_refused(tmp_path, tiny_model_dir):  # noqa: F811
    """A PPT export of the tiny BERT loaded on the tiny RoBERTa: one line naming the re-export."""
    from conftest import _roberta
    from openprompt_ipt.pretraining.ppt import run_ppt
    from openprompt_ipt.runner.experiment import run_experiment

    cfg = ppt_cfg(tmp_path, tiny_model_dir)
    cfg["train"]["epochs"] = 1
    run_ppt(cfg, output_dir=str(tmp_path / "bert_ppt"), show_progress=False, log=lambda *_: None)
    model, tok = _roberta(str(tmp_path))
    model.save_pretrained(str(tmp_path / "roberta"))
    run = tiny_cfg(str(tmp_path / "roberta"), write_cb(tmp_path / "CB"), epochs=1)
    run["instance_wise"] = {**run["instance_wise"], "strategy": "none", "task_prompt_length": 3}
    with pytest.raises(ValueError, match="for backbone .* but this run's tokenizer is another .* re-export with "
                                         "openprompt-ipt pretrain ppt --config pretrain_ppt.yaml") as err:
        run_experiment({**run, "init_prompt_from": str(tmp_path / "bert_ppt")}, show_progress=False)
    assert "\n" not in str(err.value)


def test_prefix_tuning_prefix_is_pretrained_and_loaded(tmp_path, tiny_model_dir):  # noqa: F811
    from safetensors.torch import load_file

    from openprompt_ipt.pretraining.ppt import experiment_config, run_ppt
    from openprompt_ipt.runner.experiment import build_model
    from openprompt_ipt.runner.init_prompt import init_prompt_from

    cfg = ppt_cfg(tmp_path, tiny_model_dir, template="generated_prefix")
    cfg["train"]["epochs"] = 1
    run_ppt(cfg, output_dir=str(tmp_path / "prefix_ppt"), show_progress=False, log=lambda *_: None)
    state = load_file(str(tmp_path / "prefix_ppt" / "prompt.safetensors"))
    assert {"generator.task.embedding", "generator.task.mlp.0.weight"} <= set(state)
    exp = experiment_config(cfg)
    exp["init_prompt_from"] = str(tmp_path / "prefix_ppt")
    model, tok, _ = build_model(exp, [], 3, ["a", "b", "c"])
    init_prompt_from(model, exp, tok)
    params = dict(model.template.named_parameters())
    assert all(torch.equal(params[k], v) for k, v in state.items())
    exp["template"], exp["instance_wise"] = "instance_wise", {"text": exp["generated_prefix"]["text"], "strategy": "none"}
    with pytest.raises(ValueError, match="for template 'generated_prefix' but this run uses 'instance_wise'"):
        init_prompt_from(model, exp, tok)


def test_bad_ppt_config_is_one_line(tmp_path, tiny_model_dir):  # noqa: F811
    from openprompt_ipt.pretraining.ppt import load_ppt_config, run_ppt

    path = tmp_path / "p.yaml"
    path.write_text("corpus: {pairs: 0}\n")
    with pytest.raises(ValueError, match=r"^corpus.pairs = 0 is not allowed: give an integer >= 1$"):
        load_ppt_config(str(path))
    path.write_text("train: {epochs: 2.5}\n")  # int() made it 2
    with pytest.raises(ValueError, match=r"^train.epochs = 2.5 is not allowed: give an integer >= 1$"):
        load_ppt_config(str(path))
    path.write_text("corpus: {pair: 3}\n")
    with pytest.raises(KeyError, match="did you mean 'pairs'"):
        load_ppt_config(str(path))
    cfg = ppt_cfg(tmp_path, tiny_model_dir)
    cfg["corpus"]["path"] = str(tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError, match="PPT corpus .* not found"):
        run_ppt(cfg, output_dir=str(tmp_path / "x"), show_progress=False, log=lambda *_: None)
    assert not any(p.name.startswith("x") for p in tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("pairs,least", [(1, 9), (2, 9), (8, 9)])
def test_too_few_pairs_for_three_splits_is_refused(tmp_path, pairs, least):
    """corpus.pairs of 1 or 2 became 3 pairs per split (9) without a word; refused before anything is written."""
    from openprompt_ipt.pretraining.ppt import load_ppt_config, split_sizes

    path = tmp_path / "p.yaml"
    path.write_text(f"corpus: {{pairs: {pairs}}}\n")
    with pytest.raises(ValueError, match=rf"^corpus.pairs = {pairs} is too few: the train, dev and test splits take at "
                                         rf"least 3 pairs each .*: give corpus.pairs >= {least}$"):
        load_ppt_config(str(path))
    path.write_text(f"corpus: {{pairs: {least}}}\n")
    assert sum(split_sizes(load_ppt_config(str(path))["corpus"]).values()) == least
    assert split_sizes({"pairs": 3000, "dev_fraction": 0.1, "test_fraction": 0.1}) == {"train": 2400, "dev": 300,
                                                                                     "test": 300}


def test_too_few_pairs_in_a_built_config_writes_nothing(tmp_path, tiny_model_dir):  # noqa: F811
    from openprompt_ipt.pretraining.ppt import run_ppt

    cfg = ppt_cfg(tmp_path, tiny_model_dir)
    cfg["corpus"]["pairs"] = 2
    with pytest.raises(ValueError, match=r"corpus.pairs = 2 is too few"):
        run_ppt(cfg, output_dir=str(tmp_path / "x"), show_progress=False, log=lambda *_: None)
    assert not any(p.name.startswith("x") for p in tmp_path.iterdir())


@pytest.mark.parametrize("line,what", [('["a list"]', "it is a list, not a JSON object"),
                                       ('{"title": "n", "text": 5}', "its 'text' is int, not a string")])
def test_a_corpus_line_that_is_not_an_article_is_one_line(tmp_path, line, what):
    """A JSON line that is not an object, or whose text is not a string: AttributeError / TypeError tracebacks."""
    from openprompt_ipt.pretraining.ppt import read_documents

    path = write_corpus(tmp_path / "wiki.jsonl", docs=3)
    with open(path, "a") as f:
        f.write(line + "\n")
    with pytest.raises(ValueError, match=rf"^PPT corpus '.*wiki.jsonl' line 4: {what}: write one JSON object per line "
                                         r"with the article as a string under 'text'$"):
        read_documents(path, 1, 40)
