"""Practical data (issue #43 items 4 and 5): predict on files with extra fields; every bad row of a file
named at once (up to 20, then 'and N more'); a missing label and a non-numeric score are row problems
that skip_bad_rows / --skip-bad-rows skip, in training and in predict."""
import json

import pytest

from test_predict_and_runs import load_script, tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_training import write_cb


# ---------------------------------------------------------------- item 4: predict on real files
def test_predict_carries_extra_fields_and_a_misspelled_text_column_says_did_you_mean(tmp_path, capsys, tiny_model_dir):  # noqa: F811
    from openprompt_ipt.data.rows import BadRows
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    run = str(tmp_path / "run")
    run_experiment(tiny_cfg(tiny_model_dir, write_cb(tmp_path / "CB"), epochs=1), output_dir=run, show_progress=False)
    rows = [{"id": "a-1", "premise": "a cat sat", "hypothesis": "it sat", "source": "web"},
            {"id": "a-2", "premise": "a dog ran", "hypothesis": "it ran", "source": "news", "label": "neutral"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cli, out = load_script("predict"), tmp_path / "preds.jsonl"
    capsys.readouterr()
    assert cli.main(["--run", run, "--input", str(path), "--output", str(out)]) == 0
    preds = [json.loads(line) for line in open(out)]
    assert [(p["guid"], p["id"], p["source"]) for p in preds] == [("0", "a-1", "web"), ("1", "a-2", "news")]
    assert set(preds[0]) == {"guid", "label", "probabilities", "id", "source"}  # the input label is not carried
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: fields ['id', 'source'] not used by task 'cb' (it reads ['premise'] + ['hypothesis']): "
                     "carried to the output rows as they are"]
    # a misspelled text column is still an error, naming the field it probably meant
    typo = [{"premise": "a cat sat", "hypothesys": "it sat", "id": "b"}]
    with pytest.raises(BadRows) as e:
        load_run(run).predict(typo)
    assert e.value.lines == ["input row 0 has no column 'hypothesis' (text_b) (its field 'hypothesys': did you mean "
                             "'hypothesis'?): not scored"]


# ---------------------------------------------------------------- item 5: every bad row at once
def write_rows(folder, rows, name="train.jsonl"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def test_every_bad_row_of_a_training_file_is_named_at_once_up_to_20(tmp_path):
    from openprompt_ipt.data import get_task
    from openprompt_ipt.data.rows import BadRows

    good = {"text": "a good film", "label": "pos"}
    rows = [dict(good) for _ in range(3)] + [{"text": None, "label": "pos"}] * 24 + [{"text": "fine"}]
    folder = write_rows(tmp_path / "reviews", rows)
    ds = {"name": "text_classification", "path": folder, "labels": ["neg", "pos"]}
    with pytest.raises(BadRows) as e:
        get_task(ds["name"], ds).load(folder, "train")
    file = f"{folder}/train.jsonl"
    assert e.value.lines[:2] == [f"{file} line 4 column 'text' (text_a) is null", f"{file} line 5 column 'text' (text_a) is null"]
    assert len(e.value.lines) == 21 and e.value.lines[-1] == "and 5 more"  # 24 null texts + 1 missing label key
    assert e.value.summary == (f"25 bad rows in {file}: fix them, or set dataset.skip_bad_rows: true to skip such rows")
    # one bad row: the one line it always was
    write_rows(tmp_path / "one", [dict(good)] * 3 + [{"text": "fine"}])
    with pytest.raises(ValueError) as e:
        get_task(ds["name"], {**ds, "path": str(tmp_path / "one")}).load(str(tmp_path / "one"), "train")
    assert str(e.value) == (f"{tmp_path}/one/train.jsonl line 4 has no column 'label' (dataset.columns.label): fix the "
                            "row, or set dataset.skip_bad_rows: true to skip such rows")
    # skip_bad_rows skips all of them, the row missing its label too
    kept = get_task(ds["name"], {**ds, "skip_bad_rows": True}).load(folder, "train")
    assert len(kept) == 3


def test_a_missing_label_key_and_a_non_numeric_score_are_skippable_row_problems(tmp_path, capsys):
    from openprompt_ipt.data import get_task
    from openprompt_ipt.data.rows import BadRows
    from openprompt_ipt.runner.predict import Predictor

    # a registered task: a row without its label key names the row; skip_bad_rows skips it
    rows = [{"premise": "a cat", "hypothesis": "it sat", "label": "entailment", "idx": i} for i in range(3)]
    folder = write_rows(tmp_path / "CB", rows + [{"premise": "a dog", "hypothesis": "it ran", "idx": 3}])
    with pytest.raises(ValueError, match=r"train.jsonl row 3 has no label \(none of \['label'\]\), but split 'train'"):
        get_task("cb").load(folder, "train")
    assert len(get_task("cb", {"skip_bad_rows": True}).load(folder, "train")) == 3
    assert "note: skipped 1 bad row(s)" in capsys.readouterr().out
    # regression: every non-numeric score at once; skip_bad_rows skips them
    scores = [{"a": "a cat", "b": "a dog", "sim": s} for s in ("1.5", "high", "2", "n/a", "3")]
    folder = write_rows(tmp_path / "sim", scores)
    ds = {"name": "text_pair_regression", "path": folder, "columns": {"text_a": "a", "text_b": "b", "label": "sim"}}
    with pytest.raises(BadRows) as e:
        get_task(ds["name"], ds).load(folder, "train")
    assert [line.split(": score ")[1][:6] for line in e.value.lines] == ["'high'", "'n/a' "]
    assert len(get_task(ds["name"], {**ds, "skip_bad_rows": True}).load(folder, "train")) == 3
    # predict: a non-numeric score is a row problem (--skip-bad-rows skips it), all listed at once
    predictor = Predictor(None, None, None, None, {"dataset": {"name": "stsb"}}, "cpu")
    rows = [{"sentence1": "a cat", "sentence2": "a dog", "score": s} for s in ["1"] + ["x"] * 23]
    with pytest.raises(BadRows) as e:
        predictor.examples(rows)
    assert e.value.lines[0].startswith("input row 1 score 'x' is not a number: stsb is a regression task")
    assert len(e.value.lines) == 21 and e.value.lines[-1] == "and 3 more"
    skipped = []
    assert len(predictor.examples(rows, on_bad_row=skipped.append)) == 1 and len(skipped) == 23
