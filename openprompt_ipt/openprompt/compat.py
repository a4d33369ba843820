"""Shims that let unmodified OpenPrompt (1.0.1 / HEAD) import and run on newer transformers.

OpenPrompt was written against transformers 4.x. What it uses that is gone or renamed:
  * ``transformers.generation_utils`` (removed in 4.40) -> alias to ``transformers.generation``;
  * ``transformers.AdamW`` (removed in 4.50)            -> ``Transformers4AdamW`` (its algorithm and defaults:
    torch's AdamW decays by 0.01 and adds eps 1e-8, so OpenPrompt's trainer silently decayed the template's and
    verbalizer's weights, which it builds with the defaults);
  * on 5.x, tokenizers lost ``build_inputs_with_special_tokens`` and the non-formatted form of
    ``get_special_tokens_mask`` (OpenPrompt's tokenizer wrappers call both) -> rebuilt from what
    the tokenizer itself adds around a probe text;
  * on 5.x, ``additional_special_tokens`` / ``..._ids`` were renamed ``extra_special_tokens`` / ``..._ids``
    (OpenPrompt's T5 wrappers read T5's ``<extra_id_i>`` from them) -> aliases of the new names.
Plus two modules OpenPrompt imports for names only (``transformers.data.processors.utils``,
``tokenization_utils.SPECIAL_TOKENS_MAP_FILE``). ``apply()`` is idempotent and runs just before anything imports
``openprompt`` (``hook.py``); ``apply_to_openprompt()`` just after, for what patches OpenPrompt's own classes:
  * on 5.x, ``PromptForGeneration.generate`` (a ``GenerationMixin`` on a plain ``nn.Module``) met a ``generate``
    that calls ``PreTrainedModel`` methods on it and renamed the encoder hook OpenPrompt overrides -> delegated to
    its PLM / OpenPrompt's hook; loss, greedy and beam search then equal 4.39's on the same weights;
  * on 5.x, ``PrefixTuningTemplate`` feeds 4.x tuple ``past_key_values`` (GPT-2 then computes other logits
    silently, T5 crashes): refused in one line;
  * on 5.x, ``SoftVerbalizer`` took a masked LM's last child for its head, but XLM-R's and CamemBERT's ``lm_head``
    now come first (it raised "Can't not retrieve a linear layer") -> shown the head's child last.
The 4.39 Trainer's resume fix is the 🤗 door's (``hf/trainer_compat.py``).
"""
from __future__ import annotations

import functools
import importlib.util
import math
import sys
import types
from typing import List, Optional

import torch

from ..generators.sentence import special_token_frame  # the probe lives with its other user, the prompt layer

_APPLIED = False


def _missing(module: str) -> bool:
    if module in sys.modules:
        return False
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        return True


def _alias_generation_utils() -> None:
    if not _missing("transformers.generation_utils"):
        # 4.39 still ships it, with a FutureWarning on every OpenPrompt import that users can't act on
        import warnings

        warnings.filterwarnings("ignore", message="Importing `GenerationMixin` from", category=FutureWarning)
        return
    import transformers

    mod = types.ModuleType("transformers.generation_utils")
    mod.GenerationMixin = transformers.GenerationMixin
    sys.modules["transformers.generation_utils"] = mod


class Transformers4AdamW(torch.optim.Optimizer):
    """transformers 4's ``AdamW``, as OpenPrompt's trainers build it (``AdamW(params, lr=...)``): eps 1e-6 and no
    weight decay by default, eps added to sqrt(v) before the bias correction, the decay applied after the step.
    torch's AdamW differs in all four (0.01 decay by default), so it would train OpenPrompt otherwise than 4.x."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0,
                 correct_bias: bool = True, no_deprecation_warning: bool = False):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      correct_bias=correct_bias))

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:  # an OpenPrompt checkpoint saved with torch's AdamW (this shim's stand-in on
            group.setdefault("correct_bias", True)  # transformers >= 4.50 before): its groups lack the key; resumed

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Adam does not support sparse gradients (transformers 4's AdamW, which "
                                       "OpenPrompt's trainer builds): give the template dense tables (sparse: false)")
                state = self.state[p]
                if not state:
                    state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                step_size = group["lr"]
                if group["correct_bias"]:
                    step_size *= math.sqrt(1.0 - beta2 ** state["step"]) / (1.0 - beta1 ** state["step"])
                p.addcdiv_(m, v.sqrt().add_(group["eps"]), value=-step_size)
                if group["weight_decay"] > 0.0:
                    p.add_(p, alpha=-group["lr"] * group["weight_decay"])
        return loss


def _restore_adamw() -> None:
    import transformers

    if hasattr(transformers, "AdamW"):
        return
    # On 5.x importing ``transformers.models`` swaps the top-level lazy module for a new object,
    # so an attribute set on the module is lost: answer the name from the lazy-module class.
    from transformers.utils import import_utils

    lazy = import_utils._LazyModule
    original = lazy.__getattr__

    def __getattr__(self, name):
        if name == "AdamW" and self.__name__ == "transformers":
            return Transformers4AdamW
        return original(self, name)

    lazy.__getattr__ = __getattr__


def _restore_processor_utils() -> None:
    if not _missing("transformers.data.processors.utils"):
        return
    from dataclasses import dataclass

    @dataclass
    class InputExample:  # only imported by OpenPrompt, never used on our paths
        guid: str
        text_a: str
        text_b: Optional[str] = None
        label: Optional[str] = None

    @dataclass
    class InputFeatures:
        input_ids: List[int]
        attention_mask: Optional[List[int]] = None
        token_type_ids: Optional[List[int]] = None
        label: Optional[int] = None

    for name in ("transformers.data.processors", "transformers.data.processors.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    utils = sys.modules["transformers.data.processors.utils"]
    utils.InputExample, utils.InputFeatures = InputExample, InputFeatures


def _restore_special_tokens_map_file() -> None:
    import transformers.tokenization_utils as tu

    if not hasattr(tu, "SPECIAL_TOKENS_MAP_FILE"):
        tu.SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"


def _build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
    pre, mid, post = special_token_frame(self, token_ids_1 is not None)
    if token_ids_1 is None:
        return list(pre) + list(token_ids_0) + list(post)
    return list(pre) + list(token_ids_0) + list(mid) + list(token_ids_1) + list(post)


def _patch_tokenizers() -> None:
    """Fast (4.x) and all 5.x tokenizers only answer ``get_special_tokens_mask`` for already-formatted
    ids; 5.x also dropped ``build_inputs_with_special_tokens``. Python ("slow") tokenizers override
    both with their own correct versions, so patching the shared base class is enough."""
    from transformers import tokenization_utils_base as tub

    base = tub.PreTrainedTokenizerBase
    if getattr(base, "_ipt_patched", False):
        return
    if not hasattr(base, "build_inputs_with_special_tokens"):
        base.build_inputs_with_special_tokens = _build_inputs_with_special_tokens
    original_mask = base.get_special_tokens_mask

    def get_special_tokens_mask(self, token_ids_0, token_ids_1=None, already_has_special_tokens=False):
        if already_has_special_tokens:
            return original_mask(self, token_ids_0, token_ids_1, already_has_special_tokens=True)
        pre, mid, post = special_token_frame(self, token_ids_1 is not None)
        mask = [1] * len(pre) + [0] * len(token_ids_0)
        if token_ids_1 is not None:
            mask += [1] * len(mid) + [0] * len(token_ids_1)
        return mask + [1] * len(post)

    base.get_special_tokens_mask = get_special_tokens_mask
    base._ipt_patched = True


def _alias_additional_special_tokens() -> None:
    """5.x still accepts ``additional_special_tokens=`` when building a tokenizer (it becomes
    ``extra_special_tokens``) but no longer answers the attribute; 4.x has it, so nothing to do there."""
    from transformers import tokenization_utils_base as tub

    base = tub.PreTrainedTokenizerBase
    if hasattr(base, "additional_special_tokens"):  # 4.x: a property of its own
        return

    def alias(new: str) -> property:
        return property(lambda self: getattr(self, new), lambda self, value: setattr(self, new, value),
                        doc=f"transformers 4's name of ``{new}`` (shimmed for OpenPrompt)")

    base.additional_special_tokens = alias("extra_special_tokens")
    base.additional_special_tokens_ids = alias("extra_special_tokens_ids")


def _generation_hook_renamed() -> bool:
    """transformers 5 renamed the encoder hook of ``generate`` that OpenPrompt overrides (4.x: the old name)."""
    from transformers import GenerationMixin

    return (hasattr(GenerationMixin, "_prepare_text_encoder_decoder_kwargs_for_generation")
            and not hasattr(GenerationMixin, "_prepare_encoder_decoder_kwargs_for_generation"))


def _delegate_to_plm(name: str):
    def method(self, *args, **kwargs):
        return getattr(self.plm, name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"The PLM's ``{name}`` (5.x ``generate`` calls it on the model; shimmed for OpenPrompt)."
    return method


def _patch_prompt_for_generation() -> None:
    """OpenPrompt's ``PromptForGeneration`` is a ``GenerationMixin`` but no ``PreTrainedModel``: 5.x's ``generate``
    asks it for ``get_encoder`` / ``get_experts_implementation``, calls the encoder hook by its new name (skipping
    OpenPrompt's override, the one that runs the template), and reorders beams through ``_reorder_cache`` when the
    model has one: OpenPrompt's forwards to the PLM's, which 5.x PLMs dropped (their caches reorder themselves)."""
    from openprompt.pipeline_base import PromptForGeneration as P

    if getattr(P, "_ipt_patched", False):
        return
    for name in ("get_encoder", "get_experts_implementation"):
        if not hasattr(P, name):
            setattr(P, name, _delegate_to_plm(name))

    def text_encoder_hook(self, inputs_tensor, model_kwargs, model_input_name, generation_config):
        return self._prepare_encoder_decoder_kwargs_for_generation(inputs_tensor, model_kwargs, model_input_name)

    P._prepare_text_encoder_decoder_kwargs_for_generation = text_encoder_hook
    openprompt_reorder = P._reorder_cache

    def reorder_cache(self):
        if not hasattr(self.plm, "_reorder_cache"):  # hasattr(model) False: generate reorders the cache itself
            raise AttributeError("_reorder_cache")
        return openprompt_reorder.__get__(self)

    P._reorder_cache = property(reorder_cache)
    P._ipt_patched = True


def _refuse_prefix_tuning_template() -> None:
    import transformers
    from openprompt.prompts.prefix_tuning_template import PrefixTuningTemplate as T

    if getattr(T, "_ipt_patched", False):
        return

    def modify_plm(self, model):  # the last step of its __init__, before it rewires the PLM's layers
        raise ValueError(
            f"OpenPrompt's PrefixTuningTemplate does not work on transformers {transformers.__version__}: it passes "
            "transformers 4's tuple past_key_values, which 5.x no longer reads (GPT-2 computes other logits, T5 "
            "raises KeyError); use transformers<5 for it, or SoftTemplate / MixedTemplate (docs/openprompt.md)")

    T.modify_plm = modify_plm
    T._ipt_patched = True


class _HeadLast:
    """``model`` with the child that holds its vocabulary head listed last, for SoftVerbalizer, which copies the last
    child as the head: transformers 5 registers XLM-R's and CamemBERT's ``lm_head`` before their encoder, so it
    walked into the encoder and raised "Can't not retrieve a linear layer"."""

    def __init__(self, model, name: str):
        self._model, self._name = model, name

    def named_children(self):
        others = [(n, c) for n, c in self._model.named_children() if n != self._name]
        return iter(others + [(self._name, getattr(self._model, self._name))])

    def __getattr__(self, name):
        return getattr(self._model, name)

    @classmethod
    def of(cls, model):
        head = getattr(model, "get_output_embeddings", lambda: None)()
        names = [n for n, c in model.named_children() if head is not None and any(m is head for m in c.modules())]
        last = [n for n, _ in model.named_children()][-1:]
        return cls(model, names[0]) if names and names != last else model


def _soft_verbalizer_finds_the_vocabulary_head() -> None:
    from openprompt.prompts.soft_verbalizer import SoftVerbalizer as V

    if getattr(V, "_ipt_patched", False):
        return
    init = V.__init__

    @functools.wraps(init)  # its signature stays the original's: OpenPrompt's loader and our config check read it
    def __init__(self, tokenizer, model, *args, **kwargs):
        init(self, tokenizer, _HeadLast.of(model) if model is not None else model, *args, **kwargs)

    V.__init__ = __init__
    V._ipt_patched = True


def apply_to_openprompt() -> None:
    """The shims that patch OpenPrompt's own classes; run once ``openprompt`` is imported (idempotent; on
    transformers 4 only the SoftVerbalizer's, which changes nothing there)."""
    _soft_verbalizer_finds_the_vocabulary_head()
    if not _generation_hook_renamed():
        return
    _patch_prompt_for_generation()
    _refuse_prefix_tuning_template()


def apply() -> None:
    """Install every shim OpenPrompt needs on the installed transformers version (idempotent)."""
    global _APPLIED
    if _APPLIED:
        return
    _alias_generation_utils()
    _restore_adamw()
    _restore_processor_utils()
    _restore_special_tokens_map_file()
    _patch_tokenizers()
    _alias_additional_special_tokens()
    _APPLIED = True
