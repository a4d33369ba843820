"""Examples -> tokenised features -> batches padded to their own longest example.

OpenPrompt's ``PromptDataLoader`` pads every example to ``max_seq_length``; CB through a BERT
tokenizer averages ~83 tokens (p90 140), so padding to 256 triples the compute. We reuse
OpenPrompt's template wrapping and tokenizer wrapper, strip each example's padding once, and pad
per batch in ``collate``.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import torch
from torch.utils.data import DataLoader, Sampler
from tqdm.auto import tqdm

from ..prompting.examples import text_fields_filled

SEQUENCE_KEYS = ("input_ids", "attention_mask", "token_type_ids", "loss_ids", "soft_token_ids")


def encode_examples(examples: Sequence, template, tokenizer_wrapper, desc: str = "tokenizing",
                    show_progress: bool = True) -> List[Dict]:
    if len(examples) == 0:
        raise ValueError(f"no examples to encode ({desc}): check the data path and split name")
    keys = set(SEQUENCE_KEYS) | set(getattr(template, "registered_inputflag_names", ()))  # + the template's flags
    features = []
    for ex in tqdm(examples, desc=desc, leave=False, disable=not show_progress or len(examples) < 500):
        wrapped = template.wrap_one_example(text_fields_filled(ex))
        enc = tokenizer_wrapper.tokenize_one_example(wrapped, teacher_forcing=False)
        length = int(sum(enc["attention_mask"]))
        feat = {k: torch.tensor(v[:length]) for k, v in enc.items() if k in keys}
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
