"""Per-layer prompt injection for BERT-style masked LMs, through hooks on the encoder.

``BertForMaskedLM.forward`` takes no ``past_key_values``, and OpenPrompt's prefix template knows only
T5/GPT-2, so prompts reach the inner layers here:

* ``kv``     -- a pre-hook on every self-attention module hands it prefix keys/values (a
  ``(k, v)`` tuple on transformers 4.x, a ``DynamicCache`` on 5.x) and widens its attention mask by
  the prefix length: Prefix Tuning / P-tuning v2.
* ``hidden`` -- a pre-hook on every block i >= 1 writes that layer's prompt vectors into the
  dedicated prompt positions of its input hidden states (replace or add); layer 0's prompt was
  spliced into the input embeddings by the template: deep prompt tuning / M-IDPG.

Each template installs its own injector; it stays idle (the hooks return at once) until the
template ``arm``s it for a forward pass, so several templates can share one frozen PLM;
prompts may be computed lazily per layer from the previous layer's output (M-IDPG).
"""
from __future__ import annotations

import inspect
from contextlib import contextmanager
from functools import partial
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import nn

from .layout import find_layout

# provider(slot, previous_first_token_state or None) -> (batch, positions, hidden)
PromptProvider = Callable[[int, Optional[torch.Tensor]], torch.Tensor]


@dataclass
class InjectionPlan:
    mode: str                                   # "kv" | "hidden"
    provider: PromptProvider
    uses_previous: bool = False                 # provider wants the previous layer's first-token state
    positions: Optional[torch.Tensor] = None    # hidden: (B, t) prompt positions in the sequence
    hidden_mode: str = "replace"                # hidden: "replace" | "add"
    prefix_mask: Optional[torch.Tensor] = None  # kv: (B, p) 1 = attend to this prefix slot
    cache: object = None


def pad_attention_mask(mask, p: int, prefix_mask, batch: int, ref: torch.Tensor):
    """Widen a layer's attention mask with ``p`` leading prefix columns (allowed unless masked)."""
    if mask is None and prefix_mask is None:
        return None
    n = ref.size(1)
    if mask is None:
        mask = torch.zeros(batch, 1, 1, n, dtype=ref.dtype, device=ref.device)
    if mask.dim() != 4:
        raise ValueError(f"expected a 4-d attention mask inside the encoder, got shape {tuple(mask.shape)}")
    mask = mask.expand(batch, *mask.shape[1:])
    shape = (*mask.shape[:-1], p)
    if prefix_mask is None:
        allowed = torch.ones(shape, dtype=torch.bool, device=mask.device)
    else:
        allowed = prefix_mask.bool().view(batch, 1, 1, p).expand(shape)
    if mask.dtype == torch.bool:
        pad = allowed
    else:
        pad = torch.zeros(shape, dtype=mask.dtype, device=mask.device).masked_fill(~allowed, torch.finfo(mask.dtype).min)
    return torch.cat([pad, mask], dim=-1)


class LayerPromptInjector:
    def __init__(self, model: nn.Module):
        self.layout = find_layout(model)
        self.plan: Optional[InjectionPlan] = None
        self.handles = []
        self._signatures = {}
        for i, (layer, attention) in enumerate(zip(self.layout.layers, self.layout.attentions)):
            self._signatures[i] = inspect.signature(attention.forward)
            self.handles.append(attention.register_forward_pre_hook(partial(self._kv_hook, i), with_kwargs=True))
            if i > 0:
                self.handles.append(layer.register_forward_pre_hook(partial(self._hidden_hook, i), with_kwargs=True))

    # ---- arming -------------------------------------------------------------------------------
    def arm(self, plan: InjectionPlan) -> None:
        if plan.mode == "kv" and self.layout.cache_style == "cache":
            from transformers import DynamicCache
            plan.cache = DynamicCache()
        self.plan = plan

    def disarm(self) -> None:
        self.plan = None

    @contextmanager
    def suspended(self):
        """Run the PLM without prompts (e.g. IDPG's frozen sentence-representation pass)."""
        plan, self.plan = self.plan, None
        try:
            yield
        finally:
            self.plan = plan

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles, self.plan = [], None

    # ---- hooks --------------------------------------------------------------------------------
    # Registered as partial(bound method, i), not closures: copy.deepcopy(model) rebinds a copied bound
    # method to the copied injector, while a closure would keep reading the original's plan (the copy,
    # e.g. moved to a GPU, would then run without its prompts).
    def _kv_hook(self, i: int, module, args, kwargs):
        plan = self.plan
        if plan is None or plan.mode != "kv":
            return None
        bound = self._signatures[i].bind(*args, **kwargs)
        hs = bound.arguments["hidden_states"]
        previous = hs[:, 0] if plan.uses_previous and i > 0 else None
        k, v = plan.provider(2 * i, previous), plan.provider(2 * i + 1, previous)
        b, p, _ = k.shape
        heads, dim = self.layout.num_heads, self.layout.head_dim
        k = k.to(hs.dtype).reshape(b, p, heads, dim).transpose(1, 2)
        v = v.to(hs.dtype).reshape(b, p, heads, dim).transpose(1, 2)
        bound.arguments["attention_mask"] = pad_attention_mask(
            bound.arguments.get("attention_mask"), p, plan.prefix_mask, b, hs)
        if self.layout.cache_style == "tuple":
            bound.arguments[self.layout.cache_arg] = (k, v)
        else:
            plan.cache.update(k, v, getattr(module, "layer_idx", i))
            bound.arguments[self.layout.cache_arg] = plan.cache
        return bound.args, bound.kwargs

    def _hidden_hook(self, i: int, module, args, kwargs):
        plan = self.plan
        if plan is None or plan.mode != "hidden":
            return None
        hs = args[0] if args else kwargs["hidden_states"]
        previous = hs[:, 0] if plan.uses_previous else None
        prompt = plan.provider(i, previous).to(hs.dtype)
        index = plan.positions.unsqueeze(-1).expand(-1, -1, hs.size(-1))
        hs = hs.scatter(1, index, prompt) if plan.hidden_mode == "replace" else hs.scatter_add(1, index, prompt)
        if args:
            return (hs, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": hs}
