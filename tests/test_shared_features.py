"""A seeds group / sweep tokenizes each split once (data/features.py: shared_features): every run of
``--seeds 1,2,3`` or a sweep point tokenized the same dev / test again (IMDB's 30,000 evaluation reviews: ~30 s each)."""
import os

import torch
from openprompt.data_utils import InputExample

from openprompt_ipt.data import encode_examples
from openprompt_ipt.data.features import shared_features
from test_predict_and_runs import tiny_cfg, tiny_model_dir  # noqa: F401
from test_training import write_cb


class Template:
    registered_inputflag_names = ()

    def wrap_one_example(self, ex):
        return [[{"text": ex.text_a, "loss_ids": 0}], {"guid": ex.guid}]


class Wrapper:
    calls = 0

    def __init__(self, max_seq_length=8):
        self.max_seq_length = max_seq_length

    def tokenize_one_example(self, wrapped, teacher_forcing=False):
        Wrapper.calls += 1
        ids = [len(wrapped[0][0]["text"]), self.max_seq_length, 0]
        return {"input_ids": ids, "attention_mask": [1, 1, 0]}


def examples():
    return [InputExample(guid=str(i), text_a="a" * (i + 1), label=i % 2) for i in range(5)]


def test_inside_shared_features_an_example_is_tokenized_once_and_encodes_the_same():
    Wrapper.calls = 0
    alone = encode_examples(examples(), Template(), Wrapper(), show_progress=False)
    with shared_features():
        first = encode_examples(examples(), Template(), Wrapper(), show_progress=False)
        again = encode_examples(examples(), Template(), Wrapper(), show_progress=False)  # a new run's wrapper
        assert Wrapper.calls == 10
        longer = encode_examples(examples(), Template(), Wrapper(max_seq_length=16), show_progress=False)
        assert Wrapper.calls == 15  # another max_seq_length is another encoding
    for a, b, c in zip(alone, first, again):
        assert a.keys() == b.keys() == c.keys() and all(torch.equal(a[k], c[k]) for k in ("input_ids", "label"))
        assert a["guid"] == c["guid"]
    assert [f["input_ids"][1].item() for f in longer] == [16] * 5
    encode_examples(examples(), Template(), Wrapper(), show_progress=False)  # closed: nothing kept
    assert Wrapper.calls == 20


def test_a_seeds_group_with_a_sweep_tokenizes_each_example_once(tiny_model_dir, tmp_path, monkeypatch):  # noqa: F811
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from openprompt_ipt.runner.runs import run_seeds

    seen = []
    original = MLMTokenizerWrapper.tokenize_one_example

    def counting(self, wrapped, teacher_forcing=False):
        seen.append(wrapped[1]["guid"])
        return original(self, wrapped, teacher_forcing)

    monkeypatch.setattr(MLMTokenizerWrapper, "tokenize_one_example", counting)
    cfg = tiny_cfg(tiny_model_dir, write_cb(tmp_path / "CB"), epochs=1)
    cfg["sweep"] = {"train.lr_prompt": [0.05, 0.01]}
    summary = run_seeds(cfg, "tiny", str(tmp_path / "runs"), seeds=[1, 2], show_progress=False)
    assert len(summary["results"]) == 2
    # 12 train rows (train + dev, split per seed) and 6 val rows (test) with the texts of 6 of them: each text
    # tokenized once, where 2 seeds x 2 points tokenized 18 rows 4 times
    assert len(seen) == 12 and len(set(seen)) == 12, sorted(seen)
    assert os.path.isfile(tmp_path / "runs" / "tiny" / "seed2" / "metrics.json")
