"""Put t prompt vectors into the input sequence at a per-example position, and take them out again.

IDPG appendix A.4 (Figure 5) inserts the prompt at one of five places; ``insert_index`` turns the
position number into a sequence index from the template's ``text_part_ids`` flag (1 = text_a,
2 = text_b tokens). ``splice`` returns the longer batch plus the index of every original position,
which ``remove_positions`` uses to drop the prompt positions from logits *and* hidden states.
"""
from __future__ import annotations

import torch

from .batch import field
from .input_embeddings import WIDENED, check_positions

INSERT_POSITIONS = {0: "before text_a", 1: "after text_a", 2: "before text_b", 3: "after text_b",
                    4: "before the final special token"}


def _first(mask: torch.Tensor, default: torch.Tensor) -> torch.Tensor:
    idx = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
    first = torch.where(mask, idx, torch.full_like(idx, mask.size(1))).min(dim=1).values
    return torch.where(mask.any(dim=1), first, default)


def _after_last(mask: torch.Tensor, default: torch.Tensor) -> torch.Tensor:
    idx = torch.arange(mask.size(1), device=mask.device).expand_as(mask)
    last = torch.where(mask, idx, torch.full_like(idx, -1)).max(dim=1).values + 1
    return torch.where(mask.any(dim=1), last, default)


def insert_index(position: int, text_part_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B,) sequence index where the prompt starts; never before the first (special) token."""
    length = attention_mask.long().sum(dim=1)
    end = (length - 1).clamp(min=1)       # before the final [SEP] / </s>
    one = torch.ones_like(length)
    a, b = text_part_ids == 1, text_part_ids == 2
    if position == 0:
        out = _first(a, one)
    elif position == 1:
        out = _after_last(a, end)
    elif position == 2:
        out = _first(b, end)
    elif position == 3:
        out = _after_last(b, end)
    elif position == 4:
        out = end
    else:
        raise ValueError(f"insert_position must be one of {sorted(INSERT_POSITIONS)} ({INSERT_POSITIONS}), got {position}")
    return out.clamp(min=1)


def splice(batch, prompts: torch.Tensor, start: torch.Tensor, limit: int | None = None):
    """Insert ``prompts`` (B, t, H) into ``inputs_embeds`` at ``start`` (B,); widen masks alike.

    Returns ``(batch, keep, positions)``: ``keep`` (B, n) the new index of each original position,
    ``positions`` (B, t) where the prompt vectors now sit."""
    embeds = batch["inputs_embeds"]
    b, n, _ = embeds.shape
    t = prompts.size(1)
    check_positions(t, n, limit)
    device = embeds.device
    j = torch.arange(n + t, device=device).unsqueeze(0).expand(b, -1)
    s = start.to(device).unsqueeze(1)
    in_prompt = (j >= s) & (j < s + t)
    # source index into cat([original (n), prompts (t)])
    src = torch.where(j < s, j, torch.where(in_prompt, n + (j - s), j - t))
    both = torch.cat([embeds, prompts.to(embeds.dtype)], dim=1)
    batch["inputs_embeds"] = both.gather(1, src.unsqueeze(-1).expand(-1, -1, both.size(-1)))
    orig = torch.where(in_prompt, (s - 1).clamp(min=0).expand(-1, n + t), src)  # prompt copies its left neighbour
    for key in WIDENED:  # a prompt position takes its left neighbour's segment and task type
        value = field(batch, key)
        if value is not None:
            spliced = value.gather(1, orig.clamp(max=n - 1))
            if key == "attention_mask":
                spliced = torch.where(in_prompt, torch.ones_like(spliced), spliced)
            batch[key] = spliced
    keep = torch.arange(n, device=device).unsqueeze(0).expand(b, -1)
    keep = torch.where(keep < s, keep, keep + t)
    positions = s + torch.arange(t, device=device).unsqueeze(0)
    return batch, keep, positions


def remove_positions(outputs, keep: torch.Tensor):
    """Keep only the original positions (``keep`` from ``splice``) in logits and hidden states."""
    def take(x):
        return x.gather(1, keep.unsqueeze(-1).expand(-1, -1, x.size(-1)))
    if getattr(outputs, "logits", None) is not None:
        outputs.logits = take(outputs.logits)
    if getattr(outputs, "hidden_states", None) is not None:
        outputs.hidden_states = tuple(take(h) for h in outputs.hidden_states)
    return outputs


def shifted_position_ids(config, attention_mask: torch.Tensor, offset: int) -> torch.Tensor:
    """Position ids of the text when ``offset`` prefix slots sit before it (Prefix Tuning semantics).

    RoBERTa-family models count from ``padding_idx + 1`` and keep padding at ``padding_idx``."""
    from .input_embeddings import _PADDING_OFFSET_FAMILIES

    mask = attention_mask.long()
    if getattr(config, "model_type", "") in _PADDING_OFFSET_FAMILIES:
        pad = int(getattr(config, "pad_token_id", 1) or 0)
        return (torch.cumsum(mask, dim=1) + offset) * mask + pad
    n = mask.size(1)
    return (torch.arange(n, device=mask.device) + offset).unsqueeze(0).expand(mask.size(0), -1)
