"""Peer methods (issue #22): Adapter and Compacter through AdapterHub `adapters`, LoRA through PEFT, run
by our runner from a `peer:` section. The library tests skip without the `peers` extra (its own venv:
`adapters` pins transformers 4.57); the bad-input tests run everywhere."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest
import torch
import yaml

from openprompt_ipt.runner.config import load_config
from openprompt_ipt.runner.peers import INSTALL, build_peer, check_peer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIBRARY = {"adapter": "adapters", "compacter": "adapters", "lora": "peft"}
# closed form on the tiny BERT (hidden 32, 2 layers) with the YAML defaults m = 16, n = 4, r = 8
TINY_COUNTS = {
    "adapter": (32 * 16 + 16 + 16 * 32 + 32) * 2 * 2,  # down W+b, up W+b; after attention and FFN
    "compacter": (32 + 16 + 16 + 16 + 32 + 32) * 2 * 2 + 4 ** 3,  # s, t, bias down/up per module; one shared A
    "lora": (32 * 8 + 8 * 32) * 2 * 2,  # A and B on query and value
}


def _cfg(tmp_path, peer, template=None):
    from conftest import _bert
    from test_training import write_cb

    model, _ = _bert(str(tmp_path))
    model.save_pretrained(str(tmp_path / "bert"))
    text = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'
    cfg = {"dataset": {"name": "cb", "path": write_cb(tmp_path / "CB"), "dev_from_train": 0.25},
           "plm": {"model_path": str(tmp_path / "bert"), "freeze": True, "max_seq_length": 32},
           "template": "instance_wise",
           "instance_wise": template or {"text": text, "strategy": "none", "task_prompt_length": 0},
           "peer": peer, "verbalizer": "soft_verbalizer",
           "soft_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]},
           "train": {"epochs": 2, "batch_size": 4, "lr_prompt": 0.01, "lr_head": 0.01, "device": "cpu",
                     "checkpoint_every": 0},
           "test": {"batch_size": 4}, "seed": 3}
    path = tmp_path / "tiny_peer.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_unknown_peer_method_and_key_are_one_line(tmp_path):
    path = tmp_path / "p.yaml"
    for peer, match in (({"method": "prefix"}, "unknown peer method 'prefix': choose one of adapter, compacter, lora"),
                        ({"method": "lora", "rank": 4}, r"unknown key 'peer.rank' for method lora: valid: alpha, r, "),
                        ({"method": "adapter", "architecture": "x"}, "choose one of houlsby, pfeiffer"),
                        ("adapter", "peer: must be a mapping with a method")):
        path.write_text(yaml.safe_dump({"dataset": {"name": "cb"}, "peer": peer}))
        with pytest.raises(ValueError, match=match) as err:
            load_config(str(path))
        assert "\n" not in str(err.value)
    cfg = load_config(os.path.join(ROOT, "yamls", "cb_compacter.yaml"))  # defaults filled in, libraries not imported
    assert cfg["peer"] == {"method": "compacter", "bottleneck": 16, "phm_dim": 4, "architecture": "compacter",
                           "shared_phm_rule": True, "non_linearity": None}
    from openprompt_ipt.runner.experiment import paper_method_name

    assert [paper_method_name(load_config(os.path.join(ROOT, "yamls", f"rte_{m}.yaml"))) for m in LIBRARY] == \
        ["Adapter", "Compacter", "LoRA"]


@pytest.mark.parametrize("method", ["adapter", "lora"])
def test_missing_library_names_the_install_command(tmp_path, monkeypatch, capsys, method):
    """Runs in every venv: with the library hidden, the run stops with one line naming the extra, before
    any backbone loads or anything is written."""
    monkeypatch.setitem(sys.modules, LIBRARY[method], None)  # import of it raises ImportError
    path = _cfg(tmp_path, {"method": method})
    with pytest.raises(ImportError) as err:
        build_peer(load_config(path), [], 3)
    assert str(err.value) == f"the peer methods need the {LIBRARY[method]!r} package: {INSTALL}"
    sys.path.insert(0, os.path.join(ROOT, "experiments"))
    import run as run_py

    out = tmp_path / "out"
    capsys.readouterr()
    assert run_py.main(["--config", path, "--output-dir", str(out), "--quiet", "--data-root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"error: the peer methods need the {LIBRARY[method]!r} package: {INSTALL}"
    assert not any(f.endswith("metrics.json") for _, _, fs in os.walk(out) for f in fs)


@pytest.mark.parametrize("method", ["adapter", "compacter", "lora"])
def test_peer_trains_only_its_modules_through_our_runner(tmp_path, method):
    pytest.importorskip(LIBRARY[method])
    from openprompt_ipt.runner.experiment import build_model, run_experiment
    from openprompt_ipt.data.prepare import load_task
    from openprompt_ipt.training.optim import build_optimizers

    cfg = load_config(_cfg(tmp_path, {"method": method}))
    train, _, _, labels = load_task(cfg, str(tmp_path))
    model, _, _ = build_peer(cfg, train, len(labels), labels)
    peer = {id(p) for p in model.template.peer.parameters()}
    assert sum(p.numel() for p in model.template.peer.parameters()) == TINY_COUNTS[method]
    (opt,) = build_optimizers(model, lr_prompt=0.01, lr_head=0.02, lr_plm=0.03)
    groups = {g["lr"]: {id(p) for p in g["params"]} for g in opt.param_groups}
    assert groups.keys() == {0.01, 0.02} and groups[0.01] == peer  # the peer is the method group; no PLM group
    assert groups[0.02] == {id(p) for p in model.verbalizer.parameters() if p.requires_grad}
    # the same head as our methods' rows get
    plain, _, _ = build_model(dict(cfg, peer=None), train, len(labels), labels)
    assert {n: p.shape for n, p in plain.verbalizer.named_parameters()} == \
        {n: p.shape for n, p in model.verbalizer.named_parameters()}

    out = tmp_path / "run"
    result = run_experiment(cfg, output_dir=str(out), show_progress=False)
    assert result["method"] == {"adapter": "Adapter", "compacter": "Compacter", "lora": "LoRA"}[method]
    assert result["trainable"] == {"prompt": TINY_COUNTS[method], "head": result["trainable"]["head"], "plm": 0}
    assert json.loads((out / "config.json").read_text())["peer"]["method"] == method
    # best.safetensors holds the peer's weights and the head, nothing of the frozen backbone
    from safetensors.torch import load_file

    saved = load_file(str(out / "best.safetensors"))
    assert sum(v.numel() for k, v in saved.items() if k.startswith("template.peer.")) == TINY_COUNTS[method]
    assert all(k.startswith(("template.peer.", "verbalizer.")) for k in saved)


@pytest.mark.parametrize("method", ["adapter", "lora"])
def test_peer_changes_the_output_and_the_backbone_stays_put(tmp_path, method):
    """One optimizer step moves the peer's weights and the logits; the backbone's own weights do not move."""
    pytest.importorskip(LIBRARY[method])
    from openprompt_ipt.data import encode_examples, make_loader
    from openprompt_ipt.data.prepare import load_task
    from openprompt_ipt.training.optim import build_optimizers

    cfg = load_config(_cfg(tmp_path, {"method": method}))
    train, _, _, labels = load_task(cfg, str(tmp_path))
    model, tokenizer, wrapper_class = build_peer(cfg, train, len(labels), labels)
    wrapper = wrapper_class(max_seq_length=32, tokenizer=tokenizer, truncate_method="balanced")
    batch = next(iter(make_loader(encode_examples(train, model.template, wrapper, desc="t"), 4, 0)))
    frozen = {n: p.detach().clone() for n, p in model.prompt_model.plm.named_parameters() if not p.requires_grad}
    peer = [p.detach().clone() for p in model.template.peer.parameters()]
    model.train()
    before = model(dict(batch)).detach()  # the template rewrites the batch it gets
    (opt,) = build_optimizers(model, lr_prompt=0.05, lr_head=0.0)
    torch.nn.functional.cross_entropy(model(dict(batch)), batch["label"]).backward()
    opt.step()
    assert any(not torch.equal(a, b) for a, b in zip(peer, model.template.peer.parameters()))
    assert all(torch.equal(frozen[n], p) for n, p in model.prompt_model.plm.named_parameters() if n in frozen)
    assert not torch.allclose(before, model(dict(batch)).detach())


def test_peer_refuses_a_prompt_template_and_a_trainable_backbone(tmp_path):
    pytest.importorskip("peft")
    text = '{"placeholder":"text_a"} {"placeholder":"text_b"} ? {"mask"} .'
    cfg = load_config(_cfg(tmp_path, {"method": "lora"}, {"text": text, "strategy": "none", "task_prompt_length": 4}))
    with pytest.raises(ValueError, match="runs on a prompt-free template: set .*task_prompt_length: 0"):
        build_peer(cfg, [], 3, ["a", "b", "c"])
    cfg = load_config(_cfg(tmp_path, {"method": "lora"}))
    with pytest.raises(ValueError, match="set plm.freeze: true"):
        build_peer(dict(cfg, plm=dict(cfg["plm"], freeze=False)), [], 3)


def test_bottleneck_that_does_not_divide_the_hidden_size_is_refused(tmp_path):
    pytest.importorskip("adapters")
    from openprompt_ipt.data.prepare import load_task

    cfg = load_config(_cfg(tmp_path, {"method": "compacter", "phm_dim": 3}))
    train, _, _, labels = load_task(cfg, str(tmp_path))
    with pytest.raises(ValueError, match="peer.phm_dim 3 must divide the hidden size 32 and the bottleneck 16"):
        build_peer(cfg, train, len(labels), labels)


def test_param_counts_adapter_rows_match_idpg_a12():
    """IDPG A.1.2 on roberta-large: Adapter 1,622,784 ("1.55M") exactly; Compacter 152,832 ("149.25K") by
    the paper's sum, 149,824 in the real modules: the shared A_i counted once, not once per module."""
    pytest.importorskip("adapters")
    spec = importlib.util.spec_from_file_location("param_counts", os.path.join(ROOT, "benchmarks", "param_counts.py"))
    pc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pc)
    counts = pc.peer_counts("roberta-large")
    assert sum(counts["adapter"].values()) == 1_622_784 == sum(n for _, n in pc.ADAPTER_A12)
    assert pc.kilo(1_622_784) == "1.55M" and pc.kilo(sum(n for _, n in pc.COMPACTER_A12)) == "149.25K"
    paper = dict(pc.COMPACTER_A12)
    assert {t: counts["compacter"][t] - paper[t] for t in paper if counts["compacter"][t] != paper[t]} == \
        {"shared A_i": 64 - 3072}
    assert sum(counts["compacter"].values()) == 149_824
    text = "\n".join(pc.peer_lines(counts))
    assert "| **Adapter** | **total** | **1,622,784 (1.55M)** | **1,622,784 (1.55M)** | **+0** |" in text
    assert "**149,824 (146.31K)** | **152,832 (149.25K)** | **-3,008**" in text


def test_efficiency_benchmark_times_the_peers_on_their_own_backbone_copies(tmp_path):
    """The peers' rows in benchmarks/efficiency.py: each library modifies a copy of the backbone, so the
    methods built beside them (Prompt Tuning here) keep an unmodified one."""
    pytest.importorskip("adapters")
    pytest.importorskip("peft")
    from conftest import _bert

    model, _ = _bert(str(tmp_path))
    model.save_pretrained(str(tmp_path / "bert"))
    spec = importlib.util.spec_from_file_location("efficiency", os.path.join(ROOT, "benchmarks", "efficiency.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "perf.md"
    names = "Prompt Tuning,Adapter,Compacter,LoRA"
    assert bench.main(["--backbone", str(tmp_path / "bert"), "--batch-size", "2", "--seq-len", "24", "--rounds", "1",
                       "--steps", "1", "--no-memory", "--methods", names, "--data-root", str(tmp_path / "none"),
                       "--output", str(out)]) == 0
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.read_text().splitlines()
            if line.startswith("| ")}
    for name, method in (("Adapter", "adapter"), ("Compacter", "compacter"), ("LoRA", "lora")):
        assert rows[name][1] == f"{TINY_COUNTS[method]:,}"
    assert rows["Prompt Tuning"][1] == "640"  # 20 x 32: no adapter leaked into the shared backbone


def test_a_peer_run_resumes_from_its_checkpoint(tmp_path):
    """A run cut off after epoch 1 continues from that checkpoint (the peer's weights load by name) and
    ends where the uninterrupted run ended."""
    pytest.importorskip("peft")
    import shutil

    from openprompt_ipt.runner.experiment import run_experiment

    cfg = load_config(_cfg(tmp_path, {"method": "lora"}), ["train.keep_checkpoints=5"])
    out = tmp_path / "run"
    full = run_experiment(cfg, output_dir=str(out), show_progress=False)
    steps = sorted(d for d in os.listdir(out / "checkpoints") if d.startswith("step-"))
    assert len(steps) == 2  # one per epoch
    shutil.rmtree(out / "checkpoints" / steps[1])  # the run "died" during epoch 2
    (out / "checkpoints" / "latest").write_text(steps[0])
    os.remove(out / "metrics.json")
    resumed = run_experiment(cfg, output_dir=str(out), show_progress=False, resume=True)
    assert resumed["training"]["resumed_from_step"] == int(steps[0].split("-")[1])
    assert resumed["test"] == full["test"] and resumed["best_dev"] == full["best_dev"]


def test_accuracy_study_refuses_peer_rows_without_their_library(tmp_path, monkeypatch):
    """Without the peers extra, `accuracy.py --group cb_peer_family` stops with one line before any run."""
    monkeypatch.setitem(sys.modules, "adapters", None)
    spec = importlib.util.spec_from_file_location("accuracy", os.path.join(ROOT, "benchmarks", "accuracy.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    started = []
    monkeypatch.setattr(bench, "run_job", lambda *a: started.append(a) or 0)
    with pytest.raises(SystemExit) as err:
        bench.main(["--group", "cb_peer_family", "--out", str(tmp_path / "g"), "--docs", str(tmp_path / "docs")])
    assert str(err.value) == f"error: Adapter: the peer methods need the 'adapters' package: {INSTALL}"
    assert started == [] and not (tmp_path / "docs").exists()


@pytest.mark.parametrize("method", ["lora", "adapter"])
def test_predict_rebuilds_a_peer_run_with_its_trained_modules(tmp_path, method):
    """`openprompt-ipt predict` on an Adapter / LoRA run puts the library's modules back and loads their trained
    weights (it stopped at "has weights this module lacks: ['template.peer.0...']"); the run says how."""
    pytest.importorskip(LIBRARY[method])
    from safetensors.torch import load_file

    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run
    from openprompt_ipt.training.logs import format_summary

    cfg = load_config(_cfg(tmp_path, {"method": method}))
    out = tmp_path / "run"
    result = run_experiment(cfg, output_dir=str(out), show_progress=False)
    predictor = load_run(str(out))
    own = dict(predictor.model.named_parameters())
    saved = load_file(str(out / "best.safetensors"))
    assert sum(v.numel() for k, v in saved.items() if k.startswith("template.peer.")) == TINY_COUNTS[method]
    assert all(torch.equal(own[k], v) for k, v in saved.items())
    with open(tmp_path / "CB" / "val.jsonl") as f:  # the run's test split (the official val)
        rows = [json.loads(line) for line in f]
    predicted = [p["label"] for p in predictor.predict(rows)]
    assert sum(p == r["label"] for p, r in zip(predicted, rows)) / len(rows) == result["test"]["accuracy"]
    assert f"predict: openprompt-ipt predict --run {out} --input FILE.jsonl" in format_summary(result, str(out))


def test_predict_refuses_a_peft_run_in_one_line(tmp_path, capsys):
    """A PEFT run of benchmarks/peft_run.py (its model lives in benchmarks/): one line, not a weights error."""
    pytest.importorskip("peft")
    spec = importlib.util.spec_from_file_location("peft_run", os.path.join(ROOT, "benchmarks", "peft_run.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    from test_benchmarks import _peft_cfg

    from openprompt_ipt.commands.predict import main as predict
    from openprompt_ipt.training.logs import format_summary

    out = tmp_path / "runs"
    assert runner.main(["--peft", "prompt", "--config", _peft_cfg(tmp_path, "instance_wise"), "--output-dir",
                        str(out), "--quiet"]) == 0
    run = out / "tiny_peft" / "seed3"
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"premise": "the cat sat", "hypothesis": "it sat"}) + "\n")
    capsys.readouterr()
    assert predict(["--run", str(run), "--input", str(rows)]) == 2
    assert capsys.readouterr().err == (f"error: '{run}' is a peft peer run (benchmarks/peft_run.py): predict loads "
                                       "the runs of openprompt-ipt run / experiments/run.py only\n")
    assert "predict:" not in format_summary(json.loads((run / "metrics.json").read_text()), str(run))


def test_peer_option_values_are_checked_when_the_config_loads(tmp_path):
    """One LoRA target named alone is a list of one (it was split into its letters: "Target modules {'q', 'u',
    ...} not found"); a non-list, an empty list, a quoted "maybe" for a flag: one line naming the key."""
    path = tmp_path / "p.yaml"

    def peer(section):
        path.write_text(yaml.safe_dump({"dataset": {"name": "cb"}, "peer": section}))
        return load_config(str(path))["peer"]

    assert peer({"method": "lora", "target_modules": "query"})["target_modules"] == ["query"]
    for section, match in (({"method": "lora", "target_modules": []}, r"peer.target_modules = \[\] is not allowed"),
                           ({"method": "lora", "target_modules": 5}, "peer.target_modules = 5 is not allowed"),
                           ({"method": "lora", "target_modules": ["query", 3]}, "give module names, e.g. "),
                           ({"method": "compacter", "shared_phm_rule": "maybe"},
                            "peer.shared_phm_rule = 'maybe' is not allowed: give true or false")):
        with pytest.raises(ValueError, match=match) as err:
            peer(section)
        assert "\n" not in str(err.value)


def test_lora_on_one_named_module_and_an_unknown_adapter_activation(tmp_path):
    pytest.importorskip("peft")
    pytest.importorskip("adapters")
    from openprompt_ipt.data.prepare import load_task

    cfg = load_config(_cfg(tmp_path, {"method": "lora", "target_modules": "query"}))
    train, _, _, labels = load_task(cfg, str(tmp_path))
    model, _, _ = build_peer(cfg, train, len(labels), labels)
    assert sum(p.numel() for p in model.template.peer.parameters()) == TINY_COUNTS["lora"] // 2  # query only
    for bad in ("foo", ""):
        cfg = load_config(_cfg(tmp_path, {"method": "adapter", "non_linearity": bad}))
        with pytest.raises(ValueError, match=f"peer.non_linearity '{bad}' is unknown: choose one of .*relu") as err:
            build_peer(cfg, train, len(labels), labels)
        assert "\n" not in str(err.value)
    cfg = load_config(_cfg(tmp_path, {"method": "adapter", "non_linearity": "ReLU"}))  # adapters lower-cases it
    build_peer(cfg, train, len(labels), labels)


@pytest.mark.parametrize("frozen_dropout", [False, True])
def test_peft_peer_keeps_the_frozen_dropout_of_the_rows_it_is_compared_with(tmp_path, frozen_dropout):
    """plm.frozen_dropout (the idpg_table1 YAMLs: the authors' dropout in the frozen PLM) reaches the PEFT peer
    as it reaches our rows from the same YAML; the peer ran without dropout whatever the YAML said."""
    pytest.importorskip("peft")
    spec = importlib.util.spec_from_file_location("peft_run", os.path.join(ROOT, "benchmarks", "peft_run.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    from test_benchmarks import _peft_cfg

    from openprompt_ipt.data.prepare import load_task
    from openprompt_ipt.runner.experiment import build_model

    cfg = load_config(_peft_cfg(tmp_path, "instance_wise"), [f"plm.frozen_dropout={str(frozen_dropout).lower()}"])
    train, _, _, labels = load_task(cfg, str(tmp_path))
    ours, _, _ = build_model(cfg, train, len(labels), labels)
    peer, _, _ = runner.build_peer(dict(cfg, peer=runner.peer_settings(cfg, "prompt", "sample_vocab")), train,
                                   len(labels), labels)
    for model in (ours, peer):
        model.train()
        assert {m.training for m in model.plm.modules() if isinstance(m, torch.nn.Dropout)} == {frozen_dropout}


def test_adapter_run_prints_no_false_none_activated_warning(tmp_path, caplog):
    """adapters' "none are activated for the forward pass" came from its own reset while switching the adapter
    on, before training: a reader took it for an Adapter row trained without its adapter."""
    pytest.importorskip("adapters")
    from openprompt_ipt.data.prepare import load_task

    cfg = load_config(_cfg(tmp_path, {"method": "adapter"}))
    train, _, _, labels = load_task(cfg, str(tmp_path))
    with caplog.at_level("WARNING"):
        model, _, _ = build_peer(cfg, train, len(labels), labels)
    assert not [r for r in caplog.records if "none are activated" in r.getMessage()]
    assert str(model.prompt_model.plm.active_adapters) == "Stack[peer]"
    import logging

    assert logging.getLogger("adapters.model_mixin").level == logging.NOTSET  # left as it was


def test_init_from_a_peer_run_copies_its_modules_and_head(tmp_path):
    """Two-stage runs (IDPG A.4) for a peer: init_from a finished LoRA run copies its LoRA weights and head (it
    said the run was "not a finished run: template/template.safetensors is missing"); another peer, one line."""
    pytest.importorskip("peft")
    from safetensors.torch import load_file

    from openprompt_ipt.data.prepare import load_task
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.init_from import init_from_run

    cfg = load_config(_cfg(tmp_path, {"method": "lora"}))
    source = tmp_path / "stage1"
    run_experiment(cfg, output_dir=str(source), show_progress=False)
    saved = load_file(str(source / "best.safetensors"))
    train, _, _, labels = load_task(cfg, str(tmp_path))
    model, _, _ = build_peer(cfg, train, len(labels), labels)
    info = init_from_run(model, dict(cfg, init_from=str(source)), labels, log=lambda line: None)
    own = dict(model.named_parameters())
    assert info["template_tensors"] == sum(k.startswith("template.peer.") for k in saved) > 0
    assert info["head"].startswith("loaded") and all(torch.equal(own[k], v) for k, v in saved.items())
    other = load_config(_cfg(tmp_path, {"method": "lora", "r": 4}))
    with pytest.raises(ValueError, match=r"trained peer .*'r': 8.* but this run has peer .*'r': 4.*same peer method"):
        init_from_run(build_peer(other, train, len(labels), labels)[0], dict(other, init_from=str(source)), labels)
