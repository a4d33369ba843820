"""Is this the model's tokenizer? A tokenizer of another model gives other ids for the same words and special
tokens, and the logits change without an error. Checked against the model (vocabulary size: no larger, and smaller
only by a padded vocabulary's rows; the special ids its config names, every special id in range) when the prompt is
built, and against what ``save_pretrained`` recorded (vocabulary, special and mask ids) when it is loaded; a mismatch
is one line."""
from __future__ import annotations

import hashlib
import json
import os
import warnings

from ..generators.vocab_table import tokenization_fingerprint

SPECIALS = ("pad", "bos", "eos", "cls", "sep", "unk", "mask")
# The prompt's vocabulary tables have one row per row of the base's input embeddings (``config.vocab_size``, padding
# rows included). A tokenizer may have fewer tokens than that, as many as a vocabulary padded to a multiple adds
# (``resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64)``: rows no id reads), never more.
PADDED_ROWS = 128
FIX = "pass the tokenizer the model was trained with (AutoTokenizer.from_pretrained(<the model's path>))"


def recorded_path(name_or_path: str) -> str:
    """A local folder as its absolute path, a hub name as it is: loaded from another working directory, a relative
    path named whatever folder is there (another model of the same shape loaded without a word)."""
    return os.path.abspath(name_or_path) if name_or_path and os.path.isdir(name_or_path) else name_or_path


def tokenizer_record(tokenizer) -> dict:
    """What a saved prompt records of its tokenizer (``save_pretrained``)."""
    vocab = sorted(tokenizer.get_vocab().items())
    return {"name_or_path": recorded_path(getattr(tokenizer, "name_or_path", "") or ""),
            "vocab_size": len(tokenizer),
            "vocab_sha256": hashlib.sha256(json.dumps(vocab).encode("utf-8")).hexdigest(),
            "special_ids": {f"{s}_token_id": getattr(tokenizer, f"{s}_token_id", None) for s in SPECIALS},
            # the same vocabulary normalised otherwise (do_lower_case, strip_accents, add_prefix_space): other ids
            "tokenization": tokenization_fingerprint(tokenizer)}


def _name(path: str) -> str:
    return os.path.basename(str(path).rstrip("/\\")).lower()


def check_against_model(tokenizer, model) -> None:
    cfg = model.config
    size, vocab = len(tokenizer), getattr(cfg, "vocab_size", None)
    name = getattr(tokenizer, "name_or_path", "") or "tokenizer"
    if vocab is not None and size > vocab:  # ids past the base's table
        raise ValueError(f"tokenizer '{name}' has {size} tokens but the model's vocabulary has {vocab}: after "
                         "tokenizer.add_tokens(...), resize the base first, "
                         f"base.resize_token_embeddings(len(tokenizer)), then wrap it; else {FIX}")
    if vocab is not None and vocab - size >= PADDED_ROWS:  # more than a vocabulary padded to a multiple
        raise ValueError(f"tokenizer '{name}' has {size} tokens but the model's vocabulary has {vocab} (a vocabulary "
                         f"padded to a multiple has fewer than {PADDED_ROWS} rows more than its tokenizer): {FIX}")
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        mine, theirs = getattr(tokenizer, key, None), getattr(cfg, key, None)
        if mine is not None and theirs is not None and mine != theirs:
            raise ValueError(f"tokenizer '{name}' has {key} {mine} but the model's config has {theirs}: {FIX}")
    model_path, tokenizer_path = getattr(cfg, "_name_or_path", "") or "", getattr(tokenizer, "name_or_path", "") or ""
    # hub names only: a local folder (a checkpoint, the Trainer's copy of the tokenizer) may be named anything; and
    # with ids and sizes in agreement another name may still be the same vocabulary (ELECTRA ships BERT's): a warning
    hub_names = model_path and tokenizer_path and not (os.path.isdir(model_path) or os.path.isdir(tokenizer_path))
    if hub_names and _name(model_path) != _name(tokenizer_path):
        warnings.warn(f"tokenizer '{tokenizer.name_or_path}' and model '{model_path}' have different names "
                      "(their vocabulary sizes and special ids agree)", stacklevel=3)


def check_against_record(tokenizer, record: dict, directory: str) -> None:
    """``record``: what ``tokenizer_record`` saved beside the prompt in ``directory``."""
    if not record:
        return
    mine = tokenizer_record(tokenizer)
    saved = record.get("name_or_path") or "the tokenizer it was saved with"
    for key in ("vocab_size", "special_ids", "vocab_sha256", "tokenization"):
        if record.get(key) is not None and mine[key] is not None and record[key] != mine[key]:
            what = {"vocab_size": "vocabulary size", "special_ids": "special token ids", "vocab_sha256": "vocabulary",
                    "tokenization": ("tokenization of the same vocabulary (other ids for the same text: "
                                     "do_lower_case, strip_accents or add_prefix_space differ)")}[key]
            detail = "" if key in ("vocab_sha256", "tokenization") else f" ({record[key]} saved, {mine[key]} given)"
            raise ValueError(f"'{directory}' was saved with tokenizer '{saved}' and the given tokenizer "
                             f"'{mine['name_or_path']}' has another {what}{detail}: pass the tokenizer it was saved "
                             "with")


def _load_tokenizer(model):
    path = getattr(model.config, "_name_or_path", "") or getattr(model, "name_or_path", "")
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001  (any failure: the fix is the same)
        raise ValueError(f"no tokenizer given and none loads from the model's path '{path}' ({type(e).__name__}): "
                         "pass tokenizer=AutoTokenizer.from_pretrained(<model path>)") from None
