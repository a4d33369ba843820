"""The efficiency benchmark runs end to end on a tiny local checkpoint (numbers come from real runs, in docs/)."""
import importlib.util
import json
import os

import conftest
import torch


def _load(name):
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_checkpoint(tmp_path):
    """A tiny random BERT saved as a local checkpoint the benchmarks load as their backbone."""
    model, _ = conftest._bert(str(tmp_path))
    model.save_pretrained(str(tmp_path / "bert"))
    return tmp_path / "bert"


def test_efficiency_benchmark_smoke(tmp_path, capsys):
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    methods = "Prompt Tuning,PT + Random IPT,P-tuning v2,M-IDPG-PHM (cached [CLS]),M-IDPG-PHM (hidden injection)"
    peft = importlib.util.find_spec("peft") is not None
    if peft:  # the peer, through the shared benchmarks/peft_peer.py
        methods += ",PEFT prompt tuning,PEFT prefix tuning"
    out = tmp_path / "perf.md"
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--rounds", "1", "--steps", "1",
                     "--no-memory", "--methods", methods, "--data-root", str(tmp_path / "no-data"),
                     "--output", str(out)])
    assert rc == 0
    table = out.read_text()
    for name in methods.split(","):
        assert f"| {name} |" in table
    assert "| Prompt Tuning | 640 |" in table  # 20 x 32 trainable prompt values
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table.splitlines() if line.startswith("| ")}
    assert rows["method"][4:6] == ["GFLOP / step", "× PT FLOPs"]
    assert rows["Prompt Tuning"][5] == "1.000" and float(rows["Prompt Tuning"][4]) > 0
    assert "vocab tables sparse" in table.splitlines()[0]  # the runner's path, said in the header
    # same 20 prompt positions, and a table lookup is no matmul: Random IPT does Prompt Tuning's work
    assert abs(float(rows["PT + Random IPT"][5]) - 1.0) < 0.02
    if peft:
        assert "| PEFT prompt tuning | 640 |" in table
    assert json.loads((tmp_path / "perf.json").read_text())["flops"]  # the numbers beside the report


def test_a_benchmark_report_already_there_is_kept_unless_overwrite(tmp_path, capsys):
    """efficiency / step_profile / hf_door_vs_peft / param_counts --output replaced an earlier measurement (another
    machine's, a quiet one's) without a word, after minutes of timing; param_counts wrote in place (half a table after
    a kill). Each now refuses in one line naming the file and --overwrite before any work, and writes atomically."""
    report = tmp_path / "report.md"
    report.write_text("an earlier measurement\n")
    (tmp_path / "report.json").write_text("{}")
    line = f"error: --output: '{report}' already exists: --overwrite replaces it, or give another --output"
    none = str(tmp_path / "no-backbone")  # refused before it is looked for: no work starts
    for name, argv in (("efficiency", ["--device", "cpu", "--backbone", none]), ("step_profile", ["--backbone", none]),
                       ("hf_door_vs_peft", ["--backbone", none]), ("param_counts", ["--architecture", "no-such"])):
        bench = _load(name)
        assert bench.main(argv + ["--output", str(report)]) == 2, name
        assert capsys.readouterr().err.strip().splitlines() == [line], name
    json_only = tmp_path / "new.md"
    (tmp_path / "new.json").write_text("{}")  # efficiency's numbers of an earlier report: kept with it
    assert _load("efficiency").main(["--device", "cpu", "--backbone", none, "--output", str(json_only)]) == 2
    assert f"'{tmp_path / 'new.json'}' already exists" in capsys.readouterr().err
    assert report.read_text() == "an earlier measurement\n" and sorted(os.listdir(tmp_path)) == \
        ["new.json", "report.json", "report.md"]


def test_efficiency_benchmark_bf16_autocast_runs_every_kind_of_injection(tmp_path, monkeypatch):
    from helpers import cpu_without_bf16_lstm

    cpu_without_bf16_lstm(monkeypatch)  # the same on every CPU: as if oneDNN had no bf16 LSTM (AVX2-only)
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    seen = []
    real = bench.autocast
    monkeypatch.setattr(bench, "autocast", lambda args: seen.append(args.mixed_precision) or real(args))
    methods = "Prompt Tuning,PT + Encoder IPT (RNN),M-IDPG-PHM (cached [CLS]),M-IDPG-PHM (hidden injection)"
    out = tmp_path / "perf.md"
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--rounds", "1", "--steps", "1",
                     "--no-memory", "--methods", methods, "--data-root", str(tmp_path / "no-data"),
                     "--mixed-precision", "bf16", "--output", str(out)])
    assert rc == 0 and seen and set(seen) == {"bf16"}
    table = out.read_text()
    assert "mixed precision bf16" in table.splitlines()[0]
    for name in methods.split(","):
        assert f"| {name} |" in table


def test_efficiency_methods_train_their_whole_head_whatever_the_build_order(tmp_path):
    """Methods share one backbone; a method built after another froze it still trains its whole
    SoftVerbalizer head (a deep copy of the PLM's), and fine-tuning still trains the PLM."""
    import argparse
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    names = ["Prompt Tuning", "PT + Random IPT", "Fine-tuning"]
    args = argparse.Namespace(backbone=str(ckpt), batch_size=2, seq_len=24, device="cpu", keep_mlm_head=False,
                              data_root=str(tmp_path / "no-data"))
    runs, _, _ = bench.prepare(args, names)
    heads = {n: {k: p.requires_grad for k, p in runs[n][0].verbalizer.head.named_parameters()} for n in names}
    for n in names:
        assert heads[n] and all(heads[n].values()), (n, heads[n])
        assert heads[n] == heads["Prompt Tuning"]
    assert all(p.requires_grad for p in runs["Fine-tuning"][0].plm.parameters())
    assert not any(p.requires_grad for p in runs["PT + Random IPT"][0].plm.parameters())

def test_efficiency_trains_vocab_tables_as_the_runner_does_unless_told_dense(tmp_path):
    """The runner switches vocab tables to sparse rows (RowSparseAdam: moments for looked-up rows only); the
    benchmark measures that by default, and the constructors' dense default (a stock AdamW with moments for
    every row) with --tables dense. A benchmark that silently measured the dense path overstated IPT's cost."""
    import argparse
    from openprompt_ipt.training.row_sparse_adam import RowSparseAdam
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    kinds = {}
    for tables in ("sparse", "dense"):
        args = argparse.Namespace(backbone=str(ckpt), batch_size=2, seq_len=24, device="cpu", keep_mlm_head=False,
                                  data_root=str(tmp_path / "no-data"), tables=tables)
        runs, _, _ = bench.prepare(args, ["PT + Random IPT", "Prefix + Random IPT"])
        kinds[tables] = {n: sorted(type(o).__name__ for o in opts) for n, (_, _, opts) in runs.items()}
        for n, (m, batch, opts) in runs.items():
            bench.step_fn(m, opts, batch, batch["label"])()  # one step trains on either path
    assert kinds["sparse"] == {n: ["AdamW", RowSparseAdam.__name__] for n in kinds["sparse"]}
    assert kinds["dense"] == {n: ["AdamW"] for n in kinds["dense"]}


def _fake_run(root, bench, method, seed, acc, prompt=100):
    d = bench.run_dir(str(root), method, seed)
    os.makedirs(d)
    rec = {"metrics": ["accuracy", "macro_f1"], "trainable": {"prompt": prompt, "head": 3, "plm": 0},
           "best_dev": {"accuracy": 0.5}, "test": {"accuracy": acc, "macro_f1": acc / 2}, "seconds": 1.0}
    with open(os.path.join(d, "metrics.json"), "w") as f:
        import json
        json.dump(rec, f)


def test_accuracy_study_table_from_finished_runs(tmp_path):
    """The study table reads per-seed metrics.json, gives mean ± std and judges each row against its base."""
    bench = _load("accuracy")
    group = {"title": "T", "task": "cb", "seeds": [1, 2], "paper_source": "P",
             "methods": [{"label": "Base", "yaml": "yamls/a.yaml", "paper": 70.0},
                         {"label": "Better", "yaml": "yamls/b.yaml", "base": "Base"},
                         {"label": "Worse", "yaml": "yamls/c.yaml", "base": "Base"},
                         {"label": "Missing", "yaml": "yamls/d.yaml", "base": "Base"}]}
    for seed, (a, b, c) in zip([1, 2], [(0.5, 0.6, 0.4), (0.7, 0.8, 0.5)]):
        _fake_run(tmp_path, bench, group["methods"][0], seed, a)
        _fake_run(tmp_path, bench, group["methods"][1], seed, b)
        _fake_run(tmp_path, bench, group["methods"][2], seed, c)
    rows = bench.collect(group, str(tmp_path))
    assert [r["n"] for r in rows] == [2, 2, 2, 0]
    md = bench.report("g", group, rows, "cmd")["g.md"]
    lines = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert "60.0 ± 14.1" in lines["Base"] and "70.0" in lines["Base"]
    assert "+10.0 | met" in lines["Better"]
    assert "-15.0 | missed" in lines["Worse"]
    assert "| – |" in lines["Missing"] and "met" not in lines["Missing"]
    # a finished (method, seed) is never rerun: the job list only holds what is missing
    assert [(m["label"], s) for m, s in bench.pending(group, str(tmp_path))] == [("Missing", 1), ("Missing", 2)]
    # another group reuses the finished "Base" runs instead of redoing them
    other = {"title": "U", "task": "cb", "seeds": [1, 2], "paper_source": "P",
             "methods": [dict(group["methods"][0], from_group=tmp_path.name)]}
    out = os.path.join(os.path.dirname(str(tmp_path)), "other_group")
    assert bench.pending(other, out) == [] and bench.collect(other, out)[0]["n"] == 2
    # ... under a label of its own (from_label names the row there): "before / after a fix" tables
    renamed = {**other, "methods": [dict(group["methods"][0], label="Base (before)", from_group=tmp_path.name,
                                         from_label="Base")]}
    assert bench.pending(renamed, out) == [] and bench.collect(renamed, out)[0]["n"] == 2


def test_accuracy_table_of_a_partial_group_claims_no_spread_and_no_verdict(tmp_path):
    """One seed so far: no "± 0.0" (there is no spread) and no met/missed (one run decides nothing)."""
    bench = _load("accuracy")
    group = {"title": "T", "task": "cb", "seeds": [1, 2], "paper_source": "P",
             "methods": [{"label": "Base", "yaml": "yamls/a.yaml"}, {"label": "IPT", "yaml": "yamls/b.yaml", "base": "Base"}]}
    _fake_run(tmp_path, bench, group["methods"][0], 1, 0.55)
    _fake_run(tmp_path, bench, group["methods"][1], 1, 0.50)
    md = bench.report("g", group, bench.collect(group, str(tmp_path)), "cmd")["g.md"]
    lines = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert "| 55.0 |" in lines["Base"] and "±" not in lines["Base"]
    assert "-5.0 | n = 1" in lines["IPT"] and "missed" not in lines["IPT"]


def test_accuracy_runner_builds_peer_command_and_rejects_unknown(tmp_path):
    """A `runner:` method runs benchmarks/peft_run.py with run.py's options, into the same layout."""
    import pytest

    bench = _load("accuracy")
    method = {"label": "PEFT prompt tuning", "yaml": "yamls/cb_prompt_tuning.yaml", "runner": "peft_prompt"}
    cmd = bench.command(method, 3, str(tmp_path), ["train.epochs=1"])
    assert cmd[1].endswith(os.path.join("benchmarks", "peft_run.py")) and cmd[2:4] == ["--peft", "prompt"]
    assert cmd[cmd.index("--output-dir") + 1] == os.path.join(str(tmp_path), "peft_prompt_tuning")
    assert cmd[-2:] == ["--set", "train.epochs=1"] and "--quiet" in cmd and cmd[cmd.index("--seeds") + 1] == "3"
    plain = bench.command(dict(method, runner=None), 3, str(tmp_path), [])
    assert plain[1].endswith(os.path.join("experiments", "run.py")) and "--peft" not in plain
    assert "--resume" not in cmd and "--resume" not in plain
    groups = tmp_path / "groups.yaml"
    groups.write_text("g:\n  title: T\n  seeds: [1]\n  methods:\n    - {label: A, yaml: a.yaml, runner: nope}\n")
    with pytest.raises(SystemExit, match="unknown runner 'nope'"):
        bench.load_group("g", str(groups))
    for name in ("cb_pt_family", "cb_prefix_family"):  # the study's own groups load with their peer rows
        assert any(m.get("runner") for m in bench.load_group(name)["methods"])


def test_every_shipped_accuracy_group_loads_and_its_yamls_fit_its_task():
    """A typo in a group (a missing YAML, a base that is no method, a YAML of another task) would only
    show up hours into a study: every group of accuracy_groups.yaml is checked here."""
    import yaml

    from openprompt_ipt.runner.config import load_config

    bench = _load("accuracy")
    with open(bench.GROUPS_FILE) as f:
        names = list(yaml.safe_load(f))
    assert {"rte_pt_family", "rte_prefix_family", "rte_idpg_family"} <= set(names)
    for name in names:
        group = bench.load_group(name)
        for m in group["methods"]:
            path = os.path.join(bench.ROOT, m["yaml"])
            assert os.path.isfile(path), (name, m["yaml"])
            assert load_config(path)["dataset"]["name"] == group["task"], (name, m["yaml"])


def test_accuracy_group_set_applies_to_every_method(tmp_path):
    """A group's `set:` (e.g. the few-shot protocol) reaches every run, before the method's own overrides;
    reusing another group's runs (made without it) is refused."""
    import pytest

    bench = _load("accuracy")
    groups = tmp_path / "groups.yaml"
    groups.write_text("g:\n  title: T\n  seeds: [1]\n  paper_source: P\n  set: [protocol.name=few_shot, train.epochs=30]\n"
                      "  methods:\n    - {label: A, yaml: a.yaml}\n    - {label: B, yaml: b.yaml, set: [train.epochs=5]}\n"
                      "h:\n  title: T\n  seeds: [1]\n  set: [train.epochs=30]\n  methods:\n    - {label: A, yaml: a.yaml, from_group: g}\n")
    group = bench.load_group("g", str(groups))
    a, b = (bench.command(m, 1, str(tmp_path), []) for m in group["methods"])
    sets = lambda cmd: [cmd[i + 1] for i, c in enumerate(cmd) if c == "--set"]  # noqa: E731
    assert sets(a) == ["protocol.name=few_shot", "train.epochs=30"]
    assert sets(b) == ["protocol.name=few_shot", "train.epochs=30", "train.epochs=5"]  # the method's own wins
    md = bench.report("g", group, bench.collect(group, str(tmp_path)), "cmd")["g.md"]
    assert "--set protocol.name=few_shot --set train.epochs=30" in md  # the table says how its runs differ
    with pytest.raises(SystemExit, match="from_group reuses runs made without"):
        bench.load_group("h", str(groups))
    for name in ("cb_few_shot", "rte_few_shot", "sst2_table5", "agnews_table5", "imdb_table5"):
        assert all("protocol.name=few_shot" in m["set"] or "dataset.max_train=1000" in m["set"]
                   for m in bench.load_group(name)["methods"])


def _peft_cfg(tmp_path, template):
    import yaml

    from conftest import _bert
    from test_training import write_cb

    model, _ = _bert(str(tmp_path))
    model.save_pretrained(str(tmp_path / "bert"))
    text = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'
    section = ({"text": text, "strategy": "none", "task_prompt_length": 5} if template == "instance_wise" else
               {"text": text, "prompt_length": 4, "generator": "prefix", "prefix": {"reparameterize": True,
                                                                                     "reparam_hidden": 8}})
    cfg = {"dataset": {"name": "cb", "path": write_cb(tmp_path / "CB"), "dev_from_train": 0.25},
           "plm": {"model_path": str(tmp_path / "bert"), "freeze": True, "max_seq_length": 32},
           "template": template, template: section, "verbalizer": "soft_verbalizer",
           "soft_verbalizer": {"label_words": [["yes"], ["no"], ["maybe"]]},
           "train": {"epochs": 1, "batch_size": 4, "lr_prompt": 0.01, "lr_head": 0.01, "device": "cpu"},
           "test": {"batch_size": 4}, "seed": 3}
    path = tmp_path / "tiny_peft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_peft_run_writes_study_metrics(tmp_path):
    """peft_run trains PEFT through our loop and writes what the study table reads."""
    import json

    import pytest

    pytest.importorskip("peft")
    runner, bench = _load("peft_run"), _load("accuracy")
    for kind, template in (("prompt", "instance_wise"), ("prefix", "generated_prefix")):
        config = _peft_cfg(tmp_path / kind, template)
        out = tmp_path / "runs" / kind
        assert runner.main(["--peft", kind, "--config", config, "--seeds", "1", "--output-dir", str(out), "--quiet"]) == 0
        seed_dir = out / "tiny_peft" / "seed1"
        rec = json.loads((seed_dir / "metrics.json").read_text())
        assert rec["method"] == f"PEFT {kind} tuning" and rec["trainable"]["plm"] == 0 and rec["trainable"]["head"] > 0
        assert len(rec["history"]) == 1 and (seed_dir / "config.json").exists() and (seed_dir / "log.csv").exists()
        assert json.loads((seed_dir / "config.json").read_text())["peer"]["kind"] == kind
        if kind == "prompt":
            assert rec["trainable"]["prompt"] == 5 * 32  # num_virtual_tokens x hidden
        else:  # PEFT's prefix MLP: embedding (4 x 32) + 32 -> 8 -> 2 layers x 2 x 32
            assert rec["trainable"]["prompt"] == 4 * 32 + (32 * 8 + 8) + (8 * 2 * 2 * 32 + 2 * 2 * 32)
        # the study's table reads it like any other run
        method = {"label": f"PEFT {kind} tuning", "yaml": config, "runner": f"peft_{kind}"}
        group = {"title": "T", "seeds": [1], "paper_source": "-", "methods": [method]}
        row = bench.collect(group, str(out.parent / "study"))[0]
        assert row["n"] == 0  # nothing there yet: the same layout is what makes it count below
        os.makedirs(os.path.dirname(bench.run_dir(str(out.parent / "study"), method, 1)))
        os.rename(str(seed_dir), bench.run_dir(str(out.parent / "study"), method, 1))
        row = bench.collect(group, str(out.parent / "study"))[0]
        assert row["n"] == 1 and row["prompt_params"] == rec["trainable"]["prompt"]
        assert "PEFT" in bench.report("g", group, [row], "cmd")["g.md"]


def test_step_profile_counts_ops_and_splits_work_from_overhead(tmp_path):
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("step_profile")
    assert bench.is_work("aten::addmm") and bench.is_work("aten::_scaled_dot_product_flash_attention_for_cpu")
    assert not bench.is_work("aten::gelu") and not bench.is_work("aten::copy_")
    out = tmp_path / "profile.md"
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--rounds", "4",
                     "--methods", "Prompt Tuning,Fine-tuning", "--data-root", str(tmp_path / "no-data"),
                     "--output", str(out)])
    assert rc == 0
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| method")}
    pt, ft = rows["Prompt Tuning"], rows["Fine-tuning"]
    assert int(pt[2]) > 100 and float(pt[6].split()[0]) == 1.0
    # the per-round ratio comes with its interquartile range, lower end <= median <= upper end
    med, iqr = ft[6].split(" ", 1)
    lo, hi = (float(x) for x in iqr.strip("()").split("–"))
    assert lo <= float(med) <= hi and pt[6] == "1.000 (1.000–1.000)"
    # fine-tuning updates every PLM weight: many more optimizer ops than Prompt Tuning's one table + head
    assert int(ft[2]) > int(pt[2])
    try:
        bench.main(["--methods", "No Such Method"])
        raise AssertionError("unknown method accepted")
    except SystemExit as e:
        assert "unknown method" in str(e)


def test_accuracy_continues_a_run_cut_off_mid_way(tmp_path):
    """A run directory holding a checkpoint but no metrics.json (the process was killed) is resumed."""
    from test_checkpoints import _bert_factory, tiny_run

    bench = _load("accuracy")
    method = {"label": "Random IPT", "yaml": "yamls/cb_random_ipt.yaml"}
    run = bench.run_dir(str(tmp_path / "g"), method, 2)
    assert "--resume" not in bench.command(method, 2, str(tmp_path / "g"), [])
    tiny_run(_bert_factory(str(tmp_path / "tiny")), run, epochs=1)  # leaves checkpoints/ and no metrics.json
    cmd = bench.command(method, 2, str(tmp_path / "g"), [])
    assert cmd[-1] == "--resume" and cmd[cmd.index("--output-dir") + 1] == os.path.dirname(os.path.dirname(run))


def test_accuracy_stop_after_starts_no_run_past_the_deadline(tmp_path, monkeypatch, capsys):
    """--stop-after: runs due after the deadline are not started (and are not failures); without it,
    every pending run starts."""
    bench = _load("accuracy")
    group = {"title": "T", "task": "cb", "seeds": [1, 2], "paper_source": "P",
             "methods": [{"label": "A", "yaml": "yamls/cb_prompt_tuning.yaml", "set": []}]}
    started = []
    monkeypatch.setattr(bench, "run_job", lambda cmd, log, threads: started.append(cmd) or 0)
    assert bench.run_group("g", group, str(tmp_path), 1, 1, [], stop_after=0) == []
    assert started == [] and "2 runs not started" in capsys.readouterr().out
    assert bench.run_group("g", group, str(tmp_path), 1, 1, []) == []
    assert [c[c.index("--seeds") + 1] for c in started] == ["1", "2"]


def test_plot_groups_draws_the_tables_and_refuses_a_missing_one(tmp_path, capsys):
    bench = _load("plot_groups")
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "agnews_table5.csv").write_text(
        "method,prompt_params,test_acc_mean,test_acc_std,test_macro_f1_mean,dev_acc_mean,delta_vs_base,paper,n\n"
        "Random IPT,10,0.84,0.01,0.84,0.86,,86.2,5\nPretrained IPT,10,0.85,0.02,0.85,0.86,+1.0,86.9,5\n")
    out = tmp_path / "plot.png"
    assert bench.main(["--groups", "agnews_table5", "--tables", str(tables), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = tmp_path / "none.png"
    assert bench.main(["--groups", "agnews_table5", "imdb_table5", "--tables", str(tables), "--out", str(missing)]) == 2
    assert "accuracy.py --group imdb_table5" in capsys.readouterr().err and not missing.exists()
    # a figure already there (another set of groups) was replaced without a word: kept unless --overwrite
    out.write_bytes(b"theirs")
    assert bench.main(["--groups", "agnews_table5", "--tables", str(tables), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out: '{out}' already exists: --overwrite replaces it, or give another --out"]
    assert out.read_bytes() == b"theirs"
    assert bench.main(["--groups", "agnews_table5", "--tables", str(tables), "--out", str(out), "--overwrite"]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


def _sweep_point(root, name, seed, point, cfg_iw, acc, template="instance_wise"):
    d = root / name / f"seed{seed}" / point
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "level": "sweep_point", "method": "PT + Pretrained IPT" if cfg_iw.get("strategy") != "none" else "Prompt Tuning",
        "dataset": "cb", "selection_metric": "accuracy", "metrics": ["accuracy"], "test": {"accuracy": acc},
        "seed": seed, "config_name": name, "sweep_point": {"x": point}}))
    (d / "config.json").write_text(json.dumps({"template": template, "instance_wise": cfg_iw}))


def test_plot_prompt_length_puts_both_sweeps_on_prompt_positions(tmp_path, capsys):
    bench = _load("plot_prompt_length")
    for seed, (a, b) in enumerate([(0.60, 0.70), (0.64, 0.74)], start=1):
        _sweep_point(tmp_path, "ipt", seed, "prompt_length=5",
                     {"strategy": "pretrained", "task_prompt_length": 4, "prompt_length": 5}, a)
        _sweep_point(tmp_path, "ipt", seed, "prompt_length=10",
                     {"strategy": "pretrained", "task_prompt_length": 4, "prompt_length": 10}, b)
        _sweep_point(tmp_path, "pt", seed, "task_prompt_length=9",
                     {"strategy": "none", "task_prompt_length": 9, "prompt_length": 16}, 0.5)
    out = tmp_path / "docs" / "fig"
    assert bench.main([str(tmp_path / "ipt"), str(tmp_path / "pt"), "--out", str(out)]) == 0
    md = (tmp_path / "docs" / "fig.md").read_text()
    assert "| series | 9 | 14 |" in md  # IPT's 4 + L and PT's task vectors land on one axis
    assert "| PT + Pretrained IPT | 62.0 ± 2.8 (n=2) | 72.0 ± 2.8 (n=2) |" in md
    assert "| Prompt Tuning | 50.0 ± 0.0 (n=2) | - |" in md
    assert "| PT + Pretrained IPT − Prompt Tuning | +12.0 | - |" in md
    assert (tmp_path / "docs" / "fig.png").read_bytes()[:4] == b"\x89PNG"
    # a run of another template cannot be placed on the axis: one line, nothing written
    _sweep_point(tmp_path, "soft", 1, "p=1", {}, 0.5, template="soft")
    bad = tmp_path / "bad"
    assert bench.main([str(tmp_path / "soft"), "--out", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not an instance_wise run" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.md").exists() and not (tmp_path / "bad.png").exists()
    # the same --out again (another pair of sweeps' figure there): kept unless --overwrite, before any run is read
    (tmp_path / "docs" / "fig.md").write_text("theirs")
    assert bench.main([str(tmp_path / "no-sweep"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out: '{out}.md' already exists: --overwrite replaces it, or give another --out"]
    assert (tmp_path / "docs" / "fig.md").read_text() == "theirs"
    assert bench.main([str(tmp_path / "ipt"), str(tmp_path / "pt"), "--out", str(out), "--overwrite"]) == 0
    assert "| series | 9 | 14 |" in (tmp_path / "docs" / "fig.md").read_text()


def test_accuracy_resumes_a_run_killed_before_its_first_checkpoint_and_overwrite_clears_the_group(tmp_path):
    """A run directory with no checkpoint and no metrics.json (killed early) would be refused by run.py
    without --resume; the group passes --resume (which then says there was nothing to resume).
    --overwrite removes the group's own runs, never a from_group row's."""
    bench = _load("accuracy")
    out = str(tmp_path / "g")
    method = {"label": "Random IPT", "yaml": "yamls/cb_random_ipt.yaml"}
    borrowed = {"label": "PT", "yaml": "yamls/cb_prompt_tuning.yaml", "from_group": "other"}
    run = bench.run_dir(out, method, 2)
    os.makedirs(run)
    open(os.path.join(run, "log.csv"), "w").write("step,epoch,name,value\n")
    assert bench.command(method, 2, out, [])[-1] == "--resume"
    done = bench.run_dir(out, method, 1)
    os.makedirs(done)
    open(os.path.join(done, "metrics.json"), "w").write("{}")
    other = bench.run_dir(out, borrowed, 1)
    os.makedirs(other)
    open(os.path.join(other, "metrics.json"), "w").write("{}")
    group = {"methods": [method, borrowed], "seeds": [1, 2]}
    assert [s for _, s in bench.pending(group, out)] == [2, 2]
    assert bench.clear_group(group, out) == 2
    assert not os.path.exists(run) and not os.path.exists(done) and os.path.isfile(os.path.join(other, "metrics.json"))


def test_paired_ratios_take_each_rounds_median_and_count_the_rounds_at_or_below_one():
    bench = _load("efficiency")
    # 4 rounds x 3 steps; round 2 is slow for both (machine load): a per-round ratio does not care
    ours = [1.0, 1.1, 0.9, 2.0, 2.2, 1.8, 1.0, 1.0, 1.0, 0.95, 0.95, 0.95]
    peft = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0]
    lines = bench.paired_ratios({"P-tuning v2": ours, "PEFT prefix tuning": peft, "Prompt Tuning": ours}, steps=3)
    row = next(line for line in lines if line.startswith("| P-tuning v2 / PEFT prefix tuning |"))
    # per-round ratios 1.0, 1.0, 1.111, 0.95 -> median 1.0, three of four at or below 1.0
    assert "| 1.000 (IQR" in row and row.endswith("| 3 of 4 |")
    assert not any("Prompt Tuning / PEFT prompt tuning" in line for line in lines)  # its peer was not timed
    assert bench.paired_ratios({"P-tuning v2": ours}, steps=3) == []


def test_accuracy_methods_option_runs_only_the_named_rows(tmp_path, monkeypatch, capsys):
    """``--methods "A;B"``: only those rows start now; an unknown label is refused, naming the group's labels."""
    import pytest

    bench = _load("accuracy")
    seen = {}

    def fake_run_group(name, group, out, *args):
        seen["labels"] = [m["label"] for m in group["methods"]]
        return []

    monkeypatch.setattr(bench, "run_group", fake_run_group)
    out = str(tmp_path / "out")
    bench.main(["--group", "h33_screen_mr", "--methods", "Prompt Tuning (t = 4); PT + Random IPT (table frozen)",
                "--out", out, "--docs", str(tmp_path / "docs")])
    assert seen["labels"] == ["Prompt Tuning (t = 4)", "PT + Random IPT (table frozen)"]
    with pytest.raises(SystemExit):
        bench.main(["--group", "h33_screen_mr", "--methods", "Prompt Tunning", "--out", out])
    assert "'Prompt Tunning'] not among group h33_screen_mr's methods" in capsys.readouterr().err


def test_within_one_std_verdict_for_issue_33_groups(tmp_path):
    """``verdict: within_one_std``: a row meets the bar when it is at most one std (the larger of its own and its
    base's) below its base."""
    bench = _load("accuracy")
    group = {"title": "T", "task": "mr", "seeds": [1, 2], "paper_source": "none", "verdict": "within_one_std",
             "methods": [{"label": "Base", "yaml": "yamls/a.yaml"},
                         {"label": "Close", "yaml": "yamls/b.yaml", "base": "Base"},
                         {"label": "Far", "yaml": "yamls/c.yaml", "base": "Base"}]}
    # Base 0.70 / 0.74 (std 2.8); Close 0.68 / 0.70 (-3.0, std 1.4); Far 0.60 / 0.62 (-11.0)
    for seed, accs in zip([1, 2], [(0.70, 0.68, 0.60), (0.74, 0.70, 0.62)]):
        for m, a in zip(group["methods"], accs):
            _fake_run(tmp_path, bench, m, seed, a)
    md = bench.report("g", group, bench.collect(group, str(tmp_path)), "cmd")["g.md"]
    lines = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert "-3.0 | missed (≥ −2.8)" in lines["Close"]
    assert "-11.0 | missed (≥ −2.8)" in lines["Far"]
    _fake_run(tmp_path / "b", bench, group["methods"][0], 1, 0.70)
    _fake_run(tmp_path / "b", bench, group["methods"][0], 2, 0.76)
    _fake_run(tmp_path / "b", bench, group["methods"][1], 1, 0.68)
    _fake_run(tmp_path / "b", bench, group["methods"][1], 2, 0.70)
    md = bench.report("g", group, bench.collect(group, str(tmp_path / "b")), "cmd")["g.md"]
    assert "-4.0 | met (≥ −4.2)" in md


def test_accuracy_table_headline_is_the_groups_score(tmp_path):
    """A GLUE group (``score: pearson_spearman``, STS-B) reports, compares and lists per seed its own metric,
    not accuracy (a regression run has none); an unknown score is refused by name."""
    import pytest
    import yaml

    bench = _load("accuracy")
    group = {"title": "T", "task": "stsb", "seeds": [1, 2], "paper_source": "P", "score": "pearson_spearman",
             "methods": [{"label": "Base", "yaml": "yamls/a.yaml"}, {"label": "IDPG", "yaml": "yamls/b.yaml", "base": "Base"}]}
    for m, seed, (p, s) in [(0, 1, (0.70, 0.80)), (0, 2, (0.72, 0.82)), (1, 1, (0.80, 0.90)), (1, 2, (0.84, 0.86))]:
        d = bench.run_dir(str(tmp_path), group["methods"][m], seed)
        os.makedirs(d)
        test = {"pearson": p, "spearman": s, "pearson_spearman": (p + s) / 2, "mse": 0.1}
        with open(os.path.join(d, "metrics.json"), "w") as f:
            json.dump({"metrics": ["pearson", "spearman", "pearson_spearman", "mse"], "trainable": {"prompt": 10, "plm": 0},
                       "best_dev": {"pearson_spearman": 0.5}, "test": test, "seconds": 1.0}, f)
    out = bench.report("g", group, bench.collect(group, str(tmp_path)), "cmd")
    lines = [line.split(" | ") for line in out["g.md"].splitlines() if line.startswith("| ")]
    head, rows = lines[0], {cells[0].strip("| "): cells for cells in lines[1:]}
    assert head[2] == "test pearson_spearman (mean ± std)" and "test pearson" in head and "test pearson_spearman" not in head[3:]
    assert rows["Base"][2] == "76.0 ± 1.4"          # (0.75, 0.77): mean 76.0, sample std 1.4
    assert rows["IDPG"][2] == "85.0 ± 0.0"          # (0.85, 0.85)
    assert "+9.0" in rows["IDPG"] and "met" in " ".join(rows["IDPG"])
    assert "75.0 77.0" in rows["Base"]              # per-seed column is the score too
    assert out["g.csv"].splitlines()[0].startswith("method,prompt_params,test_pearson_spearman_mean,test_pearson_spearman_std")
    groups = tmp_path / "groups.yaml"
    groups.write_text(yaml.safe_dump({"bad": dict(group, score="pearson_spearmen")}))
    with pytest.raises(SystemExit, match="score 'pearson_spearmen' is not a metric"):
        bench.load_group("bad", str(groups))


def test_saved_for_backward_counts_what_the_late_prompt_stops(tmp_path):
    """--activations-only: LPT builds no graph below its layer, so autograd saves less for the backward than Prompt
    Tuning's (whose graph runs to the input); the counting is real (both rows > 0) and excludes parameters."""
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    out = tmp_path / "act.md"
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--activations-only",
                     "--methods", "Prompt Tuning,LPT-NPG,Fine-tuning", "--data-root", str(tmp_path / "no-data"),
                     "--late-layer", "1", "--output", str(out)])
    assert rc == 0
    saved = json.loads((tmp_path / "act.json").read_text())["saved_for_backward_mb"]
    assert 0 < saved["LPT-NPG"] < saved["Prompt Tuning"]
    report = json.loads((tmp_path / "act.json").read_text())
    weights, state = report["resident_mb"]["Prompt Tuning"]
    assert weights > 0 and 0 < state < weights  # the prompt and head train; the backbone is frozen
    ft_weights, ft_state = report["resident_mb"]["Fine-tuning"]
    assert abs(ft_state - 3 * ft_weights) < 0.05 * ft_weights  # every weight trains: its grad and two moments
    assert "| Prompt Tuning |" in out.read_text() and "| 1.00 |" in out.read_text()


def test_memory_only_measures_each_method_in_its_own_process(tmp_path):
    """--memory-only: each method is built and trained in a fresh process; the report holds what was in use before
    the first step and the measured peak, which cannot be below it, for every method asked for."""
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    out = tmp_path / "mem.md"
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--memory-only", "--threads", "1",
                     "--methods", "Prompt Tuning,LPT-NPG", "--data-root", str(tmp_path / "no-data"),
                     "--late-layer", "1", "--output", str(out)])
    assert rc == 0
    report = json.loads((tmp_path / "mem.json").read_text())
    for name in ("Prompt Tuning", "LPT-NPG"):
        before, peak = report["before_first_step_mb"][name], report["peak_mb"][name]
        assert 0 < before <= peak and report["rise_mb"][name] == peak - before
    assert "| LPT-NPG |" in out.read_text() and "peak RSS MB" in out.read_text()


def test_memory_only_names_a_failed_method_and_writes_no_table_of_nans(tmp_path, capsys):
    """A method whose process fails is a "failed" row, not NaNs; when every one fails, nothing is written; and
    --device cuda where torch sees no GPU is one line, before any work."""
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    common = ["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--memory-only", "--threads", "1",
              "--data-root", str(tmp_path / "no-data")]
    out = tmp_path / "mem.md"
    # the tiny BERT has 2 layers: a late layer of 5 fails the late row's build, Prompt Tuning's does not use it
    rc = bench.main(common + ["--methods", "Prompt Tuning,LPT-NPG", "--late-layer", "5", "--output", str(out)])
    assert rc == 1
    assert "| LPT-NPG | failed |" in out.read_text() and "Failed (" in out.read_text()
    assert json.loads((tmp_path / "mem.json").read_text())["failed"] == ["LPT-NPG"]
    out2 = tmp_path / "none.md"
    assert bench.main(common + ["--methods", "LPT-NPG", "--late-layer", "5", "--output", str(out2)]) == 1
    assert not out2.exists() and "Nothing written" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert bench.main(common + ["--device", "cuda", "--output", str(out2)]) == 2
        assert "--device = 'cuda' but this machine has no CUDA GPU" in capsys.readouterr().err and not out2.exists()
    assert bench.main(common + ["--device", "gpu", "--output", str(out2)]) == 2  # torch's RuntimeError was a traceback
    assert "--device = 'gpu' is not a device: give auto, cpu" in capsys.readouterr().err and not out2.exists()


def test_accuracy_seeds_that_are_not_integers_are_a_usage_line(tmp_path, capsys):
    """`--seeds a` was a ValueError traceback from int(); now argparse's one line, as run.py's --seeds."""
    import pytest

    bench = _load("accuracy")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--group", "cb_pt_family", "--seeds", "1,a", "--report-only", "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert "--seeds must be comma-separated integers, got '1,a'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--group", "cb_pt_family", "--seeds", "1,99", "--out", str(tmp_path)])
    assert "--seeds 1,99: [99] not among group cb_pt_family's seeds" in capsys.readouterr().err


def _recorded_run(bench, out, method, seed, acc, extra=(), **changes):
    """A finished run whose config.json is what ``--set extra`` built, then ``changes`` ('train.device': 'cuda')."""
    from openprompt_ipt.runner.config import load_config

    _fake_run(out, bench, method, seed, acc)
    cfg = json.loads(json.dumps(load_config(os.path.join(bench.ROOT, method["yaml"]), list(extra)), default=str))
    cfg["seed"] = seed
    for key, value in changes.items():
        *sections, leaf = key.split(".")
        node = cfg
        for s in sections:
            node = node.setdefault(s, {})
        node[leaf] = value
    d = bench.run_dir(str(out), method, seed)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    metrics = json.load(open(os.path.join(d, "metrics.json")))
    metrics["backbone_shape"] = {"hidden_size": 384, "vocab_size": 30522}  # what the runner records (MiniLM)
    json.dump(metrics, open(os.path.join(d, "metrics.json"), "w"))


def test_accuracy_never_takes_runs_made_with_other_settings_as_this_commands(tmp_path, monkeypatch, capsys):
    """A smoke run (--set train.epochs=1) then the study without it: the 1-epoch runs were skipped as finished and
    reported as the study, under the second command's header. Now the study is refused (exit 2, one line naming
    the runs and keys, nothing started); the table's header states what the runs were made with; a row mixing
    settings is marked. A GPU run, a local copy of the backbone (also one since removed), a key only the recorded
    config has (renamed since) are the same settings."""
    bench = _load("accuracy")
    m = {"label": "PT", "yaml": "yamls/cb_prompt_tuning.yaml", "set": []}
    group = {"title": "T", "task": "cb", "seeds": [1, 2], "paper_source": "P", "methods": [m]}
    monkeypatch.setattr(bench, "load_group", lambda name: group)
    started = []
    monkeypatch.setattr(bench, "run_job", lambda cmd, log, threads: started.append(cmd) or 0)
    out, docs = tmp_path / "g", tmp_path / "docs"
    args = ["--group", "g", "--out", str(out), "--docs", str(docs)]
    for seed in (1, 2):
        _recorded_run(bench, out, m, seed, 0.5, ["train.epochs=1"])
    assert bench.main(args) == 2
    err = capsys.readouterr().err
    assert "error: group g: 2 finished runs were made with other settings than this command's" in err
    assert "PT seeds 1, 2 (train.epochs 1 → 8)" in err and "--overwrite" in err
    assert started == [] and not docs.exists()
    # the same --set: theirs; the header says how they were made, also when regenerated without it
    assert bench.main(args + ["--set", "train.epochs=1"]) == 0 and started == []
    for extra in ([], ["--set", "train.epochs=1"]):
        assert bench.main(args + ["--report-only"] + extra) == 0
        md = (docs / "g.md").read_text()
        assert "--group g --workers 2 --set train.epochs=1`" in md and "†" not in md
    assert "note: group g: 2 finished runs were made with other settings" in capsys.readouterr().out
    # one seed redone as the group defines it: the row mixes settings, and says which seed was made how
    import shutil

    shutil.rmtree(bench.run_dir(str(out), m, 1))
    _recorded_run(bench, out, m, 1, 0.5)
    assert bench.main(args + ["--report-only"]) == 0
    md = (docs / "g.md").read_text()
    assert "--group g --workers 2`" in md and "| PT † |" in md
    assert "PT seed 2 (train.epochs 1 → 8)" in md.splitlines()[-1]
    assert "PT seed 2 (train.epochs 1 → 8)" in (docs / "g.csv").read_text()
    # how and where it ran is no difference: a GPU, a local copy of the backbone (same weights), a key
    # the recorded config has and this release has not (renamed), a key added since that holds its default
    copy = tmp_path / "minilm_copy"
    copy.mkdir()
    from openprompt_ipt import backbone_path
    shutil.copy(os.path.join(backbone_path("minilm"), "config.json"), copy / "config.json")
    os.symlink(os.path.join(backbone_path("minilm"), "model.safetensors"), copy / "model.safetensors")
    for seed, path in ((1, str(copy)), (2, "minilm")):
        shutil.rmtree(bench.run_dir(str(out), m, seed))
        _recorded_run(bench, out, m, seed, 0.5, **{"train.device": "cuda", "plm.model_path": path,
                                                    "instance_wise.old_name": True})
    assert bench.main(args) == 0 and started == []
    md = (docs / "g.md").read_text()
    assert "--group g --workers 2`" in md and "†" not in md
    # ... but another backbone is
    shutil.rmtree(bench.run_dir(str(out), m, 2))
    _recorded_run(bench, out, m, 2, 0.5, **{"plm.model_path": "bert-base-uncased"})
    assert bench.main(args) == 2
    assert "PT seed 2 (plm.model_path bert-base-uncased → minilm)" in capsys.readouterr().err
    # ... and so is a local folder since removed (fp16-rounded weights, say): it cannot be checked
    shutil.rmtree(bench.run_dir(str(out), m, 2))
    _recorded_run(bench, out, m, 2, 0.5, **{"plm.model_path": "/gone/minilm16"})
    assert bench.main(args) == 2
    assert "PT seed 2 (plm.model_path /gone/minilm16 → minilm)" in capsys.readouterr().err


def test_accuracy_trial_run_elsewhere_never_replaces_the_committed_table(tmp_path, monkeypatch, capsys):
    """`--out /tmp/try` wrote docs/results/<group>.md of the repo (--docs defaulted to it whatever --out was):
    a trial replaced the committed table. Now the table goes to the --out folder; with the default --out (or an
    explicit --docs) to where it did."""
    bench = _load("accuracy")
    m = {"label": "PT", "yaml": "yamls/cb_prompt_tuning.yaml", "set": []}
    group = {"title": "T", "task": "cb", "seeds": [1], "paper_source": "P", "methods": [m]}
    monkeypatch.setattr(bench, "load_group", lambda name: group)
    repo = tmp_path / "repo"  # stands for the clone: its docs/results holds the committed table
    monkeypatch.setattr(bench, "ROOT", str(repo))
    committed = repo / "docs" / "results" / "g.md"
    committed.parent.mkdir(parents=True)
    committed.write_text("the committed table\n")
    trial = tmp_path / "try"
    _fake_run(trial, bench, m, 1, 0.5)
    assert bench.main(["--group", "g", "--out", str(trial), "--report-only"]) == 0
    assert committed.read_text() == "the committed table\n"
    assert "| PT |" in (trial / "g.md").read_text() and (trial / "g.csv").exists()
    assert f"wrote {trial / 'g.md'}" in capsys.readouterr().out
    _fake_run(repo / "results" / "accuracy" / "g", bench, m, 1, 0.7)  # the study's own folder: its table is the repo's
    assert bench.main(["--group", "g", "--report-only"]) == 0
    assert "| PT |" in committed.read_text() and "70.0" in committed.read_text()
    assert bench.main(["--group", "g", "--out", str(trial), "--report-only", "--docs", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "g.md").exists()


def test_accuracy_tells_a_local_backbone_with_other_weights_apart(tmp_path):
    """A local copy of the backbone is the same backbone; the fp16-rounded copy the GPU studies use
    (prepare_device_carry.sh --local) has the same shape but other weights: it was taken as the same, and a
    table made on it dropped the --set that says so."""
    bench = _load("accuracy")
    shape = {"model_type": "bert", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 16, "vocab_size": 30}
    folders = {}
    for name, weights in (("a", b"one"), ("copy", b"one"), ("rounded", b"two")):
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "config.json").write_text(json.dumps(shape))
        (folders[name] / "model.safetensors").write_bytes(weights)
    assert bench.same_backbone(str(folders["a"]), str(folders["copy"]))
    assert not bench.same_backbone(str(folders["a"]), str(folders["rounded"]))
    assert bench.result_differences({"plm": {"model_path": str(folders["rounded"])}},
                                    {"plm": {"model_path": str(folders["a"])}})


def test_inference_speed_of_cached_idpg_pays_the_cls_pass_unseen_examples_pay(tmp_path, monkeypatch):
    """Inference is timed on the batch the training steps ran: M-IDPG's cache of M(x) held every row, so the cached
    row's ex/s left out the [CLS] pass of the PLM that each unseen example needs. Every eval forward now runs it."""
    from openprompt_ipt.generators.sentence import PLMClsEncoder

    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    eval_passes = []
    real = PLMClsEncoder.forward

    def counting(self, *a, **k):
        before = self.passes
        out = real(self, *a, **k)
        if not self.training:  # the inference loop's forwards (training steps run in train mode)
            eval_passes.append(self.passes - before)
        return out
    monkeypatch.setattr(PLMClsEncoder, "forward", counting)
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--rounds", "1", "--steps", "2",
                     "--no-memory", "--methods", "M-IDPG-PHM (cached [CLS])", "--data-root", str(tmp_path / "no-data")])
    assert rc == 0
    assert eval_passes == [2, 2, 2]  # warm-up + 2 timed forwards, each a PLM pass over both rows


def test_efficiency_report_says_the_command_that_made_it(tmp_path):
    """A committed table must say how it was made: the report's last line is the command, quoted so that pasting it
    back gives the same arguments (method names hold spaces and brackets), and the JSON beside it carries it too."""
    import shlex

    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    out = tmp_path / "act.md"
    argv = ["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--activations-only",
            "--methods", "Prompt Tuning,M-IDPG-PHM (cached [CLS])", "--data-root", str(tmp_path / "no-data"),
            "--output", str(out)]
    assert bench.main(argv) == 0
    last = out.read_text().strip().splitlines()[-1]
    assert last.startswith("Command: `") and last.endswith("`")
    assert shlex.split(last[len("Command: `"):-1]) == ["python", "benchmarks/efficiency.py", *argv]
    assert json.loads((tmp_path / "act.json").read_text())["args"]["command"] == last[len("Command: `"):-1]


def test_hf_door_benchmark_alternates_the_order_and_gives_per_round_ratios(tmp_path):
    """hf_door_vs_peft.py ran every round in one fixed order (PEFT always last) and reported only a ratio of medians;
    its claims (e.g. "4 % faster") had no spread behind them. Now: the order reverses every other round, each pair
    has per-round ratios (median, IQR, rounds at or below 1.0), and --output keeps the per-round times."""
    bench = _load("hf_door_vs_peft")
    names = ["a", "b", "c"]
    assert [bench.round_order(names, r) for r in range(3)] == [names, names[::-1], names]
    # a drifting machine: both sides of a round slow down alike; ours is 0.9x the peer in every round
    peer = [100.0, 150.0, 200.0, 250.0, 300.0]
    assert bench.paired([0.9 * x for x in peer], peer) == "0.900 (0.900–0.900) | 5 of 5"
    assert bench.paired([110.0, 90.0], [100.0, 100.0]) == "1.000 | 1 of 2"  # under 4 rounds: no IQR claimed
    if importlib.util.find_spec("peft") is None:
        return
    model, tok = conftest._bert(str(tmp_path))
    model.save_pretrained(str(tmp_path / "bert"))
    out = tmp_path / "door.md"
    assert bench.main(["--backbone", str(tmp_path / "bert"), "--batch-size", "2", "--seq-len", "24", "--rounds", "2",
                       "--steps", "1", "--output", str(out)]) == 0
    assert "| ours Prompt Tuning / PEFT prompt tuning |" in out.read_text() and "of 2 |" in out.read_text()
    raw = json.loads((tmp_path / "door.json").read_text())
    assert raw["command"].startswith("python benchmarks/hf_door_vs_peft.py --backbone")
    assert all(len(v) == 2 for v in raw["ms_per_step_per_round"].values())



def test_memory_processes_build_the_model_the_timed_one_builds(monkeypatch):
    """Each method's memory is measured in a fresh process, which must build what the timed process built: with
    --keep-mlm-head the vocabulary head (its logits and their gradient) ran in the timed steps but not in the memory
    process, so the memory column silently left it out."""
    bench = _load("efficiency")
    parent, child = [], []
    monkeypatch.setattr(bench, "memory_report", lambda args, names: parent.append(args) or 0)
    monkeypatch.setattr(bench, "memory_only", lambda args: child.append(args))
    monkeypatch.setattr(bench.torch, "set_num_threads", lambda n: None)  # --threads: not this test process's
    common = ["--backbone", "minilm", "--memory-only", "--methods", "Prompt Tuning", "--device", "cpu",
              "--mixed-precision", "bf16", "--tables", "dense", "--late-layer", "2", "--threads", "1",
              "--batch-size", "3", "--seq-len", "40", "--data-root", "somewhere"]
    for extra in ([], ["--keep-mlm-head"]):
        parent.clear(), child.clear()
        assert bench.main(common + extra) == 0
        cmd = bench._memory_cmd(parent[0], "Prompt Tuning")
        assert bench.main(cmd[2:]) == 0  # what the fresh process parses (cmd[:2]: python, the script)
        for key in ("backbone", "batch_size", "seq_len", "device", "data_root", "mixed_precision", "tables",
                    "late_layer", "threads", "keep_mlm_head"):
            assert getattr(child[0], key) == getattr(parent[0], key), (key, extra)
        assert child[0].memory_of == "Prompt Tuning"


def test_param_counts_report_names_the_command_that_made_it(tmp_path):
    """param_counts.py wrote a fixed command line into every report, whatever it was run with (another --output
    here): the file claimed it was the committed one's output."""
    bench = _load("param_counts")
    out = tmp_path / "counts.md"
    bench.main(["--output", str(out)])
    assert f"Command: `python benchmarks/param_counts.py --output {out}`" in out.read_text()


def _efficiency_commands(script: str, out: str):
    """The argv of every benchmarks/efficiency.py command in ``script`` (continuations joined, its ``E=`` prefix
    expanded, ``$OUT`` -> ``out``, the shell's redirections and fallbacks cut)."""
    import re
    import shlex

    text = open(script, encoding="utf-8").read().replace("\\\n", " ")
    found = re.search(r'^E="([^"]*)"', text, re.M)
    commands = []
    for line in text.splitlines():
        line = line.split("  # ")[0]
        if line.lstrip().startswith("#") or not re.search(r"\$PY (\$E|benchmarks/efficiency\.py)\b", line):
            continue
        line = line.replace("$E", found.group(1) if found else "$E").replace("$OUT", out).replace("$mp", "bf16")
        words = shlex.split(line.split("$PY ", 1)[1])
        cut = next((i for i, w in enumerate(words) if w in ("||", "&&") or w.startswith((">", "2>"))), len(words))
        assert words[0] == "benchmarks/efficiency.py", line
        commands.append(words[1:cut])
    return commands


def test_the_gpu_scripts_efficiency_commands_parse_and_name_known_methods(tmp_path, monkeypatch):
    """A loan is 15 minutes of GPU: a flag or a method name that one of benchmarks/gpu_*.sh gets wrong costs its
    step there. Each of their efficiency.py commands parses, and every method it names is the benchmark's."""
    import glob

    import openprompt_ipt.training.distributed as distributed

    bench = _load("efficiency")
    monkeypatch.setattr(distributed, "resolve_device", lambda device, key=None: "cpu")  # no GPU here
    named, real = [], bench.method_names

    class Parsed(Exception):
        pass

    def stop_after_names(text):
        named.append(real(text))  # an unknown name: SystemExit naming it
        raise Parsed

    monkeypatch.setattr(bench, "method_names", stop_after_names)
    scripts = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "benchmarks", "gpu_*.sh")))
    commands = [c for s in scripts for c in _efficiency_commands(s, str(tmp_path))]
    assert len(commands) >= 5, commands  # next loan: 2 (one in a loop), late study: 2, GLUE study: 1
    for argv in commands:
        try:
            bench.main(argv)
        except Parsed:
            continue
        raise AssertionError(f"efficiency.py {argv} stopped before naming its methods")
    assert len(named) == len(commands) and all(named)


def _hooks(module):
    tables = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
    return sum(len(getattr(m, t)) for m in module.modules() for t in tables)


def test_each_timed_method_runs_with_only_its_own_hooks_on_the_shared_backbone(tmp_path, monkeypatch):
    """Methods share one backbone and the injecting ones leave hooks on it: every method was timed with the idle
    hooks of all the others (and fine-tuning's copy of the backbone carried those built before it)."""
    import argparse
    ckpt = _tiny_checkpoint(tmp_path)
    bench = _load("efficiency")
    names = ["P-tuning v2", "Prefix + Random IPT", "M-IDPG-PHM (hidden injection)", "Fine-tuning", "PT + Random IPT"]
    args = argparse.Namespace(backbone=str(ckpt), batch_size=2, seq_len=24, device="cpu", keep_mlm_head=False,
                              data_root=str(tmp_path / "no-data"))
    by_itself = {}
    for name in names:  # each built alone on a backbone of its own, after a step (transformers adds hooks of its own)
        runs, _, _ = bench.prepare(args, [name])
        m, batch, opts = runs[name]
        bench.step_fn(m, opts, batch, batch["label"])()
        by_itself[name] = _hooks(m)
    assert by_itself["P-tuning v2"] > by_itself["PT + Random IPT"]
    timed = {}
    real = bench.step_fn

    def counting(model, *a, **k):
        step = real(model, *a, **k)

        def counted():
            timed.setdefault(next(n for n, m in runs_of.items() if m is model), set()).add(_hooks(model))
            step()
        return counted
    runs_of = {}
    real_prepare = bench.prepare

    def prepare(*a, **k):
        out = real_prepare(*a, **k)
        runs_of.update({n: r[0] for n, r in out[0].items()})
        return out
    monkeypatch.setattr(bench, "step_fn", counting)
    monkeypatch.setattr(bench, "prepare", prepare)
    assert bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--rounds", "2", "--steps", "1",
                       "--no-memory", "--methods", ",".join(names), "--data-root", str(tmp_path / "no-data")]) == 0
    assert timed == {n: {by_itself[n]} for n in names}
