"""The efficiency benchmark runs end to end on a tiny local checkpoint (numbers come from real runs, in docs/)."""
import importlib.util
import os

import conftest


def _load(name):
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_efficiency_benchmark_smoke(tmp_path, capsys):
    model, tok = conftest._bert(str(tmp_path))
    ckpt = tmp_path / "bert"
    model.save_pretrained(str(ckpt))
    bench = _load("efficiency")
    methods = "Prompt Tuning,PT + Random IPT,P-tuning v2,M-IDPG-PHM (cached [CLS]),M-IDPG-PHM (hidden injection)"
    out = tmp_path / "perf.md"
    rc = bench.main(["--backbone", str(ckpt), "--batch-size", "2", "--seq-len", "24", "--rounds", "1", "--steps", "1",
                     "--no-memory", "--methods", methods, "--data-root", str(tmp_path / "no-data"),
                     "--output", str(out)])
    assert rc == 0
    table = out.read_text()
    for name in methods.split(","):
        assert f"| {name} |" in table
    assert "| Prompt Tuning | 640 |" in table  # 20 x 32 trainable prompt values


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
