"""An OpenPrompt ``InputExample`` as templates read it: both our templates (any caller) and the runner (OpenPrompt's
own templates too) fill a missing text the same way."""
from __future__ import annotations

import copy


def text_fields_filled(example):
    """``example``, or a copy with "" where ``text_a`` / ``text_b`` is None: OpenPrompt's ``wrap_one_example``
    concatenates them as strings and removes their keys from ``example.keys()``, which leaves out None values
    ('list.remove(x): x not in list'). The example itself is unchanged."""
    if getattr(example, "text_a", "") is not None and getattr(example, "text_b", "") is not None:
        return example
    filled = copy.copy(example)
    filled.text_a = "" if example.text_a is None else example.text_a
    filled.text_b = "" if example.text_b is None else example.text_b
    return filled
