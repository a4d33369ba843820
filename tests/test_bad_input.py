"""Each bad input gets one clear error that names the fix."""
import pytest
import torch

from helpers import TEXT
from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.generators import save_table
from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)


def make(bert, **kw):
    model, tok = bert
    kw.setdefault("text", TEXT)
    return InstanceWiseTemplate(model, tok, **kw)


@pytest.mark.parametrize("kw,match", [
    (dict(strategy="randm"), "unknown strategy 'randm'"),
    (dict(strategy="encoder", encoder="transformer"), "unknown encoder 'transformer'"),
    (dict(token_source="everything"), "unknown token_source"),
    (dict(prompt_length=0), "prompt_length must be a positive"),
    (dict(prompt_length=-3), "prompt_length must be a positive"),
    (dict(prompt_length=127), "leaves no room"),
    (dict(strategy="encoder", sequence_utilization_rate=0.0), r"sequence_utilization_rate must be in \(0, 1\]"),
    (dict(strategy="encoder", sequence_utilization_rate=1.5), r"sequence_utilization_rate must be in \(0, 1\]"),
    (dict(strategy="pretrained"), "needs pretrained_path"),
    (dict(text='{"placeholder":"text_a"} is it ?'), 'has no {"mask"}'),
])
def test_bad_arguments(bert, kw, match):
    with pytest.raises(ValueError, match=match):
        make(bert, **kw)


def test_missing_pretrained_file(bert, tmp_path):
    with pytest.raises(FileNotFoundError, match="pretrain_categories"):
        make(bert, strategy="pretrained", pretrained_path=str(tmp_path / "nope.safetensors"))


def test_wrong_vocab_size_table(bert, tmp_path):
    path = str(tmp_path / "t.safetensors")
    save_table(path, torch.randn(7, 32), {"tokenizer": "other"})
    with pytest.raises(ValueError, match="has 7 rows but this PLM/tokenizer has"):
        make(bert, strategy="pretrained", pretrained_path=path)
    assert not (tmp_path / "t.safetensors.tmp").exists()


def test_too_wide_table(bert, tmp_path):
    model, _ = bert
    path = str(tmp_path / "t.safetensors")
    save_table(path, torch.randn(model.config.vocab_size, 64), {})
    with pytest.raises(ValueError, match="wider than the PLM hidden size 32"):
        make(bert, strategy="pretrained", pretrained_path=path)


@pytest.mark.parametrize("section, path, missing", [
    ("encoder_path", "exports/lstm-roberta-large", "encoder_path 'exports/lstm-roberta-large' does not exist"),
    ("pretrained_path", "exports/textcnn-roberta-large/embedding.safetensors", "pretrained table"),
])
def test_a_missing_roberta_large_export_names_the_pretraining_command(bert, section, path, missing):
    """The Encoder / Pretrained IPT table rows point at exports/<encoder>-roberta-large (issue #24 item 3)."""
    from openprompt_ipt import InstanceWiseTemplate

    model, tok = bert
    kwargs = dict(strategy="encoder", encoder="lstm") if section == "encoder_path" else dict(strategy="pretrained")
    with pytest.raises(FileNotFoundError) as err:
        InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', prompt_length=2,
                             **{section: path}, **kwargs)
    message = str(err.value)
    assert missing in message and "\n" not in message
    name = "lstm" if section == "encoder_path" else "textcnn"
    assert (f"run the pretraining first: openprompt-ipt pretrain categories --config pretrain_{name}.yaml "
            "--set plm.model_path=roberta-large (in a clone also: python experiments/pretrain_categories.py, "
            "same options)") in message


# ---------------------------------------------------------------- predict: rows with no usable text (issue #32 item 4)
def test_predict_names_each_row_whose_text_is_null_a_number_or_empty_and_scores_none_of_them(
        tmp_path, capsys, tiny_model_dir):  # noqa: F811
    import json

    from test_predict_and_runs import load_script, tiny_cfg
    from test_training import write_cb

    from openprompt_ipt.data.rows import BadRows
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run, read_jsonl

    run = str(tmp_path / "run")
    run_experiment(tiny_cfg(tiny_model_dir, write_cb(tmp_path / "CB"), epochs=1), output_dir=run, show_progress=False)
    rows = [{"premise": "a cat sat", "hypothesis": "it sat"},
            {"premise": None, "hypothesis": "it sat"},
            {"premise": "a cat sat", "hypothesis": 3},
            {"premise": "", "hypothesis": "it sat"},
            {"premise": "a dog ran"}]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expected = [f"{path} line 2 column 'premise' (text_a) is null: not scored",
                f"{path} line 3 column 'hypothesis' (text_b) is a number (3), not text: not scored",
                f"{path} line 4 column 'premise' (text_a) is empty: not scored",
                f"{path} line 5 has no column 'hypothesis' (text_b): not scored"]
    predictor = load_run(run)
    with pytest.raises(BadRows) as e:
        predictor.predict(read_jsonl(str(path)))
    assert e.value.lines == expected
    # the CLI: one line per bad row and what to do, exit 2, nothing written
    cli = load_script("predict")
    out = tmp_path / "preds.jsonl"
    capsys.readouterr()
    assert cli.main(["--run", run, "--input", str(path), "--output", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.split("\n") if line.startswith("error:")]  # not the weight-loading bar
    assert err[:4] == [f"error: {line}" for line in expected]
    assert err[4].startswith("error: 4 of 5 input rows cannot be scored") and len(err) == 5
    assert err[4].endswith("or leave them out (experiments/predict.py --skip-bad-rows)")
    assert not out.exists()
    # the console command names itself, not the clone's script (a pip install has no experiments/)
    from openprompt_ipt.commands import main as console

    assert console(["predict", "--run", run, "--input", str(path), "--output", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.split("\n") if line.startswith("error:")]
    assert err[4].endswith("or leave them out (openprompt-ipt predict --skip-bad-rows)") and len(err) == 5
    assert "on_bad_row" in e.value.summary  # from Python: the keyword that does it
    # --skip-bad-rows: the good row is scored (its guid keeps its place), each bad one named
    assert cli.main(["--run", run, "--input", str(path), "--output", str(out), "--skip-bad-rows"]) == 0
    preds = [json.loads(line) for line in open(out)]
    assert [p["guid"] for p in preds] == ["0"]
    err = capsys.readouterr().err
    assert all(f"skipped: {line}" in err for line in expected) and "1 predictions (4 bad rows skipped)" in err


# ---------------------------------------------------------------- template placeholders vs the dataset's texts (#43 item 2)
PAIR_TEXT = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'


@pytest.mark.parametrize("dataset, fix", [
    ("{name: text_classification, path: data/reviews, labels: [neg, pos]}",
     "or use dataset.name: text_pair with dataset.columns.text_b"),
    ("{name: sst2}", "or use a two-text dataset"),
])
def test_a_text_b_placeholder_on_a_one_text_dataset_is_refused_when_the_config_is_read(tmp_path, dataset, fix):
    from helpers import config_file

    from openprompt_ipt.runner.config import load_config

    name = "text_classification" if "text_classification" in dataset else "sst2"
    path = config_file(tmp_path, f"dataset: {dataset}\ninstance_wise: {{text: '{PAIR_TEXT}'}}\n"
                                 "soft_verbalizer: {label_words: [[bad], [good]]}\n")
    with pytest.raises(ValueError) as e:
        load_config(path)
    assert str(e.value) == (f'instance_wise.text uses {{"placeholder":"text_b"}}, but dataset \'{name}\' has one text per '
                            'example (text_a only: text_b would be an empty string): remove {"placeholder":"text_b"} from '
                            f"instance_wise.text, {fix}")


def test_template_file_path_in_our_schema_is_read_into_the_text(tmp_path):
    """``instance_wise.file_path`` passed the key check, then crashed in OpenPrompt (AttributeError: choice) once
    the data had loaded. Now it is read when the config is, beside the YAML, as the OpenPrompt schema does."""
    from helpers import config_file

    from openprompt_ipt.runner.config import load_config

    (tmp_path / "t.txt").write_text('{"placeholder":"text_b"} ? {"mask"} {"placeholder":"text_a"}\n' + PAIR_TEXT + "\n")
    cfg = load_config(config_file(tmp_path, "dataset: {name: cb}\ninstance_wise: {file_path: t.txt, choice: 1}\n"))
    assert cfg["instance_wise"]["text"] == PAIR_TEXT and "file_path" not in cfg["instance_wise"]
    cfg = load_config(config_file(tmp_path, "dataset: {name: cb}\ninstance_wise: {file_path: t.txt}\n"))
    assert cfg["instance_wise"]["text"].startswith('{"placeholder":"text_b"}')  # choice 0, as OpenPrompt
    for section, error in (("{file_path: t.txt, choice: 5}", "instance_wise.choice: 5 names no template line"),
                           ("{file_path: nope.txt}", "instance_wise.file_path: file 'nope.txt' not found"),
                           (f"{{file_path: t.txt, text: '{PAIR_TEXT}'}}", "give text or file_path, not both")):
        with pytest.raises(ValueError, match=error):
            load_config(config_file(tmp_path, f"dataset: {{name: cb}}\ninstance_wise: {section}\n"))


def test_verbalizer_file_path_in_our_schema_is_read_into_label_words(tmp_path):
    """The same for ``soft_verbalizer.file_path``: a line per class in the task's label order, or a {label: words}
    JSON file, which on own data without dataset.labels defines the labels (as label_words given as a dict does)."""
    import json

    from helpers import config_file

    from openprompt_ipt.runner.config import load_config

    (tmp_path / "words.txt").write_text("yes\nno\nmaybe\n")
    cfg = load_config(config_file(tmp_path, f"dataset: {{name: cb}}\ninstance_wise: {{text: '{PAIR_TEXT}'}}\n"
                                            "soft_verbalizer: {file_path: words.txt}\n"))
    assert cfg["soft_verbalizer"]["label_words"] == [["yes"], ["no"], ["maybe"]]
    assert "file_path" not in cfg["soft_verbalizer"]
    (tmp_path / "words.json").write_text(json.dumps({"pos": ["great"], "neg": "bad"}))
    cfg = load_config(config_file(tmp_path, f"dataset: {{name: text_classification, path: {tmp_path}}}\n"
                                            "instance_wise: {text: '{\"placeholder\":\"text_a\"} {\"mask\"}'}\n"
                                            "soft_verbalizer: {file_path: words.json}\n"))
    assert cfg["dataset"]["labels"] == ["pos", "neg"] and cfg["soft_verbalizer"]["label_words"] == [["great"], ["bad"]]
    with pytest.raises(ValueError, match="give label_words or file_path, not both"):
        load_config(config_file(tmp_path, "dataset: {name: cb}\nsoft_verbalizer: {file_path: words.txt, "
                                          "label_words: [[a], [b], [c]]}\n"))


def test_a_pair_dataset_whose_template_never_uses_text_b_gets_one_warning(tmp_path):
    import warnings

    from helpers import config_file

    from openprompt_ipt.runner.config import load_config
    from openprompt_ipt.runner.template_text import UnusedTextBWarning

    one = config_file(tmp_path, "dataset: {name: cb}\ninstance_wise: {text: '{\"placeholder\":\"text_a\"} ? {\"mask\"} .'}\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_config(one)
    said = [w for w in caught if issubclass(w.category, UnusedTextBWarning)]
    assert len(said) == 1 and "second text of every 'cb' example (field 'hypothesis') is left out" in str(said[0].message)
    both = config_file(tmp_path, f"dataset: {{name: cb}}\ninstance_wise: {{text: '{PAIR_TEXT}'}}\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_config(both)
    assert not [w for w in caught if issubclass(w.category, UnusedTextBWarning)]


# ---------------------------------------------------------------- Encoder IPT without its export (#43 item 6)
@pytest.mark.parametrize("encoder", ["textcnn", "lstm", "mlp"])
def test_the_encoder_ipt_yamls_say_their_encoder_starts_random_without_an_export(encoder):
    import os

    from openprompt_ipt.runner.config import load_config
    from openprompt_ipt.runner.experiment import encoder_start

    path = os.path.join(os.path.dirname(__file__), "..", "yamls", f"cb_encoder_ipt_{encoder}.yaml")
    assert "starts from random weights" in open(path).read()  # documented in the YAML
    start = encoder_start(load_config(path))
    assert start["weights"] == "random" and start["note"].startswith(
        f"note: Encoder IPT ({encoder}) starts from random encoder weights: no instance_wise.encoder_path")
    assert f"--set instance_wise.encoder_path=exports/{encoder}-minilm" in start["note"]
    with_export = encoder_start(load_config(path, [f"instance_wise.encoder_path=exports/{encoder}-minilm"]))
    assert with_export == {"encoder": encoder, "weights": f"exports/{encoder}-minilm"}


def test_an_encoder_ipt_run_without_its_export_says_so_first_and_in_metrics_json(tmp_path, capsys, tiny_model_dir):  # noqa: F811
    import json
    import os

    import yaml
    from test_predict_and_runs import load_script, tiny_raw
    from test_training import write_cb

    raw = tiny_raw(tiny_model_dir, write_cb(tmp_path / "CB"), epochs=1)
    raw["instance_wise"].update(strategy="encoder", encoder="mlp", encoder_hidden=8)
    config = tmp_path / "enc.yaml"
    config.write_text(yaml.safe_dump(raw))
    capsys.readouterr()
    assert load_script("run").main(["--config", str(config), "--output-dir", str(tmp_path / "runs"), "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith("note: Encoder IPT (mlp) starts from random encoder weights")]
    assert said and said[0] < 3  # among the first lines, before the result
    metrics = json.load(open(os.path.join(tmp_path, "runs", "enc", "seed3", "metrics.json")))
    assert metrics["encoder_init"] == {"encoder": "mlp", "weights": "random"}
