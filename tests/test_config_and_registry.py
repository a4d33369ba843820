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
])
def test_unknown_keys_name_the_nearest(tmp_path, text, match):
    with pytest.raises(KeyError, match=match):
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
