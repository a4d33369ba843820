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


LEFT_PADDING = ("a row of this batch starts with padding (left padding): the templates read an example from position 0 "
                "(the prompt's place, the first tokens, the positions), so its logits would change with its "
                "batch-mates; pad on the right: tokenizer.padding_side = \"right\" (OpenPrompt's PromptDataLoader and "
                "openprompt_ipt.data.make_loader always do)")


def refuse_left_padding(attention_mask) -> None:
    """One line for a left-padded batch (a row that starts with padding and holds a token): one host read."""
    if attention_mask is None or attention_mask.dim() != 2 or attention_mask.size(1) == 0:
        return
    if bool(((attention_mask[:, 0] == 0) & attention_mask.bool().any(dim=1)).any()):
        raise ValueError(LEFT_PADDING)
