"""init_from (IDPG A.4, two stages): RTE -> CB on a tiny BERT, the head rule, the refusals, accuracy.py's wiring."""
import copy
import json
import os
import sys

import pytest
import torch

from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)
from test_tasks import write_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT_RTE = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'
TEXT_CB = '{"placeholder":"text_a"} answer: {"placeholder":"text_b"} ? {"mask"} .'  # wording may differ
S_IDPG = {"prompt_length": 2, "generator": "idpg", "injection": "input",
          "idpg": {"depth": "single", "layer": "phm", "phm_n": 4, "hidden": 8}}


def cfg(model_dir, data_root, task, text, **extra):
    from openprompt_ipt.runner.config import DEFAULTS, merge_config, check_init

    words = [["yes"], ["no"]] if task == "rte" else [["yes"], ["no"], ["maybe"]]
    raw = {"dataset": {"name": task, "path": os.path.join(data_root, "superglue", task.upper()), "dev_from_train": 0.25},
           "plm": {"model_path": model_dir, "freeze": True, "max_seq_length": 64},
           "template": "generated_prefix", "generated_prefix": {"text": text, **copy.deepcopy(S_IDPG)},
           "soft_verbalizer": {"label_words": words},
           "train": {"epochs": 1, "batch_size": 4, "lr_prompt": 0.05, "lr_head": 0.05, "device": "cpu"},
           "test": {"batch_size": 4}, "seed": 3, **extra}
    out = merge_config(DEFAULTS, raw, "", {"generated_prefix": raw["generated_prefix"], "soft_verbalizer": raw["soft_verbalizer"]})
    check_init(out)
    return out


@pytest.fixture(scope="module")
def stage1(tiny_model_dir, tmp_path_factory):  # noqa: F811
    """A finished tiny RTE run (the intermediate task) and the data root holding RTE and CB."""
    from openprompt_ipt.runner.experiment import run_experiment

    root = tmp_path_factory.mktemp("assets")
    write_task(root, "rte"), write_task(root, "cb")
    out = str(root / "runs" / "stage1" / "seed3")
    run_experiment(cfg(tiny_model_dir, str(root), "rte", TEXT_RTE), output_dir=out, show_progress=False)
    return str(root), out


def saved_template(run_dir):
    from safetensors.torch import load_file

    return load_file(os.path.join(run_dir, "template", "template.safetensors"))


def run_capturing_start(config, out, monkeypatch):
    """Run ``config``; return (result, the template's and head's weights when training starts)."""
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.training import Trainer

    seen, fit = {}, Trainer.fit

    def spy(self, *a, **k):
        seen["template"] = {n: p.detach().clone() for n, p in self.model.template.named_parameters()}
        seen["head"] = {n: p.detach().clone() for n, p in self.model.verbalizer.named_parameters()}
        return fit(self, *a, **k)
    monkeypatch.setattr(Trainer, "fit", spy)
    return run_experiment(config, output_dir=out, show_progress=False), seen


def test_rte_to_cb_starts_from_stage_one_weights(stage1, tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    root, first = stage1
    stage2 = cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=os.path.join(root, "runs", "stage1", "seed{seed}"))
    result, start = run_capturing_start(stage2, str(tmp_path / "cb"), monkeypatch)
    trained = saved_template(first)
    assert trained and set(trained) <= set(start["template"])
    for name, value in trained.items():
        assert torch.equal(start["template"][name], value), name
    # a run without init_from starts elsewhere: the check above could fail
    fresh, fresh_start = run_capturing_start(cfg(tiny_model_dir, root, "cb", TEXT_CB), str(tmp_path / "fresh"), monkeypatch)
    assert any(not torch.equal(fresh_start["template"][n], v) for n, v in trained.items())
    assert result["init_from"]["run"] == first and result["init_from"]["template_tensors"] == len(trained)
    assert result["init_from"]["head"].startswith("not loaded: label sets differ")
    assert "head: not loaded" in capsys.readouterr().out
    saved = json.load(open(tmp_path / "cb" / "metrics.json"))
    assert saved["init_from"]["run"] == first and "init_from" not in fresh


def test_head_comes_along_when_the_labels_match(stage1, tiny_model_dir, tmp_path, monkeypatch):  # noqa: F811
    from safetensors.torch import load_file

    root, first = stage1
    again = cfg(tiny_model_dir, root, "rte", TEXT_CB, init_from=first)
    result, start = run_capturing_start(again, str(tmp_path / "rte2"), monkeypatch)
    best = {k[len("verbalizer."):]: v for k, v in load_file(os.path.join(first, "best.safetensors")).items()
            if k.startswith("verbalizer.")}
    assert best and all(torch.equal(start["head"][n], v) for n, v in best.items())
    assert result["init_from"]["head"].startswith("loaded")
    off = cfg(tiny_model_dir, root, "rte", TEXT_CB, init_from=first, init_head=False)
    result, start = run_capturing_start(off, str(tmp_path / "rte3"), monkeypatch)
    assert not all(torch.equal(start["head"][n], v) for n, v in best.items())
    with pytest.raises(ValueError, match="init_head: true but .* label sets differ"):
        run_capturing_start(cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=first, init_head=True),
                            str(tmp_path / "cb4"), monkeypatch)


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(template="instance_wise", instance_wise={"text": TEXT_CB, "strategy": "none"},
                        generated_prefix={}), "trained template 'generated_prefix' but this run uses 'instance_wise'"),
    (lambda c: c["generated_prefix"].update(prompt_length=3), r"generated_prefix.prompt_length is 2 there but 3 here"),
    (lambda c: c["generated_prefix"]["idpg"].update(hidden=4), r"generated_prefix.idpg.hidden is 8 there but 4 here"),
])
def test_mismatched_template_is_refused_before_training(stage1, tiny_model_dir, tmp_path, change, message):  # noqa: F811
    from openprompt_ipt.runner.experiment import run_experiment

    root, first = stage1
    c = cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=first)
    change(c)
    with pytest.raises(ValueError, match=message) as err:
        run_experiment(c, output_dir=str(tmp_path / "x"), show_progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "x").exists()


def test_other_backbone_and_missing_run_are_refused(stage1, tiny_model_dir, tmp_path):  # noqa: F811
    from transformers import BertConfig, BertForMaskedLM

    from openprompt_ipt.runner.experiment import run_experiment

    root, first = stage1
    other = tmp_path / "other"
    BertForMaskedLM(BertConfig(vocab_size=80, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32, max_position_embeddings=128)).save_pretrained(str(other))
    for name in ("vocab.txt", "tokenizer_config.json"):
        (other / name).write_text(open(os.path.join(tiny_model_dir, name)).read())
    with pytest.raises(ValueError, match="trained on backbone .* start from a run of the same backbone"):
        run_experiment(cfg(str(other), root, "cb", TEXT_CB, init_from=first), output_dir=str(tmp_path / "y"),
                       show_progress=False)
    # same name, another model (hidden / vocab size): metrics.json's backbone_shape catches it
    fake = tmp_path / "fake_run"
    os.makedirs(fake / "template")
    for name in ("config.json", "template/template.safetensors", "template/template_config.json"):
        (fake / name).write_bytes(open(os.path.join(first, name), "rb").read())
    meta = json.load(open(os.path.join(first, "metrics.json")))
    meta["backbone_shape"]["hidden_size"] = 1024
    (fake / "metrics.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="hidden_size 1024 but this one has 32"):
        run_experiment(cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=str(fake)), output_dir=str(tmp_path / "z"),
                       show_progress=False)
    with pytest.raises(FileNotFoundError, match="is not a finished run: config.json is missing"):
        run_experiment(cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=str(tmp_path)), output_dir=str(tmp_path / "w"),
                       show_progress=False)


def test_config_and_cli_take_init_from(tmp_path):
    from openprompt_ipt.runner.config import load_config

    c = load_config(os.path.join(ROOT, "yamls", "rte_to_cb", "stage2_cb_m_idpg_phm.yaml"))
    assert c["init_from"] == "runs/stage1_rte_m_idpg_phm/seed{seed}" and c["init_head"] == "auto"
    s1 = load_config(os.path.join(ROOT, "yamls", "rte_to_cb", "stage1_rte_m_idpg_phm.yaml"))
    assert s1["generated_prefix"] == c["generated_prefix"]  # the pair shares the template: stage 2 can load stage 1
    with pytest.raises(ValueError, match="init_head must be auto, true or false"):
        load_config(os.path.join(ROOT, "yamls", "rte_to_cb", "stage2_cb_m_idpg_phm.yaml"), ["init_head=maybe"])
    sys.path.insert(0, os.path.join(ROOT, "experiments"))
    import run

    args = run.build_parser().parse_args(["--config", "x.yaml", "--init-from", "runs/a/seed1"])
    assert args.init_from == "runs/a/seed1"


def test_accuracy_groups_pass_each_seed_its_stage_one_run(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import accuracy

    group = accuracy.load_group("rte_to_cb")
    out = str(tmp_path / "rte_to_cb")
    two_stage = [m for m in group["methods"] if m.get("init_from_group")]
    assert {m["init_from_group"] for m in two_stage} == {"rte_to_cb_stage1"}
    for m in two_stage:
        start = accuracy.init_dir(out, m, 4)
        stage1 = accuracy.source_method(m)
        assert start == accuracy.run_dir(str(tmp_path / "rte_to_cb_stage1"), stage1, 4)
        assert f"init_from={start}" in accuracy.command(m, 4, out, [])
    # a stage-2 run whose stage-1 run has not finished waits (no failure, nothing started)
    started = []
    monkeypatch.setattr(accuracy, "run_job", lambda *a: started.append(a) or 0)
    only = {**group, "methods": two_stage[:1], "seeds": [4]}
    assert accuracy.run_group("rte_to_cb", only, out, 1, 1, []) == [] and not started
    os.makedirs(start := accuracy.init_dir(out, two_stage[0], 4))
    open(os.path.join(start, "metrics.json"), "w").write("{}")
    accuracy.run_group("rte_to_cb", only, out, 1, 1, [])
    assert len(started) == 1
    with pytest.raises(SystemExit, match="has no method 'nope'"):
        accuracy.source_method({"label": "x", "init_from_group": "rte_to_cb_stage1", "init_from_label": "nope"})


def test_stage_one_group_keeps_what_init_from_reads(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import accuracy

    assert accuracy.load_group("rte_to_cb_stage1")["keep"] == ["template", "best.safetensors"]
    run = tmp_path / "m" / "seed1"
    os.makedirs(run / "template")
    os.makedirs(run / "checkpoints" / "step-1")
    for name in ("template/template.safetensors", "best.safetensors", "checkpoints/step-1/trainable.safetensors",
                 "metrics.json"):
        (run / name).write_text("x")
    accuracy.prune_weights(str(tmp_path), ["template", "best.safetensors"])
    assert (run / "template" / "template.safetensors").exists() and (run / "best.safetensors").exists()
    assert not (run / "checkpoints" / "step-1" / "trainable.safetensors").exists() and (run / "metrics.json").exists()
    accuracy.prune_weights(str(tmp_path))  # other groups: weights go
    assert not (run / "best.safetensors").exists() and not (run / "template" / "template.safetensors").exists()


def test_a_run_saved_with_another_tokenizer_is_refused(stage1, tiny_model_dir, tmp_path):  # noqa: F811
    """Same backbone path and shapes, but the template was saved with another vocabulary (a tokenizer swapped in the
    model folder): its table rows are indexed by token id, so the prompt would start from other rows silently."""
    from openprompt_ipt.runner.experiment import run_experiment

    root, first = stage1
    fake = tmp_path / "fake_run"
    os.makedirs(fake / "template")
    for name in ("config.json", "metrics.json", "template/template.safetensors"):
        (fake / name).write_bytes(open(os.path.join(first, name), "rb").read())
    saved = json.load(open(os.path.join(first, "template", "template_config.json")))
    saved["saved_with"]["tokenizer"]["fingerprint"] = "0" * 16
    (fake / "template" / "template_config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=r"init_from '.*fake_run': '.*template' was saved with tokenizer .* has another "
                                         "vocabulary") as err:
        run_experiment(cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=str(fake)), output_dir=str(tmp_path / "z"),
                       show_progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "z").exists()


def copy_run(first, fake, edit=None):
    """A copy of the run's files init_from reads; ``edit(state)`` changes its template weights first."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    os.makedirs(fake / "template")
    for name in ("config.json", "metrics.json", "template/template_config.json"):
        (fake / name).write_bytes(open(os.path.join(first, name), "rb").read())
    path = os.path.join(first, "template", "template.safetensors")
    with safe_open(path, "pt") as f:
        state, meta = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    (edit or (lambda s: None))(state)
    save_file(state, str(fake / "template" / "template.safetensors"), metadata=meta)
    return str(fake)


def test_a_template_file_that_lacks_a_trained_tensor_is_refused(stage1, tiny_model_dir, tmp_path):  # noqa: F811
    """A template.safetensors without one of the tensors this run's prompt trains (another release's file, an edit):
    that tensor trained from its fresh start while the log said the run started from the source's prompt."""
    from openprompt_ipt.runner.experiment import run_experiment

    root, first = stage1
    dropped = []
    fake = copy_run(first, tmp_path / "fake_run", lambda s: dropped.append(sorted(s)[0]) or s.pop(dropped[0]))
    with pytest.raises(ValueError, match=rf"init_from '.*fake_run': its template/template.safetensors lacks 1 "
                                         rf"tensor\(s\) this run's prompt trains \({dropped[0]}\): they would train "
                                         r"from a fresh start, not from that run .* --overwrite\)") as err:
        run_experiment(cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=fake), output_dir=str(tmp_path / "z"),
                       show_progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "z").exists()


SOFT_CB = '{"placeholder":"text_a"} {"soft": "answer"} {"soft"}: {"placeholder":"text_b"} ? {"mask"} .'


def test_soft_tokens_of_another_text_start_fresh_and_are_said(
        stage1, tiny_model_dir, tmp_path, monkeypatch, capsys):  # noqa: F811
    """The text may differ, and {"soft"} tokens are part of it: a stage-2 text with soft tokens the stage-1 text lacked
    starts them fresh (from their words) and says so; a stage-1 run with soft tokens into a text without them (it
    was refused: 'soft_embedding.weight is (3, H) but the module expects (1, H)') leaves them out and says so.
    Every other tensor still starts from the source."""
    from openprompt_ipt.runner.experiment import run_experiment

    root, first = stage1
    result, start = run_capturing_start(cfg(tiny_model_dir, root, "cb", SOFT_CB, init_from=first),
                                        str(tmp_path / "soft"), monkeypatch)
    trained = saved_template(first)
    assert "soft_embedding.weight" not in trained and start["template"]["soft_embedding.weight"].shape[0] == 3
    assert all(torch.equal(start["template"][n], v) for n, v in trained.items())
    assert result["init_from"]["fresh"] == ["soft_embedding.weight"] and result["init_from"]["not_used"] == []
    out = capsys.readouterr().out
    assert "fresh (this text's {\"soft\"} tokens, not that run's): soft_embedding.weight" in out
    # the other way: a stage-1 run with soft tokens, a stage-2 text without
    soft_first = str(tmp_path / "soft_stage1" / "seed3")
    run_experiment(cfg(tiny_model_dir, root, "rte", SOFT_CB), output_dir=soft_first, show_progress=False)
    assert saved_template(soft_first)["soft_embedding.weight"].shape[0] == 3
    result, start = run_capturing_start(cfg(tiny_model_dir, root, "cb", TEXT_CB, init_from=soft_first),
                                        str(tmp_path / "plain"), monkeypatch)
    assert result["init_from"]["fresh"] == [] and result["init_from"]["not_used"] == ["soft_embedding.weight"]
    kept = {n: v for n, v in saved_template(soft_first).items() if not n.startswith("soft_embedding.")}
    assert kept and all(torch.equal(start["template"][n], v) for n, v in kept.items())
    assert "not used (that run's {\"soft\"} tokens): soft_embedding.weight" in capsys.readouterr().out


def test_a_head_file_that_lacks_a_trained_tensor_is_refused(stage1, tiny_model_dir, tmp_path):  # noqa: F811
    """Labels match, so the head comes along: a best.safetensors without one of the head's tensors loaded the rest
    and said 'loaded', the missing one training from its fresh start."""
    from safetensors.torch import load_file, save_file

    from openprompt_ipt.runner.experiment import run_experiment

    root, first = stage1
    fake = copy_run(first, tmp_path / "fake_run")
    best = load_file(os.path.join(first, "best.safetensors"))
    head = sorted(k for k in best if k.startswith("verbalizer."))
    assert len(head) > 1
    del best[head[-1]]
    save_file(best, os.path.join(fake, "best.safetensors"))
    with pytest.raises(ValueError, match=rf"init_from '.*fake_run': its best.safetensors lacks 1 head tensor\(s\) this "
                                         rf"run's verbalizer trains \({head[-1]}\): train init_from's run") as err:
        run_experiment(cfg(tiny_model_dir, root, "rte", TEXT_CB, init_from=fake), output_dir=str(tmp_path / "z"),
                       show_progress=False)
    assert "\n" not in str(err.value) and not (tmp_path / "z").exists()
    # init_head: false does not read it
    run_experiment(cfg(tiny_model_dir, root, "rte", TEXT_CB, init_from=fake, init_head=False),
                   output_dir=str(tmp_path / "w"), show_progress=False)
