"""The ``peer:`` section of a YAML (runner/peers.py): the methods, their defaults and the check.
Plain data, so ``load_config`` checks a peer without importing torch or the peer libraries."""
from __future__ import annotations

from typing import Dict

INSTALL = 'pip install -e ".[peers]"  (adapters 1.3 pins transformers 4.57: use a venv of its own, docs/methods.md: Peer methods)'
# method -> (library, its options with our defaults); the defaults are the IDPG A.1.2 settings
# (m = 16, n = 4) and Hu et al.'s LoRA on the query and value projections.
METHODS: Dict[str, tuple] = {
    "adapter": ("adapters", {"bottleneck": 16, "architecture": "houlsby", "non_linearity": None}),
    "compacter": ("adapters", {"bottleneck": 16, "phm_dim": 4, "architecture": "compacter",
                               "shared_phm_rule": True, "non_linearity": None}),
    "lora": ("peft", {"r": 8, "alpha": 16, "target_modules": ["query", "value"]}),
}
LABELS = {"adapter": "Adapter", "compacter": "Compacter", "lora": "LoRA"}
# architecture -> adapters config class: Houlsby = after attention and FFN, Pfeiffer = after FFN only
ARCHITECTURES = {"adapter": {"houlsby": "DoubleSeqBnConfig", "pfeiffer": "SeqBnConfig"},
                 "compacter": {"compacter": "CompacterConfig", "compacter++": "CompacterPlusPlusConfig"}}


def check_peer(section) -> Dict:
    """The ``peer:`` section with the method's defaults filled in; one ValueError line for a bad one."""
    if not isinstance(section, dict) or "method" not in section:
        raise ValueError(f"peer: must be a mapping with a method, one of {', '.join(METHODS)} (got {section!r})")
    method = section["method"]
    if method not in METHODS:
        raise ValueError(f"unknown peer method {method!r}: choose one of {', '.join(METHODS)}")
    defaults = METHODS[method][1]
    for key in section:
        if key != "method" and key not in defaults:
            raise ValueError(f"unknown key 'peer.{key}' for method {method}: valid: {', '.join(sorted(defaults))}")
    out = {"method": method, **defaults, **{k: v for k, v in section.items() if k != "method"}}
    if "target_modules" in out:
        out["target_modules"] = _module_names(out["target_modules"])
    if method in ARCHITECTURES and out["architecture"] not in ARCHITECTURES[method]:
        raise ValueError(f"unknown peer.architecture {out['architecture']!r} for {method}: "
                         f"choose one of {', '.join(ARCHITECTURES[method])}")
    return out


def _module_names(value) -> list:
    """LoRA's target modules: a list of module names; one name alone is a list of one (not its letters)."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"peer.target_modules = {value!r} is not allowed: give module names, e.g. [query, value]")
    return names
