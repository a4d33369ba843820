"""``InstancePromptModel``: a 🤗 Transformers model with an instance-wise prompt, trained by any
loop that trains a ``transformers`` model (the ``Trainer`` as constructed by default included).

The backbone is frozen; the prompt (generator) and the head (``modules_to_save``, PEFT's term)
train. ``forward`` takes what a tokenizer returns and gives back the wrapped model's own output
(``SequenceClassifierOutput``, with the loss when ``labels`` are given). The prompt is made and put
in by the same functions the OpenPrompt templates call (``openprompt_ipt.prompting``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Optional

import torch
from torch import nn
from transformers.utils import SAFE_WEIGHTS_NAME, WEIGHTS_NAME

from ..generators import cannot_rebuild, check_exported_tables, exported_tables, exports_in_weights, rebuilding_saved
from ..generators.layered import InstanceInputs
from ..injection import max_positions, prepend, trim_outputs
from ..injection.checkpointing import carry_prompt
from ..injection.layout import FAMILIES  # BERT-style encoders: the families whose layout the injection finds
from ..prompting import build_input_prompt, build_layered_generator, input_prompt_vectors, place_prompts, release_prompts
from ..prompting.layered_prompt import SECTIONS
from ..serialization import read_json, read_safetensors, read_torch, write_text_atomic
from .config import InstancePromptConfig
from .instance_tokens import added_ids, instance_tokens
from .padding import caller_order, right_padding_order, take
from .tokenizer_check import check_against_model, check_against_record, tokenizer_record

# one format for save_pretrained and the Trainer (save_model, checkpoints): the state dict as model.safetensors,
# the prompt's config inside it as CONFIG_KEY (UTF-8 JSON bytes), so a folder the Trainer wrote loads too
WEIGHTS_FILE, CONFIG_KEY, FORMAT = SAFE_WEIGHTS_NAME, "instance_prompt_config", "openprompt_ipt.hf/2"
CONFIG_FILE = "instance_prompt_config.json"           # a readable copy of CONFIG_KEY (save_pretrained)
OLD_WEIGHTS_FILE = "instance_prompt.safetensors"      # format 1: weights + CONFIG_FILE, still read
TORCH_WEIGHTS_FILE = WEIGHTS_NAME  # what Trainer.save_model / checkpoints write with save_safetensors=False (< 5)
# heads whose per-position outputs the prompt positions would shift, unseen (start/end logits, choices, pretraining
# and next-token heads): refused when the prompt is built
UNSUPPORTED_HEADS = ("ForQuestionAnswering", "ForMultipleChoice", "ForPreTraining", "ForCausalLM", "LMHeadModel")
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
# what a saved prompt must agree on with the model it is loaded onto
FINGERPRINT = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
               "max_position_embeddings", "num_labels")


def fingerprint(model: nn.Module) -> dict:
    cfg = model.config
    out = {key: getattr(cfg, key, None) for key in FINGERPRINT}
    out["architecture"] = type(model).__name__
    return out


def decode_config(tensor: torch.Tensor) -> dict:
    return json.loads(bytes(tensor.cpu().tolist()).decode("utf-8"))


def _load_tokenizer(model):
    path = getattr(model.config, "_name_or_path", "") or getattr(model, "name_or_path", "")
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001  (any failure: the fix is the same)
        raise ValueError(f"no tokenizer given and none loads from the model's path '{path}' ({type(e).__name__}): "
                         "pass tokenizer=AutoTokenizer.from_pretrained(<model path>)") from None


class NonFiniteWeightsWarning(UserWarning):
    """Weights saved with NaN / inf values: training diverged."""


def warn_non_finite(state, directory: str) -> None:
    """The stock Trainer trains on through NaN (it logs such a step's loss as 0 and grad_norm nan) and saves what
    it has: a NaN prompt saved without a word predicts one class everywhere once loaded."""
    import warnings

    bad = [k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        listed = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        warnings.warn(f"save_pretrained('{directory}'): {len(bad)} tensor(s) hold NaN / inf ({listed}): training "
                      "diverged (the Trainer logs grad_norm nan); lower the learning rate and train again",
                      NonFiniteWeightsWarning, stacklevel=3)


class InstancePromptModel(nn.Module):
    main_input_name = "input_ids"
    # forward takes the Trainer's num_items_in_batch (labels other than -100 in all the micro-batches of one optimizer
    # step) and gives its share of that step's mean loss: k accumulated micro-batches train as one k-times-larger
    # batch, however many labelled tokens each holds (the base's own heads ignore the count, transformers 5.24)
    accepts_loss_kwargs = True

    def __init__(self, model: nn.Module, config: InstancePromptConfig, tokenizer=None):
        super().__init__()
        family = getattr(getattr(model, "config", None), "model_type", None)
        if family not in FAMILIES:
            raise ValueError(f"unsupported architecture '{family}' ({type(model).__name__}): instance prompts support "
                             f"BERT-style encoders: {', '.join(FAMILIES)}")
        head = type(model).__name__
        if head.endswith(UNSUPPORTED_HEADS):
            raise ValueError(f"{head} is not supported: its outputs per position would count the prompt's positions; "
                             "wrap a ...ForSequenceClassification, ...ForTokenClassification, a masked LM, or the bare "
                             "encoder (AutoModel)")
        if model.get_input_embeddings().weight.is_meta:  # else torch's "Tensor.item() cannot be called on meta tensors"
            raise ValueError(f"{head}'s weights are on the meta device (accelerate's init_empty_weights, or offloaded to "
                             "disk): the prompt starts from its input embeddings; load the weights first "
                             "(from_pretrained, or load_checkpoint_and_dispatch), then wrap it")
        tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(model)
        check_against_model(tokenizer, model)
        self.prompt_config = config
        self._prompt_off = self._checkpointing = False
        label_word_ids = self._label_word_ids(model, tokenizer, config.label_words)  # refused before the base is touched
        self.base_model = model
        flags = [(p, p.requires_grad) for p in model.parameters()]
        model.requires_grad_(False)
        self.injector = None
        try:
            self._build_prompt(model, config, tokenizer, head, label_word_ids)
        except BaseException:  # a refused setting leaves the caller's base as it was: trainable, without our hooks
            for p, flag in flags:
                p.requires_grad_(flag)
            if self.injector is not None:
                self.injector.remove()
            raise

    def _build_prompt(self, model, config, tokenizer, head, label_word_ids) -> None:
        embedding = model.get_input_embeddings()
        template, kwargs = config.template_arguments()
        self.task_prompt = None
        self.injector = self.placement = None
        if template == "InstanceWiseTemplate":
            task_prompt, generator, settings = build_input_prompt(embedding, tokenizer, max_positions(model.config),
                                                                  **kwargs)
            self.generator, self.task_prompt = generator, task_prompt  # the template's order and names
            self.n_prefix, self.combine = settings["n_prefix"], settings["combine"]
        else:
            sections = {name: kwargs.pop(name) for name in SECTIONS if name in kwargs}
            if kwargs.get("injection") == "late" and kwargs.get("late_layer") is None:
                kwargs["late_layer"] = default_late_layer(model)
                # saved as the layer it is: a later release's other default must not move a saved prompt
                self.prompt_config = dataclasses.replace(config, late_layer=kwargs["late_layer"])
            self.generator, self.injector, self.placement, _ = build_layered_generator(
                model, embedding, tokenizer, sections=sections, **kwargs)
            config.check_placement_read(self.placement.injection)  # a generator's default injection is known now
        self.modules_to_save = self._unfreeze(config.modules_to_save)
        self.register_buffer("label_word_ids", label_word_ids, persistent=False)
        self.mask_token_id = tokenizer.mask_token_id
        # token-level heads (token classification, masked LM): their loss is computed at the caller's positions
        self._token_labels = head.endswith("ForTokenClassification") or model.get_output_embeddings() is not None
        # the ids the tokenizer adds around a text, for batches without special_tokens_mask
        self.register_buffer("special_ids", torch.tensor(added_ids(tokenizer), dtype=torch.long), persistent=False)
        self.__dict__["tokenizer"] = tokenizer
        self.__dict__["_tokenizer_record"] = tokenizer_record(tokenizer)
        # what a checkpoint holds, fixed now: freezing the model for inference must not empty its saved prompt
        self._trained_names = frozenset(n for n, p in self.named_parameters() if p.requires_grad)
        # the base's mode for the prompt too (from_pretrained gives eval): a new nn.Module starts in training mode,
        # and a generator's dropout would then draw other logits at every call of an eval-mode model
        self.train(model.training)

    @staticmethod
    def _label_word_ids(model, tokenizer, label_words):
        """(classes, words) vocabulary ids of the label words' first pieces (-1 pads shorter lists)."""
        if not label_words:
            return torch.empty(0, 0, dtype=torch.long)
        if model.get_output_embeddings() is None or tokenizer.mask_token_id is None:
            raise ValueError(f"label_words need a masked LM and a tokenizer with a mask token; {type(model).__name__} "
                             "has no vocabulary head: drop label_words to train its classifier head instead")
        ids = [[tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" " + w.strip()))[0] for w in words]
               for words in label_words]
        width = max(len(row) for row in ids)
        return torch.tensor([row + [-1] * (width - len(row)) for row in ids], dtype=torch.long)

    def _verbalize(self, input_ids, logits):
        """(B, classes): each class's mean label-word logit at the example's mask token."""
        at_mask = input_ids == self.mask_token_id
        if not bool((at_mask.sum(dim=1) == 1).all()):
            raise ValueError(f"with label_words every example needs exactly one mask token "
                             f"({self.tokenizer.mask_token!r}) in its text; found {at_mask.sum(dim=1).tolist()}")
        vocab = logits[at_mask]                                          # (B, V)
        ids = self.label_word_ids
        words = vocab[:, ids.clamp(min=0)]                               # (B, C, W)
        valid = (ids >= 0).to(words.dtype)
        return (words * valid).sum(-1) / valid.sum(-1)

    def _unfreeze(self, names):
        found = []
        for name in names:
            module = getattr(self.base_model, name, None)
            if isinstance(module, nn.Module):
                module.requires_grad_(True)
                found.append(name)
        return found

    @property
    def config(self):
        return self.base_model.config

    # ---- PEFT's habits: the base's attributes, device, dtype, counts, the base without the prompt ------------
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
        the trained head stays."""
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
        if new_num_tokens is not None and (new_num_tokens != size or (pad_to and size % pad_to)):
            raise ValueError(f"resize_token_embeddings({new_num_tokens}) after the prompt was built for the base's {size} "
                             "tokens (its tables and saved record would not match): resize the base first, "
                             "base.resize_token_embeddings(len(tokenizer)), then get_instance_prompt_model(base, config, "
                             "tokenizer)")
        return self.base_model.resize_token_embeddings(new_num_tokens, *args, **kwargs)

    # ---- the Trainer's gradient_checkpointing=True ------------------------------------------------------------
    def activation_checkpointing_enable(self, activation_checkpointing_kwargs=None, **kwargs):
        """The base's gradient checkpointing, with the per-layer prompt carried into the backward's recompute
        (injection/checkpointing.py); the input embeddings then require grad, so a reentrant checkpoint sees the
        graph."""
        enable = getattr(self.base_model, "activation_checkpointing_enable", None)
        if enable is not None:  # transformers >= 5 (gradient_checkpointing_enable is its deprecated alias)
            enable(activation_checkpointing_kwargs=activation_checkpointing_kwargs, **kwargs)
        else:
            self.base_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=activation_checkpointing_kwargs,
                                                          **kwargs)
        if self.injector is not None:  # at once, not at the first forward: a reentrant request warns here
            carry_prompt(self.injector.checkpointable, self.injector)
        self._checkpointing = True

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        self.activation_checkpointing_enable(gradient_checkpointing_kwargs, **kwargs)

    # ---- checkpoints: only what trains, with the prompt's config ------------------------------------------------
    def train(self, mode: bool = True):
        """``nn.Module.train``; a base weight the user unfroze is what a checkpoint holds from then on (the Trainer
        and training loops call it before their steps), so freezing the model for inference later cannot drop a
        trained layer from what ``save_pretrained`` writes."""
        if mode and "_trained_names" in self.__dict__:
            self._trained_names |= frozenset(n for n, p in self.named_parameters() if p.requires_grad)
        return super().train(mode)

    def saved_parameters(self) -> dict:
        """``{name: parameter}`` a checkpoint holds: what trains since the prompt was built (prompt, generator,
        head), base weights unfrozen since (requiring grad now or when the model was last put in training mode);
        a model frozen for inference (``requires_grad_(False)``, ``from_pretrained(..., is_trainable=False)``) still
        saves and loads them."""
        return {n: p for n, p in self.named_parameters() if n in self._trained_names or p.requires_grad}

    def saved_config(self) -> dict:
        """What a saved folder records: the prompt, the base (fingerprint, name or path) and the tokenizer."""
        base = dict(fingerprint(self.base_model), name_or_path=getattr(self.config, "_name_or_path", "") or "")
        return {"format": FORMAT, "prompt": self.prompt_config.to_dict(), "base_model": base,
                "tokenizer": self._tokenizer_record, "exported_tables": exported_tables(self),
                "exports_in_weights": exports_in_weights(self, self.saved_parameters())}

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Only the tensors that train (prompt, generator, head), as PEFT's checkpoints, and the prompt's config
        (``CONFIG_KEY``): the Trainer's checkpoints and ``save_model`` then hold what a run changed and what it
        was, and a masked LM's tied vocabulary head cannot stop their safetensors writer. The frozen weights are
        ``self.base_model.state_dict()``; ``load_state_dict`` reads either."""
        out = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        keep = {prefix + name for name in self.saved_parameters()}
        for key in [k for k in out if k.startswith(prefix) and k not in keep]:
            del out[key]
        out[prefix + CONFIG_KEY] = torch.tensor(list(json.dumps(self.saved_config()).encode("utf-8")),
                                                dtype=torch.uint8)
        return out

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """The config entry is checked and consumed here, so a wrapper's load (``module.`` prefix) reads it too."""
        saved = state_dict.pop(prefix + CONFIG_KEY, None)
        if saved is not None:
            prompt = decode_config(saved).get("prompt")
            if isinstance(prompt, dict) and prompt.get("late_layer", 0) is None and self.prompt_config.late_layer:
                # a late prompt saved before its default layer was written down: the default it was built with
                prompt["late_layer"] = default_late_layer(self.base_model)
            if prompt != json.loads(json.dumps(self.prompt_config.to_dict())):
                raise ValueError(f"the checkpoint holds a '{(prompt or {}).get('method')}' prompt of another config "
                                 f"than this model's ({self.prompt_config.method}): load it onto a model built with "
                                 "its config (InstancePromptModel.from_pretrained)")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Reads what ``state_dict`` wrote (the Trainer's resume and ``load_best_model_at_end``): the frozen base
        is not expected, a trainable tensor is; a checkpoint of another prompt config is one line."""
        result = super().load_state_dict(state_dict, strict=False, **({"assign": True} if assign else {}))  # torch<2.1
        trainable = set(self.saved_parameters())
        missing = [k for k in result.missing_keys if k in trainable]
        if strict and (missing or result.unexpected_keys):
            raise RuntimeError(f"load_state_dict: missing trained tensors {missing[:5]}, unexpected "
                               f"{result.unexpected_keys[:5]}")
        return type(result)(missing, result.unexpected_keys)

    # ---- forward ----------------------------------------------------------------------------------
    def forward(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, special_tokens_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_attentions: Optional[bool] = None,
                output_hidden_states: Optional[bool] = None, return_dict: Optional[bool] = None,
                num_items_in_batch: Optional[torch.Tensor | int] = None, task_type_ids: Optional[torch.Tensor] = None):
        """``task_type_ids``: ERNIE's task ids (``use_task_id``), widened over the prompt's positions with each
        example's own id."""
        if input_ids is None:
            raise ValueError("InstancePromptModel needs input_ids (the instance prompt is made from the tokens)")
        if attention_mask is None:
            raise ValueError("the batch has no attention_mask: tokenize with return_attention_mask=True (the default) "
                             "and pad with DataCollatorWithPadding, which keeps it")
        verbalize = self.label_word_ids.numel() > 0
        token_loss = labels is not None and self._token_labels and not verbalize
        if task_type_ids is not None and self.config.model_type != "ernie":
            raise ValueError(f"task_type_ids are ERNIE's input; this model is '{self.config.model_type}': drop them "
                             "from the batch")
        order = right_padding_order(attention_mask)  # left padding: read as right padding (hf/padding.py)
        if order is not None:
            input_ids, attention_mask, token_type_ids, special_tokens_mask, task_type_ids = (
                take(t, order) for t in (input_ids, attention_mask, token_type_ids, special_tokens_mask, task_type_ids))
            labels = take(labels, order) if token_loss else labels
        content, parts = instance_tokens(input_ids, attention_mask, special_tokens_mask, self.special_ids)
        batch = {"inputs_embeds": self.base_model.get_input_embeddings()(input_ids), "attention_mask": attention_mask}
        if self._checkpointing and self.training and torch.is_grad_enabled():
            batch["inputs_embeds"].requires_grad_(True)  # a reentrant checkpoint needs an input that requires grad
        for key, value in (("token_type_ids", token_type_ids), ("task_type_ids", task_type_ids)):
            if value is not None:
                batch[key] = value
        keep, n_prefix = None, self.n_prefix if self.placement is None else 0
        if self._prompt_off:
            n_prefix = 0
        elif self.placement is None:
            prompts = input_prompt_vectors(self.task_prompt, self.generator, input_ids, content, attention_mask,
                                           combine=self.combine)
            if prompts is not None:
                batch = prepend(batch, prompts, limit=max_positions(self.config))
        else:
            keep = place_prompts(self.generator, self.injector, self.placement, batch,
                                 InstanceInputs(input_ids, attention_mask, content, parts))
        try:
            if labels is not None and not (verbalize or token_loss):  # only then: a bare encoder takes no labels
                batch["labels"] = labels
            # flags left None are not passed: transformers 5 reads an explicit None as False, over the base's config
            # (from_pretrained(..., output_hidden_states=True) would then give none)
            flags = {k: v for k, v in (("output_attentions", output_attentions),
                                       ("output_hidden_states", output_hidden_states)) if v is not None}
            out = self.base_model(**batch, **flags, return_dict=True)
        finally:
            if self.injector is not None:
                self.injector.disarm()
        # back to the caller's positions: hidden states always, logits when they are per token (token / MLM heads),
        # a bare encoder's last_hidden_state
        token_logits = getattr(out, "logits", None) is not None and out.logits.dim() == 3
        view = self._at_caller_positions(out.logits if token_logits else None, out.hidden_states, n_prefix, keep)
        if token_logits:
            out.logits = view.logits
        if out.hidden_states is not None:
            out.hidden_states = view.hidden_states
        if getattr(out, "last_hidden_state", None) is not None:
            out.last_hidden_state = self._at_caller_positions(out.last_hidden_state, None, n_prefix, keep).logits
        if token_loss:  # the head's own loss (cross-entropy, -100 ignored), over the caller's positions
            loss = _cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), labels.reshape(-1), num_items_in_batch)
            out = type(out)(loss=loss, **{k: v for k, v in out.items() if k != "loss"})
        elif getattr(out, "loss", None) is not None and num_items_in_batch is not None:  # the base's mean loss
            out.loss = _share_of(out.loss, out.logits, labels, num_items_in_batch)
        if verbalize:  # a masked LM read through label words: the classifier's output
            from transformers.modeling_outputs import SequenceClassifierOutput

            logits = self._verbalize(input_ids, out.logits)
            loss = None if labels is None else _cross_entropy(logits, labels, num_items_in_batch)
            out = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                           attentions=out.attentions)
        if order is not None:  # the per-token outputs back at the caller's (left-padded) positions
            back = caller_order(order)
            if getattr(out, "logits", None) is not None and out.logits.dim() == 3:
                out.logits = take(out.logits, back)
            if out.hidden_states is not None:
                out.hidden_states = tuple(take(h, back) for h in out.hidden_states)
            if getattr(out, "last_hidden_state", None) is not None:
                out.last_hidden_state = take(out.last_hidden_state, back)
        use_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        return out if use_dict else out.to_tuple()

    def _at_caller_positions(self, per_token, hidden_states, n_prefix, keep):
        """``per_token`` (B, n', ...) and every hidden state without the prompt's positions."""
        view = SimpleNamespace(logits=per_token, hidden_states=hidden_states)
        return trim_outputs(view, n_prefix) if self.placement is None else release_prompts(None, view, keep)

    # ---- save / load ------------------------------------------------------------------------------
    def push_to_hub(self, repo_id: str, commit_message: str = "Upload instance prompt", private: Optional[bool] = None,
                    token=None, **_ignored):
        """Upload what ``save_pretrained`` writes (the trained tensors and the config, never the frozen base) to the
        hub repository ``repo_id``, created if missing, as PEFT's ``push_to_hub`` does; ``from_pretrained(repo_id)``
        reads it back where the hub is reachable."""
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        repo = api.create_repo(repo_id, private=private, exist_ok=True)
        with tempfile.TemporaryDirectory() as folder:
            self.save_pretrained(folder)
            return api.upload_folder(repo_id=getattr(repo, "repo_id", repo_id), folder_path=folder,
                                     commit_message=commit_message)

    def save_pretrained(self, save_directory: str, **_ignored) -> None:
        """The folder ``Trainer.save_model`` writes: ``model.safetensors`` (only what trains, and the config as
        ``CONFIG_KEY``), plus ``instance_prompt_config.json``, a readable copy of the config; both appear at once."""
        from safetensors.torch import save_file

        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        warn_non_finite(state, save_directory)
        os.makedirs(save_directory, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=save_directory) as tmp:  # no half-written pair is ever visible
            save_file(state, os.path.join(tmp, WEIGHTS_FILE), metadata={"format": "pt"})
            with open(os.path.join(tmp, CONFIG_FILE), "w") as f:
                json.dump(decode_config(state[CONFIG_KEY]), f, indent=2)
            for name in (WEIGHTS_FILE, CONFIG_FILE):
                os.replace(os.path.join(tmp, name), os.path.join(save_directory, name))

    @classmethod
    def from_pretrained(cls, model=None, directory: Optional[str] = None, tokenizer=None, method: Optional[str] = None,
                        is_trainable: bool = True, **base_kwargs):
        """``from_pretrained(dir)``: rebuild the base from the name or path recorded at save time (as PEFT's
        ``AutoPeftModelFor...``; ``base_kwargs`` go to its ``from_pretrained``), then the prompt, and load the
        weights. ``from_pretrained(base, dir, tokenizer)``: onto the base given. ``dir`` is what ``save_pretrained``
        or ``Trainer.save_model`` wrote; ``method`` (optional) is the method the caller expects it to hold.
        The model comes back in eval mode; ``is_trainable=False`` (PEFT's keyword) also freezes the prompt and head."""
        if directory is None and isinstance(model, (str, os.PathLike)):
            model, directory = None, model
        directory = os.fspath(directory)
        if model is not None and base_kwargs:  # they would build the base, which the caller already built
            raise ValueError(f"from_pretrained: {sorted(base_kwargs)} go to the base model's from_pretrained, but the "
                             f"base was given: load the base with them, or call "
                             f"InstancePromptModel.from_pretrained('{directory}', ...) to build it")
        saved, weights = _read_saved(directory)
        if not isinstance(saved, dict) or not isinstance(saved.get("prompt", {}), dict):
            raise ValueError(f"'{os.path.join(directory, CONFIG_FILE)}' holds a {type(saved).__name__}, not the JSON "
                             "object save_pretrained writes (its prompt config and base model): save the model again "
                             "with model.save_pretrained(directory)")
        if weights is None:  # the readable config copied without its weights: no prompt to load, not an empty one
            raise FileNotFoundError(f"'{directory}' has {CONFIG_FILE} but no weights ({WEIGHTS_FILE}): copy the weights "
                                    "file too, or save the model again (model.save_pretrained(directory))")
        prompt = saved.get("prompt", {})
        if method is not None and prompt.get("method") != method:
            raise ValueError(f"'{directory}' holds a '{prompt.get('method')}' prompt, not '{method}': "
                             "load the directory saved for that method")
        if model is None:
            model = _load_base(saved.get("base_model", {}), directory, base_kwargs)
        mine = fingerprint(model)
        for key, value in saved.get("base_model", {}).items():
            if key != "name_or_path" and mine.get(key) != value:
                raise ValueError(f"'{directory}' was saved for another base model ({key} {value!r}, this model has "
                                 f"{mine.get(key)!r}): load it onto the model it was trained on")
        if tokenizer is None:
            tokenizer = _saved_tokenizer(directory, saved.get("tokenizer") or {}, model)
        check_against_record(tokenizer, saved.get("tokenizer"), directory)
        try:
            with rebuilding_saved(saved.get("exports_in_weights")):  # what the weights hold is not read from exports
                wrapped = cls(model, InstancePromptConfig.from_dict(prompt), tokenizer=tokenizer)
        except FileNotFoundError as e:  # an export the weights do not hold (a frozen table), moved or deleted
            raise FileNotFoundError(cannot_rebuild(directory, e, "the model", "then load it again")) from None
        check_exported_tables(wrapped, saved.get("exported_tables"), directory)
        own = wrapped.saved_parameters()
        # base weights the user unfroze and trained: saved as what required grad then, so loaded (and kept) as such
        base = {n for n, _ in wrapped.base_model.named_parameters(prefix="base_model")}
        unfrozen = sorted((set(weights) - set(own)) & base)
        own.update((n, p) for n, p in wrapped.named_parameters() if n in unfrozen)
        missing, unknown = sorted(set(own) - set(weights)), sorted(set(weights) - set(own))
        if missing or unknown:
            raise ValueError(f"'{directory}' lacks {missing[:3]} / has unknown {unknown[:3]}: it was not saved from a "
                             f"'{prompt.get('method')}' prompt with this config")
        for name, tensor in weights.items():
            if own[name].shape != tensor.shape:
                raise ValueError(f"'{directory}': {name} is {tuple(tensor.shape)} but the prompt expects "
                                 f"{tuple(own[name].shape)}")
            own[name].data.copy_(tensor)
        wrapped._trained_names |= frozenset(unfrozen)  # saved again, even once frozen for inference
        for name in unfrozen:
            own[name].requires_grad_(True)
        if not is_trainable:
            wrapped.requires_grad_(False)
        return wrapped.eval()  # ready to predict, as transformers' and PEFT's from_pretrained; the Trainer's train() trains


def default_late_layer(model) -> int:
    """A late prompt's layer when the config names none: the middle of the model (the LPT authors')."""
    return max(1, int(model.config.num_hidden_layers) // 2)


def _cross_entropy(logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
    """Cross-entropy, -100 ignored: the mean over this batch's labels, or with the Trainer's ``num_items_in_batch``
    their sum over it (a micro-batch's share of the accumulated batch's mean)."""
    if num_items_in_batch is None:
        return nn.functional.cross_entropy(logits, labels)
    return nn.functional.cross_entropy(logits, labels, reduction="sum") / num_items_in_batch


def _share_of(mean: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch) -> torch.Tensor:
    """A head's mean loss (cross-entropy, -100 ignored, or BCE / MSE over every label value) as its sum over the
    labels the Trainer counted (those other than -100), divided by the count over all accumulated micro-batches."""
    counted = labels.ne(-100).sum()
    if not counted:  # every label ignored: the mean is NaN, the share nothing (kept in the graph for backward)
        return logits.sum() * 0.0
    return mean * counted / num_items_in_batch


def _read_saved(directory: str):
    """``(config, weights)`` of a saved folder: ``model.safetensors`` with the config inside (save_pretrained,
    Trainer.save_model, a Trainer checkpoint; ``pytorch_model.bin`` where it ran with save_safetensors=False), or
    format 1 (instance_prompt.safetensors + its JSON config); weights ``None``: the JSON config alone."""
    fix = "save the model again (model.save_pretrained(directory) or trainer.save_model(directory))"
    path = next((p for p in (os.path.join(directory, name) for name in (WEIGHTS_FILE, TORCH_WEIGHTS_FILE))
                 if os.path.isfile(p)), None)
    if path is not None:
        weights = (read_safetensors(path, fix) if path.endswith(".safetensors")
                   else read_torch(path, fix, weights_only=True))  # the Trainer's save_safetensors=False
        if CONFIG_KEY not in weights:
            raise ValueError(f"'{path}' holds no {CONFIG_KEY}: it was not written by an InstancePromptModel; {fix}")
        return decode_config(weights.pop(CONFIG_KEY)), weights
    if os.path.isfile(os.path.join(directory, CONFIG_FILE)):
        saved = read_json(os.path.join(directory, CONFIG_FILE), fix)
        old = os.path.join(directory, OLD_WEIGHTS_FILE)
        return saved, (read_safetensors(old, fix) if os.path.isfile(old) else None)
    raise FileNotFoundError(f"'{directory}' has no {WEIGHTS_FILE}: {fix}")


def _load_base(base: dict, directory: str, kwargs: dict) -> nn.Module:
    """The base model a saved prompt records: its architecture from its name or path."""
    import transformers

    path, architecture = base.get("name_or_path"), base.get("architecture")
    if not path:
        raise ValueError(f"'{directory}' records no name or path of its base model (it was built from a config): "
                         f"pass the base, InstancePromptModel.from_pretrained(base_model, '{directory}', tokenizer)")
    if base.get("num_labels") is not None:
        kwargs = {"num_labels": base["num_labels"], **kwargs}
    model_class = getattr(transformers, architecture or "", None) or transformers.AutoModelForSequenceClassification
    try:
        return model_class.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ValueError(f"'{directory}' was trained on base model '{path}', which does not load ({reason}): pass the "
                         f"base, InstancePromptModel.from_pretrained(base_model, '{directory}', tokenizer)") from None


def _saved_tokenizer(directory: str, record: dict, model):
    """The tokenizer the Trainer saved beside the weights, else the one the config records, else the model's."""
    from transformers import AutoTokenizer

    for path in (directory, record.get("name_or_path")):
        if path and (path != directory or os.path.isfile(os.path.join(directory, "tokenizer_config.json"))):
            try:
                return AutoTokenizer.from_pretrained(path)
            except (OSError, ValueError):
                pass
    return _load_tokenizer(model)


def get_instance_prompt_model(model: nn.Module, config: InstancePromptConfig, tokenizer=None) -> InstancePromptModel:
    """Wrap a 🤗 ``...ForSequenceClassification`` (BERT / RoBERTa family; also a token classifier, a masked LM or the
    bare encoder) with the instance prompt ``config`` names; the backbone freezes, the prompt and the head
    (``config.modules_to_save``) train."""
    return InstancePromptModel(model, config, tokenizer=tokenizer)


__all__ = ["InstancePromptModel", "get_instance_prompt_model"]
