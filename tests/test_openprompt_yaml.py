"""OpenPrompt's experiment-YAML schema through our runner (docs/openprompt.md) and ``--config NAME``
lookup under yamls/."""
import glob
import importlib.util
import os

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def _run_cli():
    spec = importlib.util.spec_from_file_location("run_cli", os.path.join(ROOT, "experiments", "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bare_config_name_is_found_under_yamls(monkeypatch, capsys):
    cli = _run_cli()
    monkeypatch.chdir(ROOT)  # the design card's command, from the repo root
    # an unknown key stops it right after loading: the lookup ran and said which file it used
    assert cli.main(["--config", "cb_prefix_ipt.yaml", "--set", "train.nope=1"]) == 2
    out, err = capsys.readouterr()
    assert f"config: {os.path.join('yamls', 'cb_prefix_ipt.yaml')}" in out
    assert "unknown config key 'train.nope'" in err


def test_bare_config_name_from_another_folder(tmp_path, monkeypatch, capsys):
    cli = _run_cli()
    monkeypatch.chdir(tmp_path)  # no ./yamls here: this checkout's yamls/ is the fallback
    assert cli.main(["--config", "cb_random_ipt", "--set", "train.nope=1"]) == 2
    assert f"config: {os.path.join(ROOT, 'yamls', 'cb_random_ipt.yaml')}" in capsys.readouterr().out


def test_missing_config_lists_where_it_looked(tmp_path, monkeypatch, capsys):
    cli = _run_cli()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["--config", "no_such.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "config file 'no_such.yaml' not found (looked in: no_such.yaml, " in err
    assert os.path.join("yamls", "no_such.yaml") in err and os.path.join(ROOT, "yamls", "no_such.yaml") in err


def test_existing_path_wins_over_lookup(tmp_path):
    from openprompt_ipt.runner.config import find_config

    (tmp_path / "yamls").mkdir()
    (tmp_path / "yamls" / "a.yaml").write_text("seed: 1\n")
    (tmp_path / "a.yaml").write_text("seed: 2\n")
    assert find_config(str(tmp_path / "a.yaml"), [str(tmp_path / "yamls")]) == str(tmp_path / "a.yaml")
    assert find_config("a.yaml", [str(tmp_path / "yamls")]) == str(tmp_path / "yamls" / "a.yaml")
    with pytest.raises(FileNotFoundError, match="looked in"):
        find_config(str(tmp_path / "nope.yaml"), [str(tmp_path / "yamls")])  # absolute: no lookup


# ------------------------------------------------------------------ OpenPrompt's experiment schema
OPENPROMPT_YAMLS = sorted(glob.glob(os.path.join(ROOT, "yamls", "openprompt", "*.yaml")))
# what each kept file must mean in our schema (its header says what we changed from OpenPrompt's)
EXPECTED = {
    "cb_instance_wise.yaml": dict(
        dataset="cb", template="instance_wise", verbalizer="soft_verbalizer", words=[["yes"], ["no"], ["maybe"]],
        protocol=("full", None, None), seed=42, epochs=8, batch_size=8, max_len=128, lr_prompt=0.003, lr_head=0.001,
        warmup=10, device="cpu", text_start=' hypothesis: {"placeholder":"text_b"'),
    "boolq_generated_prefix.yaml": dict(
        dataset="boolq", template="generated_prefix", verbalizer="manual_verbalizer", words=[["no"], ["yes"]],
        protocol=("full", None, None), seed=42, epochs=4, batch_size=4, max_len=128, lr_prompt=0.003, warmup=20,
        device="cpu", text_start='{"placeholder":"text_a"} Question:', train_from="validation"),
    "agnews_few_shot_idpg.yaml": dict(
        dataset="agnews", template="generated_prefix", verbalizer="soft_verbalizer",
        words=[["politics"], ["sports"], ["business"], ["technology"]], protocol=("few_shot", 16, 16), seed=123,
        epochs=2, batch_size=2, lr_prompt=0.003, lr_head=0.001, device="cpu", text_start='A {"mask"} news:'),
    "agnews_few_shot_encoder_ipt.yaml": dict(
        dataset="agnews", template="instance_wise", verbalizer="manual_verbalizer",
        words=[["politics", "world"], ["sports", "competition"], ["business", "corporation"], ["technology", "science"]],
        protocol=("few_shot", 10, 10), seed=123, epochs=3, batch_size=2, lr_prompt=0.003, device="cpu",
        text_start='{"placeholder": "text_a"} This topic is about'),
}


def test_every_kept_openprompt_yaml_is_checked():
    assert sorted(os.path.basename(p) for p in OPENPROMPT_YAMLS) == sorted(EXPECTED)


@pytest.mark.parametrize("path", OPENPROMPT_YAMLS, ids=os.path.basename)
def test_kept_openprompt_yaml_maps_to_our_config(path):
    from openprompt_ipt.runner.config import load_config, read_yaml_with_overrides
    from openprompt_ipt.runner.openprompt_schema import looks_like_openprompt

    want = EXPECTED[os.path.basename(path)]
    assert looks_like_openprompt(read_yaml_with_overrides(path))
    assert "From OpenPrompt's experiments/" in open(path).readline()  # the header names the source
    cfg = load_config(path)
    assert cfg["dataset"]["name"] == want["dataset"]
    assert (cfg["template"], cfg["verbalizer"]) == (want["template"], want["verbalizer"])
    assert cfg[cfg["verbalizer"]]["label_words"] == want["words"]  # read from the file beside the YAML
    assert cfg[cfg["template"]]["text"].startswith(want["text_start"])
    assert "file_path" not in cfg[cfg["template"]] and "optimize" not in cfg[cfg["template"]]
    proto = cfg["protocol"]
    assert (proto["name"], proto["k"], proto["dev_k"]) == want["protocol"]
    assert cfg["seed"] == want["seed"] and cfg["plm"]["model_path"] == "minilm" and cfg["plm"]["freeze"] is True
    t = cfg["train"]
    assert (t["epochs"], t["batch_size"], t["lr_prompt"], t["device"], t["max_steps"]) == (
        want["epochs"], want["batch_size"], want["lr_prompt"], want["device"], None)
    for key, ours in (("lr_head", "lr_head"), ("warmup", "warmup_steps")):
        if key in want:
            assert t[ours] == want[key]
    if "max_len" in want:
        assert cfg["plm"]["max_seq_length"] == want["max_len"]
    if "train_from" in want:  # a key of our schema mixed into an OpenPrompt-schema file
        assert cfg["dataset"]["train_from"] == want["train_from"]


@pytest.mark.parametrize("path", OPENPROMPT_YAMLS, ids=os.path.basename)
def test_kept_openprompt_yaml_loads_in_openprompt(path):
    """OpenPrompt's own loader reads the same file: same template / verbalizer and their sections."""
    from openprompt.config import get_config_from_file, get_user_config

    from openprompt_ipt.runner.config import read_yaml_with_overrides

    node = get_config_from_file(path)
    raw = read_yaml_with_overrides(path)
    assert node.template == raw["template"] and node.verbalizer == raw["verbalizer"]
    assert node[node.template].file_path == raw[raw["template"]]["file_path"]
    assert node.dataset.name == raw["dataset"]["name"]
    # get_user_config (OpenPrompt's cli): merged onto its default config, whose value types must match
    full = get_user_config(path)
    assert (full.template, full.verbalizer, full.learning_setting) == (raw["template"], raw["verbalizer"],
                                                                       raw["learning_setting"])
    assert full.environment.num_gpus == 0 and full.dataloader.max_seq_length == (raw.get("dataloader") or {}).get(
        "max_seq_length", 256)


@pytest.mark.parametrize("path", OPENPROMPT_YAMLS, ids=os.path.basename)
def test_openprompt_and_our_runner_build_the_same_template_and_words(path, bert, monkeypatch):
    """OpenPrompt's load_template / load_verbalizer on the file as its loader reads it, and our mapped
    config, give the same wrapped example and label words (the file_path lines resolve alike)."""
    from openprompt.config import get_config_from_file
    from openprompt.data_utils import InputExample
    from openprompt.prompts import load_template, load_verbalizer
    from yacs.config import CfgNode

    from openprompt_ipt.data.tasks import TASKS
    from openprompt_ipt.runner.config import load_config

    model, tokenizer = bert
    cfg = load_config(path)
    node = get_config_from_file(path)
    monkeypatch.chdir(os.path.dirname(path))  # OpenPrompt reads file_path from the working directory
    theirs = load_template(node, model=model, tokenizer=tokenizer)
    ours = load_template(CfgNode({"template": cfg["template"], cfg["template"]: cfg[cfg["template"]]},
                                 new_allowed=True), model=model, tokenizer=tokenizer)
    assert type(theirs) is type(ours) and type(ours).__name__ in ("InstanceWiseTemplate", "GeneratedPrefixTemplate")
    example = InputExample(guid="0", text_a="the cat sat on the mat", text_b="it sat", label=0)
    assert theirs.wrap_one_example(example) == ours.wrap_one_example(example)
    classes = list(TASKS[cfg["dataset"]["name"]].labels)  # OpenPrompt orders a {label: words} file by these
    theirs_v = load_verbalizer(node, model=model, tokenizer=tokenizer, classes=classes)
    name = cfg["verbalizer"]
    ours_v = load_verbalizer(CfgNode({"verbalizer": name, name: cfg[name]}, new_allowed=True), model=model,
                             tokenizer=tokenizer, classes=classes)
    assert type(theirs_v) is type(ours_v) and len(ours_v.label_words) == len(classes)
    assert [list(w) for w in theirs_v.label_words] == [list(w) for w in ours_v.label_words]


def test_our_own_yamls_are_not_taken_for_openprompt_ones():
    from openprompt_ipt.runner.config import read_yaml_with_overrides
    from openprompt_ipt.runner.openprompt_schema import looks_like_openprompt

    ours = [p for p in glob.glob(os.path.join(ROOT, "yamls", "**", "*.yaml"), recursive=True)
            if os.sep + "openprompt" + os.sep not in p]
    assert len(ours) > 40
    taken = [p for p in ours if looks_like_openprompt(read_yaml_with_overrides(p) or {})]
    assert taken == []


# OpenPrompt's experiments/cb_bert_large_cased_softprompt.yaml, as OpenPrompt ships it, with the
# template switched to ours (the only edit a user must make)
OPENPROMPT_CB = """
dataset:
  name: super_glue.cb
  path:
plm:
  model_name: bert
  model_path: bert-large-cased
  optimize:
    freeze_para: True
    lr: 1.0e-5
    weight_decay: 0.0
    scheduler:
      type:
      num_warmup_steps: 500
dataloader:
  max_seq_length: 384
  decoder_max_length: 3
  truncate_method: "head"
  decode_from_pad: false
train:
  batch_size: 8
  gradient_accumulation_steps: 1
  max_grad_norm: 1.0
  num_epochs:
  num_training_steps: 30000
test:
  batch_size: 16
dev:
  batch_size: 16
template: instance_wise
verbalizer: manual_verbalizer
instance_wise:
  choice: 0
  file_path: template.txt
  strategy: random
  optimize:
    name: AdamW
    lr: 0.03
    adam_epsilon: 1.0e-8
    scheduler:
      num_warmup_steps: 500
manual_verbalizer:
  choice: 0
  file_path: verbalizer.txt
environment:
  num_gpus: 1
  cuda_visible_devices:
  local_rank: 0
learning_setting: full
"""


def _openprompt_cb(tmp_path, text=OPENPROMPT_CB):
    (tmp_path / "template.txt").write_text('{"placeholder":"text_a"} {"placeholder":"text_b"} {"mask"} .\n')
    (tmp_path / "verbalizer.txt").write_text("yes\nno\nmaybe")
    path = tmp_path / "cb_openprompt.yaml"
    path.write_text(text)
    return str(path)


def test_openprompt_cb_config_maps_key_by_key(tmp_path):
    from openprompt_ipt.runner.config import load_config, read_yaml_with_overrides
    from openprompt_ipt.runner.openprompt_schema import to_ours

    path = _openprompt_cb(tmp_path)
    raw, notes = to_ours(read_yaml_with_overrides(path), base_dir=str(tmp_path), gpus=1)
    assert raw["train"]["device"] == "cuda" and raw["seed"] == 100  # num_gpus 1 here; OpenPrompt's default seed
    assert any(n.startswith("dataloader.truncate_method head") for n in notes)
    cpu = path.replace(".yaml", "_cpu.yaml")
    open(cpu, "w").write(OPENPROMPT_CB.replace("num_gpus: 1", "num_gpus: 0"))
    cfg = load_config(cpu, ["reproduce.seed=7"])  # --set works on OpenPrompt's keys
    assert cfg["dataset"]["name"] == "cb" and cfg["dataset"]["path"] is None
    assert cfg["plm"] == {"model_path": "bert-large-cased", "model_name": "bert", "freeze": True, "max_seq_length": 384,
                          "frozen_dropout": True}  # OpenPrompt's cli freezes without plm_eval_mode: dropout stays on
    t = cfg["train"]
    assert t["max_steps"] == 30000 and t["batch_size"] == 8 and t["max_grad_norm"] == 1.0
    assert t["lr_prompt"] == 0.03 and t["warmup_steps"] == 500 and t["adam_eps"] == 1e-8
    assert t["lr_plm"] == 1e-5 and t["weight_decay"] == 0.0  # frozen PLM: DEFAULTS, whatever plm.optimize says
    assert t["device"] == "cpu" and cfg["seed"] == 7 and cfg["test"]["batch_size"] == 16
    assert cfg["manual_verbalizer"]["label_words"] == [["yes"], ["no"], ["maybe"]]
    assert cfg["instance_wise"]["text"] == '{"placeholder":"text_a"} {"placeholder":"text_b"} {"mask"} .'


def test_openprompt_defaults_where_the_yaml_is_silent(tmp_path):
    """OpenPrompt's config_default: PLM trained (freeze_para False), 5 epochs, seed 100, metric micro-f1."""
    from openprompt_ipt.runner.config import load_config

    text = OPENPROMPT_CB.replace("    freeze_para: True\n", "").replace("  num_training_steps: 30000\n", "")
    text = text.replace("num_gpus: 1", "num_gpus: 0") + "classification:\n  metric: [macro-f1]\n"
    notes = []
    cfg = load_config(_openprompt_cb(tmp_path, text), [], notes)
    assert cfg["plm"]["freeze"] is False and cfg["train"]["epochs"] == 5 and cfg["train"]["max_steps"] is None
    assert cfg["seed"] == 100 and cfg["train"]["metric"] == "macro_f1"
    assert cfg["train"]["lr_plm"] == 1e-5  # plm.optimize.lr: the PLM trains here
    assert any("freeze_para not set" in n for n in notes)


@pytest.mark.parametrize("edit, message", [
    (("model_name: bert", "model_name: t5"), "plm.model_name: t5 is not a masked LM"),
    (("num_gpus: 1", "num_gpus: 4"), "environment.num_gpus: 4 but this machine has 0 CUDA GPU(s): set it to 0"),
    (("template: instance_wise", "template: soft_template"), "template: soft_template is OpenPrompt's own: switch it"),
    (("template: instance_wise", "template: instance_wide"), "template: 'instance_wide' is unknown (did you mean 'instance_wise'?)"),
    (("name: super_glue.cb", "name: super_glue.copa"), "dataset.name: super_glue.copa has no task in our runner"),
    (("learning_setting: full", "learning_setting: zero_shot"), "learning_setting: zero_shot is not supported"),
    (("verbalizer: manual_verbalizer", "verbalizer: knowledgeable_verbalizer"),
     "verbalizer: knowledgeable_verbalizer is not supported by our runner (automatic / knowledgeable / proto "
     "verbalizers need OpenPrompt's own trainer): use one of ['manual_verbalizer', 'soft_verbalizer']"),
    (("file_path: verbalizer.txt", "file_path: missing.txt"), "manual_verbalizer.file_path: file 'missing.txt' not found"),
    (("  choice: 0\n  file_path: template.txt", "  choice: 3\n  file_path: template.txt"),
     "instance_wise.choice: 3 names no template line"),
    (("learning_setting: full", "learning_setting: full\ntask: generation"), "task: generation is not supported"),
    (("learning_setting: full", "learning_setting: full\ncalibrate: pmi_calibrate"), "calibrate: pmi_calibrate is not supported"),
    (("learning_setting: full", "learning_setting: few_shot\nsampling_from_train:\n  seed: [1, 2]"),
     "sampling_from_train.seed lists 2 seeds: keep one and run the others with --seeds 1,2"),
    (("learning_setting: full", "learning_setting: few_shot\nsampling_from_train:\n  also_sample_dev: false"),
     "sampling_from_train.also_sample_dev: false is not supported"),
    (("learning_setting: full", "learning_setting: full\nenviroment:\n  num_gpus: 0"),
     "unknown key 'enviroment' in an OpenPrompt-schema YAML (did you mean 'environment'?)"),
    (("  batch_size: 8\n", "  batch_size: 8\n  num_epoch: 3\n"), "unknown key 'train.num_epoch'"),
    (("    name: AdamW\n    lr: 0.03", "    name: Adafactor\n    lr: 0.03"), "instance_wise.optimize.name: Adafactor is not supported"),
])
def test_what_we_cannot_do_is_refused_naming_the_key(tmp_path, monkeypatch, edit, message):
    import torch

    from openprompt_ipt.runner.config import load_config

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    old, new = edit
    text = OPENPROMPT_CB.replace(old, new, 1)
    assert text != OPENPROMPT_CB
    if "num_gpus: 4" not in new:
        text = text.replace("num_gpus: 1", "num_gpus: 0")
    with pytest.raises(ValueError) as err:
        load_config(_openprompt_cb(tmp_path, text))
    line = str(err.value)
    assert message in line and "\n" not in line


def test_refusal_through_the_cli_is_one_line_and_writes_nothing(tmp_path, capsys):
    cli = _run_cli()
    path = _openprompt_cb(tmp_path, OPENPROMPT_CB.replace("model_name: bert", "model_name: t5-lm"))
    out = tmp_path / "runs"
    assert cli.main(["--config", path, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: plm.model_name: t5-lm is not a masked LM") and len(err.splitlines()) == 1
    assert not out.exists()


def test_training_steps_round_up_to_whole_epochs():
    from openprompt_ipt.runner.experiment import epochs_for_steps

    assert epochs_for_steps(5, batches_per_epoch=3) == 2       # 3 steps per epoch: 5 steps -> 2 epochs
    assert epochs_for_steps(6, batches_per_epoch=3) == 2
    assert epochs_for_steps(5, batches_per_epoch=4, accumulation=2) == 3  # 2 steps per epoch
    assert epochs_for_steps(1, batches_per_epoch=100) == 1
    with pytest.raises(ValueError, match="train.max_steps must be a positive integer"):
        epochs_for_steps(0, batches_per_epoch=3)


def test_openprompt_yaml_runs_end_to_end_on_a_tiny_model(tmp_path, capsys):
    """OpenPrompt's CB config (template switched, num_training_steps 5) through run.py on a tiny BERT, with
    --set on OpenPrompt's keys and ours: 9 training examples in batches of 4 = 3 steps per epoch -> 2 epochs."""
    import json

    import torch

    from conftest import _bert
    from test_training import write_cb

    torch.manual_seed(0)
    model, _ = _bert(str(tmp_path))
    model.save_pretrained(str(tmp_path / "bert"))
    data = write_cb(tmp_path / "CB", n_train=12, n_val=6)
    path = _openprompt_cb(tmp_path, OPENPROMPT_CB.replace("num_gpus: 1", "num_gpus: 0"))
    cli = _run_cli()
    out = tmp_path / "runs"
    rc = cli.main(["--config", path, "--output-dir", str(out), "--quiet",
                   "--set", f"plm.model_path={tmp_path / 'bert'}", "--set", "dataloader.max_seq_length=64",
                   "--set", "train.num_training_steps=5", "--set", "train.batch_size=4",
                   "--set", "instance_wise.prompt_length=2", "--set", "instance_wise.optimize.lr=0.05",
                   "--set", f"dataset.path={data}", "--set", "dataset.dev_from_train=0.25"])
    printed = capsys.readouterr().out
    assert rc == 0
    assert "note (OpenPrompt schema): dataloader.truncate_method head" in printed
    assert "| test (official val) |" in printed and "steps 6 over 2 epochs" in printed
    metrics = json.load(open(out / "cb_openprompt" / "seed100" / "metrics.json"))
    assert metrics["sizes"] == {"train": 9, "dev": 3, "test": 6} and metrics["training"]["epochs"] == 2
    assert metrics["template"] == "instance_wise" and metrics["trainable"]["plm"] == 0
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0 and len(metrics["history"]) == 2
    saved = json.load(open(out / "cb_openprompt" / "seed100" / "config.json"))
    assert saved["manual_verbalizer"]["label_words"] == [["yes"], ["no"], ["maybe"]] and saved["train"]["max_steps"] == 5


def test_label_word_dict_follows_the_task_label_order(tmp_path):
    import json

    from openprompt_ipt.runner.config import load_config

    path = _openprompt_cb(tmp_path, OPENPROMPT_CB.replace("num_gpus: 1", "num_gpus: 0")
                          .replace("file_path: verbalizer.txt", "file_path: words.json"))
    (tmp_path / "words.json").write_text(json.dumps({"neutral": ["maybe"], "entailment": ["yes", "true"],
                                                     "contradiction": ["no"]}))
    assert load_config(path)["manual_verbalizer"]["label_words"] == [["yes", "true"], ["no"], ["maybe"]]
    (tmp_path / "words.json").write_text(json.dumps({"neutral": ["maybe"], "yes": ["yes"], "no": ["no"]}))
    with pytest.raises(ValueError, match=r"names labels \['neutral', 'no', 'yes'\] but the task's are"):
        load_config(path)


def test_our_epochs_beside_openprompt_steps_wins(tmp_path):
    from openprompt_ipt.runner.config import load_config

    path = _openprompt_cb(tmp_path, OPENPROMPT_CB.replace("num_gpus: 1", "num_gpus: 0"))
    cfg = load_config(path, ["train.epochs=2", "dataset.max_train=32"])
    assert cfg["train"]["epochs"] == 2 and cfg["train"]["max_steps"] is None and cfg["dataset"]["max_train"] == 32
    assert load_config(path, ["train.num_epochs=3"])["train"]["max_steps"] == 30000  # OpenPrompt: steps win
