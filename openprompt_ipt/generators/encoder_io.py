"""Load a pretrained encoder body (from a category classifier export) into Encoder IPT.

Export layout (a directory): ``classifier.safetensors`` with ``body.*`` (and other) tensors, and
``classifier.json`` with the ``EncoderConfig`` fields under ``"encoder"``."""
from __future__ import annotations

import os
from typing import Optional, Tuple

from torch import nn


# the pretrain command, named for both ways users run it: this layer does not know which one ran (a shipped config's
# bare name, pretrain_<encoder>.yaml, is found from any directory by both)
PRETRAIN = "openprompt-ipt pretrain categories"
IN_A_CLONE = "(in a clone also: python experiments/pretrain_categories.py, same options)"


def pretrain_command(options: str) -> str:
    """The pretrain command line with ``options``, for a message: the console command, and the clone's script."""
    return f"{PRETRAIN} {options} {IN_A_CLONE}"


def pretraining_hint(path: str, again: bool = False) -> str:
    """How to make the export ``path`` names: exports/<name>-<backbone>[/embedding.safetensors] comes from
    the category pretraining with the shipped pretrain_<name>.yaml on that backbone (``again``: rewrite it)."""
    folder = os.path.basename(os.path.dirname(path) if path.endswith(".safetensors") else os.path.normpath(path))
    name, _, backbone = folder.partition("-")
    overwrite = " --overwrite" if again else ""
    if backbone and name in ("textcnn", "lstm", "mlp"):  # the shipped yamls/pretrain_<name>.yaml
        options = f"--config pretrain_{name}.yaml --set plm.model_path={backbone}{overwrite}"
    else:
        options = f"--config pretrain_<encoder>.yaml{overwrite}"
    return f"run the pretraining {'again' if again else 'first'}: {pretrain_command(options)}"


def rerun_hint(path: str) -> str:
    """How to write the export ``path`` names again (a damaged file in it)."""
    return pretraining_hint(path, again=True)


def refuse_unfinished(path: str, key: str) -> None:
    """An export in a pretraining run's work folder (``<out>.partial``): the run never finished (the folder is
    renamed to ``<out>`` only then), so its files are an interrupted run's, not an export."""
    folder = os.path.normpath(path if os.path.isdir(path) and not path.endswith(".safetensors") else os.path.dirname(path))
    if folder.endswith(".partial"):
        raise ValueError(f"{key} '{path}' is inside '{folder}', the work folder of a pretraining run that never "
                         f"finished: resume it (the same {PRETRAIN} command + --resume; in a clone also "
                         "python experiments/pretrain_categories.py), then use the "
                         f"finished export '{folder[:-len('.partial')]}'")


def load_encoder_body(encoder: nn.Module, path: str, vocabulary: Optional[Tuple[str, str]] = None) -> dict:
    """The ``body.*`` of the export in ``path``; with ``vocabulary`` (the tokenizer's name and
    ``tokenizer_fingerprint``) given, the export must be of that vocabulary (the body learned on its embeddings:
    another backbone's would be a pretrained start in name only)."""
    from ..serialization import read_json, read_safetensors

    refuse_unfinished(path, "encoder_path")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"encoder_path '{path}' does not exist: {pretraining_hint(path)} "
                                "(or set encoder_path: null for a fresh encoder)")
    weights, config = os.path.join(path, "classifier.safetensors"), os.path.join(path, "classifier.json")
    for f in (weights, config):
        if not os.path.isfile(f):
            raise FileNotFoundError(f"encoder_path '{path}' lacks {os.path.basename(f)}: point it at a directory "
                                    f"written by {PRETRAIN} {IN_A_CLONE}")
    fix = f"{rerun_hint(path)} (or set encoder_path: null for a fresh encoder)"
    meta = read_json(config, fix)
    saved = meta.get("encoder", {})
    theirs = meta.get("tokenizer_fingerprint")
    if vocabulary is not None and theirs and theirs != vocabulary[1]:
        raise ValueError(f"encoder_path '{path}' was pretrained on the vocabulary of '{meta.get('tokenizer', '?')}' but "
                         f"this template's tokenizer '{vocabulary[0]}' has another "
                         f"(fingerprint {theirs} != {vocabulary[1]}): the encoder learned on that "
                         "vocabulary's embeddings; export one for this backbone: "
                         + pretrain_command(f"--config pretrain_{saved.get('name', '<encoder>')}.yaml --set "
                                            "plm.model_path=<this backbone>")
                         + ", or set encoder_path: null for a fresh encoder")
    mine = encoder.config.to_dict()
    keys = ("name", "input_dim", "hidden") + (("kernel_sizes",) if mine["name"] == "textcnn" else ())
    for key in keys:
        if key in saved and saved[key] != mine[key]:
            raise ValueError(f"encoder_path '{path}' holds a {key}={saved[key]} encoder but this template asks for "
                             f"{key}={mine[key]}: set encoder/encoder_hidden to match the export")
    state = {k[len("body."):]: v for k, v in read_safetensors(weights, fix).items() if k.startswith("body.")}
    encoder.body.load_state_dict(state, strict=True)
    return meta
