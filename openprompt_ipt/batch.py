"""Read a field of a batch the same way for plain dicts and OpenPrompt ``InputFeatures``.

``InputFeatures`` subclasses ``dict`` but keeps its fields as attributes: ``dict.get`` on it sees
nothing, so a template reading ``batch.get("attention_mask")`` silently got ``None`` on
``PromptDataLoader`` batches (issue #21). ``batch[key]`` works on both; a missing field is ``None``.
"""
from __future__ import annotations


def field(batch, key: str):
    """``batch[key]``, or ``None`` when the batch has no such field (or holds ``None`` there)."""
    try:
        return batch[key]
    except (KeyError, AttributeError):  # dict / InputFeatures without that field
        return None
