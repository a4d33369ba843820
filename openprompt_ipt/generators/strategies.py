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

import contextlib
import contextvars
from typing import Dict, Iterable, Optional, Type

import torch
from torch import nn

from .encoders import EncoderConfig, PromptEncoder
from .token_select import first_content_ids, utilized_content_ids
from .vocab_table import VocabPromptTable, load_table, table_sha256, tokenizer_fingerprint

TOKEN_SOURCES = ("content", "input_prefix")

# While a saved prompt is rebuilt: the exports whose trained result its weights file holds (``exports_in_weights``
# at save time), by path. Set by the doors' from_pretrained (``rebuilding_saved``), read by the strategies.
_IN_SAVED_WEIGHTS: contextvars.ContextVar = contextvars.ContextVar("exports_in_saved_weights", default=None)


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
            from .encoder_io import IN_A_CLONE, PRETRAIN

            raise ValueError("strategy 'pretrained' needs pretrained_path: the .safetensors table exported by "
                             f"{PRETRAIN} {IN_A_CLONE}")
        saved = _saved_export("pretrained_path", pretrained_path)
        if saved is not None:  # rebuilt to receive saved weights that hold the trained table: only its width is needed
            weight, metadata, kwargs["table_dim"] = None, {}, int(saved["table_dim"])
        else:
            weight, metadata = load_table(pretrained_path, vocab_size, hidden_size, tokenizer_vocab, tokenizer)
            kwargs["table_dim"] = weight.shape[1]
        super().__init__(vocab_size, hidden_size, prompt_length, weight=weight, **kwargs)
        self.table_metadata = metadata
        # the table trains, so a saved prompt holds it: what rebuilding it needs instead of the export
        self.export_record = {"pretrained_path": str(pretrained_path), "table_dim": self.table.dim}


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
            # the body trains, so a saved prompt holds it: rebuilt for those weights, the export is not read
            self.export_record = {"encoder_path": str(encoder_path)}
        if encoder_path and _saved_export("encoder_path", encoder_path) is None:
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


def exports_in_weights(module: nn.Module, saved: Iterable[str]) -> Dict[str, dict]:
    """``{name: record}`` of the exports inside ``module`` whose trained result is in the saved weights (``saved``:
    the parameter names a checkpoint holds): Pretrained IPT's table (``{"pretrained_path", "table_dim"}``), Encoder
    IPT's body (``{"encoder_path"}``). A saved prompt records it, so rebuilding it reads none of them."""
    saved = set(saved)
    out = {}
    for name, m in module.named_modules():
        record = getattr(m, "export_record", None)
        if not record:
            continue
        part = "table" if "pretrained_path" in record else "encoder"  # the submodule the export fills
        prefix = f"{name}.{part}." if name else f"{part}."
        if all(prefix + n in saved for n, _ in getattr(m, part).named_parameters()):
            out[name] = dict(record)
    return out


@contextlib.contextmanager
def rebuilding_saved(records: Optional[Dict[str, dict]]):
    """Inside: a prompt rebuilt to receive saved weights that hold ``records`` (``exports_in_weights`` at save time)
    takes what it needs from them instead of reading those exports (a folder copied without ``exports/`` loads).
    A frozen table (Encoder IPT's ``pretrained_path``) is not in the weights: it is read, and checked, as ever."""
    by_key: Dict[str, dict] = {}
    for record in (records or {}).values():
        if isinstance(record, dict):
            for key in ("pretrained_path", "encoder_path"):
                if record.get(key):
                    by_key.setdefault(key, {})[str(record[key])] = record
    token = _IN_SAVED_WEIGHTS.set(by_key)
    try:
        yield
    finally:
        _IN_SAVED_WEIGHTS.reset(token)


def cannot_rebuild(directory: str, error: FileNotFoundError, what: str, move: str) -> str:
    """The line for a saved prompt whose export is gone: Encoder IPT's frozen table (not in the weights: 47 MB for
    MiniLM's vocabulary), or any export of a folder saved before ``exports_in_weights`` was recorded."""
    return (f"'{directory}' cannot be rebuilt: {str(error).split(': ', 1)[0]}; {what} reads its exports again when it "
            f"is loaded: put the export back at that path, {move}")


def _saved_export(key: str, path) -> Optional[dict]:
    """The record of export ``path`` (``key``: pretrained_path / encoder_path) when the weights being loaded hold it."""
    return ((_IN_SAVED_WEIGHTS.get() or {}).get(key) or {}).get(str(path)) if path else None


STRATEGIES: Dict[str, Type[InstancePromptGenerator]] = {
    "random": RandomIPT,
    "pretrained": PretrainedIPT,
    "encoder": EncoderIPT,
}
