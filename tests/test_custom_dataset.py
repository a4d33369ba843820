"""Your own data with no package code: text_classification / text_pair from a jsonl / csv / tsv
folder, the YAML naming its columns and label words; each bad input is one clear line."""
import json
import os
import re

import pytest
import yaml

from openprompt_ipt.runner.config import load_config
from openprompt_ipt.data.prepare import load_task
from test_predict_and_runs import load_script, tiny_model_dir  # noqa: F401  (fixture)

TEMPLATE_PAIR = '{"placeholder":"text_a"} ? {"mask"} , {"placeholder":"text_b"}'
TEMPLATE_ONE = '{"placeholder":"text_a"} it was {"mask"} .'


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def nli_folder(folder, n_train=16, n_test=6, dev=True, label="gold"):
    labels = ["entails", "contradicts"]
    row = lambda i: {"sent1": f"the cat sat {i}", "sent2": f"the dog ran {i}", label: labels[i % 2], "id": i}  # noqa: E731
    write_jsonl(folder / "train.jsonl", [row(i) for i in range(n_train)])
    write_jsonl(folder / "test.jsonl", [row(100 + i) for i in range(n_test)])
    if dev:
        write_jsonl(folder / "dev.jsonl", [row(200 + i) for i in range(4)])
    return str(folder)


def write_yaml(tmp_path, dataset, label_words, model="minilm", **extra):
    raw = {"dataset": dataset, "plm": {"model_path": model, "max_seq_length": 48},
           "instance_wise": {"text": TEMPLATE_PAIR if dataset["name"] == "text_pair" else TEMPLATE_ONE,
                             "strategy": "random", "prompt_length": 2},
           "soft_verbalizer": {"label_words": label_words},
           "train": {"epochs": 1, "batch_size": 4, "device": "cpu"}, "test": {"batch_size": 4}, "seed": 1, **extra}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def test_text_pair_jsonl_with_column_mapping(tmp_path):
    folder = nli_folder(tmp_path / "my_nli")
    cfg = load_config(write_yaml(tmp_path, {"name": "text_pair", "path": folder,
                                            "columns": {"text_a": "sent1", "text_b": "sent2", "label": "gold"},
                                            "labels": ["entails", "contradicts"]}, [["yes"], ["no"]]))
    train, dev, test, labels = load_task(cfg, str(tmp_path / "no-root-needed"))
    assert labels == ["entails", "contradicts"]
    assert (len(train), len(dev), len(test)) == (16, 4, 6)  # dev.jsonl is the dev set: train is not split
    first = sorted(train, key=lambda e: int(e.guid.split("-")[1]))[0]
    assert (first.text_a, first.text_b, first.label) == ("the cat sat 0", "the dog ran 0", 0)
    assert {e.label for e in test} == {0, 1}


@pytest.mark.parametrize("ext", ["csv", "tsv"])
def test_text_classification_csv_tsv_with_label_words_defining_the_labels(tmp_path, ext):
    folder = tmp_path / "reviews"
    folder.mkdir()
    sep = "," if ext == "csv" else "\t"
    for split, n in (("train", 10), ("test", 4)):
        text = 'a fine, "quoted" film' if ext == "tsv" else "a fine film"
        lines = [f"review{sep}stars"] + [f"{text} {i}{sep}{i % 2 + 1}" for i in range(n)]
        (folder / f"{split}.{ext}").write_text("\n".join(lines) + "\n")
    cfg = load_config(write_yaml(tmp_path, {"name": "text_classification", "path": str(folder), "dev_from_train": 0.2,
                                            "columns": {"text_a": "review", "label": "stars"}},
                                 {2: ["good"], 1: ["bad"]}))
    assert cfg["dataset"]["labels"] == ["2", "1"]  # the label words' order is the class order
    assert cfg["soft_verbalizer"]["label_words"] == [["good"], ["bad"]]
    train, dev, test, labels = load_task(cfg, None)
    assert len(train) + len(dev) == 10 and len(dev) >= 1 and len(test) == 4
    row = next(e for e in train + dev if e.text_a.endswith(" 0"))
    assert row.label == 1  # stars 1 -> the second label
    assert all(e.text_b is None for e in test)
    if ext == "tsv":
        assert '"quoted"' in row.text_a  # tsv quotes are text


def _bad(tmp_path, case):
    folder = tmp_path / "data"
    words = [["yes"], ["no"]]
    ds = {"name": "text_pair", "path": str(folder), "columns": {"text_a": "sent1", "text_b": "sent2", "label": "gold"},
          "labels": ["entails", "contradicts"]}
    if case == "unknown_folder":
        ds["path"] = str(tmp_path / "no_such_folder")
        return ds, words, r"text_pair data folder '.*no_such_folder' not found"
    nli_folder(folder)
    if case == "missing_column":
        ds["columns"]["text_b"] = "hypothesis"
        return ds, words, r"train.jsonl has no column 'hypothesis' \(dataset.columns.text_b; line 1 has \['gold', 'id', 'sent1', 'sent2'\]\)"
    if case == "label_without_words":
        ds.pop("labels")
        return ds, {"entails": ["yes"]}, None  # checked at load_config below
    if case == "row_label_unknown":
        write_jsonl(folder / "test.jsonl", [{"sent1": "a", "sent2": "b", "gold": "neutral"}])
        return ds, words, r"test.jsonl line 1: label 'neutral' is not among the labels with label words \['entails', 'contradicts'\]"
    if case == "unlabelled_test":  # rows to predict given as the test split: the YAML's column name is right
        write_jsonl(folder / "test.jsonl", [{"sent1": "a", "sent2": "b"}])
        return ds, words, (r"test.jsonl has no column 'gold' \(dataset.columns.label; line 1 has \['sent1', 'sent2'\]\): "
                           r"name an existing column in the YAML, or label the file's rows \(an unlabelled file cannot be "
                           r"trained on or scored; new rows get their labels from openprompt-ipt predict --run RUN --input FILE\)$")
    if case == "missing_test":
        os.remove(folder / "test.jsonl")
        return ds, words, r"folder '.*data' has no test file \(looked for test.jsonl, test.csv, test.tsv\)"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["unknown_folder", "missing_column", "row_label_unknown", "unlabelled_test", "missing_test"])
def test_bad_data_is_one_line(tmp_path, case):
    ds, words, match = _bad(tmp_path, case)
    cfg = load_config(write_yaml(tmp_path, ds, words))
    with pytest.raises((ValueError, FileNotFoundError), match=match) as e:
        load_task(cfg, None)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("dataset,words,match", [
    ({"labels": ["entails", "contradicts"]}, {"entails": ["yes"]}, r"label 'contradicts' has no label words: add it to soft_verbalizer.label_words"),
    ({}, [["yes"], ["no"]], r"dataset.labels must list the label values"),
    ({"labels": ["a", "b"], "columns": {"text_b": "x"}, "name": "text_classification"}, [["y"], ["n"]],
     r"dataset.columns.text_b is not a field of text_classification \(two texts: dataset.name: text_pair\)"),
    ({"labels": ["a", "b"], "path": None}, [["y"], ["n"]], r"needs dataset.path"),
    ({"labels": ["a", "b"], "name": "cb"}, [["y"], ["n"], ["m"]], r"dataset.labels is for your own data"),
])
def test_bad_yaml_is_one_line(tmp_path, dataset, words, match):
    ds = {"name": "text_pair", "path": str(tmp_path), **dataset}
    with pytest.raises(ValueError, match=match):
        load_config(write_yaml(tmp_path, ds, words))


def test_cli_runs_your_own_data_and_says_where_it_came_from(tiny_model_dir, tmp_path, capsys):  # noqa: F811
    folder = nli_folder(tmp_path / "my_nli")
    config = write_yaml(tmp_path, {"name": "text_pair", "path": folder,
                                   "columns": {"text_a": "sent1", "text_b": "sent2", "label": "gold"}},
                        {"entails": ["yes"], "contradicts": ["no"]}, model=tiny_model_dir)
    run = load_script("run")
    out = str(tmp_path / "runs")
    assert run.main(["--config", config, "--output-dir", out, "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"data: text_pair from {folder} (dataset.path)" in printed and "test" in printed
    metrics = json.load(open(os.path.join(out, "mine", "seed1", "metrics.json")))
    assert metrics["data_source"].startswith("data: text_pair from") and metrics["sizes"] == {"train": 16, "dev": 4, "test": 6}
    # predict reads rows in your own columns
    from openprompt_ipt.runner.predict import load_run

    preds = load_run(os.path.join(out, "mine", "seed1")).predict([{"sent1": "a cat", "sent2": "a dog", "gold": "entails"}])
    assert set(preds[0]["probabilities"]) == {"entails", "contradicts"}
    # a bad YAML through the CLI: exit 2 and one line on stderr
    bad = write_yaml(tmp_path, {"name": "text_pair", "path": str(tmp_path / "nowhere"), "labels": ["a", "b"]},
                     [["y"], ["n"]], model=tiny_model_dir)
    capsys.readouterr()
    assert run.main(["--config", bad, "--output-dir", out + "_bad", "--quiet"]) == 2  # runs/ holds the run above
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: text_pair data folder") and "nowhere" in err


@pytest.mark.parametrize("labels", ["  labels: [no, yes]\nsoft_verbalizer:\n  label_words: [[no], [yes]]\n",
                                    "soft_verbalizer:\n  label_words: {no: [no], yes: [yes]}\n"])
def test_labels_yes_and_no_written_unquoted_are_the_files_labels(tmp_path, labels):
    """YAML 1.1 read unquoted yes / no / on / off as booleans: 'labels: [no, yes]' became ['False', 'True'] and
    every row was refused with "label 'no' is not among the labels ['False', 'True']: add it to dataset.labels"."""
    folder = tmp_path / "answers"
    rows = [{"text": f"is it {i}", "label": ["no", "yes"][i % 2]} for i in range(8)]
    write_jsonl(folder / "train.jsonl", rows)
    write_jsonl(folder / "test.jsonl", rows[:4])
    path = tmp_path / "c.yaml"
    path.write_text(f"dataset:\n  name: text_classification\n  path: {folder}\n" + labels
                    + "plm:\n  freeze: true\n")
    cfg = load_config(str(path))
    assert cfg["dataset"]["labels"] == ["no", "yes"] and cfg["soft_verbalizer"]["label_words"] == [["no"], ["yes"]]
    train, _, test, names = load_task(cfg, str(tmp_path))
    assert names == ["no", "yes"] and sorted(e.label for e in test) == [0, 0, 1, 1]
    # a flag still takes true / false only; 'yes' is one line, no longer a silent True
    with pytest.raises(ValueError, match=r"^plm.freeze = 'yes' is not allowed: give true or false$"):
        load_config(str(path), ["plm.freeze=yes"])


def test_init_from_reads_the_label_set_of_a_run_on_your_own_data(tmp_path):
    """init_from compares label sets (to carry the head over): a source run on text_pair data names its
    labels in its dataset section, not in a registered task."""
    from openprompt_ipt.runner.init_from import _source_labels

    folder = nli_folder(tmp_path / "my_nli")
    source = load_config(write_yaml(tmp_path, {"name": "text_pair", "path": folder,
                                               "columns": {"text_a": "sent1", "text_b": "sent2", "label": "gold"},
                                               "labels": ["entails", "contradicts"]}, [["yes"], ["no"]]))
    assert _source_labels(source) == ["entails", "contradicts"]


# ---------------------------------------------------------------- bad rows (issue #32 items 4, 6, 7)
PAIR = {"name": "text_pair", "columns": {"text_a": "sent1", "text_b": "sent2", "label": "gold"},
        "labels": ["entails", "contradicts"]}


@pytest.mark.parametrize("value,why", [
    (None, "is null"),
    (7, r"is a number \(7\), not text"),
    ("   ", "is empty"),
])
def test_a_null_number_or_empty_text_is_refused_with_file_line_and_column(tmp_path, value, why):
    """A null text trained as the string "None" (and a number as "7")."""
    folder = tmp_path / "data"
    nli_folder(folder)
    rows = [json.loads(line) for line in open(folder / "train.jsonl")]
    rows[2]["sent2"] = value
    write_jsonl(folder / "train.jsonl", rows)
    cfg = load_config(write_yaml(tmp_path, {**PAIR, "path": str(folder)}, [["yes"], ["no"]]))
    with pytest.raises(ValueError, match=rf"train.jsonl line 3 column 'sent2' \(text_b\) {why}: fix the row, or set "
                                         r"dataset.skip_bad_rows: true to skip such rows$"):
        load_task(cfg, None)


def test_skip_bad_rows_skips_them_and_says_how_many(tmp_path, capsys):
    folder = tmp_path / "data"
    nli_folder(folder)
    rows = [json.loads(line) for line in open(folder / "train.jsonl")]
    rows[2]["sent1"], rows[5]["sent2"] = None, ""
    write_jsonl(folder / "train.jsonl", rows)
    cfg = load_config(write_yaml(tmp_path, {**PAIR, "path": str(folder), "skip_bad_rows": True}, [["yes"], ["no"]]))
    train, dev, test, _ = load_task(cfg, None)
    assert len(train) == 14 and all(e.text_a != "None" and e.text_b for e in train)
    printed = capsys.readouterr().out
    assert "note: skipped 2 bad row(s) of" in printed and "line 3 column 'sent1' (text_a) is null" in printed


@pytest.mark.parametrize("ext,line,fields,hint", [
    ("csv", "a fine, long film,1", 3, r"a text holding a comma must be quoted \(\"a, b\"\)"),
    ("tsv", "a fine\tlong film\t1", 3, "a text holding a tab splits into two fields"),
    ("csv", "a fine film", 1, "a field is missing"),
])
def test_a_row_with_more_or_fewer_fields_than_the_header_is_refused(tmp_path, ext, line, fields, hint):
    """csv.DictReader silently cut the extra fields (and filled missing ones with None)."""
    folder = tmp_path / "reviews"
    folder.mkdir()
    sep = "," if ext == "csv" else "\t"
    for split in ("train", "test"):
        rows = [f"review{sep}stars"] + [f"film {i}{sep}{i % 2}" for i in range(6)]
        if split == "train":
            rows.insert(4, line)  # file line 5
        (folder / f"{split}.{ext}").write_text("\n".join(rows) + "\n")
    cfg = load_config(write_yaml(tmp_path, {"name": "text_classification", "path": str(folder),
                                            "columns": {"text_a": "review", "label": "stars"}, "labels": ["0", "1"]},
                                 [["bad"], ["good"]]))
    with pytest.raises(ValueError, match=rf"train.{ext} line 5 has {fields} fields but the header has 2 \({hint}\): "
                                         "fix the row"):
        load_task(cfg, None)


def test_a_non_utf8_file_names_the_file_and_the_encoding_setting(tmp_path):
    folder = tmp_path / "reviews"
    folder.mkdir()
    for split in ("train", "test"):
        text = "review,stars\n" + "".join(f"caf\u00e9 {i},{i % 2}\n" for i in range(6))
        (folder / f"{split}.csv").write_bytes(text.encode("latin-1"))
    ds = {"name": "text_classification", "path": str(folder), "columns": {"text_a": "review", "label": "stars"},
          "labels": ["0", "1"]}
    cfg = load_config(write_yaml(tmp_path, ds, [["bad"], ["good"]]))
    with pytest.raises(ValueError, match=r"data file .*train.csv is not utf-8 text \(line 2: byte 0xe9 cannot be read\): "
                                         r"re-save it as UTF-8, or set dataset.encoding"):
        load_task(cfg, None)
    cfg = load_config(write_yaml(tmp_path, {**ds, "encoding": "latin-1"}, [["bad"], ["good"]]))
    train, dev, test, _ = load_task(cfg, None)
    assert test[0].text_a == "caf\u00e9 0"
    with pytest.raises(ValueError, match=r"dataset.encoding 'latin-9x' is not an encoding Python knows"):
        load_config(write_yaml(tmp_path, {**ds, "encoding": "latin-9x"}, [["bad"], ["good"]]))


def test_a_non_utf8_file_of_a_builtin_task_names_the_file(tmp_path):
    from openprompt_ipt.data.tasks import TASKS

    folder = tmp_path / "CB"
    folder.mkdir()
    (folder / "train.jsonl").write_bytes('{"premise": "caf\u00e9", "hypothesis": "x", "label": 0}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"data file .*CB/train.jsonl is not UTF-8 text \(byte 0xe9 cannot be read\): "
                                         "re-save it as UTF-8"):
        TASKS["cb"].load(str(folder), "train")


def test_a_null_text_in_a_builtin_task_folder_is_refused(tmp_path):
    """A CB-format folder with a null hypothesis trained it as text_b None."""
    from openprompt_ipt.data.tasks import TASKS

    folder = tmp_path / "CB"
    write_jsonl(folder / "train.jsonl", [{"premise": "a", "hypothesis": "b", "label": 0},
                                         {"premise": "a", "hypothesis": None, "label": 1}])
    with pytest.raises(ValueError, match=r"CB/train.jsonl row 1 column 'hypothesis' \(text_b\) is null: fix the row, "
                                         r"or set dataset.skip_bad_rows: true to skip such rows$"):
        TASKS["cb"].load(str(folder), "train")
    from openprompt_ipt.data.lookup import get_task

    kept = get_task("cb", {"skip_bad_rows": True}).load(str(folder), "train")
    assert [e.text_b for e in kept] == ["b"]


@pytest.mark.parametrize("value, why", [(3, "is a number (3), not text"), ("", "is empty"), (None, "is null")])
def test_a_bad_text_in_a_sentence_task_folder_is_refused_like_every_other_tasks(tmp_path, value, why):
    """MR / CR / MPQA / Subj rows skipped the text check (their reader undoes csv quoting): a number
    trained as the text "3" and an empty sentence as "", where SST-2 or CB refuse the row."""
    from openprompt_ipt.data.lookup import get_task
    from openprompt_ipt.data.tasks import TASKS

    folder = tmp_path / "mr"
    write_jsonl(folder / "train.jsonl", [{"sentence": '"a "" b"', "label": "1"}, {"sentence": value, "label": "0"}])
    with pytest.raises(ValueError, match=rf"mr/train.jsonl row 1 column 'sentence' \(text_a\) {re.escape(why)}: fix the row, "
                                         r"or set dataset.skip_bad_rows: true to skip such rows$"):
        TASKS["mr"].load(str(folder), "train")
    kept = get_task("mr", {"skip_bad_rows": True}).load(str(folder), "train")
    assert [e.text_a for e in kept] == ['a " b']


def test_a_dev_split_of_one_label_is_refused_before_training(tmp_path):
    """A dev.jsonl whose rows all carry one label: predicting it everywhere scored dev accuracy and macro-F1 1.0,
    so the run silently selected the epoch that had collapsed onto that label."""
    from openprompt_ipt.data.prepare import prepare_splits

    folder = nli_folder(tmp_path / "my_nli")
    rows = [json.loads(line) for line in (tmp_path / "my_nli" / "dev.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "my_nli" / "dev.jsonl", [dict(r, gold="contradicts") for r in rows])
    dataset = {"name": "text_pair", "path": folder, "columns": {"text_a": "sent1", "text_b": "sent2", "label": "gold"},
               "labels": ["entails", "contradicts"]}
    cfg = load_config(write_yaml(tmp_path, dataset, [["yes"], ["no"]]))
    with pytest.raises(ValueError, match=r"^the dev split of text_pair labels all its 4 example\(s\) 'contradicts': a "
                                         r"model predicting 'contradicts' everywhere would score 1.0 on it, so it cannot "
                                         r"select an epoch: give a dev split with at least 2 labels \(without a dev "
                                         r"file, dataset.dev_from_train draws one from train, stratified by label\)$"):
        prepare_splits(cfg, str(tmp_path))
    (tmp_path / "my_nli" / "dev.jsonl").unlink()  # dev drawn from train: both labels
    assert {e.label for e in prepare_splits(cfg, str(tmp_path)).dev} == {0, 1}
