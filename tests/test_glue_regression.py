"""IDPG Table 1's GLUE pair tasks (MRPC, QNLI, QQP, STS-B) and real-valued labels: the GLUE metrics against
hand-computed values, the regression head, the GLUE readers, bad input, and regression training end to end."""
import json
import math
import os

import pytest
import torch
import yaml

from openprompt_ipt.data import TASKS
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.training.metrics import binary_metrics, regression_metrics
from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
ASSETS = os.environ.get("IPT_ASSETS") or os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "assets")


# ------------------------------------------------------------------------------------------- metrics
def test_regression_metrics_against_hand_computed_values():
    perfect = regression_metrics([1, 2, 3, 4], [2, 4, 6, 8])  # any increasing linear map: r = rho = 1
    assert perfect["pearson"] == pytest.approx(1) and perfect["spearman"] == pytest.approx(1)
    anti = regression_metrics([1, 2, 3, 4], [4, 3, 2, 1])  # perfectly anti-correlated
    assert (anti["pearson"], anti["spearman"], anti["pearson_spearman"]) == pytest.approx((-1, -1, -1))
    # monotone but not linear: Spearman 1, Pearson = 9 / sqrt(2 * 438 / 9) (worked by hand)
    bent = regression_metrics([1, 2, 3], [1, 2, 10])
    assert bent["spearman"] == pytest.approx(1)
    assert bent["pearson"] == pytest.approx(9 / math.sqrt(2 * 438 / 9))
    assert bent["pearson_spearman"] == pytest.approx((1 + 9 / math.sqrt(2 * 438 / 9)) / 2)
    assert bent["mse"] == pytest.approx(49 / 3)
    # ties get their average rank: ranks (1.5, 1.5, 3) vs (1, 2, 3) -> rho = 1.5 / sqrt(1.5 * 2)
    assert regression_metrics([0, 0, 1], [1, 2, 3])["spearman"] == pytest.approx(1.5 / math.sqrt(3))
    assert regression_metrics([1, 2, 3], [5, 5, 5])["pearson"] == 0.0  # constant predictions: no correlation
    with pytest.raises(ValueError, match="at least 2"):
        regression_metrics([1.0], [1.0])


def test_binary_metrics_mean_of_accuracy_and_positive_f1():
    # TP 2, FP 1, FN 1, TN 1: accuracy 3/5, precision = recall = F1 = 2/3
    m = binary_metrics([1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    assert m["f1"] == pytest.approx(2 / 3) and m["acc_and_f1"] == pytest.approx((3 / 5 + 2 / 3) / 2)
    assert binary_metrics([0, 0, 1], [0, 0, 0])["f1"] == 0.0  # no positive predicted: F1 of class 1 is 0


# ----------------------------------------------------------------------------------- regression head
def _regression_model(model, tokenizer, template="instance_wise"):
    from openprompt import PromptForClassification

    from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate, RegressionHeadVerbalizer
    from helpers import TEXT

    t = (InstanceWiseTemplate(model, tokenizer, text=TEXT, strategy="none", task_prompt_length=2)
         if template == "instance_wise" else GeneratedPrefixTemplate(model, tokenizer, text=TEXT, prompt_length=2))
    head = RegressionHeadVerbalizer(tokenizer, model, num_classes=1)
    return PromptForClassification(model, t, head, freeze_plm=True, plm_eval_mode=True)


def test_regression_head_predicts_one_score_and_trains_with_mse(bert):
    from openprompt.data_utils import InputExample

    from helpers import SENTENCES, clone, loader_for
    from openprompt_ipt.training.trainer import evaluate, task_loss

    model, tok = bert
    pm = _regression_model(model, tok)
    exs = [InputExample(guid=str(i), text_a=SENTENCES[i], text_b="is it good", label=i / 5) for i in range(6)]
    batch = next(iter(loader_for(pm, tok, exs, 6)))
    assert batch["label"].dtype == torch.float32
    out = pm(clone(batch))
    assert out.shape == (6, 1)
    loss = task_loss(out, batch["label"], regression=True)
    assert loss.item() == pytest.approx(((out.squeeze(-1) - batch["label"]) ** 2).mean().item(), rel=1e-6)
    loss.backward()  # the head's gradient flows; the frozen PLM gets none
    assert pm.verbalizer.head.out_proj.weight.grad is not None
    metrics = evaluate(pm, loader_for(pm, tok, exs, 3), show_progress=False)
    preds = pm.eval()(clone(batch)).squeeze(-1).tolist()  # the head's dropout off, as in evaluate
    expected = regression_metrics(batch["label"].tolist(), preds)  # padding differs: equal up to float noise
    assert metrics["pearson"] == pytest.approx(expected["pearson"], abs=1e-3)
    assert metrics["spearman"] == pytest.approx(expected["spearman"], abs=1e-3)
    assert metrics["loss"] == pytest.approx(expected["mse"], rel=1e-3) and "accuracy" not in metrics
    with pytest.raises(ValueError, match="regression_head predicts one real-valued score"):
        _ = type(pm.verbalizer)(tok, model, num_classes=3)


# ------------------------------------------------------------------------------------------ readers
def write_tsv(path, header, rows, bom=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\t".join(header) + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return str(path.parent)


def test_mrpc_header_with_bom_and_missing_columns(tmp_path):
    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    folder = write_tsv(tmp_path / "MRPC" / "dev.tsv", header,
                       [[1, 11, 12, 'He said " yes "', "He agreed"], [0, 21, 22, "A cat", "A dog"]], bom=True)
    exs = TASKS["mrpc"].load(folder, "validation")
    assert [(e.text_a, e.text_b, e.label) for e in exs] == [('He said " yes "', "He agreed", 1), ("A cat", "A dog", 0)]
    write_tsv(tmp_path / "MRPC" / "train.tsv", ["Quality", "#1 String", "#2 Sentence"], [[1, "a", "b"]], bom=True)
    with pytest.raises(ValueError, match=r"train.tsv has no column '#2 String' \(its header: .*\): the file must have"):
        TASKS["mrpc"].load(folder, "train")
    write_tsv(tmp_path / "MRPC" / "train.tsv", header, [[1, 11, 12, "only one sentence"]])
    with pytest.raises(ValueError, match=r"train.tsv line 2 has 4 tab-separated fields, its header 5"):
        TASKS["mrpc"].load(folder, "train")


def test_stsb_scores_are_scaled_and_checked(tmp_path):
    header = ["index", "genre", "sentence1", "sentence2", "score"]
    folder = write_tsv(tmp_path / "STS-B" / "train.tsv", header, [[0, "g", "a", "b", "5.000"], [1, "g", "c", "d", "1.25"]])
    exs = TASKS["stsb"].load(folder, "train")
    assert [e.label for e in exs] == [1.0, 0.25]  # / 5, as fairseq's STS-B targets
    assert TASKS["stsb"].unscale(0.25) == pytest.approx(1.25)
    write_tsv(tmp_path / "STS-B" / "train.tsv", header, [[0, "g", "a", "b", "high"]])
    with pytest.raises(ValueError, match=r"train.tsv row 0: score 'high' is not a number: stsb is a regression task"):
        TASKS["stsb"].load(folder, "train")
    write_tsv(tmp_path / "STS-B" / "train.tsv", header, [[0, "g", "a", "b", "7"]])
    with pytest.raises(ValueError, match=r"score 7.0 is outside stsb's range 0-5"):
        TASKS["stsb"].load(folder, "train")
    assert TASKS["stsb"].label_id(-1, 0, "hub") is None  # the hub's unlabelled test rows


def test_qqp_offline_dev_is_carved_from_train_with_a_fixed_seed(tmp_path):
    from openprompt_ipt.data.prepare import load_task
    from test_tasks import cfg_for

    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    write_tsv(tmp_path / "glue" / "QQP" / "train_subset_23496.tsv", header,
              [[i, 2 * i, 2 * i + 1, f"q {i}", f"r {i}", int(i % 3 == 0)] for i in range(6000)])
    folder = str(tmp_path / "glue" / "QQP")
    task = TASKS["qqp"]
    assert task.carves(folder) and "20% of train_subset_23496.tsv (seed 0" in task.offline_note(folder)
    test = task.load(folder, "validation")
    assert len(test) == 1200 and [e.guid for e in test] == [e.guid for e in task.load(folder, "dev")]
    a = load_task(cfg_for("qqp", dev_from_train=0.2), str(tmp_path))
    other_seed = cfg_for("qqp", dev_from_train=0.2)
    other_seed["seed"] = 7
    b = load_task(other_seed, str(tmp_path))
    assert [e.guid for e in a[2]] == [e.guid for e in b[2]]  # the reported split is the same for every seed
    assert len(a[0]) + len(a[1]) == 4800 and not {e.guid for e in a[0] + a[1]} & {e.guid for e in a[2]}
    assert all(e.meta["carved_from"] == "train_subset_23496.tsv" for e in a[2])


@pytest.mark.skipif(not os.path.isdir(os.path.join(ASSETS, "glue")), reason="offline GLUE copy not present")
@pytest.mark.parametrize("name, sizes", [("mrpc", (3668, 408)), ("qnli", (9999, 5463)), ("qqp", (18797, 4699)),
                                         ("stsb", (5749, 1500))])
def test_the_offline_glue_copies(name, sizes):
    task = TASKS[name]
    folder = os.path.join(ASSETS, task.default_path)
    train, dev = task.load(folder, "train"), task.load(folder, "validation")
    assert (len(train), len(dev)) == sizes
    if task.regression:
        assert all(0.0 <= e.label <= 1.0 for e in train + dev)
    else:
        assert {e.label for e in train} == {0, 1} and all(e.text_a and e.text_b for e in dev)
    if name == "mrpc":  # the BOM-headed file: label column found, 279 / 129 on dev
        assert sum(e.label for e in dev) == 279


# ---------------------------------------------------------------------------------------- bad input
PAIR = '{"placeholder":"text_a"} ? {"mask"} , {"placeholder":"text_b"}'


def write_config(tmp_path, dataset, verbalizer="regression_head", head=None, template="instance_wise",
                 template_section=None, model="minilm", **extra):
    raw = {"dataset": dataset, "plm": {"model_path": model, "max_seq_length": 48}, "template": template,
           template: template_section or {"text": PAIR, "strategy": "none", "task_prompt_length": 2},
           "verbalizer": verbalizer, **({verbalizer: head} if head is not None else {}),
           "train": {"epochs": 2, "batch_size": 4, "device": "cpu", "metric": "pearson_spearman", "lr_prompt": 0.05,
                     "lr_head": 0.05},
           "test": {"batch_size": 4}, "seed": 1, **extra}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("dataset, verbalizer, head, match", [
    ({"name": "stsb"}, "soft_verbalizer", {"label_words": [["yes"], ["no"]]},
     r"^stsb is a regression task .* but verbalizer: soft_verbalizer classifies: set verbalizer: regression_head"),
    ({"name": "stsb"}, "regression_head", {"label_words": [["similar"]]},
     r"^regression_head.label_words: stsb is a regression task with no classes: remove regression_head.label_words$"),
    ({"name": "mrpc"}, "regression_head", None,
     r"^verbalizer: regression_head predicts one real-valued score, but mrpc is a classification task: use cls_head"),
    ({"name": "stsb", "labels": ["0", "5"]}, "regression_head", None,
     r"^dataset.labels is for classification: stsb is a regression task .*: remove dataset.labels$"),
    ({"name": "text_pair_regression", "path": "x", "labels": ["a", "b"]}, "regression_head", None,
     r"^dataset.labels is for classification: text_pair_regression reads a numeric score .*: remove dataset.labels$"),
])
def test_bad_regression_yaml_is_one_line(tmp_path, dataset, verbalizer, head, match):
    with pytest.raises(ValueError, match=match) as err:
        load_config(write_config(tmp_path, dataset, verbalizer, head))
    assert "\n" not in str(err.value)


def similarity_folder(folder, bad_row=None):
    folder.mkdir(parents=True, exist_ok=True)
    words = ["the cat sat on the mat", "a dog ran fast", "she said the movie was great", "he was slow"]
    rows = [(words[i % 4], words[(i * 3 + 1) % 4], f"{(i * 7) % 11 / 2:.2f}") for i in range(24)]
    for split, part in (("train", rows[:16]), ("dev", rows[16:20]), ("test", rows[20:])):
        lines = ["a,b,sim"] + [",".join(r) for r in part]
        if split == "train" and bad_row:
            lines.append(bad_row)
        (folder / f"{split}.csv").write_text("\n".join(lines) + "\n")
    return str(folder)


def test_a_non_numeric_score_in_your_own_file_is_one_line(tmp_path):
    from openprompt_ipt.data.prepare import load_task

    folder = similarity_folder(tmp_path / "sim", bad_row="a cat,a dog,very similar")
    cfg = load_config(write_config(tmp_path, {"name": "text_pair_regression", "path": folder,
                                              "columns": {"text_a": "a", "text_b": "b", "label": "sim"}}))
    with pytest.raises(ValueError, match=r"train.csv line 18: score 'very similar' is not a number: "
                                         r"text_pair_regression is a regression task, .* \['sim'\]"):
        load_task(cfg, str(tmp_path))


@pytest.mark.parametrize("dev_rows, constant, match", [
    (1, False, r"^the dev split of text_pair_regression has 1 example: Pearson / Spearman .* need at least 2 whose "
               r"scores differ: give a larger dev split \(dataset.max_eval / dev_from_train, or more rows in its file\)$"),
    (4, True, r"^the dev split of text_pair_regression gives all its 4 examples the same score: Pearson / Spearman are "
              r"undefined there \(a model would score 0.0 whatever it predicts\): give a dev split whose scores differ$"),
])
def test_a_dev_split_pearson_cannot_score_is_refused_before_training(tmp_path, dev_rows, constant, match):
    """One dev example stopped the run after its first epoch (`correlation needs at least 2 scored examples`, no
    split named); constant dev scores made every epoch's Pearson / Spearman 0.0 and the first epoch was selected."""
    from openprompt_ipt.data.prepare import prepare_splits

    folder = similarity_folder(tmp_path / "sim")
    lines = (tmp_path / "sim" / "dev.csv").read_text().splitlines()[:1 + dev_rows]
    if constant:
        lines = lines[:1] + [row.rsplit(",", 1)[0] + ",2.50" for row in lines[1:]]
    (tmp_path / "sim" / "dev.csv").write_text("\n".join(lines) + "\n")
    cfg = load_config(write_config(tmp_path, {"name": "text_pair_regression", "path": folder,
                                              "columns": {"text_a": "a", "text_b": "b", "label": "sim"}}))
    with pytest.raises(ValueError, match=match):
        prepare_splits(cfg, str(tmp_path))


# ---------------------------------------------------------------------------------- end to end training
IDPG = {"text": PAIR, "prompt_length": 2, "generator": "idpg", "injection": "hidden",
        "idpg": {"depth": "multi", "layer": "phm", "hidden": 4, "phm_n": 2, "sharing": "M",
                 "input_from": "previous", "encoder": "plm_cls"}}


OTHER_TEMPLATES = {  # the remaining templates of the tables, one short epoch-pair each
    "random_ipt": ("instance_wise", {"text": PAIR, "strategy": "random", "prompt_length": 2}),
    "prefix_tuning": ("generated_prefix", {"text": PAIR, "prompt_length": 2, "generator": "prefix", "injection": "kv",
                                           "prefix": {"reparameterize": True}}),
    "ptuning_v2": ("generated_prefix", {"text": PAIR, "prompt_length": 2, "generator": "prefix", "injection": "hidden",
                                        "prefix": {"reparameterize": False}}),
    "s_idpg_phm": ("generated_prefix", {"text": PAIR, "prompt_length": 2, "generator": "idpg", "injection": "input",
                                        "idpg": {"depth": "single", "layer": "phm", "hidden": 4, "phm_n": 2,
                                                 "encoder": "plm_cls"}}),
}


@pytest.mark.parametrize("method", sorted(OTHER_TEMPLATES))
def test_regression_trains_with_every_other_template(tiny_model_dir, tmp_path, method):  # noqa: F811
    from openprompt_ipt.runner.experiment import run_experiment

    template, section = OTHER_TEMPLATES[method]
    cfg = load_config(write_config(tmp_path, {"name": "text_pair_regression", "path": similarity_folder(tmp_path / "sim"),
                                              "columns": {"text_a": "a", "text_b": "b", "label": "sim"}},
                                   template=template, template_section=section, model=tiny_model_dir))
    result = run_experiment(cfg, show_progress=False)
    assert result["trainable"]["prompt"] > 0 and math.isfinite(result["test"]["pearson_spearman"])
    assert [r["epoch"] for r in result["history"]] == [1, 2] and "dev_pearson" in result["history"][0]


@pytest.mark.parametrize("method", ["prompt_tuning", "m_idpg_phm", "finetune"])
def test_regression_trains_from_yaml_alone_and_predict_returns_scores(tiny_model_dir, tmp_path, method):  # noqa: F811
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    folder = similarity_folder(tmp_path / "sim")
    template, section, extra = {"prompt_tuning": ("instance_wise", None, {}),
                                "m_idpg_phm": ("generated_prefix", IDPG, {}),
                                "finetune": ("mixed_template", {"text": PAIR}, {"plm": {"model_path": tiny_model_dir,
                                                                                          "freeze": False,
                                                                                          "max_seq_length": 48}})}[method]
    cfg = load_config(write_config(tmp_path, {"name": "text_pair_regression", "path": folder,
                                              "columns": {"text_a": "a", "text_b": "b", "label": "sim"}},
                                   template=template, template_section=section, model=tiny_model_dir, **extra))
    out = str(tmp_path / "run")
    result = run_experiment(cfg, output_dir=out, show_progress=False)
    assert result["metrics"] == ["pearson_spearman", "pearson", "spearman"]
    assert result["sizes"] == {"train": 16, "dev": 4, "test": 4} and result["trainable"]["head"] > 0
    assert {"pearson", "spearman", "pearson_spearman", "mse"} <= set(result["test"]) and "accuracy" not in result["test"]
    history = result["history"]
    best = max(history, key=lambda r: (r["dev_pearson_spearman"], -r["epoch"]))
    assert result["training"]["best_epoch"] == best["epoch"]  # selected by the task's own metric
    assert result["best_dev"]["pearson_spearman"] == pytest.approx(best["dev_pearson_spearman"])
    # predict returns scores on the file's own scale, the same the test metrics were computed from
    rows = [{"a": r.split(",")[0], "b": r.split(",")[1]} for r in open(os.path.join(folder, "test.csv")).read().split("\n")[1:] if r]
    preds = load_run(out).predict(rows)
    assert set(preds[0]) == {"guid", "score"} and all(isinstance(p["score"], float) for p in preds)
    labels = [float(r.split(",")[2]) for r in open(os.path.join(folder, "test.csv")).read().split("\n")[1:] if r]
    assert regression_metrics(labels, [p["score"] for p in preds])["pearson"] == pytest.approx(result["test"]["pearson"], abs=1e-4)
    assert json.load(open(os.path.join(out, "metrics.json")))["test"]["pearson"] == result["test"]["pearson"]


# ------------------------------------------------------------------------------------ aggregate table
def test_aggregate_gains_idpg_table1_average_on_the_papers_scores(tmp_path):
    from openprompt_ipt.runner.aggregate import IDPG_TABLE1, aggregate

    def write(method, task, seed, test, metric):
        d = tmp_path / "runs" / f"{method}_{task}" / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({
            "dataset": task, "method": method, "metrics": list(test), "selection_metric": metric, "level": "seed",
            "seed": seed, "config_name": f"{method}_{task}", "test_split": "official val", "best_dev": {}, "test": test}))

    scores = {}
    for i, (task, paper_metric) in enumerate(IDPG_TABLE1.items()):
        for seed, shift in ((1, 0.0), (2, 0.02)):
            value = 0.5 + i / 100 + shift
            # cells select on accuracy for MRPC / QQP and Pearson for STS-B: the Avg still uses the paper's score
            test = ({"pearson_spearman": value, "pearson": 0.1, "spearman": value} if task == "stsb" else
                    {"accuracy": 0.1, "acc_and_f1": value} if paper_metric == "acc_and_f1" else {"accuracy": value})
            write("M-IDPG-PHM", task, seed, test, "pearson" if task == "stsb" else "accuracy")
            scores.setdefault(task, []).append(value)
    write("Prompt Tuning", "mrpc", 1, {"accuracy": 0.7, "acc_and_f1": 0.7}, "acc_and_f1")
    md = aggregate([str(tmp_path / "runs" / "*")])["results.md"]
    header = md.splitlines()[0]
    assert header.endswith("| Avg (IDPG Table 1's 10 tasks) |") and "| MRPC (acc_and_f1) |" not in header
    expected = 100 * sum(sum(v) / 2 for v in scores.values()) / 10  # hand: mean of the ten seed means
    idpg_row = next(line for line in md.splitlines() if line.startswith("| M-IDPG-PHM |"))
    assert idpg_row.endswith(f"| {expected:.1f} |")
    pt_row = next(line for line in md.splitlines() if line.startswith("| Prompt Tuning |"))
    assert pt_row.endswith("| - (1/10 tasks) |")  # a partial row is never read as Table 1's Avg
    # a table without all ten tasks keeps its old shape
    files = aggregate([str(tmp_path / "runs" / "Prompt Tuning_mrpc")])
    assert "Avg" not in files["results.md"]


def test_few_shot_on_a_regression_task_is_one_line(tmp_path):
    from openprompt_ipt.data.prepare import prepare_splits

    cfg = load_config(write_config(tmp_path, {"name": "stsb"}, protocol={"name": "few_shot", "k": 4}))
    with pytest.raises(ValueError, match=r"^protocol few_shot samples K examples per label, and stsb is a regression "
                                         r"task \(no labels\): use protocol.name: low_resource"):
        prepare_splits(cfg, str(tmp_path))


# ---------------------------------------------------------------------- IDPG §4.5.5 cosine analysis
def test_top_k_group_counts_by_hand():
    from openprompt_ipt.analysis.sts_cosine import top_k_group_counts

    gold = [4.8, 0.2, 3.5, 5.0, 1.0, 2.9]
    cos = [0.9, 0.95, 0.1, 0.8, 0.3, 0.5]  # ranked: 1 (0.2), 0 (4.8), 3 (5.0), 5 (2.9), 4 (1.0), 2 (3.5)
    counts = top_k_group_counts(cos, gold, [1, 3, 6])
    assert counts == {1: [1, 0, 0, 0, 0], 3: [1, 0, 0, 0, 2], 6: [1, 1, 1, 1, 2]}
    with pytest.raises(ValueError, match="top-k 7 must be in 1..6"):
        top_k_group_counts(cos, gold, [7])


def test_sts_cosine_script_on_a_tiny_stsb_run(tiny_model_dir, tmp_path):  # noqa: F811
    import importlib.util

    from openprompt_ipt.runner.experiment import run_experiment

    words = ["the cat sat on the mat", "a dog ran fast", "she said the movie was great", "he was slow"]
    header = ["index", "genre", "sentence1", "sentence2", "score"]
    rows = [[i, "g", words[i % 4], words[(i * 3 + 1) % 4], f"{(i * 7) % 11 / 2.2:.2f}"] for i in range(20)]
    folder = write_tsv(tmp_path / "STS-B" / "train.tsv", header, rows[:14])
    write_tsv(tmp_path / "STS-B" / "dev.tsv", header, rows[14:])
    cfg = load_config(write_config(tmp_path, {"name": "stsb", "path": folder, "dev_from_train": 0.25},
                                   template="generated_prefix", template_section=IDPG, model=tiny_model_dir))
    run_experiment(cfg, output_dir=str(tmp_path / "run"), show_progress=False)
    spec = importlib.util.spec_from_file_location("sts_cosine", os.path.join(os.path.dirname(__file__), "..",
                                                                           "experiments", "sts_cosine.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = str(tmp_path / "fig" / "sts")
    assert script.main(["--run", str(tmp_path / "run"), "--top-k", "2", "6", "--out", out]) == 0
    md = open(out + ".md").read()
    assert md.count("| 6 |") == 2 and open(out + ".png", "rb").read()[:4] == b"\x89PNG"
    for line in md.splitlines():
        if line.endswith("|") and "| 6 |" in line:  # every dev pair is in the top-6
            assert sum(int(c) for c in line.split("|")[3:-1]) == 6


# ------------------------------------------------------------------ regression with a peer and with init_from
@pytest.mark.parametrize("method", ["lora", "adapter"])
def test_regression_trains_with_a_peer_method(tiny_model_dir, tmp_path, method):  # noqa: F811
    """A peer (LoRA through PEFT, Adapter through AdapterHub) on a real-valued task: the same regression head,
    MSE, Pearson / Spearman, only the peer's modules and the head train."""
    pytest.importorskip({"lora": "peft", "adapter": "adapters"}[method])
    from openprompt_ipt.runner.experiment import run_experiment

    cfg = load_config(write_config(tmp_path, {"name": "text_pair_regression", "path": similarity_folder(tmp_path / "sim"),
                                              "columns": {"text_a": "a", "text_b": "b", "label": "sim"}},
                                   template_section={"text": PAIR, "strategy": "none", "task_prompt_length": 0},
                                   model=tiny_model_dir, peer={"method": method}))
    result = run_experiment(cfg, output_dir=str(tmp_path / "run"), show_progress=False)
    assert result["trainable"]["prompt"] > 0 and result["trainable"]["plm"] == 0
    assert math.isfinite(result["test"]["pearson_spearman"]) and "accuracy" not in result["test"]
    assert "dev_pearson_spearman" in result["history"][0]


def test_regression_init_from_a_finished_regression_run(tiny_model_dir, tmp_path):  # noqa: F811
    """IDPG A.4's two stages on a real-valued task: stage 2 starts from stage 1's prompt and its one-output head
    (no classes to match), and trains on."""
    from safetensors.torch import load_file

    from openprompt_ipt.runner.experiment import run_experiment

    dataset = {"name": "text_pair_regression", "path": similarity_folder(tmp_path / "sim"),
               "columns": {"text_a": "a", "text_b": "b", "label": "sim"}}
    stage1 = str(tmp_path / "stage1")
    run_experiment(load_config(write_config(tmp_path, dataset, model=tiny_model_dir)), output_dir=stage1,
                   show_progress=False)
    (tmp_path / "two").mkdir()
    cfg = load_config(write_config(tmp_path / "two", dataset, model=tiny_model_dir, init_from=stage1))
    result = run_experiment(cfg, output_dir=str(tmp_path / "stage2"), show_progress=False)
    assert result["init_from"]["head"].startswith("loaded"), result["init_from"]
    assert math.isfinite(result["test"]["pearson_spearman"])
    first = load_file(os.path.join(stage1, "best.safetensors"))
    second = load_file(str(tmp_path / "stage2" / "best.safetensors"))
    assert set(first) == set(second)
