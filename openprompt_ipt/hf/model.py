"""``InstancePromptModel``: a 🤗 Transformers model with an instance-wise prompt, trained by any
loop that trains a ``transformers`` model (the ``Trainer`` as constructed by default included).

The backbone is frozen; the prompt (generator) and the head (``modules_to_save``, PEFT's term)
train. ``forward`` takes what a tokenizer returns and gives back the wrapped model's own output
(``SequenceClassifierOutput``, with the loss when ``labels`` are given). The prompt is made and put
in by the same functions the OpenPrompt templates call (``openprompt_ipt.prompting``).
"""
from __future__ import annotations

import dataclasses
import warnings
import weakref
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Optional

import torch
from torch import nn

from ..generators.layered import InstanceInputs
from ..injection import max_positions, prepend, trim_outputs
from ..injection.encoder_hooks import remove_orphaned_copies
from ..injection.layout import FAMILIES  # BERT-style encoders: the families whose layout the injection finds
from ..injection.per_thread import PerThread, pin
from ..prompting import build_input_prompt, build_layered_generator, input_prompt_vectors, place_prompts, release_prompts
from ..prompting.device import place_beside
from ..prompting.layered_prompt import SECTIONS, prompt_positions
from .config import InstancePromptConfig, default_late_layer
from .gradient_checkpointing import GradientCheckpointingMixin
from .habits import PeftHabitsMixin
from .instance_tokens import added_ids, instance_tokens
from .padding import caller_order, padded_to, right_padding_order, take, width_within
from .replicas import refuse_data_parallel
from .saving import LOADING_SAVED, NonFiniteWeightsWarning, SavingMixin
from .shared_base import SharedBaseWarning, register
from .tokenizer_check import _load_tokenizer, check_against_model, tokenizer_record

# heads whose per-position outputs the prompt positions would shift, unseen (start/end logits, choices, pretraining
# and next-token heads): refused when the prompt is built
UNSUPPORTED_HEADS = ("ForQuestionAnswering", "ForMultipleChoice", "ForPreTraining", "ForCausalLM", "LMHeadModel")
# a trace records the prompt's per-batch decisions (padding side, each example's token counts, IDPG's cached M(x)) as
# constants: the traced model gave other logits on other batches (a left-padded one: off by ~0.5) without a word
NOT_TRACEABLE = ("InstancePromptModel cannot be traced or exported (torch.jit.trace, torch.export, torch.onnx.export): "
                 "its prompt is made per batch by steps that depend on the tokens, which a trace records as constants "
                 "for every later batch; serve the eager model (model.eval() under torch.inference_mode()), or "
                 "torch.compile(model)")

# on the base: the head modules every InstancePromptModel built on it has trained (modules_to_save), so far
WRAPPED_HEADS = "_instance_prompt_heads"
# base -> the mark made on that very base: copy.deepcopy(base) / pickle copy the mark in __dict__ too, but a copy's
# head is its own (training it changes no other model), so a mark another object made is not this base's
_OWN_MARK: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class InstancePromptModel(SavingMixin, GradientCheckpointingMixin, PeftHabitsMixin, nn.Module):
    """Built here with its forward; PEFT's habits (hf/habits.py), gradient checkpointing
    (hf/gradient_checkpointing.py) and saving / loading (hf/saving.py) come from the mixins."""
    main_input_name = "input_ids"
    # forward takes the Trainer's num_items_in_batch (labels other than -100 in all the micro-batches of one optimizer
    # step) and gives its share of that step's mean loss: k accumulated micro-batches train as one k-times-larger
    # batch, however many labelled tokens each holds (the base's own heads ignore the count, transformers 5.24)
    accepts_loss_kwargs = True
    # disable_adapter() and vocabulary_logits() switch the forwards of the thread that entered the block: a server's
    # other threads (a classification endpoint beside a fill-mask one) kept getting vocabulary logits or no prompt
    _prompt_off = PerThread(False)
    _vocabulary = PerThread(False)

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
        remove_orphaned_copies(model)  # a copy of a wrapped base carries the copied hooks, which no model owns
        self.prompt_config = config
        self._prompt_off = self._checkpointing = self._vocabulary = False
        label_word_ids = self._label_word_ids(model, tokenizer, config.label_words)  # refused before the base is touched
        self.base_model = model
        as_it_was = self.base_as_it_is(model)
        model.requires_grad_(False)
        self.injector = None
        try:
            self._build_prompt(model, config, tokenizer, head, label_word_ids)
            self._refuse_empty_prompt(head)
            self._place_prompt(model.get_input_embeddings().weight.device)
        except BaseException:  # a refused setting leaves the caller's base as it was: trainable, without our hooks
            self.give_back_base(as_it_was)
            raise
        if self.injector is not None:
            self.injector.remove_with(self)
        _mark_base(model, self.modules_to_save)  # only once built: a refused wrap leaves no mark on the base
        register(model, self)  # from_pretrained onto this base says when it changes this model's head

    def __setstate__(self, state):
        # a copy (copy.deepcopy, pickle / torch.save of the whole model) takes its own hooks off its own base when it
        # is garbage, as the original does: the finalizer was the original's only, so a copy's base kept them
        super().__setstate__(state)
        if self.__dict__.get("injector") is not None:
            self.injector.remove_with(self)
        register(self.base_model, self)
        if WRAPPED_HEADS in self.base_model.__dict__:  # the copied base is this copy's own: wrapping it again shares
            _OWN_MARK[self.base_model] = self.base_model.__dict__[WRAPPED_HEADS]  # this copy's head

    @staticmethod
    def base_as_it_is(model) -> dict:
        """What wrapping changes on the caller's ``model`` (which parameters train, the mark of earlier wraps, the
        class names a label-word prompt sets), for ``give_back_base``."""
        cfg = model.config
        return {"flags": [(p, p.requires_grad) for p in model.parameters()], "mark": model.__dict__.get(WRAPPED_HEADS),
                "own_mark": _OWN_MARK.get(model),
                "labels": (dict(getattr(cfg, "id2label", None) or {}), dict(getattr(cfg, "label2id", None) or {}))}

    def give_back_base(self, as_it_was: dict) -> None:
        """Undo the wrap on the base (a refused setting, a refused ``from_pretrained``): its parameters train as
        they did, our hooks are off it, and it carries no mark or class names of ours."""
        model = self.base_model
        for p, flag in as_it_was["flags"]:
            p.requires_grad_(flag)
        if self.injector is not None:
            self.injector.remove()
        if as_it_was["mark"] is None:
            model.__dict__.pop(WRAPPED_HEADS, None)
        else:
            model.__dict__[WRAPPED_HEADS] = as_it_was["mark"]
        if as_it_was.get("own_mark") is None:
            _OWN_MARK.pop(model, None)
        else:
            _OWN_MARK[model] = as_it_was["own_mark"]
        id2label, label2id = as_it_was["labels"]
        if id2label and dict(getattr(model.config, "id2label", None) or {}) != id2label:
            model.config.id2label, model.config.label2id = id2label, label2id

    def _place_prompt(self, device: torch.device) -> None:
        """The prompt's own parts on the device of the base's input embeddings, as PEFT places its adapters: a base
        loaded with ``device_map="cuda"`` (or moved before wrapping) got a prompt made on the CPU, and its first
        forward outside the Trainer (which moves the whole model) failed on tensors on two devices."""
        place_beside(self, device, skip=(self.base_model,))

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
        if label_word_ids.numel():
            _name_classes(model.config, label_word_ids.size(0))
        self.mask_token_id = tokenizer.mask_token_id
        # token-level heads (token classification, masked LM): their loss is computed at the caller's positions
        self._token_labels = head.endswith("ForTokenClassification") or model.get_output_embeddings() is not None
        # the ids the tokenizer adds around a text, for batches without special_tokens_mask
        self.register_buffer("special_ids", torch.tensor(added_ids(tokenizer), dtype=torch.long), persistent=False)
        self.__dict__["tokenizer"] = tokenizer
        self.__dict__["_tokenizer_record"] = tokenizer_record(tokenizer)
        # the base's vocabulary the prompt was made for (IPT's tables have a row per id, and its pad row just after)
        self.__dict__["_vocab_rows"] = embedding.weight.shape[0]
        # what a checkpoint holds, fixed now: freezing the model for inference must not empty its saved prompt
        self._trained_names = frozenset(n for n, p in self.named_parameters() if p.requires_grad)
        # the base's mode for the prompt too (from_pretrained gives eval): a new nn.Module starts in training mode,
        # and a generator's dropout would then draw other logits at every call of an eval-mode model
        self.train(model.training)

    def _refuse_empty_prompt(self, head) -> None:
        """Wrapped inside accelerate's ``init_empty_weights()``, a loaded base got a prompt on the meta device: no
        values, and none to come (from_pretrained loads into real tensors only; the prompt starts from the base's
        embeddings), so the first forward failed with torch's "Tensor on device cpu is not on the expected device
        meta!"."""
        empty = [n for n, p in self.named_parameters() if p.is_meta and not n.startswith("base_model.")]
        if empty:
            raise ValueError(f"the prompt was made on the meta device ({empty[0]}): accelerate's init_empty_weights() "
                             f"was on while {head} was wrapped, and a prompt starts from the base's embeddings: wrap "
                             "the loaded base outside init_empty_weights")

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

    def _replicate_for_data_parallel(self):
        """A copy nn.DataParallel runs in a thread of its own: it takes the switches the calling thread has on."""
        replica = super()._replicate_for_data_parallel()
        pin(self, replica, ("_prompt_off", "_vocabulary"))
        return replica

    @property
    def config(self):
        return self.base_model.config

    @contextmanager
    def vocabulary_logits(self):
        """Inside the block a masked LM read through label words returns its vocabulary logits (``MaskedLMOutput``,
        at the caller's positions, the prompt in place) rather than the class logits, so ``pipeline("fill-mask",
        model=model, tokenizer=tok)`` scores every token at the text's mask (outside it, the pipeline indexes the class
        logits as tokens: ``IndexError: too many indices``). A masked LM without label words gives them anyway. Only
        this thread's forwards: other threads forwarding the model at once (a server's classification endpoint) keep
        getting class logits."""
        if self.base_model.get_output_embeddings() is None:
            raise ValueError(f"vocabulary_logits(): {type(self.base_model).__name__} has no vocabulary head; it is for a "
                             "masked LM (AutoModelForMaskedLM), with or without label_words")
        previous, self._vocabulary = self._vocabulary, True
        try:
            yield self
        finally:
            self._vocabulary = previous

    # ---- forward ----------------------------------------------------------------------------------
    def forward(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                token_type_ids: Optional[torch.Tensor] = None, special_tokens_mask: Optional[torch.Tensor] = None,
                labels: Optional[torch.Tensor] = None, output_attentions: Optional[bool] = None,
                output_hidden_states: Optional[bool] = None, return_dict: Optional[bool] = None,
                num_items_in_batch: Optional[torch.Tensor | int] = None, task_type_ids: Optional[torch.Tensor] = None):
        """``task_type_ids``: ERNIE's task ids (``use_task_id``), widened over the prompt's positions with each
        example's own id."""
        _refuse_a_trace()
        if getattr(self, "_is_replica", False):  # a copy nn.DataParallel made for one GPU
            refuse_data_parallel(self)
        if input_ids is None:
            raise ValueError("InstancePromptModel needs input_ids (the instance prompt is made from the tokens)")
        self._check_vocabulary()
        if attention_mask is None:
            raise ValueError("the batch has no attention_mask: tokenize with return_attention_mask=True (the default) "
                             "and pad with DataCollatorWithPadding, which keeps it")
        verbalize = self.label_word_ids.numel() > 0 and not self._vocabulary
        token_loss = labels is not None and self._token_labels and not verbalize
        if task_type_ids is not None and self.config.model_type != "ernie":
            raise ValueError(f"task_type_ids are ERNIE's input; this model is '{self.config.model_type}': drop them "
                             "from the batch")
        order = right_padding_order(attention_mask)  # left padding: read as right padding (hf/padding.py)
        if order is not None:
            input_ids, attention_mask, token_type_ids, special_tokens_mask, task_type_ids = (
                take(t, order) for t in (input_ids, attention_mask, token_type_ids, special_tokens_mask, task_type_ids))
            labels = take(labels, order) if token_loss else labels
        # padding past the room the prompt leaves (padding="max_length", pad_to_multiple_of) is cut, and comes back
        # as zeros in the per-token outputs: only a token past it is refused (check_positions names the max_length)
        width = input_ids.size(1)
        cut = width_within(attention_mask, max_positions(self.config) - self._prompt_positions(),
                           labels if token_loss else None)
        if cut is not None:
            input_ids, attention_mask, token_type_ids, special_tokens_mask, task_type_ids = (
                None if t is None else t[:, :cut]
                for t in (input_ids, attention_mask, token_type_ids, special_tokens_mask, task_type_ids))
            labels = labels[:, :cut] if token_loss else labels
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
        if cut is not None:  # the per-token outputs at the caller's width
            _per_token(out, lambda t: padded_to(t, width))
        if order is not None:  # the per-token outputs back at the caller's (left-padded) positions
            back = caller_order(order)
            _per_token(out, lambda t: take(t, back))
        use_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        return out if use_dict else out.to_tuple()

    def _prompt_positions(self) -> int:
        """How many numbered positions this forward's prompt adds before / into the text."""
        if self._prompt_off:
            return 0
        return self.n_prefix if self.placement is None else prompt_positions(self.generator, self.placement)

    def _check_vocabulary(self) -> None:
        """``base.resize_token_embeddings`` after the prompt was built (on the base itself, which the wrapper's own
        ``resize_token_embeddings`` refuses): IPT's table has a row per id of the vocabulary it was built for, so the
        first new id read the pad row (another prompt, silently), the next was an IndexError (on CUDA a device-side
        assert); and the tokenizer record a save writes matched neither vocabulary. Refused before any lookup."""
        built, now = self.__dict__.get("_vocab_rows"), self.base_model.get_input_embeddings().weight.shape[0]
        if built is not None and now != built:
            raise ValueError(f"the base's vocabulary changed from {built} to {now} tokens after the prompt was built "
                             "(base.resize_token_embeddings after get_instance_prompt_model or from_pretrained), and "
                             f"the prompt's tables are for {built}: resize the base first, "
                             "base.resize_token_embeddings(len(tokenizer)), then get_instance_prompt_model(base, "
                             "config, tokenizer)")

    def _at_caller_positions(self, per_token, hidden_states, n_prefix, keep):
        """``per_token`` (B, n', ...) and every hidden state without the prompt's positions."""
        view = SimpleNamespace(logits=per_token, hidden_states=hidden_states)
        return trim_outputs(view, n_prefix) if self.placement is None else release_prompts(None, view, keep)


def _traced() -> bool:
    """Under torch.jit.trace, or torch.export (and the ONNX exporter built on it): ``torch.compiler.is_exporting``
    is torch >= 2.6, and setup.cfg allows torch 2.1 (where every forward raised an AttributeError)."""
    exporting = getattr(torch.compiler, "is_exporting", None)
    return torch.jit.is_tracing() or (exporting is not None and exporting())


def _refuse_a_trace() -> bool:
    """``NOT_TRACEABLE`` under a trace or an export. Dynamo calls this function as it is, outside the graph it traces
    (``torch.compiler.assume_constant_result``), so ``torch.export.export(..., strict=True)`` shows this line as
    raised: raised inside the traced forward it came wrapped in dynamo's page ("Observed exception ... Developer debug
    context: raised exception RuntimeError(...)"). ``torch.compile`` gets ``False`` once, as a constant."""
    if _traced():
        raise RuntimeError(NOT_TRACEABLE)
    return False


# what torch.compiler.assume_constant_result(_refuse_a_trace) sets (torch 2.1 to 2.13), without importing dynamo,
# which takes seconds, at every import of the package
_refuse_a_trace._dynamo_marked_constant = True


def _mark_base(model, heads) -> None:
    """Say so when ``model`` was wrapped before: the head trains in place (it is the base's own module), so a sweep
    that wraps one base again and again started each method from the previous one's trained head, and training it
    changed the earlier model's outputs, silently. ``from_pretrained`` loads its own head over it: said there only
    where that changes a live model's head (hf/shared_base.py)."""
    mark = model.__dict__.get(WRAPPED_HEADS)
    # a mark copied with the base (copy.deepcopy(model.base_model), a pickle) names heads the copy does not share
    earlier = mark if mark is not None and _OWN_MARK.get(model) is mark else frozenset()
    shared = [name for name in heads if name in earlier]
    if shared and not LOADING_SAVED.get():
        warnings.warn(f"this {type(model).__name__} already carries an instance prompt (an earlier "
                      f"get_instance_prompt_model on it): its {', '.join(shared)} is shared and trains in place, so this "
                      "model starts from the head the earlier one trained, and training either one changes the other's "
                      "outputs; wrap a fresh base for each model (from_pretrained again, or copy.deepcopy(base) before "
                      "the first wrap)", SharedBaseWarning, stacklevel=4)
    model.__dict__[WRAPPED_HEADS] = _OWN_MARK[model] = earlier | frozenset(heads)


def _name_classes(config, classes: int) -> None:
    """A masked LM read through label words is a classifier of ``classes`` classes: its config says so, as readers of
    ``id2label`` expect (the text-classification pipeline names each class by it: a masked LM's default 2 labels
    were ``KeyError: 2`` for a third class). The caller's names stay where they are one per class."""
    if len(getattr(config, "id2label", None) or {}) != classes:
        config.num_labels = classes


def _per_token(out, fix) -> None:
    """``fix`` applied to each per-token output (token / vocabulary logits, hidden states, ``last_hidden_state``)."""
    if getattr(out, "logits", None) is not None and out.logits.dim() == 3:
        out.logits = fix(out.logits)
    if out.hidden_states is not None:
        out.hidden_states = tuple(fix(h) for h in out.hidden_states)
    if getattr(out, "last_hidden_state", None) is not None:
        out.last_hidden_state = fix(out.last_hidden_state)


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


def get_instance_prompt_model(model: nn.Module, config: InstancePromptConfig, tokenizer=None) -> InstancePromptModel:
    """Wrap a 🤗 ``...ForSequenceClassification`` (BERT / RoBERTa family; also a token classifier, a masked LM or the
    bare encoder) with the instance prompt ``config`` names; the backbone freezes, the prompt and the head
    (``config.modules_to_save``) train."""
    return InstancePromptModel(model, config, tokenizer=tokenizer)


__all__ = ["InstancePromptModel", "NonFiniteWeightsWarning", "SharedBaseWarning", "get_instance_prompt_model"]
