"""Per-layer prompt injection for BERT-style masked LMs, through hooks on the encoder.

``BertForMaskedLM.forward`` takes no ``past_key_values``, and OpenPrompt's prefix template knows only
T5/GPT-2, so prompts reach the inner layers here:

* ``kv``     -- a pre-hook on every self-attention module hands it prefix keys/values (a
  ``(k, v)`` tuple on transformers 4.x, a ``LayerPrefix`` cache on 5.x) and widens its attention mask by
  the prefix length: Prefix Tuning / P-tuning v2. The prefix enters in the dtype the key projection
  gives (bf16 under bf16 autocast), so the cache's concatenation and the attention run without casts; the
  widened mask is built once per forward and reused by every layer.
* ``hidden`` -- a pre-hook on every block i >= 1 writes that layer's prompt vectors into the
  dedicated prompt positions of its input hidden states (replace or add); layer 0's prompt was
  spliced into the input embeddings by the template: deep prompt tuning / M-IDPG.

Each template installs its own injector; it stays idle (the hooks return at once) until the
template ``arm``s it for a forward pass, so several templates can share one frozen PLM;
prompts may be computed lazily per layer from the previous layer's output (M-IDPG).
"""
from __future__ import annotations

import inspect
import weakref
from contextlib import contextmanager
from functools import partial
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import nn

from .checkpointing import carry_prompt, checkpointable, drop_prompt
from .per_thread import PerThread
from .precision import autocast_dtype
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
    cache: object = None                        # unused since LayerPrefix (kept: a public field)
    widened: object = None                      # kv: (layer mask, n, p, widened mask) of the current forward


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


class LayerPrefix:
    """One layer's prefix keys/values, handed to its self-attention as the cache (transformers 5.x), which
    calls only ``update``: the prefix is joined to the layer's keys/values in one cat. (An empty
    ``DynamicCache`` first copied each prefix into itself, one more cat per key and value per layer.)"""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys, self.values = keys, values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        return torch.cat([self.keys, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)

    def get_seq_length(self, *args, **kwargs) -> int:
        return self.keys.size(-2)


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def positional_index(signature: inspect.Signature, name: str) -> Optional[int]:
    """Where ``name`` sits among a call's positional arguments; None if it can only be a keyword."""
    for index, (param, spec) in enumerate(signature.parameters.items()):
        if spec.kind not in _POSITIONAL:
            return None
        if param == name:
            return index
    return None


class CallArguments:
    """A hooked call's arguments, read and replaced by name whether they came positionally or as keywords
    (``where``: each name's positional index, or None for keyword-only)."""

    def __init__(self, where: dict, args, kwargs):
        self.where, self.args, self.kwargs = where, list(args), dict(kwargs)

    def get(self, name):
        j = self.where[name]
        return self.args[j] if j is not None and j < len(self.args) else self.kwargs.get(name)

    def put(self, name, value) -> None:
        j = self.where[name]
        if j is not None and j < len(self.args):
            self.args[j] = value
        else:
            self.kwargs[name] = value

    def result(self):
        return tuple(self.args), self.kwargs


# injectors whose owner (template or model) is alive and takes their hooks off when it is garbage
_OWNED: "weakref.WeakSet" = weakref.WeakSet()


def remove_orphaned_copies(model: nn.Module) -> None:
    """Take off ``model`` the hooks of injectors copied with it alone (``copy.deepcopy(model.base_model)``, or a
    pickle of it): they had an owner once, but the copy of the owner was never made, so nothing takes them off and a
    new wrap stacked its hooks on them (idle, run on every forward). Injectors that never had an owner stay."""
    found = {}
    for module in model.modules():
        for hook in (*module._forward_pre_hooks.values(), *module._forward_hooks.values()):
            injector = getattr(getattr(hook, "func", hook), "__self__", None)
            if isinstance(injector, ArmedHooks) and injector.__dict__.get("owned") and injector not in _OWNED:
                found[id(injector)] = injector
    for injector in found.values():
        injector.remove()


class ArmedHooks:
    """Hooks that stay idle until a forward arms them with a plan; shared by the per-layer and the late injector.
    The plan is the arming thread's own (injection/per_thread.py): two threads forwarding one model at once (a web
    server's thread pool) each run with their own prompts."""
    plan = PerThread()
    claimed = PerThread(False)  # the PLM forward the plan was armed for has started
    handles: list  # set by each subclass's __init__
    checkpointable: tuple = ()  # the PLM's modules that may checkpoint a layer (set by watch_forwards)

    def arm(self, plan) -> None:
        self.plan, self.claimed = plan, False
        # gradient checkpointing may have been turned on since the last forward: the backward's recompute of a
        # layer must see this plan too (injection/checkpointing.py)
        carry_prompt(self.checkpointable, self)

    def watch_forwards(self, model: nn.Module) -> None:
        """A pre-hook on the PLM's encoder (``base_model``): the first forward after ``arm`` is the plan's own. A plan
        still armed when the next forward starts was left by a forward that never finished (Ctrl-C, out of memory:
        nothing disarmed it); it is dropped, so its stale prompt never reaches another template's, or the plain
        PLM's, forward. On the encoder, not the head model: passes that run the encoder alone (another IDPG
        template's prompt-free M(x) pass, a user's ``plm.bert(...)``) claim too, else they ran with the stale prompt."""
        self.handles.append(getattr(model, "base_model", model).register_forward_pre_hook(self._claim))
        self.checkpointable = checkpointable(model)

    def _claim(self, module, args):
        if self.plan is not None:
            if self.claimed:
                self.plan = None
            self.claimed = True
        return None

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

    def remove_with(self, owner) -> None:
        """The hooks leave the PLM when ``owner`` (the template or model that armed them) is garbage: a notebook or a
        sweep that wraps one PLM again and again kept every earlier wrapper's hooks on it, idle but run on every
        forward, and their injectors alive, for as long as the PLM lived."""
        weakref.finalize(owner, self.remove)
        self.owned = True
        _OWNED.add(self)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        drop_prompt(self.checkpointable, self)
        self.handles, self.plan, self.checkpointable = [], None, ()


class LayerPromptInjector(ArmedHooks):
    def __init__(self, model: nn.Module):
        self.layout = find_layout(model)
        self.plan: Optional[InjectionPlan] = None
        self.handles = []
        # per layer: the positional index of each argument the kv hook reads or replaces (None: keyword), found
        # once here, so a forward pays no inspect.Signature.bind per layer
        self._arg_index = {}
        names = ("hidden_states", "attention_mask", self.layout.cache_arg)
        for i, (layer, attention) in enumerate(zip(self.layout.layers, self.layout.attentions)):
            signature = inspect.signature(attention.forward)
            self._arg_index[i] = {name: positional_index(signature, name) for name in names}
            self.handles.append(attention.register_forward_pre_hook(partial(self._kv_hook, i), with_kwargs=True))
            if i > 0:
                self.handles.append(layer.register_forward_pre_hook(partial(self._hidden_hook, i), with_kwargs=True))
        self.watch_forwards(model)

    # ---- hooks --------------------------------------------------------------------------------
    # Registered as partial(bound method, i), not closures: copy.deepcopy(model) rebinds a copied bound
    # method to the copied injector, while a closure would keep reading the original's plan (the copy,
    # e.g. moved to a GPU, would then run without its prompts).
    def _kv_hook(self, i: int, module, args, kwargs):
        plan = self.plan
        if plan is None or plan.mode != "kv":
            return None
        call = CallArguments(self._arg_index[i], args, kwargs)
        get, put = call.get, call.put
        hs = get("hidden_states")
        previous = hs[:, 0] if plan.uses_previous and i > 0 else None
        k, v = plan.provider(2 * i, previous), plan.provider(2 * i + 1, previous)
        b, p, _ = k.shape
        heads, dim = self.layout.num_heads, self.layout.head_dim
        # the key projection's dtype: under autocast that is the autocast dtype, not the (fp32) residual
        # stream's; an fp32 prefix would make the cache's cat upcast the keys and the attention cast them back
        dtype = autocast_dtype(hs.device.type) or hs.dtype
        k = k.to(dtype).reshape(b, p, heads, dim).transpose(1, 2)
        v = v.to(dtype).reshape(b, p, heads, dim).transpose(1, 2)
        put("attention_mask", self._widened_mask(plan, get("attention_mask"), p, b, hs))
        if self.layout.cache_style == "tuple":
            put(self.layout.cache_arg, (k, v))
        else:
            put(self.layout.cache_arg, LayerPrefix(k, v))
        return call.result()

    @staticmethod
    def _widened_mask(plan: InjectionPlan, mask, p: int, b: int, hs: torch.Tensor):
        """Every layer of one forward gets the same mask object: widen it once, reuse it for the other layers."""
        n = hs.size(1)
        cached = plan.widened
        if cached is not None and cached[0] is mask and cached[1:3] == (n, p):
            return cached[3]
        widened = pad_attention_mask(mask, p, plan.prefix_mask, b, hs)
        plan.widened = (mask, n, p, widened)
        return widened

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
