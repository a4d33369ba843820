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
