"""Peer methods from the libraries made for them, under our runner: Adapter (Houlsby) and Compacter
through AdapterHub's ``adapters``, LoRA through PEFT (issue #22; IDPG Table 1's adapter rows).

A YAML selects one with a ``peer:`` section, e.g. ``peer: {method: compacter, bottleneck: 16, phm_dim: 4}``
on a prompt-free template (``instance_wise`` with ``strategy: none`` and ``task_prompt_length: 0``).
Our data, SoftVerbalizer head, trainer, protocol and selection stay as for every other row; the library
only inserts its modules into the frozen backbone. For the optimizer and the counts the inserted modules
are the method's ("prompt") group at ``train.lr_prompt``; the backbone's own weights stay frozen.

``adapters`` 1.3 pins transformers ~=4.57.6, so both libraries come as the ``peers`` extra in a venv of
their own (docs/methods.md: "Peer methods").
"""
from __future__ import annotations

import importlib
import logging
from typing import Dict, List

from torch import nn

from .peer_config import ARCHITECTURES, INSTALL, METHODS, check_peer  # noqa: F401  (re-exported)


def require(library: str):
    try:
        return importlib.import_module(library)
    except ImportError:
        raise ImportError(f"the peer methods need the {library!r} package: {INSTALL}") from None  # run.py: one line


def _adapter_config(adapters, peer: Dict, hidden: int):
    m = int(peer["bottleneck"])
    if m <= 0 or hidden % m:
        raise ValueError(f"peer.bottleneck {m} must divide the backbone's hidden size {hidden}")
    opts = {"reduction_factor": hidden / m}  # adapters sizes the bottleneck as hidden // reduction_factor
    if peer["non_linearity"] is not None:
        opts["non_linearity"] = _activation(peer["non_linearity"])
    if peer["method"] == "compacter":
        n = int(peer["phm_dim"])
        if n <= 0 or hidden % n or m % n:
            raise ValueError(f"peer.phm_dim {n} must divide the hidden size {hidden} and the bottleneck {m}")
        opts.update(phm_dim=n, shared_phm_rule=bool(peer["shared_phm_rule"]))
    return getattr(adapters, ARCHITECTURES[peer["method"]][peer["architecture"]])(**opts)


def _activation(name) -> str:
    """An activation name ``adapters`` knows (it reads ``name.lower()`` from transformers' ACT2FN)."""
    from transformers.activations import ACT2FN

    known = sorted(set(ACT2FN) | {"leakyrelu"})
    if not isinstance(name, str) or name.lower() not in known:
        raise ValueError(f"peer.non_linearity {name!r} is unknown: choose one of {', '.join(known)} "
                         "(or null: the architecture's own)")
    return name


def attach(backbone: nn.Module, peer: Dict) -> List[nn.Module]:
    """Insert the peer's modules into ``backbone`` (frozen first) and return the largest submodules that
    hold only the peer's (trainable) parameters."""
    library = require(METHODS[peer["method"]][0])
    own = {id(p) for p in backbone.parameters()}
    for p in backbone.parameters():
        p.requires_grad_(False)
    hidden = int(backbone.config.hidden_size)
    if peer["method"] == "lora":
        cfg = library.LoraConfig(r=int(peer["r"]), lora_alpha=peer["alpha"], target_modules=list(peer["target_modules"]),
                                 lora_dropout=0.0)  # the frozen backbone runs in eval mode, as for our methods
        library.inject_adapter_in_model(cfg, backbone)
    else:
        library.init(backbone)
        backbone.add_adapter("peer", config=_adapter_config(library, peer, hidden))
        # not train_adapter: it looks for the vocabulary head, which a SoftVerbalizer run has skipped
        _quietly(backbone.set_active_adapters, "peer")
    for p in backbone.parameters():  # the library's new weights are the trainable ones
        p.requires_grad_(id(p) not in own)
    return peer_modules(backbone)


def _quietly(activate, name: str) -> None:
    """``adapters`` warns "There are adapters available but none are activated for the forward pass" while it
    switches ours on (its reset pass runs before the activation): a false alarm on every peer run."""
    log = logging.getLogger("adapters.model_mixin")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        activate(name)
    finally:
        log.setLevel(level)


def peer_modules(root: nn.Module) -> List[nn.Module]:
    """Maximal submodules whose parameters are all trainable (the inserted ones; the rest is frozen)."""
    found, covered = [], set()

    def visit(module):
        params = list(module.parameters())
        if params and all(p.requires_grad for p in params):
            found.append(module)
            covered.update(id(p) for p in params)
            return
        for child in module.children():
            visit(child)

    visit(root)
    loose = [n for n, p in root.named_parameters() if p.requires_grad and id(p) not in covered]
    if loose or not found:
        raise RuntimeError(f"peer parameters outside a module of their own: {loose[:3]}" if loose else
                           "the peer library inserted no trainable parameters")
    return found


class FrozenBackbone:
    """The backbone as the trainer's "plm" group sees it: its own weights, without the peer's modules
    (those are the "prompt" group). Not a module: the classifier registers the backbone itself."""

    def __init__(self, backbone: nn.Module, peer_ids: set):
        self.module, self._peer_ids = backbone, peer_ids

    @property
    def config(self):
        return self.module.config

    def parameters(self, recurse: bool = True):
        return (p for p in self.module.parameters(recurse) if id(p) not in self._peer_ids)


class PeerTemplate(nn.Module):
    """Encodes text with the prompt-free template and owns the peer's modules, so the Trainer files
    them under "prompt" (lr_prompt, the prompt count)."""

    n_prefix = 0

    def __init__(self, plain, modules: List[nn.Module]):
        super().__init__()
        self.peer = nn.ModuleList(modules)
        self._plain = [plain]  # not a submodule: registered in the backbone's PromptForClassification
        self.registered_inputflag_names = plain.registered_inputflag_names

    def wrap_one_example(self, example):
        return self._plain[0].wrap_one_example(example)

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.peer.parameters() if p.requires_grad)


class PeerClassifier(nn.Module):
    """Our PromptForClassification (prompt-free template, SoftVerbalizer) over the peer-modified backbone."""

    def __init__(self, prompt_model, modules: List[nn.Module]):
        super().__init__()
        self.template = PeerTemplate(prompt_model.template, modules)  # registered first: names the peer's weights
        self.verbalizer = prompt_model.verbalizer
        self.prompt_model = prompt_model
        self._plm = FrozenBackbone(prompt_model.plm, {id(p) for p in self.template.peer.parameters()})

    @property
    def plm(self) -> FrozenBackbone:
        return self._plm

    def forward(self, batch):
        return self.prompt_model(batch)


def build_peer(cfg: Dict, train, num_classes: int, labels=None):
    """``build_model`` of the YAML (prompt-free template, head, frozen backbone), then the peer's modules."""
    from .build import build_model

    peer = check_peer(cfg["peer"])
    require(METHODS[peer["method"]][0])  # before the backbone loads: the missing package is the one line
    if not cfg["plm"].get("freeze", True):
        raise ValueError("peer methods train their modules on a frozen backbone: set plm.freeze: true")
    prompt_model, tokenizer, wrapper_class = build_model(cfg, train, num_classes, labels)
    if any(p.requires_grad for p in prompt_model.template.parameters()):
        raise ValueError(f"peer: {peer['method']} runs on a prompt-free template: set template: instance_wise with "
                         "instance_wise.strategy: none and task_prompt_length: 0")
    modules = attach(prompt_model.plm, peer)
    return PeerClassifier(prompt_model, modules), tokenizer, wrapper_class
