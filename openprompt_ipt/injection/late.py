"""Late prompts: t vectors join the hidden states after layer l, before the text (LPT, Liu et al. 2022).

Layers 1..l read the text as the frozen model does; from layer l+1 on, the sequence is
``[prompt; text]`` with the attention mask widened by t allowed columns. A pre-hook on block l (0-based:
the (l+1)-th block) asks the armed plan for the prompt, giving it the hidden states there (LPT's
generators read them; a late IPT / IDPG prompt ignores them) and prepends it; pre-hooks on the blocks
above widen their attention mask (once per forward, then reused). The hidden states entering block l
are detached: nothing below the prompt trains, so the backward stops there and the blocks below keep no
activations for it. A hook on the encoder drops the t prompt positions from its output, so every head reads
the text's positions: the pooler and a sequence classifier read [CLS] / <s> at position 0 (not the first
prompt vector), an MLM head reads the [MASK] where the tokenizer put it.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Callable, Optional

import torch
from torch import nn

from .encoder_hooks import ArmedHooks, CallArguments, pad_attention_mask, positional_index
from .layout import find_layout

# provider(hidden states entering block l (B, n, H), the batch's (B, n) attention mask) -> (B, t, H)
LateProvider = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class LatePlan:
    provider: LateProvider
    attention_mask: torch.Tensor      # (B, n) 1 = real token, as the tokenizer gave it
    widened: object = None            # (the layers' mask, widened mask) of the current forward


def check_late_layer(layer, num_layers: int, family: str = "the model") -> int:
    """l must leave at least one block below and one above the prompt."""
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= num_layers - 1:
        raise ValueError(f"late_layer must be an integer in 1..{num_layers - 1} ({family} has {num_layers} layers: the "
                         f"prompt joins after layer l, so at least one layer must be above it), got {layer!r}")
    return layer


class LatePromptInjector(ArmedHooks):
    def __init__(self, model: nn.Module, layer: int):
        self.layout = find_layout(model)
        family = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
        self.layer = check_late_layer(layer, self.layout.num_layers, f"'{family}'")
        self.plan: Optional[LatePlan] = None
        self.handles, self._arg_index = [], {}
        for i in range(self.layer, self.layout.num_layers):
            block = self.layout.layers[i]
            signature = inspect.signature(block.forward)
            self._arg_index[i] = {name: positional_index(signature, name) for name in ("hidden_states", "attention_mask")}
            self.handles.append(block.register_forward_pre_hook(partial(self._hook, i), with_kwargs=True))
        encoder = getattr(model, "base_model", model).encoder  # find_layout found its layers
        self.handles.append(encoder.register_forward_hook(self._drop_prompt))
        self.watch_forwards(model)

    # Registered as partial(bound method, i) (not a closure): a deep copy of the model rebinds to its own injector.
    def _hook(self, i: int, module, args, kwargs):
        plan = self.plan
        if plan is None:
            return None
        call = CallArguments(self._arg_index[i], args, kwargs)
        get, put = call.get, call.put
        hs = get("hidden_states")
        mask = get("attention_mask")
        if i == self.layer:
            hs = hs.detach()  # the backward stops at the prompt
            prompt = plan.provider(hs, plan.attention_mask).to(hs.dtype)
            hs = torch.cat([prompt, hs], dim=1)
            put("hidden_states", hs)
        t = hs.size(1) - plan.attention_mask.size(1)
        put("attention_mask", self._widened(plan, mask, t, hs))
        return call.result()

    def _drop_prompt(self, module, args, output):
        """The encoder's last hidden state without the t leading prompt positions, before the pooler or any head
        reads it (a tuple on transformers 4.x with return_dict=False, a ModelOutput otherwise)."""
        plan = self.plan
        if plan is None:
            return None
        hs = output[0]
        t = hs.size(1) - plan.attention_mask.size(1)
        if t <= 0:
            return None
        if isinstance(output, tuple):
            return (hs[:, t:], *output[1:])
        output.last_hidden_state = hs[:, t:]
        return output

    @staticmethod
    def _widened(plan: LatePlan, mask, t: int, hs: torch.Tensor):
        """The encoder hands every block the same text-sized mask: widen it once per forward. A bidirectional
        mask's rows are alike (key padding only), so one row, widened by t columns, serves all n + t queries."""
        if mask is None:
            return None  # no padding anywhere: the prompt attends and is attended to freely
        cached = plan.widened
        if cached is not None and cached[0] is mask:
            return cached[1]
        if mask.dim() != 4:
            raise ValueError(f"expected a 4-d attention mask inside the encoder, got shape {tuple(mask.shape)}")
        widened = pad_attention_mask(mask[..., :1, :], t, None, hs.size(0), hs)
        plan.widened = (mask, widened)
        return widened


def trim_late(outputs, t: int):
    """Drop the t late prompt positions (they lead the sequence) from the hidden states of the layers above the
    prompt; the layers below never had them. Logits need nothing: the heads ran on the encoder's output, which
    the injector's encoder hook already gave without them."""
    states = getattr(outputs, "hidden_states", None)
    if states is not None:
        n = min(h.size(1) for h in states)
        outputs.hidden_states = tuple(h[:, t:] if h.size(1) == n + t else h for h in states)
    return outputs
