"""``InstancePromptModel``: a 🤗 Transformers model with an instance-wise prompt, trained by any
loop that trains a ``transformers`` model (the ``Trainer`` as constructed by default included).

The backbone is frozen; the prompt (generator) and the head (``modules_to_save``, PEFT's term)
train. ``forward`` takes what a tokenizer returns and gives back the wrapped model's own output
(``SequenceClassifierOutput``, with the loss when ``labels`` are given). The prompt is made and put
in by the same functions the OpenPrompt templates call (``openprompt_ipt.prompting``).
"""
from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Optional

import torch
from torch import nn

from ..generators.layered import InstanceInputs
from ..injection import max_positions, prepend, trim_outputs
from ..prompting import build_input_prompt, build_layered_generator, input_prompt_vectors, place_prompts, release_prompts
from ..prompting.layered_prompt import SECTIONS
from ..serialization import load_trainable, read_json, save_trainable
from .config import InstancePromptConfig
from .instance_tokens import instance_tokens

CONFIG_FILE, WEIGHTS_FILE = "instance_prompt_config.json", "instance_prompt.safetensors"
# BERT-style encoders: the families whose layout the per-layer injection finds (injection/layout.py)
FAMILIES = ("bert", "roberta", "xlm-roberta", "camembert", "electra", "ernie", "data2vec-text", "roberta-prelayernorm")
# what a saved prompt must agree on with the model it is loaded onto
FINGERPRINT = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
               "max_position_embeddings", "num_labels")


def fingerprint(model: nn.Module) -> dict:
    cfg = model.config
    out = {key: getattr(cfg, key, None) for key in FINGERPRINT}
    out["architecture"] = type(model).__name__
    return out


def _load_tokenizer(model):
    path = getattr(model.config, "_name_or_path", "") or getattr(model, "name_or_path", "")
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001  (any failure: the fix is the same)
        raise ValueError(f"no tokenizer given and none loads from the model's path '{path}' ({type(e).__name__}): "
                         "pass tokenizer=AutoTokenizer.from_pretrained(<model path>)") from None


class InstancePromptModel(nn.Module):
    main_input_name = "input_ids"

    def __init__(self, model: nn.Module, config: InstancePromptConfig, tokenizer=None):
        super().__init__()
        family = getattr(getattr(model, "config", None), "model_type", None)
        if family not in FAMILIES:
            raise ValueError(f"unsupported architecture '{family}' ({type(model).__name__}): instance prompts support "
                             f"BERT-style encoders: {', '.join(FAMILIES)}")
        tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(model)
        self.prompt_config = config
        self.base_model = model
        model.requires_grad_(False)
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
            self.generator, self.injector, self.placement, _ = build_layered_generator(
                model, embedding, tokenizer, sections=sections, **kwargs)
        self.modules_to_save = self._unfreeze(config.modules_to_save)
        self.register_buffer("label_word_ids", self._label_word_ids(model, tokenizer, config.label_words),
                             persistent=False)
        self.mask_token_id = tokenizer.mask_token_id
        # the tokenizer's special ids, for batches without special_tokens_mask
        ids = sorted({int(i) for i in getattr(tokenizer, "all_special_ids", []) if i is not None})
        self.register_buffer("special_ids", torch.tensor(ids, dtype=torch.long), persistent=False)
        self.__dict__["tokenizer"] = tokenizer

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

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Only the tensors that train (prompt, generator, head), as PEFT's checkpoints: the Trainer's checkpoints
        then hold what a run changed, and a masked LM's tied vocabulary head cannot stop their safetensors
        writer. The frozen weights are ``self.base_model.state_dict()``; ``load_state_dict(strict=False)`` reads
        either."""
        out = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        keep = {prefix + name for name, p in self.named_parameters() if p.requires_grad}
        for key in [k for k in out if k.startswith(prefix) and k not in keep]:
            del out[key]
        return out

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    # ---- forward ----------------------------------------------------------------------------------
    def forward(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, special_tokens_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_attentions: Optional[bool] = None,
                output_hidden_states: Optional[bool] = None, return_dict: Optional[bool] = None):
        if input_ids is None:
            raise ValueError("InstancePromptModel needs input_ids (the instance prompt is made from the tokens)")
        if attention_mask is None:
            raise ValueError("the batch has no attention_mask: tokenize with return_attention_mask=True (the default) "
                             "and pad with DataCollatorWithPadding, which keeps it")
        content, parts = instance_tokens(input_ids, attention_mask, special_tokens_mask, self.special_ids)
        batch = {"inputs_embeds": self.base_model.get_input_embeddings()(input_ids), "attention_mask": attention_mask}
        if token_type_ids is not None:
            batch["token_type_ids"] = token_type_ids
        keep = None
        if self.placement is None:
            prompts = input_prompt_vectors(self.task_prompt, self.generator, input_ids, content, attention_mask,
                                           combine=self.combine)
            if prompts is not None:
                batch = prepend(batch, prompts, limit=max_positions(self.config))
        else:
            keep = place_prompts(self.generator, self.injector, self.placement, batch,
                                 InstanceInputs(input_ids, attention_mask, content, parts))
        verbalize = self.label_word_ids.numel() > 0
        try:
            out = self.base_model(**batch, labels=None if verbalize else labels, output_attentions=output_attentions,
                                  output_hidden_states=output_hidden_states, return_dict=True)
        finally:
            if self.injector is not None:
                self.injector.disarm()
        # back to the caller's positions: hidden states always, logits when they are per token (MLM heads)
        token_logits = getattr(out, "logits", None) is not None and out.logits.dim() == 3
        view = SimpleNamespace(logits=out.logits if token_logits else None, hidden_states=out.hidden_states)
        view = trim_outputs(view, self.n_prefix) if self.placement is None else release_prompts(None, view, keep)
        if token_logits:
            out.logits = view.logits
        if out.hidden_states is not None:
            out.hidden_states = view.hidden_states
        if verbalize:  # a masked LM read through label words: the classifier's output
            from transformers.modeling_outputs import SequenceClassifierOutput

            logits = self._verbalize(input_ids, out.logits)
            loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
            out = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                           attentions=out.attentions)
        use_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        return out if use_dict else out.to_tuple()

    # ---- save / load ------------------------------------------------------------------------------
    def save_pretrained(self, directory: str, **_ignored) -> None:
        """Only the trained weights (prompt, generator, head) as safetensors, beside a JSON config."""
        config = {"prompt": self.prompt_config.to_dict(), "base_model": fingerprint(self.base_model),
                  "format": "openprompt_ipt.hf/1"}
        save_trainable(self, directory, WEIGHTS_FILE, CONFIG_FILE, config)

    @classmethod
    def from_pretrained(cls, model: nn.Module, directory: str, tokenizer=None, method: Optional[str] = None):
        """Rebuild the prompt saved in ``directory`` on ``model`` (the base it was trained on) and load its weights.
        ``method`` (optional) is the method the caller expects the directory to hold."""
        path = os.path.join(directory, CONFIG_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"'{directory}' has no {CONFIG_FILE}: save the model with "
                                    "InstancePromptModel.save_pretrained(directory)")
        again = "save the model again with InstancePromptModel.save_pretrained(directory)"
        saved = read_json(path, again)
        if not isinstance(saved, dict) or not isinstance(saved.get("prompt", {}), dict):
            raise ValueError(f"'{path}' holds a {type(saved).__name__}, not the JSON object save_pretrained writes "
                             f"(its prompt config and base model): {again}")
        prompt = saved.get("prompt", {})
        if method is not None and prompt.get("method") != method:
            raise ValueError(f"'{directory}' holds a '{prompt.get('method')}' prompt, not '{method}': "
                             "load the directory saved for that method")
        mine = fingerprint(model)
        for key, value in saved.get("base_model", {}).items():
            if mine.get(key) != value:
                raise ValueError(f"'{directory}' was saved for another base model ({key} {value!r}, this model has "
                                 f"{mine.get(key)!r}): load it onto the model it was trained on")
        wrapped = cls(model, InstancePromptConfig.from_dict(prompt), tokenizer=tokenizer)
        weights = os.path.join(directory, WEIGHTS_FILE)
        expected = {n for n, p in wrapped.named_parameters() if p.requires_grad}
        if os.path.isfile(weights):
            from ..serialization import read_safetensors  # a truncated file: one line naming it, not a SafetensorError

            missing = sorted(expected - set(read_safetensors(weights, again)))
            if missing:
                raise ValueError(f"'{weights}' lacks {missing[:3]}: it was not saved from a "
                                 f"'{prompt.get('method')}' prompt with this config")
        load_trainable(wrapped, weights)
        return wrapped


def get_instance_prompt_model(model: nn.Module, config: InstancePromptConfig, tokenizer=None) -> InstancePromptModel:
    """Wrap a 🤗 ``...ForSequenceClassification`` (BERT / RoBERTa family) with the instance prompt ``config``
    names; the backbone freezes, the prompt and the head (``config.modules_to_save``) train."""
    return InstancePromptModel(model, config, tokenizer=tokenizer)


__all__ = ["InstancePromptModel", "get_instance_prompt_model"]
