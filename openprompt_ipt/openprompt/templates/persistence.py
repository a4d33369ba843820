"""What both of our templates share: the mask check, parameter counting, save/load of only what
they trained (safetensors) beside the arguments that rebuild them (JSON), and a warning when nobody
updates their parameters (an optimizer built from the PLM's and the verbalizer's parameters only, as in
OpenPrompt's tutorial 1.2, trains the prompts as nothing and nothing would say so)."""
from __future__ import annotations

import os
import warnings

import torch

from ...serialization import load_trainable, read_json, save_trainable

CONFIG_FILE, WEIGHTS_FILE = "template_config.json", "template.safetensors"


UNUPDATED_PASSES = 200  # training-mode forward passes without one template update before the warning


class TemplateNotTrainedWarning(UserWarning):
    """A trainable template reached evaluation (or many training passes) with its parameters unchanged."""


class TrainedTemplateMixin:
    """Needs ``self.init_config`` (the constructor arguments) and a frozen ``raw_embedding``; the
    templates call ``_watch_updates()`` at the start of ``process_batch``."""

    # ---- "nobody optimises me": parameter version counters, which every in-place update bumps --------
    def _trainable_versions(self):
        # raw_embedding is the PLM's word embedding (it trains with the PLM, not as part of the prompt)
        return [p._version for n, p in self.named_parameters() if p.requires_grad and not n.startswith("raw_embedding")]

    def _watch_updates(self) -> None:
        if not self.training or not torch.is_grad_enabled() or self.__dict__.get("_update_check_done"):
            return  # only passes that could train count (not a no_grad pass in train mode)
        watch = self.__dict__.setdefault("_update_watch", {"versions": None, "passes": 0})
        if watch["versions"] is None:
            watch["versions"] = self._trainable_versions()
        watch["passes"] += 1
        if watch["passes"] % UNUPDATED_PASSES == 0:
            self._check_updated(f"after {watch['passes']} training forward passes")

    def _check_updated(self, when: str) -> None:
        watch = self.__dict__.get("_update_watch")
        if watch is None or watch["versions"] is None or self.__dict__.get("_update_check_done"):
            return
        if not watch["versions"] or self._trainable_versions() != watch["versions"]:
            self.__dict__["_update_check_done"] = True  # updated (or nothing to train): stop watching
            return
        self.__dict__["_update_check_done"] = True
        warnings.warn(f"{type(self).__name__}: its {self.num_trainable_parameters():,} trainable parameters were never "
                      f"updated ({when}): give them to the optimizer, e.g. "
                      "torch.optim.AdamW(openprompt_ipt.optimizer_groups(prompt_model))", TemplateNotTrainedWarning,
                      stacklevel=3)

    def train(self, mode: bool = True):
        if not mode and self.training:  # model.eval() after training-mode passes: was the template trained?
            self._check_updated("at evaluation")
        return super().train(mode)

    def _check_template_format(self):
        if not any("mask" in d for d in self.text):
            raise ValueError('template text has no {"mask"}: a masked LM needs one, e.g. '
                             '\'{"placeholder":"text_a"} It was {"mask"}.\'')

    def _remember_text(self) -> None:
        """Called by ``on_text_set`` before OpenPrompt parses the text: ``save_pretrained`` writes the text in use, not
        the constructor's (OpenPrompt's ``from_file`` and ``load_template`` with ``file_path`` set it afterwards)."""
        # a parsed list (dicts, maybe lambdas) is not JSON: None makes from_pretrained ask for text= rather than reload
        # another text silently
        self.init_config["text"] = self.text if isinstance(self.text, str) else None

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for n, p in self.named_parameters() if p.requires_grad and not n.startswith("raw_embedding"))

    def save_pretrained(self, directory: str) -> None:
        save_trainable(self, directory, WEIGHTS_FILE, CONFIG_FILE, self.init_config, skip=("raw_embedding",))

    @classmethod
    def from_pretrained(cls, directory: str, model, tokenizer, **overrides):
        path = os.path.join(directory, CONFIG_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"'{directory}' has no {CONFIG_FILE}: save the template with save_pretrained()")
        config = {**read_json(path, "save the template again with save_pretrained()"), **overrides}
        template = cls(model, tokenizer, **config)
        load_trainable(template, os.path.join(directory, WEIGHTS_FILE))
        return template
