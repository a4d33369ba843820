"""Read a field of a batch the same way for plain dicts and OpenPrompt ``InputFeatures``.

``InputFeatures`` subclasses ``dict`` but keeps its fields as attributes: ``dict.get`` on it sees
nothing, so a template reading ``batch.get("attention_mask")`` silently got ``None`` on
``PromptDataLoader`` batches (issue #21). ``batch[key]`` works on both; a missing field is ``None``.
"""
from __future__ import annotations

import warnings


class MissingContentFlagWarning(UserWarning):
    """A batch reached an instance-wise template without the flag marking the example's own tokens."""


def field(batch, key: str):
    """``batch[key]``, or ``None`` when the batch has no such field (or holds ``None`` there)."""
    try:
        return batch[key]
    except (KeyError, AttributeError):  # dict / InputFeatures without that field
        return None


def content_mask(batch, key: str):
    """(B, n) bool: the example's own (placeholder) tokens, from the template's input flag ``key``
    (``instance_token_ids``: 1 on placeholder text; ``text_part_ids``: 1/2/3 on text_a/text_b/other
    placeholders; special positions may hold -100). Without the flag every attended token counts,
    [CLS] and template words included, with a warning: it changes the prompt, so it must not pass unseen."""
    flags = field(batch, key)
    if flags is not None:
        return flags > 0
    warnings.warn(f"batch has no '{key}': the instance prompt reads every attended token ([CLS] and template words "
                  "included); build batches with OpenPrompt's PromptDataLoader or openprompt_ipt.data.encode_examples "
                  "after importing openprompt_ipt", MissingContentFlagWarning, stacklevel=3)
    return batch["attention_mask"].bool()
