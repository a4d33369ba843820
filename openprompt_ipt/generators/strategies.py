"""IPT strategies G(x): an example's tokens -> ``prompt_length`` prompt vectors (IPT §4.2).

* ``random``     trainable vocab table, looked up with the example's first L tokens;
* ``pretrained`` the same table initialised from an exported category-classifier embedding;
* ``encoder``    a frozen table (exported, or the PLM's own input embeddings) + a trainable
                 TextCNN / LSTM / MLP over the first ceil(rate * n) tokens.
``token_source`` says which tokens count: ``content`` (the example's own text, special tokens,
template words and padding skipped) or ``input_prefix`` (the raw first input ids, as in the
authors' code, padding included).
"""
from __future__ import annotations

from typing import Dict, Optional, Type

import torch
from torch import nn

from .encoders import EncoderConfig, PromptEncoder
from .token_select import first_content_ids, utilized_content_ids
from .vocab_table import VocabPromptTable, load_table, table_sha256, tokenizer_fingerprint

TOKEN_SOURCES = ("content", "input_prefix")


class InstancePromptGenerator(nn.Module):
    """Base: ``forward(input_ids, content_mask, attention_mask) -> (batch, prompt_length, hidden)``."""

    def __init__(self, prompt_length: int, token_source: str, pad_token_id: int):
        super().__init__()
        if token_source not in TOKEN_SOURCES:
            raise ValueError(f"unknown token_source '{token_source}': choose one of {list(TOKEN_SOURCES)}")
        self.prompt_length, self.token_source, self.pad_token_id = prompt_length, token_source, pad_token_id

    def source_mask(self, content_mask: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return content_mask if self.token_source == "content" else attention_mask


class RandomIPT(InstancePromptGenerator):
    def __init__(self, vocab_size: int, hidden_size: int, prompt_length: int, token_source: str = "content",
                 pad_token_id: int = 0, table_dim: Optional[int] = None, vocab_rows=None,
                 init_std: float = 0.02, sparse: bool = False, weight: Optional[torch.Tensor] = None):
        super().__init__(prompt_length, token_source, pad_token_id)
        self.table = VocabPromptTable(vocab_size, hidden_size, dim=table_dim, rows=vocab_rows,
                                      init_std=init_std, sparse=sparse, weight=weight)

    def lookup_ids(self, input_ids, content_mask, attention_mask) -> torch.Tensor:
        k = self.prompt_length
        if self.token_source == "content":
            return first_content_ids(input_ids, content_mask, k, self.table.pad_id)
        ids = input_ids[:, :k]  # the authors' behaviour: raw ids, padding ids included
        if ids.size(1) < k:  # batches are padded only to their own longest example
            ids = torch.nn.functional.pad(ids, (0, k - ids.size(1)), value=self.pad_token_id)
        return ids

    def forward(self, input_ids, content_mask, attention_mask):
        return self.table(self.lookup_ids(input_ids, content_mask, attention_mask))


class PretrainedIPT(RandomIPT):
    def __init__(self, vocab_size: int, hidden_size: int, prompt_length: int, pretrained_path: str = None,
                 tokenizer_vocab: Optional[int] = None, tokenizer=None, **kwargs):
        if not pretrained_path:
            raise ValueError("strategy 'pretrained' needs pretrained_path: the .safetensors table exported by "
                             "experiments/pretrain_categories.py")
        weight, metadata = load_table(pretrained_path, vocab_size, hidden_size, tokenizer_vocab, tokenizer)
        kwargs["table_dim"] = weight.shape[1]
        super().__init__(vocab_size, hidden_size, prompt_length, weight=weight, **kwargs)
        self.table_metadata = metadata


class EncoderIPT(InstancePromptGenerator):
    def __init__(self, vocab_size: int, hidden_size: int, prompt_length: int, token_source: str = "content",
                 pad_token_id: int = 0, plm_embedding: nn.Embedding = None, pretrained_path: Optional[str] = None,
                 tokenizer_vocab: Optional[int] = None, encoder: str = "textcnn", encoder_hidden: int = 128,
                 sequence_utilization_rate: float = 1.0, max_source_tokens: int = 512, encoder_dropout: float = 0.1,
                 encoder_path: Optional[str] = None, tokenizer=None):
        super().__init__(prompt_length, token_source, pad_token_id)
        if not (0.0 < float(sequence_utilization_rate) <= 1.0):
            raise ValueError(f"sequence_utilization_rate must be in (0, 1], got {sequence_utilization_rate}")
        self.rate, self.max_source_tokens = float(sequence_utilization_rate), max_source_tokens
        if pretrained_path:
            weight, self.table_metadata = load_table(pretrained_path, vocab_size, hidden_size, tokenizer_vocab,
                                                     tokenizer)
            self.source = nn.Embedding.from_pretrained(weight, freeze=True)
            # frozen, so no checkpoint holds it: a saved prompt records where it came from and its hash instead
            self.table_record = {"path": str(pretrained_path), "sha256": table_sha256(weight)}
        else:
            # No exported table: the PLM's own (frozen) input embeddings are a vocab-aligned stand-in.
            # Held outside the module tree so it is neither saved nor counted twice.
            self.__dict__["source"] = plm_embedding
        cfg = EncoderConfig(name=encoder, input_dim=self.source.embedding_dim, hidden=encoder_hidden,
                            dropout=encoder_dropout)
        self.encoder = PromptEncoder(cfg, prompt_length, hidden_size)
        if encoder_path:
            from .encoder_io import load_encoder_body
            vocabulary = None if tokenizer is None else (getattr(tokenizer, "name_or_path", "") or "?",
                                                         tokenizer_fingerprint(tokenizer))
            load_encoder_body(self.encoder, encoder_path, vocabulary)

    def forward(self, input_ids, content_mask, attention_mask):
        ids, mask = utilized_content_ids(input_ids, self.source_mask(content_mask, attention_mask), self.rate,
                                         pad_id=self.pad_token_id, max_tokens=self.max_source_tokens)
        with torch.no_grad():  # the PLM's own table is in the PLM's dtype (bf16 / fp16 base): the encoder's, then
            x = self.source(ids).to(next(self.encoder.parameters()).dtype)
        return self.encoder(x, mask)


def exported_tables(module: nn.Module) -> Dict[str, dict]:
    """``{name: {"path", "sha256"}}`` of the frozen exported tables inside ``module``: what it reads at every call
    but no checkpoint of it holds (they are loaded from ``pretrained_path`` again when it is rebuilt)."""
    return {name: m.table_record for name, m in module.named_modules() if getattr(m, "table_record", None)}


def check_exported_tables(module: nn.Module, recorded: Optional[Dict[str, dict]], where: str) -> None:
    """A prompt saved in ``where`` with ``recorded`` (``exported_tables`` then) rebuilt as ``module``: the same tables
    (an export replaced since, by a rerun or another backbone's, would change every prompt without a word)."""
    mine = exported_tables(module)
    for name, saved in (recorded or {}).items():
        now = mine.get(name)
        if now is None or now["sha256"] != saved.get("sha256"):
            found = f"'{now['path']}' now holds another table" if now else "the rebuilt prompt reads none"
            raise ValueError(f"'{where}' was trained reading the frozen table '{saved.get('path')}' and {found}: "
                             "its prompts would change; put back the export it was trained with (pretrained_path), "
                             "or train again on the new one")


STRATEGIES: Dict[str, Type[InstancePromptGenerator]] = {
    "random": RandomIPT,
    "pretrained": PretrainedIPT,
    "encoder": EncoderIPT,
}
