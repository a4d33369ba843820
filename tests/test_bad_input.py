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
