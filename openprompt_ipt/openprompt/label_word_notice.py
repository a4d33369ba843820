"""OpenPrompt's ``SoftVerbalizer`` notice about label words, said once and only when it is true.

``SoftVerbalizer.generate_parameters`` logs "Label word for a class is a list, only use the first
word." for every class on every construction: its ``add_prefix`` has just wrapped each label word in
a list, so the check ``isinstance(word, list)`` is always true, even for one word per class (the
quick start's 11 topics printed it 11 times). Only the first word of a class does initialise its
head row, which matters when a class lists several. So: the record is dropped, and a class with
several words gets one warning naming it (Python shows an identical warning once per process).
"""
from __future__ import annotations

import logging
import warnings

OPENPROMPT_MESSAGE = "Label word for a class is a list, only use the first word."


class _DropListNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != OPENPROMPT_MESSAGE


def unused_words(classes, label_words) -> dict:
    """{class: its words after the first} for each class with more than one label word."""
    names = list(classes) if classes else list(range(len(label_words)))
    return {name: [w.strip() for w in words[1:]] for name, words in zip(names, label_words)
            if isinstance(words, (list, tuple)) and len(words) > 1}


def install() -> None:
    """Idempotent; needs OpenPrompt imported (OpenPrompt logs on the root logger)."""
    from openprompt.prompts.soft_verbalizer import SoftVerbalizer

    root = logging.getLogger()
    if not any(isinstance(f, _DropListNotice) for f in root.filters):
        root.addFilter(_DropListNotice())
    original = SoftVerbalizer.generate_parameters
    if getattr(original, "_ipt_notice", False):
        return

    def generate_parameters(self):
        unused = unused_words(getattr(self, "classes", None), self.label_words)
        if unused:
            listed = "; ".join(f"{name}: {words}" for name, words in unused.items())
            warnings.warn(f"soft_verbalizer initialises each class from its first label word only; not used: {listed}",
                          UserWarning, stacklevel=2)
        return original(self)

    generate_parameters._ipt_notice = True
    generate_parameters.__doc__ = original.__doc__
    SoftVerbalizer.generate_parameters = generate_parameters
