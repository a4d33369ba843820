"""PEFT's habits on ``InstancePromptModel``: the base's attributes, device, dtype, parameter counts, the base
without the prompt (``get_base_model``, ``disable_adapter``), and PEFT's adapter calls refused by name."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

import torch
from torch import nn

# PEFT's adapter calls that do not apply to a prompt: refused by name, not forwarded to the base, whose
# PeftAdapterMixin would add a LoRA to the frozen base (a checkpoint that then does not load) or say "no attribute"
_MERGE = ("an instance-wise prompt is computed from each input at run time, so there are no weights to merge into "
          "the base: predict with the InstancePromptModel, or use model.get_base_model() for the base without it")
_ADAPTERS = ("it holds one instance-wise prompt, not PEFT adapters, on a frozen base: run without the prompt inside "
             "`with model.disable_adapter():`, or wrap the base again with get_instance_prompt_model for another prompt")
NOT_FOR_PROMPTS = {**dict.fromkeys(("merge_and_unload", "unload", "merge_adapter", "unmerge_adapter"), _MERGE),
                   **dict.fromkeys(("add_adapter", "set_adapter", "load_adapter", "delete_adapter", "enable_adapters",
                                    "disable_adapters", "active_adapters", "active_adapter", "get_adapter_state_dict",
                                    "add_weighted_adapter", "enable_adapter_layers", "disable_adapter_layers"),
                                   _ADAPTERS)}


class PeftHabitsMixin:
    """What a ``PeftModel`` user reaches for, on a model whose ``base_model`` holds the frozen base."""

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)  # parameters, buffers, submodules
        except AttributeError:
            if name == "base_model" or name.startswith("__"):
                raise
            if name in NOT_FOR_PROMPTS:  # else the base's own (transformers' PeftAdapterMixin) would answer, unseen
                raise AttributeError(f"InstancePromptModel has no {name}: {NOT_FOR_PROMPTS[name]}") from None
            return getattr(self.base_model, name)  # model.classifier, model.can_generate(), ... (as PeftModel)

    @property
    def device(self) -> torch.device:
        return next(self.base_model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.base_model.parameters()).dtype

    def get_base_model(self) -> nn.Module:
        return self.base_model

    @contextmanager
    def disable_adapter(self):
        """Run the base model without the prompt inside the block (PEFT's name). The head trains in place, so
        the trained head stays. Only this thread's forwards (and an nn.DataParallel around them): other threads
        forwarding the model at once keep the prompt."""
        previous, self._prompt_off = self._prompt_off, True
        try:
            yield
        finally:
            self._prompt_off = previous

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def num_parameters(self, only_trainable: bool = False, exclude_embeddings: bool = False) -> int:
        """The base's count (as ``PreTrainedModel.num_parameters``) plus the prompt's own parameters."""
        base = {id(p) for p in self.base_model.parameters()}
        own = sum(p.numel() for p in self.parameters() if id(p) not in base and (p.requires_grad or not only_trainable))
        return self.base_model.num_parameters(only_trainable=only_trainable, exclude_embeddings=exclude_embeddings) + own

    def get_nb_trainable_parameters(self):
        """``(trainable, all)`` parameter counts, as PEFT's."""
        return self.num_trainable_parameters(), sum(p.numel() for p in self.parameters())

    def print_trainable_parameters(self) -> None:
        trainable, total = self.get_nb_trainable_parameters()
        print(f"trainable params: {trainable:,d} || all params: {total:,d} || trainable%: {100 * trainable / total:.4f}")

    def resize_token_embeddings(self, new_num_tokens: Optional[int] = None, *args, **kwargs):
        """The base's, when the size stays (a defensive ``resize_token_embeddings(len(tokenizer))``); another size is
        refused: the prompt's vocabulary tables, the tokenizer check and the record a save writes were made for the
        base's vocabulary, so Random IPT indexed past its table and a saved folder matched no base and no tokenizer."""
        size = self.base_model.get_input_embeddings().num_embeddings
        pad_to = kwargs.get("pad_to_multiple_of", args[0] if args else None)
        # the size the base would take: new_num_tokens rounded up to the multiple (a padded base's defensive
        # resize_token_embeddings(len(tokenizer), pad_to_multiple_of=8) keeps its size)
        target = new_num_tokens if not (pad_to and new_num_tokens) else -(-new_num_tokens // pad_to) * pad_to
        if new_num_tokens is not None and target != size:
            raise ValueError(f"resize_token_embeddings({new_num_tokens}) after the prompt was built for the base's {size} "
                             "tokens (its tables and saved record would not match): resize the base first, "
                             "base.resize_token_embeddings(len(tokenizer)), then get_instance_prompt_model(base, config, "
                             "tokenizer)")
        return self.base_model.resize_token_embeddings(new_num_tokens, *args, **kwargs)
