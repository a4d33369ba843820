"""Which tokens are the example's own, from what a 🤗 tokenizer returns.

The templates read this from OpenPrompt input flags; here it comes from the tokenizer's output:
``special_tokens_mask`` when the batch has it, else the ids the tokenizer adds around a text (``added_ids``). Part ids number
the runs of own tokens (1 = the first sentence, 2 = the second of a pair, 3 = anything after), the
meaning ``text_part_ids`` has in GeneratedPrefixTemplate, for BERT's ``[SEP]`` and RoBERTa's
``</s></s>`` alike."""
from __future__ import annotations

from typing import Optional, Tuple

import torch


ADDED = ("cls", "sep", "bos", "eos", "pad")


def added_ids(tokenizer) -> list:
    """The ids a tokenizer puts around a text ([CLS] [SEP], <s> </s>) and pads with: what ``special_tokens_mask``
    marks. Not ``all_special_ids``: a [MASK] or [UNK] inside the text is the example's own token in the mask (so
    the prompt the model trained with), and must stay so in a batch without it."""
    ids = (getattr(tokenizer, f"{name}_token_id", None) for name in ADDED)
    return sorted({int(i) for i in ids if i is not None})


def instance_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    special_tokens_mask: Optional[torch.Tensor] = None,
                    special_ids: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(content_mask, part_ids)``, both (B, n)."""
    content = attention_mask.bool()
    if special_tokens_mask is not None:
        content = content & ~special_tokens_mask.bool()
    elif special_ids is not None and special_ids.numel():
        content = content & ~torch.isin(input_ids, special_ids.to(input_ids.device))
    previous = torch.nn.functional.pad(content[:, :-1], (1, 0), value=False)
    run = (content & ~previous).long().cumsum(dim=1).clamp(max=3)
    return content, torch.where(content, run, torch.zeros_like(run))
