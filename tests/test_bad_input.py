"""Each bad input gets one clear error that names the fix."""
import pytest
import torch

from helpers import TEXT
from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.generators import save_table


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
    assert (f"run the pretraining first: python experiments/pretrain_categories.py --config yamls/pretrain_{name}.yaml "
            "--set plm.model_path=roberta-large") in message
