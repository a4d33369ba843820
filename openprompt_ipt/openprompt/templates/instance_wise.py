"""InstanceWiseTemplate: IPT on Prompt Tuning — per-example prompt vectors at the input layer.

It is an OpenPrompt ``MixedTemplate`` (hard words, ``{"mask"}``, ``{"placeholder": "text_a"}`` and
task-level ``{"soft"}`` tokens keep working) that adds, in ``process_batch``,
``[task prompt (task_prompt_length)] [instance prompt G(x) (prompt_length)]`` before the text, and
removes those positions in ``post_processing_outputs``. Which tokens are "the example's own" is a
template input flag (``instance_token_ids``: 1 on placeholder text), so OpenPrompt's tokenizer
wrapper carries it through truncation and special tokens like any other flag.

``strategy: none`` with ``task_prompt_length > 0`` is plain Prompt Tuning (Lester et al.).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from openprompt.prompts import MixedTemplate

from ...injection.batch import content_mask, field, refuse_left_padding
from ...injection import max_positions, prepend, trim_outputs
from ...prompting import STRATEGY_NAMES, build_input_prompt, input_prompt_vectors
from ...prompting.input_prompt import PositionDropout
from .persistence import TrainedTemplateMixin

__all__ = ["InstanceWiseTemplate", "STRATEGY_NAMES"]


class InstanceWiseTemplate(TrainedTemplateMixin, MixedTemplate):
    # shortenable_ids last, as in OpenPrompt's own templates: its head/tail truncation empties the flag lists in
    # place key by key, and reads shortenable_ids for every key after it (IndexError on an emptied part)
    registered_inputflag_names = ["soft_token_ids", "loss_ids", "instance_token_ids", "shortenable_ids"]

    def __init__(self, model, tokenizer, text: Optional[str] = None, strategy: str = "random",
                 prompt_length: int = 16, task_prompt_length: int = 0, token_source: str = "content",
                 table_dim: Optional[int] = None, vocab_rows: Optional[Sequence[int]] = None,
                 init_std: Optional[float] = None, sparse: bool = False, pretrained_path: Optional[str] = None,
                 encoder: str = "textcnn", encoder_hidden: int = 128, encoder_dropout: float = 0.1,
                 encoder_path: Optional[str] = None, sequence_utilization_rate: float = 1.0,
                 max_source_tokens: int = 512, instance_dropout: float = 0.0, table_init: str = "random",
                 combine: str = "concat", placeholder_mapping: dict = {"<text_a>": "text_a", "<text_b>": "text_b"}):
        super().__init__(model=model, tokenizer=tokenizer, text=None, placeholder_mapping=placeholder_mapping)
        self._remember_backbone(model)
        self.strategy = strategy
        self.position_limit = max_positions(model.config)
        # T5: the prompt enters the encoder, while logits (and the mask's loss_ids) are the decoder's positions
        self.encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
        task_prompt, generator, settings = build_input_prompt(
            self.raw_embedding, tokenizer, self.position_limit, strategy=strategy, prompt_length=prompt_length,
            task_prompt_length=task_prompt_length, token_source=token_source, table_dim=table_dim,
            vocab_rows=vocab_rows, init_std=init_std, sparse=sparse, pretrained_path=pretrained_path, encoder=encoder,
            encoder_hidden=encoder_hidden, encoder_dropout=encoder_dropout, encoder_path=encoder_path,
            sequence_utilization_rate=sequence_utilization_rate, max_source_tokens=max_source_tokens,
            table_init=table_init, combine=combine)
        self.generator, self.task_prompt = generator, task_prompt  # registration order as before (optimizer groups)
        self.prompt_length, self.task_prompt_length = settings["prompt_length"], settings["task_prompt_length"]
        self.combine, self.n_prefix = settings["combine"], settings["n_prefix"]
        # opt-in regulariser (issue #33); no parameters, so saved weights are the same with or without it
        self.instance_dropout = PositionDropout(instance_dropout) if instance_dropout else None
        self.init_config = dict(
            strategy=strategy, prompt_length=self.prompt_length, task_prompt_length=self.task_prompt_length,
            token_source=token_source, table_dim=table_dim, vocab_rows=list(vocab_rows) if vocab_rows else None,
            init_std=settings["init_std"], sparse=sparse, pretrained_path=pretrained_path, encoder=encoder,
            encoder_hidden=encoder_hidden, encoder_dropout=encoder_dropout, encoder_path=encoder_path,
            sequence_utilization_rate=sequence_utilization_rate, max_source_tokens=max_source_tokens,
            instance_dropout=float(instance_dropout), table_init=table_init, combine=combine, text=text)
        self.text = text
        self._place_beside_backbone()  # also without a text (on_text_set places it otherwise)

    # ---- OpenPrompt hooks -------------------------------------------------------------------
    def on_text_set(self):
        self._text_changed(self.generator)
        super().on_text_set()
        self.instance_token_ids = [1 if "placeholder" in d else 0 for d in self.text]
        self._check_placeholders()
        if self.num_soft_token == 0:  # MixedTemplate always makes a 1-row table; nothing uses it here
            self.soft_embedding.weight.requires_grad_(False)
        self._place_beside_backbone()

    def prompt_vectors(self, batch) -> Optional[torch.Tensor]:
        """The (B, n_prefix, H) vectors ``process_batch`` puts before the text, in the input embedding
        space: ``task_prompt_length`` task-level vectors (the same for every example), then the
        ``prompt_length`` instance vectors G(x). ``None`` when the template has no prompt positions.
        Reads ``input_ids``, ``attention_mask`` and ``instance_token_ids`` (when present) of ``batch``."""
        if self.n_prefix == 0:
            return None
        content = content_mask(batch, "instance_token_ids") if self.generator is not None else None
        return input_prompt_vectors(self.task_prompt, self.generator, batch["input_ids"], content,
                                    batch["attention_mask"], dropout=self.instance_dropout,
                                    combine=self.combine)

    def prompt_position_names(self) -> list:
        """One name per row of ``prompt_vectors``: ``task 1..``, then ``instance 1..``."""
        if self.combine == "add" and self.prompt_length:
            return [f"task + instance {i + 1}" for i in range(self.task_prompt_length)]
        return ([f"task {i + 1}" for i in range(self.task_prompt_length)]
                + [f"instance {i + 1}" for i in range(self.prompt_length)])

    def process_batch(self, batch):
        self._refuse_shared_replica()
        self._check_vocabulary(field(batch, "input_ids"))
        self._watch_updates()
        refuse_left_padding(field(batch, "attention_mask"))
        prompts = self.prompt_vectors(batch)  # before MixedTemplate replaces input_ids by inputs_embeds
        batch = self._embeds_in_plm_dtype(super().process_batch(batch))  # hard + {"soft"} tokens -> inputs_embeds
        if prompts is None:
            return batch
        return prepend(batch, prompts, limit=self.position_limit)

    def post_processing_outputs(self, outputs):
        if self.encoder_decoder:  # no prompt position in the decoder's outputs (as OpenPrompt's SoftTemplate)
            return outputs
        return trim_outputs(outputs, self.n_prefix)
