"""Tiny random BERT / RoBERTa masked LMs and tokenizers built from vocab files the tests write."""
from __future__ import annotations

import json
import os

import pytest
import torch

import openprompt_ipt  # noqa: F401  (shims + registration before anything imports openprompt)

WORDS = ("the a an is was it not no yes maybe question answer true false neutral good bad movie film "
         "great terrible sports science world business music art cat dog sat on mat ran fast slow "
         "he she they we said think believe know that this what why how . , ? !").split()


def _bert(tmp):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    d = os.path.join(tmp, "bert")
    os.makedirs(d, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 128}, f)
    tok = AutoTokenizer.from_pretrained(d)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128, pad_token_id=0)
    return BertForMaskedLM(cfg).eval(), tok


def _roberta(tmp):
    from transformers import AutoTokenizer, RobertaConfig, RobertaForMaskedLM

    d = os.path.join(tmp, "roberta")
    os.makedirs(d, exist_ok=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    pieces = specials + sorted({w for w in WORDS} | {"\u0120" + w for w in WORDS})
    chars = sorted({c for w in WORDS for c in w} | {"\u0120"})
    for c in chars:
        if c not in pieces:
            pieces.append(c)
    with open(os.path.join(d, "vocab.json"), "w") as f:
        json.dump({p: i for i, p in enumerate(pieces)}, f)
    merges = set()
    for w in WORDS:  # merge each word left to right so whole words (with and without \u0120) are single tokens
        for form in (w, "\u0120" + w):
            cur = form[0]
            for c in form[1:]:
                merges.add((cur, c))
                cur += c
    merged = sorted(merges, key=lambda m: (m[0] != "\u0120", len(m[0]), m))  # \u0120 merges first
    known = set(pieces)
    with open(os.path.join(d, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
        for a, b in merged:
            f.write(f"{a} {b}\n")
            for t in (a, b, a + b):
                if t not in known:
                    known.add(t)
                    pieces.append(t)
    with open(os.path.join(d, "vocab.json"), "w") as f:
        json.dump({p: i for i, p in enumerate(pieces)}, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "RobertaTokenizer", "model_max_length": 128}, f)
    tok = AutoTokenizer.from_pretrained(d)
    cfg = RobertaConfig(vocab_size=len(pieces), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=130, pad_token_id=1, bos_token_id=0,
                        eos_token_id=2, type_vocab_size=1)
    return RobertaForMaskedLM(cfg).eval(), tok


def _t5_tokenizer(tmp, extra_ids=4):
    """A T5 tokenizer (SentencePiece-style unigram, ``</s>`` appended, ``<extra_id_i>`` sentinels) over WORDS, from
    a ``tokenizer.json`` written here: transformers 4 loads it as ``T5TokenizerFast``, 5 as ``T5Tokenizer``; both
    give the same ids."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import AutoTokenizer

    d = os.path.join(tmp, "t5")
    os.makedirs(d, exist_ok=True)
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("\u2581", -2.0)]
    vocab += [("\u2581" + w, -1.0) for w in WORDS] + [(w, -3.0) for w in WORDS]
    vocab += [(c, -5.0) for c in sorted({c for w in WORDS for c in w} - set(WORDS))]
    vocab += [(f"<extra_id_{i}>", 0.0) for i in range(extra_ids - 1, -1, -1)]  # T5's order: the last id is 0
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    try:
        meta = dict(replacement="\u2581", prepend_scheme="always", split=True)
        decoders.Metaspace(**meta)
    except TypeError:  # the older tokenizers of transformers 4.39
        meta = dict(replacement="\u2581", add_prefix_space=True)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(**meta)])
    tok.decoder = decoders.Metaspace(**meta)
    tok.post_processor = processors.TemplateProcessing(single=["$A", "</s>"], pair=["$A", "</s>", "$B", "</s>"],
                                                       special_tokens=[("</s>", 1)])
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "T5Tokenizer", "extra_ids": extra_ids, "model_max_length": 128,
                   "additional_special_tokens": [f"<extra_id_{i}>" for i in range(extra_ids)],
                   "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}, f)
    return AutoTokenizer.from_pretrained(d)


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models gain nothing from intra-op threads; on a busy 2-core machine OpenMP spin-waits make them
    10-20x slower. Modules that train a lot: ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(params=["bert", "roberta"])
def plm(request, tiny_dir):
    """(model, tokenizer) of a tiny random masked LM; a fresh model each test."""
    torch.manual_seed(0)
    return (_bert if request.param == "bert" else _roberta)(tiny_dir)


@pytest.fixture
def bert(tiny_dir):
    torch.manual_seed(0)
    return _bert(tiny_dir)


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    """accelerate keeps process-wide state, and transformers 4.39's TrainingArguments(bf16=True) exports
    ACCELERATE_MIXED_PRECISION=bf16 into os.environ: every later Trainer in the process then trained and predicted
    under bf16 autocast unasked. Each test starts from a clean state and environment, as a new process would."""
    import sys

    saved = {k: v for k, v in os.environ.items() if k.startswith("ACCELERATE_")}
    yield
    for key in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        del os.environ[key]
    os.environ.update(saved)
    state = sys.modules.get("accelerate.state")
    if state is not None:
        state.AcceleratorState._reset_state(reset_partial_state=True)
