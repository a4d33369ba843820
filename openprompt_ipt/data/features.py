"""Examples -> tokenised features -> batches padded to their own longest example.

OpenPrompt's ``PromptDataLoader`` pads every example to ``max_seq_length``; CB through a BERT
tokenizer averages ~83 tokens (p90 140), so padding to 256 triples the compute. We reuse
OpenPrompt's template wrapping and tokenizer wrapper, strip each example's padding once, and pad
per batch in ``collate``.
"""
from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Dict, List, Optional, Sequence

import torch
from torch.utils.data import DataLoader, Sampler

from ..progress import bar as progress_bar
from ..prompting.examples import text_fields_filled

SEQUENCE_KEYS = ("input_ids", "attention_mask", "token_type_ids", "loss_ids", "soft_token_ids")

# wrapped-example digest -> its token tensors, while ``shared_features()`` is open (None: nothing kept)
_SHARED: ContextVar[Optional[Dict]] = ContextVar("openprompt_ipt_shared_features", default=None)


@contextmanager
def shared_features():
    """Within it, ``encode_examples`` tokenizes each wrapped example once: the seeds and sweep points of one group
    (``runner/runs.py``) share their dev / test splits, which every run tokenized again (IMDB's 30,000
    evaluation reviews: ~30 s a run). Nested: the outer one's store. The tensors are shared, never written to."""
    token = _SHARED.set({}) if _SHARED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _SHARED.reset(token)


def _wrapper_signature(tokenizer_wrapper, keys) -> str:
    """What besides the wrapped text decides an encoding: the wrapper's tokenizer, length and truncation."""
    tok = getattr(tokenizer_wrapper, "tokenizer", None)
    truncate = getattr(getattr(tokenizer_wrapper, "truncate_fct", None), "__name__", None)
    return json.dumps([type(tokenizer_wrapper).__qualname__, getattr(tokenizer_wrapper, "max_seq_length", None),
                       truncate, getattr(tokenizer_wrapper, "create_token_type_ids", None), type(tok).__qualname__,
                       getattr(tok, "name_or_path", None), len(tok) if tok is not None else None, sorted(keys)])


def _encoded(wrapped, tokenizer_wrapper, keys, store: Optional[Dict], signature: str) -> Dict:
    """One wrapped example's token tensors (padding stripped), from ``store`` when it already holds them."""
    if store is None:
        return _tokenize(wrapped, tokenizer_wrapper, keys)
    text = wrapped[0] if isinstance(wrapped, (list, tuple)) and len(wrapped) == 2 else wrapped  # not guid / label
    key = hashlib.blake2b((signature + json.dumps(text, sort_keys=True, default=str)).encode(), digest_size=16).digest()
    if key not in store:  # the digest is taken first: tokenize_one_example rewrites special-token pieces in place
        store[key] = _tokenize(wrapped, tokenizer_wrapper, keys)
    return dict(store[key])


def _tokenize(wrapped, tokenizer_wrapper, keys) -> Dict:
    enc = tokenizer_wrapper.tokenize_one_example(wrapped, teacher_forcing=False)
    length = int(sum(enc["attention_mask"]))
    return {k: torch.tensor(v[:length]) for k, v in enc.items() if k in keys}


def encode_examples(examples: Sequence, template, tokenizer_wrapper, desc: str = "tokenizing",
                    show_progress: bool = True) -> List[Dict]:
    if len(examples) == 0:
        raise ValueError(f"no examples to encode ({desc}): check the data path and split name")
    keys = set(SEQUENCE_KEYS) | set(getattr(template, "registered_inputflag_names", ()))  # + the template's flags
    store = _SHARED.get()
    signature = _wrapper_signature(tokenizer_wrapper, keys) if store is not None else ""
    features = []
    for ex in progress_bar(examples, show_progress and len(examples) >= 500, desc=desc, leave=False):
        wrapped = template.wrap_one_example(text_fields_filled(ex))
        feat = _encoded(wrapped, tokenizer_wrapper, keys, store, signature)
        if isinstance(ex.label, float):  # a regression score (data/tasks.py: Task.regression)
            feat["label"] = torch.tensor(ex.label, dtype=torch.float32)
        else:
            feat["label"] = torch.tensor(int(ex.label) if ex.label is not None else -1)
        feat["guid"] = ex.guid
        if ex.meta and "group" in ex.meta:  # the question an answer belongs to (MultiRC EM)
            feat["group"] = ex.meta["group"]
        features.append(feat)
    return features


def collate(features: List[Dict], pad_token_id: int) -> Dict:
    length = max(f["input_ids"].size(0) for f in features)
    batch = {}
    for key in features[0]:
        values = [f[key] for f in features]
        if isinstance(values[0], torch.Tensor) and values[0].dim() == 1:  # per-token: pad to the batch
            pad = pad_token_id if key == "input_ids" else 0
            out = torch.full((len(values), length), pad, dtype=values[0].dtype)
            for i, v in enumerate(values):
                out[i, : v.size(0)] = v
            batch[key] = out
        elif isinstance(values[0], torch.Tensor):
            batch[key] = torch.stack(values)
        else:
            batch[key] = values
    return batch


class LengthSortedSampler(Sampler):
    """Evaluation order by length: batches of similar lengths waste the least padding."""

    def __init__(self, features: List[Dict]):
        self.order = sorted(range(len(features)), key=lambda i: features[i]["input_ids"].size(0))

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return len(self.order)


def make_loader(features: List[Dict], batch_size: int, pad_token_id: int, shuffle: bool = False,
                sort_by_length: bool = False, generator: torch.Generator | None = None) -> DataLoader:
    sampler = LengthSortedSampler(features) if sort_by_length and not shuffle else None
    return DataLoader(features, batch_size=batch_size, shuffle=shuffle and sampler is None, sampler=sampler,
                      collate_fn=lambda b: collate(b, pad_token_id), generator=generator)
