"""``init_prompt_from: <PPT export>``: start Prompt Tuning's task prompt / Prefix Tuning's prefix from a
PPT pre-training export (``pretraining/ppt.py`` writes it). An export for another backbone or tokenizer, or
another template shape, is refused in one line naming the re-export command.

The export's contract (file name, format tag, finished marker) is defined here, where it is read; the
pre-training imports it to write exports, so imports point one way (pretraining -> runner)."""
from __future__ import annotations

import json
import os
from typing import Dict

PROMPT_FILE, FORMAT = "prompt.safetensors", "openprompt_ipt.ppt_prompt"
DONE = "DONE"  # written last into a finished export folder (pretraining/export.py)

from .run_dirs import RUN_COMMAND, command_beside


def reexport_command(run_command: str = RUN_COMMAND) -> str:
    """The PPT export command, as the user runs commands (``run_command``: what trains a run where the user is)."""
    ppt = command_beside(run_command, "pretrain ppt")
    yaml = f"{'yamls/' if ppt.startswith('python ') else ''}pretrain_ppt.yaml"  # a shipped name: any directory
    return f"{ppt} --config {yaml} --set experiment=<this YAML>"


def init_prompt_from(model, cfg: Dict, tokenizer, run_command: str = RUN_COMMAND) -> Dict:
    reexport = reexport_command(run_command)  # the command line every message below names
    from safetensors import safe_open

    from ..generators import tokenizer_fingerprint
    from ..serialization import check_safetensors

    export = cfg["init_prompt_from"]
    path = os.path.join(export, PROMPT_FILE)
    if not (os.path.isfile(os.path.join(export, DONE)) and os.path.isfile(path)):
        raise FileNotFoundError(f"init_prompt_from '{export}' is not a finished PPT export (no {PROMPT_FILE} / DONE): "
                                f"run {reexport} first")
    check_safetensors(path, f"run {reexport} --overwrite")  # a cut-short copy: one line naming it
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
        state = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("format") != FORMAT:
        raise ValueError(f"init_prompt_from '{export}': {PROMPT_FILE} is not a PPT export (format {meta.get('format')!r})")
    where = f"init_prompt_from '{export}' was pre-trained"
    mine = tokenizer_fingerprint(tokenizer)
    conf = model.plm.config
    if meta.get("tokenizer_fingerprint") != mine:
        raise ValueError(f"{where} for backbone '{meta.get('backbone')}' (tokenizer fingerprint "
                         f"{meta.get('tokenizer_fingerprint')}) but this run's tokenizer is another ({mine}, "
                         f"'{cfg['plm']['model_path']}'): re-export with {reexport} "
                         f"--set plm.model_path={cfg['plm']['model_path']}")
    for key, value in (("hidden_size", conf.hidden_size), ("vocab_size", conf.vocab_size)):
        if meta.get(key) is not None and int(meta[key]) != int(value):
            raise ValueError(f"{where} on a backbone with {key} {meta[key]} but this one has {value}: re-export with "
                             f"{reexport} --set plm.model_path={cfg['plm']['model_path']}")
    if meta.get("template") != cfg["template"]:
        raise ValueError(f"{where} for template '{meta.get('template')}' but this run uses '{cfg['template']}': "
                         f"re-export with {reexport}")
    params = dict(model.template.named_parameters())
    for name, tensor in state.items():
        if name not in params:
            raise ValueError(f"{where} with {name}, which this template lacks (its settings there: "
                             f"{meta.get('template_settings')}): re-export with {reexport}")
        if tuple(params[name].shape) != tuple(tensor.shape):
            raise ValueError(f"{where} with {name} of shape {tuple(tensor.shape)} but this template's is "
                             f"{tuple(params[name].shape)} (its settings there: {meta.get('template_settings')}): "
                             f"re-export with {reexport}")
    for name, tensor in state.items():
        params[name].data.copy_(tensor.to(params[name].dtype))
    print(f"init_prompt_from: {len(state)} PPT tensors ({', '.join(state)}) from {export}")
    return {"export": export, "tensors": sorted(state), "settings": json.loads(meta.get("template_settings", "{}"))}
