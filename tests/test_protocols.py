"""Protocols (few-shot sampler + CV folds, low-resource), sweeps, seeds mean ± std, aggregate tables,
bad input; a fake train function keeps these fast."""
import csv
import io
import json
import os

import pytest
from openprompt.data_utils import InputExample

from openprompt_ipt.runner.aggregate import aggregate
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.data.prepare import prepare_splits
from openprompt_ipt.data.protocols import cv_folds, few_shot_splits, sample_per_label, low_resource_splits
from openprompt_ipt.runner.runs import mean_std, run_seeds
from openprompt_ipt.runner.sweep import apply_point, expand_grid, point_name, select_best

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pool(n_per_label=20, labels=3):
    return [InputExample(guid=f"train-{lab}-{i}", text_a=f"t {lab} {i}", text_b="h", label=lab)
            for lab in range(labels) for i in range(n_per_label)]


def guids(exs):
    return [e.guid for e in exs]


def test_few_shot_sampler_is_balanced_and_deterministic():
    exs = pool()
    train, dev = few_shot_splits(exs, 4, 3, seed=1)
    assert sorted(e.label for e in train) == [0] * 4 + [1] * 4 + [2] * 4
    assert sorted(e.label for e in dev) == [0] * 3 + [1] * 3 + [2] * 3
    assert not set(guids(train)) & set(guids(dev))
    again = few_shot_splits(list(reversed(exs)), 4, 3, seed=1)  # input order does not matter
    assert guids(again[0]) == guids(train) and guids(again[1]) == guids(dev)
    other = few_shot_splits(exs, 4, 3, seed=2)
    assert set(guids(other[0])) != set(guids(train))


def test_few_shot_k_larger_than_a_label_is_one_clear_error():
    exs = pool(10)[:-5]  # label 2 has 5
    with pytest.raises(ValueError, match=r"protocol.k=3 needs 6 examples of label 'c' in train but it has 5"):
        few_shot_splits(exs, 3, 3, seed=1, labels=["a", "b", "c"])
    with pytest.raises(ValueError, match="needs 11 examples"):
        sample_per_label(exs, 11, 0)


def test_few_shot_with_fewglue_train_samples_dev_from_the_rest():
    exs = pool(10, 2)
    fewglue = [InputExample(guid="fg-0", text_a=exs[0].text_a, text_b="h", label=0)]
    train, dev = few_shot_splits(exs, 2, 2, seed=0, train_source=fewglue)
    assert guids(train) == ["fg-0"] and len(dev) == 4
    assert exs[0].text_a not in [e.text_a for e in dev]


def test_few_shot_k_in_total_is_balanced_as_far_as_labels_allow():
    exs = pool(30, 2) + [InputExample(guid=f"n{i}", text_a=f"n {i}", label=2) for i in range(5)]  # CB-like rare label
    train, dev = few_shot_splits(exs, 12, 12, seed=0, per="total")
    assert len(train) == len(dev) == 12 and not set(guids(train)) & set(guids(dev))
    counts = [sum(e.label == lab for e in train + dev) for lab in range(3)]
    assert counts[2] == 5 and abs(counts[0] - counts[1]) <= 1
    assert guids(few_shot_splits(exs, 12, 12, seed=0, per="total")[0]) == guids(train)


def test_cv_folds_are_disjoint_cover_and_stratified():
    exs = pool(8, 2)
    folds = cv_folds(exs, 4, seed=3)
    held = [guids(h) for _, h in folds]
    assert sorted(g for h in held for g in h) == sorted(guids(exs))
    assert all(not set(a) & set(b) for i, a in enumerate(held) for b in held[i + 1:])
    for tr, h in folds:
        assert not set(guids(tr)) & set(guids(h)) and len(tr) + len(h) == len(exs)
        assert sorted(e.label for e in h) == [0, 0, 1, 1]
    assert [guids(h) for _, h in cv_folds(exs, 4, seed=3)] == held
    with pytest.raises(ValueError, match="cv_folds"):
        cv_folds(exs[:1], 2, 0)


def test_cv_folds_keep_a_multirc_paragraph_in_one_fold():
    """Answer-level examples: a question's other answers in the training folds would leak into its held-out score."""
    exs = [InputExample(guid=f"train-{p}-{q}-{a}", text_a=f"paragraph {p}", text_b=f"question {q}", label=a % 2,
                        meta={"answer": f"a{a}", "group": f"{p}-{q}", "paragraph": str(p)})
           for p in range(6) for q in range(2) for a in range(3)]
    folds = cv_folds(exs, 4, seed=0)
    held = [guids(h) for _, h in folds]
    assert sorted(g for h in held for g in h) == sorted(guids(exs)) and all(held)
    for tr, h in folds:
        assert not {e.meta["paragraph"] for e in tr} & {e.meta["paragraph"] for e in h}
    assert [guids(h) for _, h in cv_folds(list(reversed(exs)), 4, seed=0)] == held  # input order does not matter
    with pytest.raises(ValueError, match=r"cv_folds=4 needs at least 4 paragraphs .* come from 3"):
        cv_folds(exs[:18], 4, 0)


def test_low_resource_sizes():
    exs = pool(400, 3)
    for k in (100, 500, 1000 - 800):
        train, dev = low_resource_splits(exs, k, 150, seed=1)
        assert len(train) == k and len(dev) == 150 and not set(guids(train)) & set(guids(dev))
    assert guids(low_resource_splits(exs, 100, 150, 1)[0]) == guids(low_resource_splits(exs[::-1], 100, 150, 1)[0])
    with pytest.raises(ValueError, match="protocol.k=1000 \\+ protocol.dev_size=1000 exceeds the 1200"):
        low_resource_splits(exs, 1000, 1000, 1)
    # a task without MultiRC paragraphs draws exactly what it drew before paragraphs were kept whole
    train, dev = low_resource_splits(exs, 5, 3, seed=1)
    assert guids(train) == ["train-1-173", "train-1-179", "train-0-46", "train-1-355", "train-0-185"]
    assert guids(dev) == ["train-0-1", "train-2-52", "train-1-226"]


def multirc_rows(paragraphs=30, questions=4, answers=5):
    return [InputExample(guid=f"train-{p}-{q}-{a}", text_a=f"paragraph {p}", text_b=f"question {q}", label=a % 2,
                         meta={"answer": f"a{a}", "group": f"{p}-{q}", "paragraph": str(p)})
            for p in range(paragraphs) for q in range(questions) for a in range(answers)]


@pytest.mark.parametrize("k", [7, 100, 300])
def test_low_resource_keeps_a_multirc_paragraph_on_one_side(k):
    """Drawn answer by answer, dev repeated questions (and passages) that train had seen: the dev set that picks
    the epoch was partly training data. K still counts answers; dev holds whole questions."""
    exs = multirc_rows()
    for seed in (1, 2, 3):
        train, dev = low_resource_splits(exs, k, 150, seed)
        assert len(train) == k and len(dev) == 150
        assert not {e.meta["group"] for e in train} & {e.meta["group"] for e in dev}
        assert not {e.meta["paragraph"] for e in train} & {e.meta["paragraph"] for e in dev}
        dev_questions = {e.meta["group"] for e in dev}
        assert len(dev) == sum(e.meta["group"] in dev_questions for e in exs)  # every answer of a dev question
        again = low_resource_splits(exs[::-1], k, 150, seed)
        assert (guids(again[0]), guids(again[1])) == (guids(train), guids(dev))  # input order does not matter
    assert set(guids(low_resource_splits(exs, k, 150, 4)[1])) != set(guids(dev))
    with pytest.raises(ValueError, match=r"protocol.k=441 \+ protocol.dev_size=150: MultiRC keeps .* only 440"):
        low_resource_splits(exs, 441, 150, 1)  # dev's 150 answers open 8 paragraphs of 20: 440 answers left
    with pytest.raises(ValueError, match=r"protocol.dev_size=4 is smaller than every MultiRC question"):
        low_resource_splits(exs, k, 4, 1)  # 5 answers a question


def test_sweep_grid_expansion_and_selection():
    grid = expand_grid({"train.lr_prompt": [0.1, 0.2], "instance_wise.prompt_length": [4, 8, 16]})
    assert len(grid) == 6 and grid[1] == {"train.lr_prompt": 0.1, "instance_wise.prompt_length": 8}
    assert expand_grid({}) == [{}]
    assert point_name(grid[0]) == "lr_prompt=0.1,prompt_length=4"
    cfg = apply_point({"train": {"lr_prompt": 1}, "instance_wise": {}}, grid[5])
    assert cfg == {"train": {"lr_prompt": 0.2}, "instance_wise": {"prompt_length": 16}}
    assert select_best([0.5, 0.7, 0.7, 0.1]) == 1
    with pytest.raises(ValueError, match="has no values"):
        expand_grid({"train.lr_prompt": []})


def test_mean_std():
    s = mean_std([0.5, 0.7, 0.6])
    assert s["n"] == 3 and abs(s["mean"] - 0.6) < 1e-12 and abs(s["std"] - 0.1) < 1e-12
    assert mean_std([0.4]) == {"mean": 0.4, "std": 0.0, "n": 1}


# ---------------------------------------------------------------- runner with a fake train function
def write_cb(folder, n_train=60, n_val=9):
    os.makedirs(folder, exist_ok=True)
    labels = ["entailment", "contradiction", "neutral"]
    for name, n in (("train", n_train), ("val", n_val)):
        with open(os.path.join(folder, f"{name}.jsonl"), "w") as f:
            for i in range(n):
                f.write(json.dumps({"premise": f"the cat sat {name} {i}", "hypothesis": "it sat",
                                    "label": labels[i % 3], "idx": i}) + "\n")


def yaml_config(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text("dataset:\n  name: cb\n  path: CB\n" + text)
    return str(path)


def fake_train(calls):
    def train(cfg, splits, output_dir, show_progress):
        lr = cfg["train"]["lr_prompt"]
        calls.append((cfg["seed"], lr, len(splits.train), len(splits.dev), len(splits.test), output_dir))
        dev = 1.0 - abs(lr - 0.01) + cfg["seed"] / 1000  # best point: lr 0.01
        result = {"dataset": "cb", "strategy": "random", "template": "instance_wise", "metrics": ["accuracy", "macro_f1"],
                  "test_split": "official val", "best_dev": {"accuracy": dev, "macro_f1": dev},
                  "test": {"accuracy": dev - 0.1, "macro_f1": dev - 0.2}}
        if output_dir:
            os.makedirs(output_dir, exist_ok=True)
            with open(os.path.join(output_dir, "metrics.json"), "w") as f:
                json.dump(result, f)
        return result
    return train


def test_few_shot_sweep_uses_cv_then_trains_on_k_and_early_stops_on_k(tmp_path):
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "protocol:\n  name: few_shot\n  k: 4\n  cv_folds: 4\n"
                                  "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    calls = []
    summary = run_seeds(cfg, "fs", str(tmp_path / "runs"), [1, 2], str(tmp_path), train_fn=fake_train(calls),
                        show_progress=False)
    # per seed: 2 points x 4 folds on the 24 pooled examples (18 train / 6 held), then one final run
    per_seed = [c for c in calls if c[0] == 1]
    assert len(per_seed) == 9 and all(c[2:5] == (18, 6, 6) for c in per_seed[:8])
    assert per_seed[8][1] == 0.01 and per_seed[8][2:5] == (12, 12, 9)
    assert summary["protocol"] == "few_shot K=4/label" and summary["per_seed"][0]["selected_point"] == {"train.lr_prompt": 0.01}
    assert summary["test"]["accuracy"]["n"] == 2
    top = tmp_path / "runs" / "fs"
    assert (top / "summary.json").exists() and (top / "seed1" / "cv" / "lr_prompt=0.1" / "fold3").is_dir()
    seed1 = json.loads((top / "seed1" / "metrics.json").read_text())
    assert seed1["level"] == "seed" and seed1["selection"] == "held_out" and len(seed1["sweep"]) == 2
    fold = json.loads((top / "seed1" / "cv" / "lr_prompt=0.1" / "fold0" / "metrics.json").read_text())
    assert fold["level"] == "cv_fold"
    assert "(n=2)" in aggregate([str(top)])["results.md"]  # folds are not counted as seeds


def test_few_shot_sweep_on_eval_set_never_trains_on_the_reported_split(tmp_path):
    """few_shot + selection: on_eval_set + sweep: dev is the reported split, and the CV pool (train + dev) put
    the official val's examples into the folds' training data; now the point is picked on it, never trained on."""
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "selection: on_eval_set\nprotocol:\n  name: few_shot\n  k: 4\n"
                                  "  cv_folds: 4\nsweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    seen = []

    def train(cfg, splits, output_dir, show_progress):
        seen.append(({e.guid for e in splits.train}, {e.guid for e in splits.test}))
        return fake_train([])(cfg, splits, output_dir, show_progress)

    summary = run_seeds(cfg, "fs", str(tmp_path / "runs"), [1], str(tmp_path), train_fn=train, show_progress=False)
    reported = seen[-1][1]
    assert len(reported) == 9 and all(not trained & reported for trained, _ in seen)
    assert len(seen) == 2 and summary["per_seed"][0]["selected_point"] == {"train.lr_prompt": 0.01}


def test_full_sweep_best_on_dev_per_seed_and_on_eval_set_is_labelled(tmp_path):
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "selection: on_eval_set\nsweep:\n  train:\n    lr_prompt: [0.1, 0.01, 0.05]\n"))
    calls = []
    summary = run_seeds(cfg, "full", str(tmp_path / "runs"), [1, 2, 3], str(tmp_path), train_fn=fake_train(calls),
                        show_progress=False)
    assert len(calls) == 9 and all(c[3] == c[4] == 9 for c in calls)  # dev is the reported split
    assert [r["selected_point"] for r in summary["per_seed"]] == [{"train.lr_prompt": 0.01}] * 3
    assert summary["selection"] == "on_eval_set" and "on_eval_set" in summary["test_split"]
    acc = summary["test"]["accuracy"]
    assert acc["n"] == 3 and abs(acc["mean"] - 0.902) < 1e-9 and abs(acc["std"] - 0.001) < 1e-9
    point = json.loads((tmp_path / "runs" / "full" / "seed2" / "lr_prompt=0.05" / "metrics.json").read_text())
    assert point["level"] == "sweep_point" and point["sweep_point"] == {"train.lr_prompt": 0.05}


def test_a_sweep_over_a_dataset_key_trains_each_point_on_its_own_data(tmp_path):
    """The splits were prepared once per seed, before the sweep: `sweep: dataset.max_train: [10, 40]` (a learning
    curve) ran every point on the same 48 examples, and the sweep table showed two sizes of one run."""
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "sweep:\n  dataset.max_train: [10, 40]\n  dataset.max_eval: [3, 9]\n"))
    calls = []
    summary = run_seeds(cfg, "dsw", str(tmp_path / "runs"), [1], str(tmp_path), train_fn=fake_train(calls),
                        show_progress=False)
    assert [c[2:5] for c in calls] == [(7, 3, 3), (7, 3, 9), (33, 3, 3), (33, 7, 9)]
    assert summary["per_seed"][0]["selected_point"] == {"dataset.max_train": 10, "dataset.max_eval": 3}  # a tie: the first
    seed1 = json.loads((tmp_path / "runs" / "dsw" / "seed1" / "metrics.json").read_text())
    assert seed1["test_cap"] == {"max_eval": 3, "kept": 3, "of": 9}  # the selected point's sample of the reported split


def test_aggregate_tables_and_sweep_plot(tmp_path, capsys):
    write_cb(str(tmp_path / "CB"))
    calls = []
    cfg = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    run_seeds(cfg, "cb_sweep", str(tmp_path / "runs"), [1, 2], str(tmp_path), train_fn=fake_train(calls),
              show_progress=False)
    other = tmp_path / "runs" / "rte_x" / "seed1"
    other.mkdir(parents=True)
    (other / "metrics.json").write_text(json.dumps({
        "dataset": "rte", "strategy": "prefix/kv", "metrics": ["accuracy", "macro_f1"], "selection_metric": "accuracy",
        "test_split": "official val", "level": "seed", "seed": 1, "config_name": "rte_x", "protocol": "few_shot K=32",
        "best_dev": {"accuracy": 0.6}, "test": {"accuracy": 0.55, "macro_f1": 0.5}}))
    files = aggregate([str(tmp_path / "runs" / "*")], str(tmp_path / "out"))
    md = files["results.md"]
    assert "| method | CB (accuracy) | RTE (accuracy) |" in md
    assert "| Prompt Tuning | 90.1 ± 0.1 (n=2) | - |" in md  # named from the run's config.json
    assert "| prefix/kv [few_shot K=32] | - | 55.0 ± 0.0 (n=1) |" in md
    rows = list(csv.DictReader(io.StringIO(files["results.csv"])))
    cb_f1 = next(r for r in rows if r["task"] == "cb" and r["metric"] == "macro_f1")
    assert cb_f1["n"] == "2" and abs(float(cb_f1["mean"]) - 0.8015) < 1e-6 and cb_f1["seeds"] == "1 2"
    assert "lr_prompt=0.01" in files["sweep_lr_prompt.md"]
    png = (tmp_path / "out" / "sweep_lr_prompt.png").read_bytes()
    assert png[:4] == b"\x89PNG"
    assert (tmp_path / "out" / "results.csv").read_text() == files["results.csv"]

    # `aggregate OTHER_RUNS --out out` replaced results.md without a word and left the first set's sweep_lr_prompt.*
    # beside it, read as the new runs' sweep; now kept unless --overwrite, which replaces the set whole
    from openprompt_ipt.commands.aggregate import main

    out, before = tmp_path / "out", sorted(os.listdir(tmp_path / "out"))
    capsys.readouterr()  # the runs' own output
    kept = (out / "results.md").read_text()
    assert main([str(tmp_path / "runs" / "rte_x"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: --out '{out}' already holds the tables of an earlier aggregate (results.csv, results.md "
                   "and 3 more): --overwrite replaces them (and removes its sweep files this one does not write), or "
                   "give another --out"]
    assert sorted(os.listdir(out)) == before and (out / "results.md").read_text() == kept
    with pytest.raises(ValueError, match="already holds the tables of an earlier aggregate"):
        aggregate([str(tmp_path / "runs" / "rte_x")], str(out), overwrite=False)  # checked again while it holds out
    assert main([str(tmp_path / "runs" / "rte_x"), "--out", str(out), "--overwrite"]) == 0
    assert sorted(os.listdir(out)) == ["results.csv", "results.md"] and "CB" not in (out / "results.md").read_text()


def test_aggregate_never_averages_other_settings_or_a_seed_twice(tmp_path):
    """Runs of one config name in two --output-dirs at other settings were one cell: 'n=3' over two lrs;
    the same seed in two folders was counted twice (std from a duplicate)."""
    from openprompt_ipt.runner.config import DEFAULTS, merge_config

    def run(out, seed, acc, lr, device="cpu"):
        d = tmp_path / out / "cb_pt" / f"seed{seed}"
        d.mkdir(parents=True)
        cfg = merge_config(DEFAULTS, {"seed": seed, "output_dir": out, "train": {"lr_prompt": lr, "device": device},
                                      "init_from": f"stage1/seed{seed}"}, "", {})  # each seed from its own stage-1 run
        (d / "config.json").write_text(json.dumps(cfg))
        (d / "metrics.json").write_text(json.dumps({
            "dataset": "cb", "method": "Prompt Tuning", "metrics": ["accuracy"], "selection_metric": "accuracy",
            "level": "seed", "seed": seed, "config_name": "cb_pt", "test_split": "official val",
            "best_dev": {}, "test": {"accuracy": acc}}))

    run("runs_a", 1, 0.80, 0.1)
    run("runs_a", 2, 0.82, 0.1, device="cuda")  # where a seed ran is not a setting
    run("runs_b", 3, 0.40, 0.5)
    md = aggregate([str(tmp_path / "runs_a" / "cb_pt"), str(tmp_path / "runs_b" / "cb_pt")])["results.md"]
    assert "| Prompt Tuning [train.lr_prompt=0.1] | 81.0 ± 1.4 (n=2) |" in md
    assert "| Prompt Tuning [train.lr_prompt=0.5] | 40.0 ± 0.0 (n=1) |" in md
    run("runs_c", 1, 0.80, 0.1)  # seed 1 again, same settings: a copy, or a rerun
    with pytest.raises(ValueError, match=r"^seed 1 of 'Prompt Tuning' on cb is in two runs, .*runs_a/cb_pt/seed1 "
                                         r"and .*runs_c/cb_pt/seed1, with the same settings: .*aggregate one of them"):
        aggregate([str(tmp_path / "runs_a" / "cb_pt"), str(tmp_path / "runs_c" / "cb_pt")])


def test_sweep_tables_never_average_other_settings_or_a_seed_twice(tmp_path):
    """The sweep table / plot put every sweep point of a task into one line: two --output-dirs of one config
    at other settings were averaged ('n=4' over two epochs), and a copied run counted its seeds twice."""
    import shutil

    write_cb(str(tmp_path / "CB"))

    def train_writing_config(shift):
        fake = fake_train([])

        def train(cfg, splits, output_dir, show_progress):  # as run_experiment: config.json beside metrics.json
            result = fake(cfg, splits, output_dir, show_progress)
            result["test"] = {k: v - shift for k, v in result["test"].items()}
            with open(os.path.join(output_dir, "config.json"), "w") as f:
                json.dump(cfg, f)
            return result
        return train

    for out, text, shift in (("runs_a", "", 0.0), ("runs_b", "train:\n  epochs: 7\n", 0.3)):
        cfg = load_config(yaml_config(tmp_path, text + "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
        run_seeds(cfg, "sw", str(tmp_path / out), [1, 2], str(tmp_path), train_fn=train_writing_config(shift),
                  show_progress=False)
    md = aggregate([str(tmp_path / "runs_a" / "sw"), str(tmp_path / "runs_b" / "sw")])["sweep_lr_prompt.md"]
    assert "| Prompt Tuning [train.epochs=10] / CB (accuracy) | 90.1 ± 0.1 (n=2) | 81.2 ± 0.1 (n=2) |" in md
    assert "| Prompt Tuning [train.epochs=7] / CB (accuracy) | 60.2 ± 0.1 (n=2) | 51.2 ± 0.1 (n=2) |" in md
    shutil.copytree(tmp_path / "runs_a" / "sw" / "seed1" / "lr_prompt=0.1", tmp_path / "copy" / "lr_prompt=0.1")
    with pytest.raises(ValueError, match=r"^seed 1 of 'Prompt Tuning' on cb at lr_prompt=0.1 is in two runs, "
                                         r".*runs_a/sw/seed1/lr_prompt=0.1 and .*copy/lr_prompt=0.1, with the same"):
        aggregate([str(tmp_path / "runs_a" / "sw"), str(tmp_path / "copy")])


def test_aggregate_names_the_seeds_it_leaves_out(tmp_path):
    """A seed that failed or was killed (no metrics.json) was dropped from the mean without a word (n=2 of 3)."""
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    run_seeds(cfg, "sw", str(tmp_path / "runs"), [1, 2, 3], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    top = tmp_path / "runs" / "sw"
    os.remove(top / "seed3" / "metrics.json")  # killed after its sweep points, before the seed's result
    md = aggregate([str(tmp_path / "runs" / "*")])["results.md"]
    assert "(n=2)" in md
    assert md.endswith(f"\nleft out, no metrics.json (failed or unfinished; --resume finishes them): {top / 'seed3'}\n")
    assert "left out" not in aggregate([str(top / "seed1")])["results.md"]


def test_aggregate_reads_only_metrics_files_from_a_glob_and_refuses_another_named_file(tmp_path):
    """`aggregate 'runs/cap/*'` also matched summary.json, read as a seed's record: a TypeError traceback (a
    best.safetensors: a utf-8 decode error). A glob's other files are skipped as a folder's are; a file named
    alone that is not a metrics.json is one line."""
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, ""))
    run_seeds(cfg, "cap", str(tmp_path / "runs"), [1, 2], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    top = tmp_path / "runs" / "cap"
    (top / "seed1" / "best.safetensors").write_bytes(b"\xa0\x00")
    assert os.path.isfile(top / "summary.json")
    md = aggregate([str(top / "*")])["results.md"]
    assert md == aggregate([str(top)])["results.md"] and "(n=2)" in md
    assert "(n=1)" in aggregate([str(top / "seed1" / "*")])["results.md"]
    assert "(n=1)" in aggregate([str(top / "seed1" / "metrics.json")])["results.md"]
    with pytest.raises(ValueError, match="summary.json' is not a run's metrics.json: give run directories"):
        aggregate([str(top / "summary.json")])


def test_aggregate_says_when_the_reported_split_was_a_max_eval_sample(tmp_path):
    """Seeds run with dataset.max_eval (9 of the 30 val rows) were tabled as 'CB: official val', the whole split."""
    write_cb(str(tmp_path / "CB"), n_train=90, n_val=30)
    cfg = load_config(yaml_config(tmp_path, ""))
    cfg["dataset"]["max_eval"] = 9
    run_seeds(cfg, "cap", str(tmp_path / "runs"), [1, 2], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    files = aggregate([str(tmp_path / "runs" / "cap")])
    assert "reported split — CB: official val, 9 of 30 sampled by dataset.max_eval" in files["results.md"]
    rows = list(csv.DictReader(io.StringIO(files["results.csv"])))
    assert {r["test_split"] for r in rows} == {"official val, 9 of 30 sampled by dataset.max_eval"}


@pytest.mark.parametrize("text,match", [
    ("sweep:\n  train.lr_prompt: []\n", "sweep 'train.lr_prompt' has no values"),
    ("sweep:\n  train.lr_promt: [1, 2]\n", "unknown sweep key 'train.lr_promt' \\(did you mean 'train.lr_prompt'\\?\\)"),
    ("sweep:\n  instance_wise.prompt_lenght: [1]\n", "did you mean 'instance_wise.prompt_length'"),
    ("protocol:\n  name: fewshot\n", "unknown protocol 'fewshot' \\(did you mean 'few_shot'\\?\\)"),
    ("protocol:\n  name: few_shot\n", "needs protocol.k"),
    ("selection: on_val\n", "unknown selection 'on_val'"),
])
def test_bad_config_rows(tmp_path, text, match):
    with pytest.raises((KeyError, ValueError), match=match):
        load_config(yaml_config(tmp_path, text))


def test_k_too_large_fails_before_anything_is_written(tmp_path):
    write_cb(str(tmp_path / "CB"), n_train=12)
    cfg = load_config(yaml_config(tmp_path, "protocol:\n  name: few_shot\n  k: 3\n"))
    with pytest.raises(ValueError, match="protocol.k=3 needs 6 examples of label 'entailment'"):
        run_seeds(cfg, "fs", str(tmp_path / "runs"), [1], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    assert not (tmp_path / "runs").exists()


def cli(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"cli_{name}", os.path.join(ROOT, "experiments", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    path = yaml_config(tmp_path, "sweep:\n  train.lr_prompt: []\n")
    assert cli("run")(["--config", path, "--output-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: sweep 'train.lr_prompt' has no values")
    assert not (tmp_path / "runs").exists()
    assert cli("aggregate")([str(tmp_path / "nope*")]) == 2
    assert capsys.readouterr().err == f"error: no run directory matches '{tmp_path / 'nope*'}'\n"


def test_end_to_end_few_shot_two_seeds_on_tiny_bert(bert, tmp_path):
    """Real training (1 epoch) through run_experiment: two seeds, few-shot K=2 per label, summary + aggregate."""
    model, tok = bert
    backbone = str(tmp_path / "tiny-bert")
    model.save_pretrained(backbone)
    tok.save_pretrained(backbone)
    write_cb(str(tmp_path / "CB"), n_train=15, n_val=6)
    cfg = load_config(yaml_config(tmp_path, f"""protocol:
  name: few_shot
  k: 2
plm:
  model_path: {backbone}
  max_seq_length: 64
template: instance_wise
instance_wise:
  text: '{{"placeholder":"text_a"}} question: {{"placeholder":"text_b"}} ? {{"mask"}} .'
  strategy: random
  prompt_length: 2
soft_verbalizer:
  label_words: [["yes"], ["no"], ["maybe"]]
train:
  epochs: 1
  batch_size: 4
  device: cpu
"""))
    summary = run_seeds(cfg, "tiny_fs", str(tmp_path / "runs"), [1, 2], str(tmp_path), show_progress=False)
    assert summary["test"]["accuracy"]["n"] == 2 and summary["protocol"] == "few_shot K=2/label"
    seed1 = json.loads((tmp_path / "runs" / "tiny_fs" / "seed1" / "metrics.json").read_text())
    assert seed1["sizes"] == {"train": 6, "dev": 6, "test": 6} and seed1["test_split"] == "official val"
    md = aggregate([str(tmp_path / "runs" / "tiny_fs")])["results.md"]
    assert "| PT + Random IPT [few_shot K=2/label] |" in md and "(n=2)" in md


def test_a_sweep_or_seed_group_never_replaces_earlier_runs(tmp_path):
    """The run-directory rule (training/run_dir.py) holds for every seed of a group and for sweeps: a seed
    directory that holds a run is refused before any run starts; --overwrite clears every point first."""
    from openprompt_ipt.training.run_dir import RunDirExists

    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    runs = tmp_path / "runs"
    run_seeds(cfg, "sw", str(runs), [1], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    old_point = runs / "sw" / "seed1" / "lr_prompt=0.1" / "metrics.json"
    before = old_point.read_text()
    calls = []
    with pytest.raises(RunDirExists, match=r"seed1' already holds a finished run \(metrics.json\)"):
        run_seeds(cfg, "sw", str(runs), [2, 1], str(tmp_path), train_fn=fake_train(calls), show_progress=False)
    assert calls == [] and not (runs / "sw" / "seed2").exists() and old_point.read_text() == before
    (runs / "sw" / "seed1" / "lr_prompt=0.5").mkdir()  # a point the new grid does not have
    other = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.02]\n"))
    run_seeds(other, "sw", str(runs), [1], str(tmp_path), train_fn=fake_train(calls), show_progress=False,
              overwrite=True)
    assert sorted(os.listdir(runs / "sw" / "seed1")) == ["config.json", "lr_prompt=0.02", "metrics.json"]


def test_a_seed_group_says_when_its_summary_drops_earlier_seeds(tmp_path, capsys):
    """--seeds 3 after --seeds 1,2 in one output dir replaced summary.json (seeds 1, 2, n=2) with one of seed 3
    alone (n=1) without a word; the documented rule stays (the latest command's seeds), now said in one line."""
    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    top = tmp_path / "runs" / "sw"
    run_seeds(cfg, "sw", str(tmp_path / "runs"), [1, 2], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    run_seeds(cfg, "sw", str(tmp_path / "runs"), [1, 2, 3], str(tmp_path), train_fn=fake_train([]),
              show_progress=False, resume=True)
    assert "note:" not in capsys.readouterr().out  # a superset: nothing left out
    run_seeds(cfg, "sw", str(tmp_path / "runs"), [4], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    out = capsys.readouterr().out
    assert (f"note: {top / 'summary.json'} summarised seeds 1, 2, 3; it now summarises this command's seeds 4 "
            f"(seeds 1, 2, 3 left out): openprompt-ipt aggregate {top} averages every seed") in out
    assert json.loads((top / "summary.json").read_text())["seeds"] == [4]
    assert "(n=4)" in aggregate([str(top)])["results.md"]


@pytest.mark.parametrize("same_config", [True, False])
def test_two_seed_commands_started_together_both_stay_in_the_summary(tmp_path, same_config):
    """``run --seeds 1`` and ``run --seeds 2`` of one config started at once, same output dir: the one that
    finished last replaced summary.json with its seed alone, the other's result gone from it. Now the later
    writer keeps the seeds a command beside it summarised (same config only; another config is replaced)."""
    import multiprocessing

    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, ""))
    other = load_config(yaml_config(tmp_path, "train:\n  lr_prompt: 0.02\n")) if not same_config else cfg
    ctx = multiprocessing.get_context("fork")
    started, first_done = ctx.Barrier(2), ctx.Event()

    def command(seed, config):
        def train(c, splits, output_dir, show_progress):
            started.wait(timeout=60)  # both commands run before either summarises
            if seed == 2:
                first_done.wait(timeout=60)  # seed 1's command has written summary.json
            return fake_train([])(c, splits, output_dir, show_progress)
        run_seeds(config, "pair", str(tmp_path / "runs"), [seed], str(tmp_path), train_fn=train, show_progress=False)

    first, second = ctx.Process(target=command, args=(1, cfg)), ctx.Process(target=command, args=(2, other))
    first.start()
    second.start()
    first.join(60)
    first_done.set()
    second.join(60)
    assert (first.exitcode, second.exitcode) == (0, 0)
    summary = json.loads((tmp_path / "runs" / "pair" / "summary.json").read_text())
    if same_config:
        assert summary["seeds"] == [1, 2] and summary["test"]["accuracy"]["n"] == 2
        assert [r["seed"] for r in summary["per_seed"]] == [1, 2]
    else:
        assert summary["seeds"] == [2]
    assert sorted(os.listdir(tmp_path / "runs" / "pair")) == ["seed1", "seed2", "summary.json"]  # no lock left
    # one command after another: the documented rule stays (the latest command's seeds)
    run_seeds(cfg, "pair", str(tmp_path / "runs"), [3], str(tmp_path), train_fn=fake_train([]), show_progress=False)
    assert json.loads((tmp_path / "runs" / "pair" / "summary.json").read_text())["seeds"] == [3]


@pytest.mark.parametrize("protocol", ["name: low_resource\n  k: 10\n  dev_size: 8", "name: few_shot\n  k: 3"])
def test_max_eval_caps_the_reported_split_without_changing_the_sampled_train(tmp_path, protocol):
    """dataset.max_eval (a quick run's eval cap) also capped the held-out part of the pool that few_shot /
    low_resource sample from, so the same seed trained on other examples than the uncapped run."""
    write_cb(str(tmp_path / "CB"), n_train=90, n_val=30)
    cfg = load_config(yaml_config(tmp_path, f"protocol:\n  {protocol}\n"))
    full = prepare_splits(cfg, str(tmp_path))
    cfg["dataset"]["max_eval"] = 6
    quick = prepare_splits(cfg, str(tmp_path))
    assert [e.guid for e in quick.train] == [e.guid for e in full.train]
    assert [e.guid for e in quick.dev] == [e.guid for e in full.dev]
    assert len(quick.test) == 6 and quick.test_cap == {"max_eval": 6, "kept": 6, "of": 30}


def test_aggregate_is_the_same_whatever_order_the_disk_lists_folders_in(tmp_path, monkeypatch):
    """os.walk lists folders in the file system's order (ext4: a hash seeded per disk), so the same runs copied to
    another machine gave results.md rows, results.csv's seeds column and the sweep lines in another order."""
    import openprompt_ipt.runner.aggregate as agg

    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    for name in ("cb_b", "cb_a"):
        run_seeds(cfg, name, str(tmp_path / "runs"), [10, 2, 1], str(tmp_path), train_fn=fake_train([]),
                  show_progress=False)
    real_walk = os.walk

    def listed(order):
        def walk(top, *a, **k):
            for dirpath, dirnames, names in real_walk(top, *a, **k):
                dirnames.sort(reverse=order == "reversed")  # in place: os.walk descends in this order
                names.sort(reverse=order == "reversed")
                yield dirpath, dirnames, names
        return walk

    outputs = []
    for order in ("sorted", "reversed"):
        monkeypatch.setattr(agg.os, "walk", listed(order))
        files = aggregate([str(tmp_path / "runs")])
        outputs.append({k: v for k, v in files.items() if not k.endswith(".png")})
    assert outputs[0] == outputs[1]
    rows = list(csv.DictReader(io.StringIO(outputs[0]["results.csv"])))
    assert [r["seeds"] for r in rows if r["metric"] == "accuracy"] == ["1 2 10", "1 2 10"]  # numeric seed order


def test_a_seed_numpy_cannot_take_is_refused_before_any_seed_trains(tmp_path, capsys):
    """`--seeds 1,-2` (or 1,4294967296) trained seed 1 to the end, then stopped at seed -2 with numpy's
    'Seed must be between 0 and 2**32 - 1', naming no option; `--set seed=4294967296` passed the config check."""
    from openprompt_ipt.commands.run import main
    from openprompt_ipt.runner.schema import ConfigValueError

    write_cb(str(tmp_path / "CB"))
    cfg = load_config(yaml_config(tmp_path, ""))
    calls = []
    for seeds in ([1, -2], [1, 2**32]):
        with pytest.raises(ConfigValueError, match=r"^seed = (-2|4294967296) is not allowed: give an integer in \[0, 4294967295\]$"):
            run_seeds(cfg, "bad", str(tmp_path / "runs"), seeds, str(tmp_path), train_fn=fake_train(calls),
                      show_progress=False)
    assert calls == [] and not (tmp_path / "runs").exists()
    with pytest.raises(SystemExit) as stop:
        main(["--config", yaml_config(tmp_path, ""), "--seeds", "1,4294967296", "--output-dir", str(tmp_path / "runs")])
    assert stop.value.code == 2
    assert "--seeds 1,4294967296: seed = 4294967296 is not allowed: give an integer in [0, 4294967295]" in capsys.readouterr().err
    assert run_seeds(cfg, "ok", None, [0, 2**32 - 1], str(tmp_path), train_fn=fake_train(calls),
                     show_progress=False)["seeds"] == [0, 2**32 - 1]  # numpy's whole range runs


def test_a_long_sweep_point_or_cv_fold_is_never_a_silent_terminal(tmp_path, capsys):
    """A sweep point ran with show_progress=False: on a large split the terminal stayed at "sweep points 0/2"
    for minutes (its tokenizing, epochs and evaluation all quiet). Now each point shows its own progress and the
    bar names it; few-shot CV ticks per fold, naming the point and fold; several seeds' data (read again per seed,
    before the first line) has a bar; --quiet stays quiet."""
    write_cb(str(tmp_path / "CB"))
    shown = []

    def train(cfg, splits, output_dir, show_progress):
        shown.append(show_progress)
        return fake_train([])(cfg, splits, output_dir, show_progress)

    cfg = load_config(yaml_config(tmp_path, "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    run_seeds(cfg, "sw", str(tmp_path / "a"), [1], str(tmp_path), train_fn=train, show_progress=True)
    err = capsys.readouterr().err
    assert shown == [True, True] and "lr_prompt=0.01" in err
    assert "preparing each seed's data" not in err  # one seed: no bar for its data
    run_seeds(cfg, "sw", str(tmp_path / "a2"), [1, 2], str(tmp_path), train_fn=train, show_progress=True)
    assert "preparing each seed's data" in capsys.readouterr().err
    run_seeds(cfg, "sw", str(tmp_path / "b"), [1], str(tmp_path), train_fn=train, show_progress=False)
    assert shown[6:] == [False, False] and capsys.readouterr().err == ""
    cfg = load_config(yaml_config(tmp_path, "protocol:\n  name: few_shot\n  k: 4\n  cv_folds: 4\n"
                                  "sweep:\n  train.lr_prompt: [0.1, 0.01]\n"))
    run_seeds(cfg, "fs", str(tmp_path / "c"), [1], str(tmp_path), train_fn=train, show_progress=True)
    err = capsys.readouterr().err
    assert "CV folds over sweep points" in err and "/8 [" in err and "lr_prompt=0.1 fold 1/4" in err  # 2 points x 4
