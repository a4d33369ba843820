"""YAML -> OpenPrompt's own load_template finds our class; config errors name the nearest key."""
import os
import pytest
from openprompt.prompts import load_template
from yacs.config import CfgNode

from helpers import TEXT, config_file
from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.runner.config import load_config, parse_override


def test_openprompt_load_template_builds_instance_wise(bert):
    model, tok = bert
    node = CfgNode({"template": "instance_wise",
                    "instance_wise": {"text": TEXT, "strategy": "encoder", "prompt_length": 3, "encoder": "mlp",
                                      "sequence_utilization_rate": 0.5}}, new_allowed=True)
    t = load_template(node, model=model, tokenizer=tok)
    assert isinstance(t, InstanceWiseTemplate)
    assert t.generator.rate == 0.5 and t.prompt_length == 3


def test_openprompt_load_template_builds_generated_prefix_with_its_generator_section(bert):
    from openprompt_ipt import GeneratedPrefixTemplate

    model, tok = bert
    node = CfgNode({"template": "generated_prefix",
                    "generated_prefix": {"text": TEXT, "generator": "idpg", "prompt_length": 3,
                                         "idpg": {"layer": "dnn", "hidden": 4, "sharing": "L"}}}, new_allowed=True)
    t = load_template(node, model=model, tokenizer=tok)
    assert isinstance(t, GeneratedPrefixTemplate)
    assert t.injection == "hidden" and len(t.generator.generators) == model.config.num_hidden_layers


def test_nested_generator_key_typo_names_the_nearest(tmp_path):
    path = config_file(tmp_path, "template: generated_prefix\ngenerated_prefix:\n  generatr: idpg\n")
    with pytest.raises(KeyError, match="did you mean 'generator'"):
        load_config(path)


def test_yaml_loads_with_overrides(tmp_path):
    cfg = load_config(config_file(tmp_path,
                                  "template: instance_wise\ninstance_wise:\n  strategy: random\n  prompt_length: 8\n"),
                      ["train.epochs=2", "instance_wise.prompt_length=4"])
    assert cfg["train"]["epochs"] == 2 and cfg["instance_wise"]["prompt_length"] == 4
    assert cfg["train"]["batch_size"] == 16  # default kept


@pytest.mark.parametrize("text,match", [
    ("trian:\n  epochs: 3\n", "did you mean 'train'"),
    ("train:\n  epoch: 3\n", "did you mean 'epochs'"),
    ("instance_wise:\n  prompt_lenght: 3\n", "did you mean 'prompt_length'"),
    ("template: instance_wize\n", "unknown template 'instance_wize'"),
    # another template's / verbalizer's section: it was "unknown config key" or "did you mean 'verbalizer'"
    ("generated_prefix:\n  prompt_length: 3\n", r"^\"section 'generated_prefix' is for template: generated_prefix, but "
     r"this config uses template: instance_wise \(its keys go under 'instance_wise'\): set template: generated_prefix, "
     r"or move the keys under 'instance_wise'\"$"),
    ("manual_verbalizer:\n  label_words: [[a], [b]]\n", r"section 'manual_verbalizer' is for verbalizer: "
     r"manual_verbalizer, but this config uses verbalizer: soft_verbalizer"),
])
def test_unknown_keys_name_the_nearest(tmp_path, text, match):
    with pytest.raises(KeyError, match=match):
        load_config(config_file(tmp_path, text))


@pytest.mark.parametrize("text,key", [("1: 2\n", "'1'"), ("train:\n  3: 4\n", "'train.3'")])
def test_a_numeric_key_is_named_not_a_type_error(tmp_path, text, key):
    """YAML reads ``1:`` as an int key: the same one line as any unknown key (it was TypeError: 'int' object is not
    iterable, from the nearest-name lookup)."""
    with pytest.raises(KeyError, match=f"unknown config key {key} \\(valid: "):
        load_config(config_file(tmp_path, text))


def test_shipped_yamls_parse():
    import glob

    files = glob.glob("yamls/cb_*.yaml") + glob.glob("yamls/rte_*.yaml")
    assert len(files) > 20 and "yamls/cb_prefix_ipt.yaml" in files
    for f in files:
        cfg = load_config(f)
        assert cfg["dataset"]["name"] == f.split("/")[-1].split("_")[0]


def test_exponent_floats_without_a_dot_are_floats(tmp_path):
    """Regression: PyYAML (YAML 1.1) read 1e-5 as the string '1e-5', so --set train.lr_prompt=1e-5 or a
    sweep written by json.dumps ([1e-05]) crashed in the LR scheduler with 'can't multiply sequence'."""
    assert parse_override("train.lr_prompt=1e-5") == (["train", "lr_prompt"], 1e-5)
    assert parse_override('sweep={"train.lr_prompt": [1e-05, 5E-4]}')[1] == {"train.lr_prompt": [1e-5, 5e-4]}
    assert parse_override("train.epochs=3")[1] == 3 and parse_override("train.metric=f1a")[1] == "f1a"
    cfg = load_config(config_file(tmp_path,
                                  "train:\n  lr_prompt: 1e-5\n  lr_head: 2.5e-3\nsweep:\n  train.lr_head: [1e-3, 5e-4]\n"),
                      ["train.lr_plm=3e-5"])
    assert cfg["train"]["lr_prompt"] == 1e-5 and cfg["train"]["lr_plm"] == 3e-5
    assert cfg["sweep"] == {"train.lr_head": [1e-3, 5e-4]}


@pytest.mark.parametrize("yaml_name,expected", [
    ("cb_prompt_tuning", "Prompt Tuning"), ("cb_finetune", "Fine-tuning"), ("cb_random_ipt", "PT + Random IPT"),
    ("cb_pretrained_ipt", "PT + Pretrained IPT"), ("cb_encoder_ipt_lstm", "PT + Encoder IPT (RNN)"),
    ("cb_prefix_tuning", "Prefix Tuning"), ("cb_ptuning_v2", "P-tuning v2"),
    ("cb_prefix_ipt_encoder_textcnn", "Prefix + Encoder IPT (CNN)"), ("cb_s_idpg_phm", "S-IDPG-PHM"),
    ("cb_m_idpg_phm_glove", "M-IDPG-PHM-GloVe")])
def test_runs_are_named_as_the_papers_tables_name_them(yaml_name, expected):
    from openprompt_ipt.runner.config import load_config
    from openprompt_ipt.runner.experiment import paper_method_name

    root = os.path.join(os.path.dirname(__file__), "..", "yamls")
    cfg = load_config(os.path.join(root, f"{yaml_name}.yaml"))
    assert paper_method_name(cfg) == expected
    cfg["generated_prefix"] = dict(cfg.get("generated_prefix") or {}, generator="idpg", injection="kv",
                                   idpg={"depth": "multi", "layer": "dnn"})
    cfg["template"] = "generated_prefix"
    assert paper_method_name(cfg) == "M-IDPG-DNN (kv)"  # a non-default injection is named


# ---------------------------------------------------------------- values: type and range (runner/schema.py)
PREFIX_IDPG = ("template: generated_prefix\ngenerated_prefix:\n  generator: idpg\n  prompt_length: 5\n"
               "  idpg:\n    hidden: 16\n")


@pytest.mark.parametrize("base,override,line", [
    ("", "train.epochs=abc", "train.epochs = 'abc' is not allowed: give an integer >= 1"),
    ("", "train.epochs=1.5", "train.epochs = 1.5 is not allowed: give an integer >= 1"),
    ("", "train.epochs=0", "train.epochs = 0 is not allowed: give an integer >= 1"),
    ("", "train.lr_prompt=abc", "train.lr_prompt = 'abc' is not allowed: give a number > 0"),
    ("", "train.lr_prompt=-0.003", "train.lr_prompt = -0.003 is not allowed: give a number > 0"),
    ("", "train.lr_head=-1", "train.lr_head = -1 is not allowed: give a number > 0, or null (train.lr_prompt's rate)"),
    ("", "train.batch_size=true", "train.batch_size = True is not allowed: give an integer >= 1"),
    ("", "train.warmup_ratio=1.5", "train.warmup_ratio = 1.5 is not allowed: give a number in [0, 1)"),
    ("", "train.max_steps=.nan", "train.max_steps = nan is not allowed: give an integer >= 1, or null (train.epochs decides)"),
    ("", "instance_wise.prompt_length=2.7", "instance_wise.prompt_length = 2.7 is not allowed: give an integer >= 0"),
    ("", "instance_wise.prompt_length=0",
     "instance_wise.prompt_length = 0 is not allowed with strategy random: give an integer >= 1 (0 only with strategy: none)"),
    ("", "instance_wise.encoder_dropout=1", "instance_wise.encoder_dropout = 1 is not allowed: give a number in [0, 1)"),
    ("", "dataset.max_train=0", "dataset.max_train = 0 is not allowed: give an integer >= 1, or null (no cap)"),
    ("", "dataset.dev_from_train=1", "dataset.dev_from_train = 1 is not allowed: give a number in (0, 1)"),
    ("", "plm.max_seq_length=64.5", "plm.max_seq_length = 64.5 is not allowed: give an integer >= 8"),
    ("", "plm.freeze=no_thanks", "plm.freeze = 'no_thanks' is not allowed: give true or false"),
    ("", "test.batch_size=-4", "test.batch_size = -4 is not allowed: give an integer >= 1"),
    ("", "protocol.cv_folds=1", "protocol.cv_folds = 1 is not allowed: give an integer >= 2"),
    ("", "seed=-1", "seed = -1 is not allowed: give an integer in [0, 4294967295]"),
    ("", "seed=4294967296", "seed = 4294967296 is not allowed: give an integer in [0, 4294967295]"),  # numpy's range
    (PREFIX_IDPG, "generated_prefix.idpg.hidden=2.5", "generated_prefix.idpg.hidden = 2.5 is not allowed: give an integer >= 1"),
    (PREFIX_IDPG, "generated_prefix.prompt_length=0", "generated_prefix.prompt_length = 0 is not allowed: give an integer >= 1"),
])
def test_a_bad_value_is_one_line_naming_the_key_the_value_and_what_is_allowed(tmp_path, base, override, line):
    """Issue #32 item 3: these ran into 30-50-line TypeErrors, a half-made run, or trained (negative rate,
    prompt_length 2.7 -> 2)."""
    from openprompt_ipt.runner.schema import ConfigValueError

    with pytest.raises(ConfigValueError) as e:
        load_config(config_file(tmp_path, base + "train:\n  epochs: 1\n"), [override])
    assert str(e.value) == line


def test_integral_floats_become_ints_and_null_means_what_the_schema_says(tmp_path):
    cfg = load_config(config_file(tmp_path, "train:\n  epochs: 2.0\n  lr_head: null\n"), ["train.lr_prompt=1"])
    assert cfg["train"]["epochs"] == 2 and isinstance(cfg["train"]["epochs"], int)
    assert cfg["train"]["lr_prompt"] == 1  # a float key takes an int as written
    assert cfg["train"]["lr_head"] is None


def test_sweep_values_are_checked_as_their_key(tmp_path):
    from openprompt_ipt.runner.schema import ConfigValueError

    with pytest.raises(ConfigValueError, match=r"^sweep train.lr_prompt = -0.1 is not allowed: give a number > 0$"):
        load_config(config_file(tmp_path, "sweep:\n  train.lr_prompt: [0.01, -0.1]\n"))


def test_openprompt_schema_numbers_are_checked_under_the_name_the_yaml_wrote(tmp_path):
    """num_epochs: 1.5 became 1 through int() in the mapping."""
    from openprompt_ipt.runner.schema import ConfigValueError

    path = os.path.join("yamls", "openprompt", "cb_instance_wise.yaml")
    with pytest.raises(ConfigValueError, match=r"^train.num_epochs = 1.5 is not allowed: give an integer >= 1$"):
        load_config(path, ["train.num_epochs=1.5"])
    with pytest.raises(ConfigValueError, match=r"^dataloader.max_seq_length = 'long' is not allowed"):
        load_config(path, ["dataloader.max_seq_length=long"])


def _numeric_annotation(annotation) -> bool:
    text = str(annotation)
    return any(t in text for t in ("int", "float", "bool")) and "List" not in text and "Sequence" not in text


def test_every_numeric_key_the_runner_reads_has_a_schema_row():
    """A new numeric setting must get its type and range in runner/schema.py."""
    import dataclasses
    import inspect

    from openprompt_ipt.generators.idpg import IDPGConfig
    from openprompt_ipt.generators.ipt_prefix import IPTPrefixConfig
    from openprompt_ipt.generators.prefix import PrefixConfig
    from openprompt_ipt.runner.config import DEFAULTS
    from openprompt_ipt.runner.schema import SCHEMA
    from openprompt_ipt.openprompt.templates.generated_prefix import GeneratedPrefixTemplate

    wanted = {k for k, v in DEFAULTS.items() if isinstance(v, (int, float))}
    wanted |= {f"{s}.{k}" for s, sec in DEFAULTS.items() if isinstance(sec, dict)
               for k, v in sec.items() if isinstance(v, (int, float))}
    for cls, section in ((InstanceWiseTemplate, "instance_wise"), (GeneratedPrefixTemplate, "generated_prefix")):
        wanted |= {f"{section}.{name}" for name, p in inspect.signature(cls.__init__).parameters.items()
                   if name not in ("self", "model", "tokenizer") and _numeric_annotation(p.annotation)}
    for cls, section in ((PrefixConfig, "prefix"), (IPTPrefixConfig, "ipt"), (IDPGConfig, "idpg")):
        wanted |= {f"generated_prefix.{section}.{f.name}" for f in dataclasses.fields(cls) if _numeric_annotation(f.type)}
    assert "train.epochs" in wanted and "generated_prefix.idpg.hidden" in wanted
    assert sorted(wanted - set(SCHEMA)) == []


# ---------------------------------------------------------------- the YAML file itself
@pytest.mark.parametrize("text,line", [
    ("train:\n  epochs: [1, 2\n", r"c.yaml:3:1: YAML syntax error: expected ',' or '\]', but got '<stream end>' "
                                  r"\(while parsing a flow sequence started at 2:11\)$"),
    ("train:\n  epochs: 1\n   lr_prompt: 2\n", r"c.yaml:3:13: YAML syntax error: mapping values are not allowed here$"),
    ("", r"config file '.*c.yaml' is empty \(no keys, only blanks or comments\)"),
    ("# only a comment\n\n", r"config file '.*c.yaml' is empty"),
    ("- train\n- epochs\n", r"config file '.*c.yaml' holds a list, not 'section: value' lines"),
])
def test_a_broken_or_empty_yaml_is_one_line(tmp_path, text, line):
    """Issue #32 item 5: a syntax error was a 58-line traceback, an empty file silently ran the defaults."""
    from openprompt_ipt.runner.config import ConfigFileError

    with pytest.raises(ConfigFileError, match=line) as e:
        load_config(config_file(tmp_path, text))
    assert "\n" not in str(e.value)


def test_a_non_utf8_yaml_names_the_file(tmp_path):
    from openprompt_ipt.runner.config import ConfigFileError

    path = tmp_path / "c.yaml"
    path.write_bytes("train:\n  # caf\u00e9\n  epochs: 1\n".encode("latin-1"))
    with pytest.raises(ConfigFileError, match=r"c.yaml' is not UTF-8 text \(line 2: byte 0xe9\): re-save it as UTF-8$"):
        load_config(str(path))


@pytest.mark.parametrize("text,args,starts", [
    ("train:\n  epochs: 1\n", ["--set", "train.epochs=0"], "error: train.epochs = 0 is not allowed"),
    ("train:\n  epochs: 1\n", ["--set", "train.lr_prompt=-1"], "error: train.lr_prompt = -1 is not allowed"),
    ("train:\n  epochs: [1\n", [], "error: "),
    ("", [], "error: config file"),
    # a value where a section goes was a TypeError traceback (an empty 'train:' too; '--set train=' dropped the YAML's)
    ("dataset: cb\n", [], "error: dataset = 'cb' is not allowed: 'dataset' is a section of keys (['name', "),
    ("train:\n  epochs: 1\n", ["--set", "train=5"], "error: train = 5 is not allowed: 'train' is a section"),
    ("train:\n  epochs: 1\n", ["--set", "train="], "error: train = null (empty) is not allowed"),
    ("train:\nseed: 1\n", [], "error: train = null (empty) is not allowed"),
    ("instance_wise: 3\n", [], "error: instance_wise = 3 is not allowed: 'instance_wise' is a section"),
])
def test_cli_refuses_before_any_run_directory_exists(tmp_path, capsys, text, args, starts):
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_cli", os.path.join("experiments", "run.py"))
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    out = tmp_path / "runs"
    assert run.main(["--config", config_file(tmp_path, text), "--output-dir", str(out), "--quiet"] + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(starts) and "\n" not in err and "Traceback" not in err
    assert not out.exists()


def test_a_set_value_that_is_not_yaml_is_one_line(tmp_path):
    from openprompt_ipt.runner.config import ConfigFileError

    with pytest.raises(ConfigFileError, match=r"^--set train.epochs=\[1: the value is not YAML \(expected ','.*quote it"):
        load_config(config_file(tmp_path, "train:\n  epochs: 1\n"), ["train.epochs=[1"])
