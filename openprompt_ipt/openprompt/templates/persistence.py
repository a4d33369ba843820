"""What both of our templates share: the mask check, parameter counting, save/load of only what
they trained (safetensors) beside the arguments that rebuild them (JSON) and what they were trained with (the
tokenizer's vocabulary, the backbone's shape, the frozen tables read from exports: another one is refused at
load, since IPT's table is indexed by token ids and a same-shaped mismatch would give other prompts silently),
and a warning when nobody updates their parameters (an optimizer built from the PLM's and the verbalizer's parameters only, as in
OpenPrompt's tutorial 1.2, trains the prompts as nothing and nothing would say so)."""
from __future__ import annotations

import os
import warnings

import torch
from openprompt.prompt_base import Template

from ...generators import (IDPGGenerator, InstancePromptGenerator, cannot_rebuild, check_exported_tables,
                           exported_tables, exports_in_weights, rebuilding_saved, tokenization_fingerprint,
                           tokenizer_fingerprint)
from ...prompting.device import backbone_device, place_beside
from ...prompting.examples import text_fields_filled
from ...prompting.replicas import shares_state_across_replicas
from ...serialization import check_saved_pair, load_trainable, read_json, save_trainable

CONFIG_FILE, WEIGHTS_FILE = "template_config.json", "template.safetensors"
SAVED_WITH = "saved_with"  # the config's entry for what the template was trained with (not a constructor argument)
BACKBONE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
SKIPPED = ("raw_embedding",)  # the PLM's own embedding table: never in template.safetensors


UNUPDATED_PASSES = 200  # training-mode forward passes without one template update before the warning


class TemplateNotTrainedWarning(UserWarning):
    """A trainable template reached evaluation (or many training passes) with its parameters unchanged."""


class TrainedTemplateMixin:
    """Needs ``self.init_config`` (the constructor arguments) and a frozen ``raw_embedding``; the
    templates call ``_watch_updates()`` at the start of ``process_batch``."""

    # ---- "nobody optimises me": parameter version counters, which every in-place update bumps --------
    def _trainable_versions(self):
        # raw_embedding is the PLM's word embedding (it trains with the PLM, not as part of the prompt)
        return [p._version for n, p in self.named_parameters() if p.requires_grad and not n.startswith("raw_embedding")]

    def _watch_updates(self) -> None:
        if not self.training or not torch.is_grad_enabled() or self.__dict__.get("_update_check_done"):
            return  # only passes that could train count (not a no_grad pass in train mode)
        watch = self.__dict__.setdefault("_update_watch", {"versions": None, "passes": 0})
        if watch["versions"] is None:
            watch["versions"] = self._trainable_versions()
        watch["passes"] += 1
        if watch["passes"] % UNUPDATED_PASSES == 0:
            self._check_updated(f"after {watch['passes']} training forward passes")

    def _check_updated(self, when: str) -> None:
        watch = self.__dict__.get("_update_watch")
        if watch is None or watch["versions"] is None or self.__dict__.get("_update_check_done"):
            return
        if not watch["versions"] or self._trainable_versions() != watch["versions"]:
            self.__dict__["_update_check_done"] = True  # updated (or nothing to train): stop watching
            return
        self.__dict__["_update_check_done"] = True
        warnings.warn(f"{type(self).__name__}: its {self.num_trainable_parameters():,} trainable parameters were never "
                      f"updated ({when}): give them to the optimizer, e.g. "
                      "torch.optim.AdamW(openprompt_ipt.optimizer_groups(prompt_model))", TemplateNotTrainedWarning,
                      stacklevel=3)

    def train(self, mode: bool = True):
        if not mode and self.training:  # model.eval() after training-mode passes: was the template trained?
            self._check_updated("at evaluation")
        return super().train(mode)

    # ---- the PLM's dtype at the seam -----------------------------------------------------------------
    def _embeds_in_plm_dtype(self, batch):
        """After MixedTemplate's ``process_batch``: its ``torch.where`` of the fp32 ``{"soft"}`` table and a bf16 /
        fp16 PLM's own embeddings promoted ``inputs_embeds`` to fp32, and the PLM's first LayerNorm stopped on it
        ("mixed dtype (CPU): expect parameter to have scalar type of Float"). The trained tables stay fp32 (as
        PEFT keeps a prompt's weights, casting at the injection); the input they give enters in the PLM's dtype."""
        embeds, dtype = batch["inputs_embeds"], self.raw_embedding.weight.dtype
        if embeds is not None and embeds.dtype != dtype:
            batch["inputs_embeds"] = embeds.to(dtype)
        return batch

    # ---- the template text --------------------------------------------------------------------
    @property
    def text(self):
        return self._text

    @text.setter
    def text(self, text):
        """OpenPrompt's setter, undone when it raises: OpenPrompt leaves the refused text half-applied and its
        ``_in_on_text_set`` stuck, so the next, good text was never parsed and failed 'has no {"mask"}'."""
        saved = {**self.__dict__, "_modules": dict(self._modules)}
        if isinstance(saved.get("init_config"), dict):
            saved["init_config"] = dict(saved["init_config"])
        try:
            Template.text.fset(self, text)
        except BaseException:
            for key in set(self.__dict__) - set(saved):
                del self.__dict__[key]
            self.__dict__.update(saved)
            raise

    def wrap_one_example(self, example):
        """OpenPrompt's, on a copy with "" for a ``text_a`` / ``text_b`` of None (OpenPrompt's own default is ""):
        ``InputExample(text_b=None)`` stopped at 'can only concatenate str (not "NoneType") to str'."""
        return super().wrap_one_example(text_fields_filled(example))

    def _text_changed(self, generator) -> None:
        """Called by ``on_text_set`` before OpenPrompt parses the new text."""
        self._remember_text()
        # OpenPrompt caches these on the first wrap_one_example and never recomputes them: after a new text the
        # verbalizer read the old mask position (another token) and truncation cut the old parts, silently
        self.loss_ids = self.shortenable_ids = None
        self.__dict__["_reads_placeholders"] = reads_placeholder_text(generator)

    def _check_placeholders(self) -> None:
        """An instance prompt read from placeholder text, on a text without a placeholder, is one prompt for all."""
        if self.__dict__.get("_reads_placeholders") and not any("placeholder" in d for d in self.text):
            raise ValueError('template text has no {"placeholder": ...}: the instance prompt reads the example\'s own '
                             'text from its placeholders ({"meta": ...} text is not read), so every example would get '
                             'the same prompt: put the text in one, e.g. {"placeholder":"text_a"}')

    def _check_template_format(self):
        if not any("mask" in d for d in self.text):
            raise ValueError('template text has no {"mask"}: a masked LM needs one, e.g. '
                             '\'{"placeholder":"text_a"} It was {"mask"}.\'')

    def _remember_text(self) -> None:
        """Called by ``on_text_set`` before OpenPrompt parses the text: ``save_pretrained`` writes the text in use, not
        the constructor's (OpenPrompt's ``from_file`` and ``load_template`` with ``file_path`` set it afterwards)."""
        # a parsed list (dicts, maybe lambdas) is not JSON: None makes from_pretrained ask for text= rather than reload
        # another text silently
        self.init_config["text"] = self.text if isinstance(self.text, str) else None

    def data_parallel_refusal(self) -> str:
        """The line that refuses nn.DataParallel for this template ("" where its copies compute their own logits):
        OpenPrompt's ClassificationRunner wraps the PromptForClassification in one when ``environment.num_gpus > 1``,
        and the copies run at once in threads: kv / hidden / late prompts through hooks every copy shares reached
        another copy's layers (or none did: wrong logits without a word); IDPG / encoder generators read the
        backbone outside the copies."""
        why = shares_state_across_replicas(getattr(self, "injector", None), self.generator)
        if not why:
            return ""
        return (f"{type(self).__name__} ({self._method_name()}) does not run under nn.DataParallel (OpenPrompt's "
                f"ClassificationRunner's choice when environment.num_gpus > 1): {why}, so the copies' logits would "
                "be wrong. Use one GPU (environment.num_gpus: 1, or CUDA_VISIBLE_DEVICES=0), or one process per GPU "
                "with DistributedDataParallel (torchrun --nproc_per_node N; our runner: accelerate launch "
                "--num_processes N -m openprompt_ipt run ..., in a clone also experiments/run.py)")

    def _refuse_shared_replica(self) -> None:
        """At the start of a forward of an nn.DataParallel copy: ``data_parallel_refusal``, raised."""
        if getattr(self, "_is_replica", False):
            refusal = self.data_parallel_refusal()
            if refusal:
                raise RuntimeError(refusal)

    def _method_name(self) -> str:
        config = self.init_config
        if "generator" in config:
            return f"generator '{config['generator']}', injection '{config.get('injection')}'"
        return f"strategy '{config.get('strategy')}'"

    def _place_beside_backbone(self) -> None:
        """The template's own parameters (generator, task prompt, MixedTemplate's ``{"soft"}`` table) where the PLM's
        input embeddings are: at the end of ``__init__`` and after each new text (MixedTemplate makes its soft table
        on the CPU). A PLM moved to the GPU before the template was built over it (``plm.cuda()``, then
        ``load_template``) got a template on the CPU, and the first forward failed on tensors on two devices."""
        place_beside(self, backbone_device(self.raw_embedding), skip=(self.raw_embedding,))

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for n, p in self.named_parameters() if p.requires_grad and not n.startswith("raw_embedding"))

    def _remember_backbone(self, model) -> None:
        """The templates call it in ``__init__``: the backbone's shape, for ``save_pretrained``'s record, and the
        PLM's vocabulary the prompt is made for (``_check_vocabulary``)."""
        cfg = model.config
        self.__dict__["_backbone"] = {"name_or_path": getattr(cfg, "_name_or_path", "") or "",
                                      **{key: getattr(cfg, key, None) for key in BACKBONE_KEYS}}
        rows, size = self.raw_embedding.weight.shape[0], len(self.tokenizer)
        if size > rows:  # ids past the PLM's table: an IndexError inside the first batch's lookups (CUDA: an assert)
            name = getattr(self.tokenizer, "name_or_path", "") or "the tokenizer"
            raise ValueError(f"tokenizer '{name}' has {size} tokens but the PLM's input embeddings have {rows} rows: "
                             "after tokenizer.add_tokens(...), resize the PLM first, "
                             "plm.resize_token_embeddings(len(tokenizer)), then build the template (or pass the PLM's "
                             "own tokenizer)")
        self.__dict__["_vocab_rows"] = rows

    def _check_vocabulary(self, input_ids=None) -> None:
        """The templates call it at the start of ``process_batch``: a PLM resized after the template was built
        (``plm.resize_token_embeddings``) gave the first new id IPT's pad row (another prompt, silently) and the next
        an IndexError inside the table (CUDA: a device-side assert); refused before any lookup. transformers 4 resizes
        into a new embedding module, so the template's own stays at its size: the batch's ids tell."""
        built, now = self.__dict__.get("_vocab_rows"), self.raw_embedding.weight.shape[0]
        if built is not None and now == built and input_ids is not None and input_ids.numel():
            top = int(input_ids.max())
            now = f"at least {top + 1}" if top >= built else now
        if built is not None and now != built:
            raise ValueError(f"the PLM's vocabulary changed from {built} to {now} tokens after the template was built "
                             "(plm.resize_token_embeddings after it), and the prompt's tables are for "
                             f"{built}: resize the PLM first, plm.resize_token_embeddings(len(tokenizer)), then build "
                             "the template")

    def saved_with(self) -> dict:
        tokenizer = self.tokenizer
        saved = [n for n, p in self.named_parameters() if p.requires_grad and not n.startswith("raw_embedding")]
        return {"tokenizer": {"name_or_path": getattr(tokenizer, "name_or_path", "") or "", "size": len(tokenizer),
                              "fingerprint": tokenizer_fingerprint(tokenizer),
                              "tokenization": tokenization_fingerprint(tokenizer)},
                "backbone": self.__dict__.get("_backbone", {}), "exported_tables": exported_tables(self),
                "exports_in_weights": exports_in_weights(self, saved)}

    def check_saved_with(self, directory: str, model) -> None:
        """``check_saved_with`` for this template: a method, so the runner (``init_from``) asks the template it
        built without importing this door."""
        check_saved_with(directory, self, model)

    def save_pretrained(self, directory: str) -> None:
        self._check_vocabulary()  # a PLM resized since the template was built: a folder that would load nowhere
        save_trainable(self, directory, WEIGHTS_FILE, CONFIG_FILE, {**self.init_config, SAVED_WITH: self.saved_with()},
                       skip=SKIPPED)

    @classmethod
    def from_pretrained(cls, directory: str, model, tokenizer, **overrides):
        path = os.path.join(directory, CONFIG_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"'{directory}' has no {CONFIG_FILE}: save the template with save_pretrained()")
        config = read_json(path, "save the template again with save_pretrained()")
        if not isinstance(config, dict):
            raise ValueError(f"'{path}' holds a {type(config).__name__}, not the JSON object save_pretrained() writes: "
                             "save the template again")
        check_saved_pair(directory, WEIGHTS_FILE, CONFIG_FILE)  # a warning: a hand edit looks the same
        record = config.pop(SAVED_WITH, None) or {}  # absent in folders saved before it was recorded
        _check_backbone(record, model, tokenizer, directory)
        try:
            with rebuilding_saved(record.get("exports_in_weights")):  # what the weights hold is not read from exports
                template = cls(model, tokenizer, **{**config, **overrides})
        except TypeError as e:  # a key edited in by hand: one line naming the file
            raise ValueError(f"'{path}': {e}: remove the key, or save the template again") from None
        except FileNotFoundError as e:  # an export its weights do not hold (a frozen table), moved or deleted
            raise FileNotFoundError(cannot_rebuild(directory, e, "the template", "or pass its new place (from_pretrained("
                                                   "..., pretrained_path=... / encoder_path=...))")) from None
        check_exported_tables(template, record.get("exported_tables"), directory)
        load_trainable(template, os.path.join(directory, WEIGHTS_FILE),
                       "save the template again with save_pretrained() (or train the run again)",
                       complete=True, skip=SKIPPED)
        return template


def reads_placeholder_text(generator) -> bool:
    """Whether ``generator``'s instance prompt reads the example through the placeholder flag (IPT with
    ``token_source: content``, IDPG's M(x)); ``input_prefix`` reads raw input ids, a task prompt reads nothing."""
    if generator is None:
        return False
    if isinstance(generator, IDPGGenerator):
        return True
    return any(isinstance(m, InstancePromptGenerator) and m.token_source == "content" for m in generator.modules())


def check_saved_with(directory: str, template, model) -> None:
    """Before loading ``directory``'s weights into a ``template`` built elsewhere (``init_from``): the tokenizer,
    backbone and exported tables it was saved with are the template's."""
    config = read_json(os.path.join(directory, CONFIG_FILE), "save the template again with save_pretrained()")
    record = (config.get(SAVED_WITH) if isinstance(config, dict) else None) or {}
    _check_backbone(record, model, template.tokenizer, directory)
    check_exported_tables(template, record.get("exported_tables"), directory)


def _check_backbone(record: dict, model, tokenizer, directory: str) -> None:
    """The tokenizer's vocabulary and the backbone's shape the template was saved with; a mismatch is one line."""
    saved = record.get("tokenizer") or {}
    if saved.get("fingerprint") and saved["fingerprint"] != tokenizer_fingerprint(tokenizer):
        given = getattr(tokenizer, "name_or_path", "") or "the given tokenizer"
        given = f"'{given}'" + (" (its files changed since)" if given == saved.get("name_or_path") else "")
        raise ValueError(f"'{directory}' was saved with tokenizer '{saved.get('name_or_path')}' ({saved.get('size')} "
                         f"tokens) and {given} ({len(tokenizer)} tokens) has another vocabulary: the prompt reads "
                         "its table by token id, so it would change; load it with the backbone and tokenizer it was "
                         "trained with")
    mine = tokenization_fingerprint(tokenizer)
    if saved.get("tokenization") and mine and saved["tokenization"] != mine:  # the same vocabulary, normalised otherwise
        given = getattr(tokenizer, "name_or_path", "") or "the given tokenizer"
        raise ValueError(f"'{directory}' was saved with tokenizer '{saved.get('name_or_path')}' and '{given}' has its "
                         "vocabulary but tokenizes the same text into other ids (do_lower_case, strip_accents or "
                         "add_prefix_space differ): the prompt reads its table by token id, so it would change; load it "
                         "with the tokenizer it was trained with")
    backbone, cfg = record.get("backbone") or {}, model.config
    for key in BACKBONE_KEYS:
        if backbone.get(key) is not None and backbone[key] != getattr(cfg, key, None):
            raise ValueError(f"'{directory}' was saved for backbone '{backbone.get('name_or_path')}' with {key} "
                             f"{backbone[key]!r}, and this one has {getattr(cfg, key, None)!r}: load it onto the "
                             "backbone it was trained on")
