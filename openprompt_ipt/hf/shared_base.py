"""The models built on one base: its head (``modules_to_save``) is the base's own module and trains in place, so
every ``InstancePromptModel`` on that base reads the same head."""
from __future__ import annotations

import warnings
import weakref

import torch

# base -> the InstancePromptModels built on it that are still alive (not on the base: deepcopy / pickle copy it)
_LIVE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class SharedBaseWarning(UserWarning):
    """A base wrapped again while an earlier wrapper's head (trained in place) is still its head."""


def register(base, wrapper) -> None:
    _LIVE.setdefault(base, weakref.WeakSet()).add(wrapper)


def warn_if_loading_changes_others(wrapper, own: dict, weights: dict, directory: str) -> None:
    """``from_pretrained(base, dir)`` copies the saved head (and unfrozen base weights) into the base in place: a
    model built on that base before and still in use then predicted with this folder's head, without a word (two
    saved runs loaded onto one base both scored with the second's head)."""
    others = [w for w in list(_LIVE.get(wrapper.base_model, ())) if w is not wrapper]
    shared = {id(p) for w in others for p in w.parameters()}
    changed = sorted(name for name, tensor in weights.items()
                     if id(own[name]) in shared and not torch.equal(own[name].detach().cpu(), tensor.cpu()))
    if changed:
        warnings.warn(f"loading '{directory}' replaced {', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''} "
                      f"of a {type(wrapper.base_model).__name__} that another InstancePromptModel built on it still "
                      "uses (the head is the base's own module): that model now predicts with this folder's head; "
                      f"load each folder onto a fresh base (InstancePromptModel.from_pretrained('{directory}') loads "
                      "one)", SharedBaseWarning, stacklevel=3)
