"""init_from with ``train.vocab_rows: seen``: each run keeps the table rows of the ids its own training text uses,
so the two runs' tables have other rows; they are matched by token id, not by position."""
import copy
import json
import os

import pytest
import torch

from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)
from test_tasks import jsonl, write_task

TEXT = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'
WORDS_RTE = ("cat sat mat", "dog ran fast")  # 6 ids
WORDS_CB_SAME_COUNT = ("cat dog good", "bad music art")  # 6 ids, cat and dog shared
WORDS_CB_FEWER = ("cat dog", "movie")  # 3 ids, cat and dog shared


def write_words(root, task, words):
    """The task's tiny folder whose training text uses only ``words`` (premise, hypothesis)."""
    from openprompt_ipt.data import get_task

    write_task(root, task)
    labels = list(get_task(task, {}).labels)
    folder = root / "superglue" / task.upper()
    jsonl(folder / "train.jsonl", [{"premise": words[0], "hypothesis": words[1], "idx": i,
                                    "label": labels[i % len(labels)]} for i in range(12)])
    return str(folder)


PREFIX = {"text": TEXT, "prompt_length": 2, "generator": "ipt_random", "injection": "input",
          "ipt": {"projection_hidden": 8, "table_dim": 16}}  # the kept ids saved in the generator's section


def cfg(model_dir, path, task, rows="seen", template="instance_wise", **extra):
    from openprompt_ipt.runner.config import DEFAULTS, check_init, merge_config

    words = [["yes"], ["no"]] if task == "rte" else [["yes"], ["no"], ["maybe"]]
    raw = {"dataset": {"name": task, "path": path, "dev_from_train": 0.25},
           "plm": {"model_path": model_dir, "freeze": True, "max_seq_length": 64},
           "template": template, template: copy.deepcopy(PREFIX) if template == "generated_prefix" else
           {"text": TEXT, "strategy": "random", "prompt_length": 2},
           "soft_verbalizer": {"label_words": words},
           "train": {"epochs": 1, "batch_size": 4, "lr_prompt": 0.05, "lr_head": 0.05, "device": "cpu",
                     "vocab_rows": rows},
           "test": {"batch_size": 4}, "seed": 3, **extra}
    out = merge_config(DEFAULTS, raw, "", {template: raw[template], "soft_verbalizer": raw["soft_verbalizer"]})
    check_init(out)
    return out


def table_of(weights_or_template):
    """(name, kept ids or None) of the one vocabulary table in a template."""
    from openprompt_ipt.generators.vocab_table import VocabPromptTable

    (name, table), = [(n, m) for n, m in weights_or_template.named_modules() if isinstance(m, VocabPromptTable)]
    return f"{name}.embedding.weight", table.rows


def rows_by_id(weight, rows, ids, vocab_size):
    """The table's row of each token id (``rows``: the kept ids, or None for a table of every id)."""
    if rows is None:
        return {i: weight[i] for i in ids} | {"pad": weight[vocab_size]}
    return {i: weight[rows.index(i) + 1] for i in ids if i in rows} | {"pad": weight[len(rows) + 1]}


@pytest.fixture(scope="module")
def source(tiny_model_dir, tmp_path_factory):  # noqa: F811
    from openprompt_ipt.runner.experiment import run_experiment

    root = tmp_path_factory.mktemp("words")
    path = write_words(root, "rte", WORDS_RTE)
    runs = {}
    for rows in ("seen", "all", "prefix"):
        runs[rows] = str(root / "runs" / rows / "seed3")
        config = (cfg(tiny_model_dir, path, "rte", "seen", "generated_prefix") if rows == "prefix"
                  else cfg(tiny_model_dir, path, "rte", rows))
        run_experiment(config, output_dir=runs[rows], show_progress=False)
    return root, runs


def capture(config, out, monkeypatch):
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.training import Trainer

    seen, fit = {}, Trainer.fit

    def spy(self, *a, **k):
        seen["name"], seen["rows"] = table_of(self.model.template)
        seen["weight"] = dict(self.model.template.named_parameters())[seen["name"]].detach().clone()
        seen["vocab"] = self.model.plm.config.vocab_size
        return fit(self, *a, **k)
    monkeypatch.setattr(Trainer, "fit", spy)
    return run_experiment(config, output_dir=out, show_progress=False), seen


def source_rows(run_dir):
    from safetensors.torch import load_file

    weights = load_file(os.path.join(run_dir, "template", "template.safetensors"))
    config = json.load(open(os.path.join(run_dir, "template", "template_config.json")))
    (name, weight), = [(k, v) for k, v in weights.items() if k.endswith("table.embedding.weight")]
    return weight, config["vocab_rows"] if "vocab_rows" in config else config["ipt"]["vocab_rows"]


@pytest.mark.parametrize("words, rows_from, rows_to", [
    (WORDS_CB_SAME_COUNT, "seen", "seen"),  # as many kept ids: loaded by position, other tokens' rows (silently)
    (WORDS_CB_FEWER, "seen", "seen"),  # fewer kept ids: a shape error
    (WORDS_CB_FEWER, "all", "seen"),
    (WORDS_CB_FEWER, "seen", "all"),
    (WORDS_CB_SAME_COUNT, "prefix", "seen"),  # generated_prefix's IPT generator, a narrower table
])
def test_table_rows_are_copied_by_token_id(source, tiny_model_dir, tmp_path, monkeypatch, capsys,
                                           words, rows_from, rows_to):  # noqa: F811
    root, runs = source
    path = write_words(tmp_path, "cb", words)
    template = "generated_prefix" if rows_from == "prefix" else "instance_wise"
    result, start = capture(cfg(tiny_model_dir, path, "cb", rows_to, template, init_from=runs[rows_from]),
                            str(tmp_path / "cb"), monkeypatch)
    weight, kept = source_rows(runs[rows_from])
    mine = start["rows"]
    assert (kept is None) == (rows_from == "all") and (mine is None) == (rows_to == "all")
    vocab = start["vocab"]
    ids_here = mine if mine is not None else list(range(vocab))
    ids_there = kept if kept is not None else list(range(vocab))
    shared = sorted(set(ids_here) & set(ids_there))
    theirs = rows_by_id(weight, kept, shared, vocab)
    here = rows_by_id(start["weight"], mine, shared, vocab)
    assert shared and all(torch.equal(here[i], theirs[i]) for i in theirs), "a shared id's row is not the source's"
    fresh = sorted(set(ids_here) - set(ids_there))
    record = result["init_from"]["vocab_rows"]
    assert record["copied"] == len(shared) and record["fresh"] == len(fresh)
    assert record["not_used"] == len(set(ids_there) - set(ids_here))
    # the others start as a run without init_from does; the shared ones do not (the check above could fail)
    _, built = capture(cfg(tiny_model_dir, path, "cb", rows_to, template), str(tmp_path / "fresh"), monkeypatch)
    rows, as_built = rows_by_id(start["weight"], mine, fresh, vocab), rows_by_id(built["weight"], mine, fresh, vocab)
    assert bool(fresh) == (rows_from != "all") and all(torch.equal(rows[i], as_built[i]) for i in fresh)
    as_built = rows_by_id(built["weight"], mine, shared, vocab)
    assert any(not torch.equal(here[i], as_built[i]) for i in shared if i != "pad")
    out = capsys.readouterr().out
    assert f"vocabulary table: {len(shared)} token rows copied by id" in out
    saved = json.load(open(tmp_path / "cb" / "metrics.json"))
    assert saved["init_from"]["vocab_rows"] == record


def test_the_same_kept_ids_load_as_before(source, tiny_model_dir, tmp_path, monkeypatch):  # noqa: F811
    root, runs = source
    path = write_words(tmp_path, "cb", WORDS_RTE)
    result, start = capture(cfg(tiny_model_dir, path, "cb", "seen", init_from=runs["seen"]), str(tmp_path / "cb"),
                            monkeypatch)
    weight, kept = source_rows(runs["seen"])
    assert start["rows"] == kept and torch.equal(start["weight"], weight)
    assert "vocab_rows" not in result["init_from"]


def test_a_table_that_does_not_fit_its_kept_ids_is_refused(source, tiny_model_dir, tmp_path):  # noqa: F811
    """A template_config.json whose kept ids do not match its table's rows (edited by hand): which row is which
    token can not be told, so nothing loads and nothing is written."""
    from openprompt_ipt.runner.experiment import run_experiment

    root, runs = source
    fake = tmp_path / "fake_run"
    os.makedirs(fake / "template")
    for name in ("config.json", "metrics.json", "template/template.safetensors"):
        (fake / name).write_bytes(open(os.path.join(runs["seen"], name), "rb").read())
    saved = json.load(open(os.path.join(runs["seen"], "template", "template_config.json")))
    saved["vocab_rows"] = saved["vocab_rows"][:-1]
    (fake / "template" / "template_config.json").write_text(json.dumps(saved))
    path = write_words(tmp_path, "cb", WORDS_CB_FEWER)
    with pytest.raises(ValueError, match=r"init_from '.*fake_run': its template/generator.table.embedding.weight: the "
                                         r"saved table is \(8, 32\) but keeps 5 ids \(expected \(7, 32\)\); train "
                                         "init_from's run") as err:
        run_experiment(cfg(tiny_model_dir, path, "cb", init_from=str(fake)), output_dir=str(tmp_path / "z"),
                       show_progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "z").exists()
