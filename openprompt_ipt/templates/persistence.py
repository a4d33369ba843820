"""What both of our templates share: the mask check, parameter counting, and save/load of only
what they trained (safetensors) beside the arguments that rebuild them (JSON)."""
from __future__ import annotations

import json
import os

from ..serialization import load_trainable, save_trainable

CONFIG_FILE, WEIGHTS_FILE = "template_config.json", "template.safetensors"


class TrainedTemplateMixin:
    """Needs ``self.init_config`` (the constructor arguments) and a frozen ``raw_embedding``."""

    def _check_template_format(self):
        if not any("mask" in d for d in self.text):
            raise ValueError('template text has no {"mask"}: a masked LM needs one, e.g. '
                             '\'{"placeholder":"text_a"} It was {"mask"}.\'')

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for n, p in self.named_parameters() if p.requires_grad and not n.startswith("raw_embedding"))

    def save_pretrained(self, directory: str) -> None:
        save_trainable(self, directory, WEIGHTS_FILE, CONFIG_FILE, self.init_config, skip=("raw_embedding",))

    @classmethod
    def from_pretrained(cls, directory: str, model, tokenizer, **overrides):
        path = os.path.join(directory, CONFIG_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"'{directory}' has no {CONFIG_FILE}: save the template with save_pretrained()")
        with open(path) as f:
            config = {**json.load(f), **overrides}
        template = cls(model, tokenizer, **config)
        load_trainable(template, os.path.join(directory, WEIGHTS_FILE))
        return template
