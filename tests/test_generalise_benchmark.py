"""Issue #33's reference benchmark (yamls/generalise, groups generalise_*): it loads, every YAML validates,
and every method runs under one budget, written out so other YAMLs' or classes' defaults cannot move it.
No training here: the runs themselves are the benchmark (docs/results/README.md)."""
import glob
import os

import pytest
import yaml

from test_benchmarks import _load

TASKS = ("mr", "subj", "agnews", "mpqa")
# the shared budget; lr_prompt is the method's own (Prefix Tuning 5e-3, the rest 3e-3, as the CB YAMLs)
BUDGET = {"dataset": ("dev_from_train", "max_train", "max_eval"),
          "plm": ("model_path", "freeze", "max_seq_length", "frozen_dropout"),
          "train": ("epochs", "batch_size", "gradient_accumulation_steps", "lr_head", "weight_decay", "scheduler",
                    "warmup_steps", "warmup_ratio", "max_grad_norm", "vocab_rows", "metric", "device")}


def test_generalise_groups_load_and_every_yaml_validates_for_its_task():
    from openprompt_ipt.runner.config import load_config

    bench = _load("accuracy")
    for task in TASKS:
        group = bench.load_group(f"generalise_{task}")
        assert group["seeds"] == [1, 2, 3]
        assert len(group["methods"]) == 8
        for m in group["methods"]:
            cfg = load_config(os.path.join(bench.ROOT, m["yaml"]))
            assert cfg["dataset"]["name"] == task and cfg["verbalizer"] == "soft_verbalizer", m["yaml"]
    # every YAML of the folder is a row of some group, #33's or #41's (none left out of the study by a typo); the
    # sweeps (*_sweep*.yaml) are run on their own (experiments/run.py)
    used = {m["yaml"] for t in TASKS for g in ("generalise", "late") for m in bench.load_group(f"{g}_{t}")["methods"]}
    shipped = {os.path.relpath(p, bench.ROOT) for p in glob.glob(os.path.join(bench.ROOT, "yamls", "generalise", "*.yaml"))
               if "_sweep" not in p}
    assert shipped == used


def test_late_groups_share_one_late_layer_and_reuse_the_reference_runs():
    """Issue #41: every late row places its prompt after the same layer (the sweep's choice), and the bases are
    the #33 runs of the same task, not reruns."""
    from openprompt_ipt.runner.config import load_config

    bench = _load("accuracy")
    layers = set()
    for task in TASKS:
        group = bench.load_group(f"late_{task}")
        assert group["seeds"] == [1, 2, 3]
        for m in group["methods"]:
            cfg = load_config(os.path.join(bench.ROOT, m["yaml"]))
            assert cfg["dataset"]["name"] == task and cfg["verbalizer"] == "soft_verbalizer", m["yaml"]
            section = cfg["generated_prefix"] if cfg["template"] == "generated_prefix" else {}
            if section.get("injection") == "late":
                layers.add(section["late_layer"])
            if m["label"] in ("Prompt Tuning", "Prefix Tuning", "M-IDPG-PHM"):
                assert m.get("from_group") == f"generalise_{task}", m["label"]
    assert len(layers) == 1, layers


def test_hypothesis_groups_validate_with_their_overrides_and_reuse_the_reference_runs():
    """The #33 hypothesis groups (h33_*): each override is a valid key for its YAML (a typo would only fail
    at run time), and their Prompt Tuning / Random IPT rows are generalise_mr's runs, not reruns."""
    from openprompt_ipt.runner.config import load_config

    bench = _load("accuracy")
    with open(bench.GROUPS_FILE) as f:
        names = [n for n in yaml.safe_load(f) if n.startswith("h33_")]
    assert len(names) >= 4
    out = os.path.join(bench.ROOT, "results", "accuracy")
    for name in names:
        group = bench.load_group(name)
        for m in group["methods"]:
            load_config(os.path.join(bench.ROOT, m["yaml"]), m["set"])
        reused = [m for m in group["methods"] if m.get("from_group")]
        assert {"Prompt Tuning", "PT + Random IPT"} <= {m["label"] for m in reused}, name
        task = group["task"]
        for m in reused:  # every reference row is read from the reference group of the same task
            assert bench.run_dir(os.path.join(out, name), m, 1).startswith(os.path.join(out, f"generalise_{task}"))
            assert m["yaml"].startswith(f"yamls/generalise/{task}_"), (name, m["label"])


LPT_LR = 0.001  # the LPT rows' rate, chosen with late_layer by the MR layer sweep (issue #41)


def test_generalise_yamls_write_out_one_budget():
    """The budget keys are in each file (not taken from DEFAULTS) and equal across all 32 YAMLs; the vocab
    tables of Random and Pretrained IPT pin `sparse`, whose class default may change."""
    bench = _load("accuracy")
    budgets = set()
    for path in sorted(glob.glob(os.path.join(bench.ROOT, "yamls", "generalise", "*.yaml"))):
        with open(path) as f:
            raw = yaml.safe_load(f)
        missing = [f"{s}.{k}" for s, keys in BUDGET.items() for k in keys if k not in raw.get(s, {})]
        assert not missing, (path, missing)
        budgets.add(tuple((s, k, str(raw[s][k])) for s, keys in BUDGET.items() for k in keys))
        section = raw[raw["template"]]
        if section.get("strategy") in ("random", "pretrained"):  # Encoder IPT's table is frozen: no sparse key
            assert section["sparse"] is True, path
        if section.get("strategy") == "encoder":
            assert "sparse" not in section, path
        if section.get("generator") == "ipt_random":
            assert section["ipt"]["sparse"] is True, path
        expected_lr = {"prefix": 0.005, "lpt": LPT_LR}.get(section.get("generator"), 0.003)
        if "_sweep" not in path:  # the sweeps try other rates
            assert raw["train"]["lr_prompt"] == expected_lr, path
    assert len(budgets) == 1, budgets


def test_accuracy_seeds_option_runs_only_those_seeds(tmp_path, monkeypatch):
    """--seeds 2 starts seed 2's runs only (seed 1 of every group can finish first); a seed the group does
    not have is refused before anything runs."""
    bench = _load("accuracy")
    group = {"title": "T", "task": "cb", "seeds": [1, 2, 3], "paper_source": "P",
             "methods": [{"label": "A", "yaml": "yamls/cb_prompt_tuning.yaml", "set": []}]}
    monkeypatch.setattr(bench, "load_group", lambda name: group)
    started = []
    monkeypatch.setattr(bench, "run_job", lambda cmd, log, threads: started.append(cmd) or 0)
    args = ["--group", "g", "--out", str(tmp_path / "g"), "--docs", str(tmp_path / "docs")]
    assert bench.main(args + ["--seeds", "2"]) == 2  # nothing finished: no table
    assert [c[c.index("--seeds") + 1] for c in started] == ["2"]
    with pytest.raises(SystemExit):
        bench.main(args + ["--seeds", "4"])
    assert len(started) == 1


def test_generalise_summary_judges_each_row_against_its_base_by_the_issues_bar(tmp_path, monkeypatch):
    """benchmarks/generalise_summary.py on fake finished runs with hand-computed means and stds: the bar is
    "no worse than the base by more than the larger std", one seed gets no verdict, and the fix table reads
    the reference runs its from_group rows point at."""
    import json

    summary = _load("generalise_summary")
    bench = summary.accuracy

    def write(group_name, label, values):
        m = {x["label"]: x for x in bench.load_group(group_name)["methods"]}[label]
        for seed, v in enumerate(values, start=1):
            d = bench.run_dir(str(tmp_path / group_name), m, seed)
            os.makedirs(d)
            with open(os.path.join(d, "metrics.json"), "w") as f:
                json.dump({"metrics": ["accuracy"], "trainable": {"prompt": 1, "plm": 0}, "seconds": 1.0,
                           "best_dev": {"accuracy": v}, "test": {"accuracy": v}}, f)

    write("generalise_mr", "Prompt Tuning", [0.74, 0.76])            # 75.0 ± 1.41
    write("generalise_mr", "M-IDPG-PHM", [0.80, 0.78])               # base Prefix Tuning: not run
    write("generalise_mr", "S-IDPG-PHM", [0.74, 0.75])               # -0.5, within 1.41
    write("generalise_mr", "PT + Random IPT", [0.70, 0.72])          # -4.0, missed
    write("generalise_mr", "PT + Pretrained IPT", [0.70])            # one seed: no verdict
    fix = bench.load_group("h33_fix_mr")["methods"][3]["label"]
    write("h33_fix_mr", fix, [0.75, 0.74])                           # paired Δ +1.0 -2.0
    write("generalise_subj", "Prompt Tuning", [0.90])                # another task's YAML names its run folders
    write("generalise_subj", "S-IDPG-PHM", [0.88])
    text = summary.build(str(tmp_path))
    rows = {}
    for line in text.splitlines():
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows.setdefault(cells[0], cells)
    assert rows["Prompt Tuning"][1] == "75.0 ± 1.4 (n=2)" and rows["Prompt Tuning"][2] == "90.0 (n=1)"
    assert rows["Prompt Tuning"][3] == "–"                                # MPQA: nothing run
    assert rows["S-IDPG-PHM (Prompt Tuning)"][1] == "-0.50 (within one std, bar ≥ −1.41); per seed +0.0 -1.0"
    assert rows["PT + Random IPT (Prompt Tuning)"][1] == "-4.00 (missed, bar ≥ −1.41); per seed -4.0 -4.0"
    assert rows["PT + Pretrained IPT (Prompt Tuning)"][1] == "-5.00 (n < 2); per seed -4.0"
    assert rows["M-IDPG-PHM (Prefix Tuning)"][1] == "–"
    assert rows["S-IDPG-PHM (Prompt Tuning)"][2] == "-2.00 (n < 2); per seed -2.0"
    mr = rows["MR"]
    assert mr[1] == "75.0 ± 1.4 (n=2)" and mr[2] == "71.0 ± 1.4 (n=2)"   # the reference runs, read through from_group
    assert mr[6] == "-0.50 (within one std, bar ≥ −1.41)" and mr[7] == "+1.0 -2.0"
    # the figure: the reference rows coloured by their base's family, the kept fix last, seeds as read
    panel = summary.figure_rows("mr", str(tmp_path))
    colour = {label: c for label, _, c in panel}
    assert colour["M-IDPG-PHM"] == colour["Prefix Tuning"] != colour["Prompt Tuning"] == colour["S-IDPG-PHM"]
    assert panel[-1][0] == summary.FIX_NAME and sorted(panel[-1][1]["score_by_seed"].values()) == [74.0, 75.0]
    out = tmp_path / "docs" / "table.md"
    assert summary.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    assert out.read_text().startswith("Issue #33") and (tmp_path / "docs" / "table.png").read_bytes()[:4] == b"\x89PNG"
    # no --out and runs elsewhere (a trial): the table goes beside them; the repo's committed one is untouched (it
    # was replaced: --out defaulted to docs/results whatever --results was)
    repo = tmp_path / "repo"
    monkeypatch.setattr(bench, "ROOT", str(repo))
    committed = repo / "docs" / "results" / "generalise_table.md"
    committed.parent.mkdir(parents=True)
    committed.write_text("committed\n")
    assert summary.main(["--results", str(tmp_path)]) == 0
    assert committed.read_text() == "committed\n" and not (committed.parent / "generalise_table.png").exists()
    assert (tmp_path / "generalise_table.md").read_text().startswith("Issue #33")


def test_generalise_summary_refuses_a_results_folder_without_the_groups_and_keeps_the_table(tmp_path):
    """A mistyped --results must not overwrite the finished table with empty cells: one line, nothing written."""
    summary = _load("generalise_summary")
    out = tmp_path / "table.md"
    out.write_text("finished table\n")
    with pytest.raises(SystemExit) as err:
        summary.main(["--results", str(tmp_path / "typo"), "--out", str(out)])
    assert "--results" in str(err.value) and "generalise_mr" in str(err.value)
    assert out.read_text() == "finished table\n"
    assert not (tmp_path / "table.png").exists()


def test_late_summary_applies_issue_41s_target_to_fake_runs(tmp_path):
    """benchmarks/late_summary.py: a row meets the target only when it is above Prompt Tuning by more than the larger
    std on >= 3 of 4 tasks and not below Prefix Tuning by more than the larger std on any; the sweep table picks the
    best dev point."""
    import json

    summary = _load("late_summary")
    bench = summary.accuracy
    results = tmp_path / "accuracy"

    def write(group_name, label, values):
        group = bench.load_group(group_name)
        m = {x["label"]: x for x in group["methods"]}[label]
        for seed, v in enumerate(values, start=1):
            d = bench.run_dir(str(results / group_name), m, seed)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "metrics.json"), "w") as f:
                json.dump({"metrics": ["accuracy"], "trainable": {"prompt": 1, "plm": 0}, "seconds": 1.0,
                           "best_dev": {"accuracy": v}, "test": {"accuracy": v}}, f)

    for t in TASKS:
        write(f"generalise_{t}", "Prompt Tuning", [0.74, 0.76])      # 75.0 ± 1.41
        write(f"generalise_{t}", "Prefix Tuning", [0.78, 0.78] if t != "agnews" else [0.76, 0.76])
        # LPT-NPG: +2.5 over PT on three tasks, +1.0 on AG News; never below Prefix by more than the larger std
        write(f"late_{t}", "LPT-NPG", [0.77, 0.78] if t != "agnews" else [0.76, 0.76])
        write(f"late_{t}", "Late prompt (plain)", [0.75, 0.76])      # +0.5: not above PT by one std anywhere
    for layer, (dev, test) in {1: (0.70, 0.71), 3: (0.80, 0.75), 4: (0.80, 0.79)}.items():
        d = tmp_path / "sweeps" / "mr_lpt_npg_layer_sweep_lr3" / "seed1" / f"late_layer={layer}"
        os.makedirs(d)
        (d / "metrics.json").write_text(json.dumps({"best_dev": {"accuracy": dev}, "test": {"accuracy": test}}))
    text = summary.build(str(results))
    rows = {}
    for line in text.splitlines():
        if line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells
    assert rows["LPT-NPG"][-3:] == ["3 of 4", "4 of 4", "**met**"]
    assert rows["Late prompt (plain)"][-3:] == ["0 of 4", "1 of 4", "missed"]  # 2.5 below Prefix on three
    assert rows["0.003"][1:] == ["70.0 / 71.0", "80.0 / 75.0", "80.0 / 79.0"]
    assert "Best on dev: late_layer 3, lr_prompt 0.003" in text  # a tie goes to the lower layer
