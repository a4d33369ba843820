"""The vocabulary-sized prompt table of Random / Pretrained IPT and its exported-file format.

A table row per vocabulary id (plus one learned *pad* row used where an example has fewer than L
tokens). Two budget knobs keep it near the paper's 0.5-1.5 % of the PLM instead of a full
vocab x hidden table: ``dim`` smaller than the PLM hidden size (a learned up-projection follows),
and ``rows`` restricting the table to the ids a task actually uses (all other ids share one row).
The embedding is dense by default (a stock ``torch.optim.AdamW`` and gradient clipping work). With
``sparse=True`` (opt-in; our runner picks it, ``use_sparse_rows``) a step's gradient and optimizer update
touch only looked-up rows, which needs a sparse-aware optimizer (``training.build_optimizers``).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Optional, Sequence

import torch
from torch import nn

TABLE_TENSOR = "embedding"  # tensor name inside an exported table file


class VocabPromptTable(nn.Module):
    def __init__(self, vocab_size: int, output_dim: int, dim: Optional[int] = None,
                 rows: Optional[Sequence[int]] = None, init_std: float = 0.02, sparse: bool = False,
                 weight: Optional[torch.Tensor] = None):
        super().__init__()
        dim = dim or output_dim
        if dim <= 0:
            raise ValueError(f"table_dim must be positive, got {dim}")
        self.vocab_size, self.dim, self.output_dim = vocab_size, dim, output_dim
        self.pad_id = vocab_size  # sentinel id for "no token here"
        if rows is None:
            self.rows = None
            n_rows = vocab_size + 1
        else:
            self.rows = sorted({int(r) for r in rows})
            if not self.rows or self.rows[0] < 0 or self.rows[-1] >= vocab_size:
                raise ValueError(f"vocab_rows must be non-empty ids in [0, {vocab_size}); got {len(self.rows)} ids")
            # row 0: every id outside ``rows``; rows 1..R: kept ids; row R+1: pad
            n_rows = len(self.rows) + 2
            row_of = torch.zeros(vocab_size + 1, dtype=torch.long)
            row_of[torch.tensor(self.rows)] = torch.arange(1, len(self.rows) + 1)
            row_of[vocab_size] = n_rows - 1
            self.register_buffer("row_of", row_of, persistent=False)
        self.embedding = nn.Embedding(n_rows, dim, sparse=sparse)
        nn.init.normal_(self.embedding.weight, std=init_std)
        if weight is not None:
            self.load_vocab_weight(weight)
        self.project = nn.Linear(dim, output_dim) if dim != output_dim else None

    @torch.no_grad()
    def load_vocab_weight(self, weight: torch.Tensor) -> None:
        """Copy a (vocab, dim) matrix into the table (only the kept rows when restricted), from any device: the
        PLM's embeddings on a GPU into a table still on the CPU (``table_init: plm`` over ``plm.cuda()``) was an
        index_put across devices."""
        if weight.shape[1] != self.dim:
            raise ValueError(f"table width {weight.shape[1]} != table_dim {self.dim}")
        n = min(weight.shape[0], self.vocab_size)
        if self.rows is None:
            self.embedding.weight[:n] = weight[:n].to(self.embedding.weight.dtype)
        else:
            kept = torch.tensor([r for r in self.rows if r < n], dtype=torch.long)
            own = self.embedding.weight
            self.embedding.weight[self.row_of[kept]] = weight[kept.to(weight.device)].to(own.device, own.dtype)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = ids if self.rows is None else self.row_of[ids]
        out = self.embedding(rows)
        return self.project(out) if self.project is not None else out


def table_rows_by_id(table: VocabPromptTable, weight: torch.Tensor, kept: Optional[Sequence[int]]):
    """``weight``, a table saved for this vocabulary that kept the ids ``kept`` (None: every id), laid out as
    ``table``'s rows: each id both keep gets its saved row, the pad row comes along, and so does the shared row of
    the ids outside a restricted table when both have one; every other row stays as ``table`` has it (fresh).
    Returns ``(weight, copied, fresh, not_used)`` (the last three: token ids). A saved table whose row count is not
    what ``kept`` says is a ValueError: its rows could not be told apart."""
    kept = None if kept is None else sorted({int(r) for r in kept})
    vocab = table.vocab_size
    expected = vocab + 1 if kept is None else len(kept) + 2
    if weight.dim() != 2 or weight.shape[0] != expected or weight.shape[1] != table.dim:
        held = "every id" if kept is None else f"{len(kept)} ids"
        raise ValueError(f"the saved table is {tuple(weight.shape)} but keeps {held} (expected ({expected}, "
                         f"{table.dim}))")
    if kept is not None and (not kept or kept[0] < 0 or kept[-1] >= vocab):
        raise ValueError(f"the saved table keeps ids outside [0, {vocab})")
    here = list(range(vocab)) if table.rows is None else table.rows
    there = list(range(vocab)) if kept is None else kept
    copied = sorted(set(here) & set(there))
    at_there = {i: (i if kept is None else n + 1) for n, i in enumerate(there)}
    src = [at_there[i] for i in copied] + [weight.shape[0] - 1]  # ... and the pad row (the last in both layouts)
    dst = (copied if table.rows is None else table.row_of[torch.tensor(copied, dtype=torch.long)].tolist()) \
        + [table.embedding.weight.shape[0] - 1]
    if kept is not None and table.rows is not None:  # both restricted: the row of every other id
        src, dst = src + [0], dst + [0]
    out = table.embedding.weight.detach().clone()
    out[torch.tensor(dst, dtype=torch.long)] = weight[torch.tensor(src, dtype=torch.long)].to(out.device, out.dtype)
    return out, copied, sorted(set(here) - set(there)), sorted(set(there) - set(here))


def use_sparse_rows(module: nn.Module) -> int:
    """Switch every vocab table inside ``module`` to sparse row gradients (what our runner trains with:
    ``RowSparseAdam`` keeps state for looked-up rows only); returns how many tables it switched.
    ``nn.Embedding.sparse`` is read at each forward, so this works after construction; the template's
    saved config keeps the constructor's (dense) default, so a saved template reloads for a stock optimizer."""
    tables = [m for m in module.modules() if isinstance(m, VocabPromptTable)]
    for table in tables:
        table.embedding.sparse = True
    return len(tables)


def tokenizer_fingerprint(tokenizer) -> str:
    """A short hash of the tokenizer's vocabulary (tokens in id order): equal for the same tokenizer
    wherever it is installed, different when the ids mean different tokens."""
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    return hashlib.sha256("\n".join(f"{i}\t{t}" for t, i in vocab).encode("utf-8")).hexdigest()[:16]


# a text whose ids change with a tokenizer's normalisation, not its vocabulary: case (do_lower_case), accents
# (strip_accents), the space before the first word (add_prefix_space), the special tokens put around a text
TOKENIZATION_PROBE = "The Movie was GREAT, said Zoë at the café."


def tokenization_fingerprint(tokenizer) -> Optional[str]:
    """A short hash of the ids ``tokenizer`` gives ``TOKENIZATION_PROBE``: the same vocabulary loaded with another
    normalisation (BERT's vocab.txt with ``do_lower_case=False``) has ``tokenizer_fingerprint``'s hash but gives
    other ids for the same text (unknown tokens where the prompt was trained on words). None where it cannot tell."""
    try:
        ids = tokenizer(TOKENIZATION_PROBE)["input_ids"]
    except Exception:  # noqa: BLE001  (a tokenizer that cannot encode a plain text is checked by its vocabulary alone)
        return None
    return hashlib.sha256(json.dumps([int(i) for i in ids]).encode("utf-8")).hexdigest()[:16]


def table_sha256(weight: torch.Tensor) -> str:
    """The hash of a table's values as read from its file (before any dtype cast): a saved prompt records it for
    a frozen table it reads but does not save (Encoder IPT's ``pretrained_path``), so a replaced export is seen."""
    data = weight.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(str(weight.dtype).encode("utf-8") + data).hexdigest()


def save_table(path: str, weight: torch.Tensor, metadata: dict) -> None:
    """Write an exported table atomically (a temp file renamed into place)."""
    from safetensors.torch import save_file

    from ..serialization import sorted_metadata, usual_mode

    meta = {k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    meta.setdefault("vocab_size", str(weight.shape[0]))
    meta.setdefault("dim", str(weight.shape[1]))
    tmp = path + ".tmp"
    save_file({TABLE_TENSOR: weight.detach().contiguous().cpu()}, tmp, metadata=meta)
    usual_mode(sorted_metadata(tmp))  # the same table and metadata: the same bytes (and safetensors' 0600 made 0644)
    os.replace(tmp, path)


def load_table(path: str, vocab_size: int, hidden_size: int, tokenizer_vocab: Optional[int] = None,
               tokenizer=None):
    """Read and validate an exported table: returns ``(weight, metadata)``.

    With ``tokenizer`` given and a ``tokenizer_fingerprint`` in the table's metadata, the table must
    have been exported for this very vocabulary (same tokens at the same ids), not only the same size."""
    from safetensors import safe_open

    from ..serialization import check_safetensors
    from .encoder_io import pretrain_command, pretraining_hint, refuse_unfinished, rerun_hint

    refuse_unfinished(path, "pretrained_path")
    if os.path.isdir(path):  # the export folder (as encoder_path takes it) rather than its table file
        inside = os.path.join(path, "embedding.safetensors")
        fix = f"set pretrained_path to '{inside}'" if os.path.isfile(inside) else pretraining_hint(path)
        raise ValueError(f"pretrained_path '{path}' is a folder, not a table file: {fix}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"pretrained table '{path}' not found: {pretraining_hint(path)} "
                                "(or set pretrained_path to an existing .safetensors file)")
    check_safetensors(path, rerun_hint(path))
    with safe_open(path, framework="pt") as f:
        if TABLE_TENSOR not in f.keys():
            raise ValueError(f"'{path}' holds no '{TABLE_TENSOR}' tensor: not a table exported by openprompt_ipt")
        weight = f.get_tensor(TABLE_TENSOR)
        metadata = f.metadata() or {}
    rows, dim = weight.shape
    if rows not in {vocab_size, tokenizer_vocab}:
        raise ValueError(
            f"pretrained table '{path}' has {rows} rows but this PLM/tokenizer has {vocab_size} ids"
            f" (tokenizer '{metadata.get('tokenizer', '?')}'): export it with this PLM's tokenizer")
    saved = metadata.get("tokenizer_fingerprint")
    if tokenizer is not None and saved and saved != tokenizer_fingerprint(tokenizer):
        mine = getattr(tokenizer, "name_or_path", "?")
        raise ValueError(
            f"pretrained table '{path}' was exported for tokenizer '{metadata.get('tokenizer', '?')}' but this template's "
            f"tokenizer '{mine}' has a different vocabulary (fingerprint {saved} != {tokenizer_fingerprint(tokenizer)}): "
            "re-export it: " + pretrain_command("--config pretrain_<encoder>.yaml --set plm.model_path=<this PLM>"))
    if dim > hidden_size:
        raise ValueError(f"pretrained table '{path}' is {dim}-d, wider than the PLM hidden size {hidden_size}: "
                         "export it with --dim <= hidden size")
    return weight, metadata
