"""Input-layer injection (Prompt Tuning style): prompts enter as extra embeddings before the text.

``prepend`` extends ``inputs_embeds`` / ``attention_mask`` / ``token_type_ids`` together, and
``trim_outputs`` removes the prompt positions again from *both* logits and hidden states, so a
verbalizer reading hidden states (SoftVerbalizer) sees the same positions as the ``loss_ids``.
OpenPrompt's SoftTemplate trims only the logits.
"""
from __future__ import annotations

import torch

from .batch import field

# Families whose position ids start after padding_idx (so pad_token_id + 1 positions are unusable): transformers'
# create_position_ids_from_input_ids in their embeddings. A family missing here gets BERT-style positions under a kv
# prefix (shift) and a limit 2 too high, silently (tests/test_families.py checks every supported family).
_PADDING_OFFSET_FAMILIES = {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "roberta-prelayernorm",
                            "data2vec-text"}
# the per-position inputs a prompt's positions widen: attention, BERT's segments, ERNIE's task types
WIDENED = ("attention_mask", "token_type_ids", "task_type_ids")


def max_positions(config) -> int:
    n = int(getattr(config, "max_position_embeddings", 10 ** 9))
    if getattr(config, "model_type", "") in _PADDING_OFFSET_FAMILIES:
        n -= int(getattr(config, "pad_token_id", 1) or 0) + 1
    return n


def check_positions(prompt: int, n: int, limit: int | None, kv: bool = False) -> None:
    """``prompt`` numbered prompt positions + ``n`` input tokens must fit the model's ``limit`` positions: one line
    naming the setting to change in either door, not a bare index error from the PLM's position table."""
    if limit is None or n + prompt <= limit:
        return
    # a 🤗 pipeline truncates at the tokenizer's model_max_length (token classification always does), which
    # counts no prompt: name that knob too
    room = (f"set max_seq_length <= {limit - prompt} (the tokenizer's max_length under 🤗 Transformers; in a "
            f"pipeline, tokenizer.model_max_length = {limit - prompt})")
    if prompt == 0:
        raise ValueError(f"{n} input tokens exceed the model's {limit} positions: {room}")
    if kv:
        raise ValueError(f"{prompt} prefix positions + {n} input tokens exceed the model's {limit} positions: "
                         f"{room}, use fewer prefix tokens, or prefix_positions: keep")
    raise ValueError(f"{prompt} prompt tokens + {n} input tokens exceed the model's {limit} positions: {room} or use "
                     "fewer prompt tokens")


def prepend(batch, prompts: torch.Tensor, limit: int | None = None):
    """Put ``prompts`` (B, n, H) in front of ``batch['inputs_embeds']`` and widen the masks."""
    embeds = batch["inputs_embeds"]
    n = prompts.size(1)
    check_positions(n, embeds.size(1), limit)
    batch["inputs_embeds"] = torch.cat([prompts.to(embeds.dtype), embeds], dim=1)
    for key in WIDENED:
        value = field(batch, key)
        if value is not None:
            batch[key] = torch.cat([_prompt_fill(key, value, n), value], dim=1)
    return batch


def _prompt_fill(key: str, value: torch.Tensor, n: int) -> torch.Tensor:
    """(B, n) values of ``key`` at ``n`` prompt positions before the text: attended, segment 0 ([CLS]'s), and the
    example's own task type (an ERNIE task id holds for the whole example)."""
    if key == "task_type_ids":
        return value[:, :1].expand(-1, n)
    fill = torch.ones if key == "attention_mask" else torch.zeros
    return fill(value.size(0), n, dtype=value.dtype, device=value.device)


def trim_outputs(outputs, n: int):
    """Drop the first ``n`` (prompt) positions from logits and every hidden-state layer."""
    if n == 0:
        return outputs
    if getattr(outputs, "logits", None) is not None:
        outputs.logits = outputs.logits[:, n:]
    if getattr(outputs, "hidden_states", None) is not None:
        outputs.hidden_states = tuple(h[:, n:] for h in outputs.hidden_states)
    return outputs
