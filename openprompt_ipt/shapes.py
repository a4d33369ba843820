"""Random-weight PLMs of a real architecture, for parameter counts and shape benchmarks offline.

``random_masked_lm("roberta-large")`` builds RobertaForMaskedLM from the config shipped in
``openprompt_ipt/configs`` (no download, no weights) with a character-level byte-BPE tokenizer
(every byte a token, no merges) so templates can be built; token ids stay below the real vocab.
"""
from __future__ import annotations

import json
import os
import tempfile

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "configs")


def _byte_unicode():
    """GPT-2's reversible byte -> printable unicode map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def char_bpe_tokenizer(directory: str | None = None):
    from transformers import AutoTokenizer

    directory = directory or tempfile.mkdtemp(prefix="ipt-tok-")
    vocab = ["<s>", "<pad>", "</s>", "<unk>"] + _byte_unicode() + ["<mask>"]
    with open(os.path.join(directory, "vocab.json"), "w") as f:
        json.dump({p: i for i, p in enumerate(vocab)}, f)
    with open(os.path.join(directory, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "RobertaTokenizer", "model_max_length": 512}, f)
    return AutoTokenizer.from_pretrained(directory)


def available_configs():
    return sorted(f[:-5] for f in os.listdir(CONFIG_DIR) if f.endswith(".json"))


def random_masked_lm(name: str = "roberta-large"):
    """(model, tokenizer) with random weights and the named architecture."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    path = os.path.join(CONFIG_DIR, f"{name}.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no shipped config '{name}': choose one of {available_configs()}")
    with open(path) as f:
        raw = json.load(f)
    config = AutoConfig.for_model(**raw)
    return AutoModelForMaskedLM.from_config(config).eval(), char_bpe_tokenizer()
