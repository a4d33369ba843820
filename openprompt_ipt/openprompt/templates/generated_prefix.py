"""GeneratedPrefixTemplate: a prompt computed per instance for every transformer layer.

An OpenPrompt ``MixedTemplate`` (hard words, ``{"mask"}``, placeholders keep working) whose
``process_batch`` asks a *generator* (``prefix``, ``ipt_random|pretrained|encoder``, ``idpg``; each
with its own config section) for prompts and puts them where ``injection`` says:

* ``input``  -- t vectors spliced into the input embeddings at ``insert_position`` (S-IDPG);
* ``kv``     -- per-layer key/value prefixes (Prefix Tuning, P-tuning v2, IPT on Prefix Tuning);
  ``prefix_positions: shift`` numbers the text after the prefix as the reference implementations
  do (prefix + text must fit the model's positions), ``keep`` leaves the text's positions alone;
* ``hidden`` -- t dedicated positions whose hidden states each layer's prompt replaces (or is added
  to, ``hidden_mode: add``) before that layer runs (deep prompt tuning, M-IDPG);
* ``late``   -- t vectors join the hidden states after layer ``late_layer``, before the text; the layers
  below read the text undisturbed and get no gradient (LPT with ``generator: lpt``; a late IPT / S-IDPG
  prompt with ``ipt_*`` / ``idpg``).

``post_processing_outputs`` disarms the hooks and removes spliced positions from logits *and*
hidden states, so verbalizers see the original positions.
"""
from __future__ import annotations

import copy
from typing import Optional

import torch
from openprompt.prompts import MixedTemplate
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

from ...injection.batch import content_mask, field, refuse_left_padding
from ...generators.layered import InstanceInputs
from ...injection import INSERT_POSITIONS
from ...injection.encoder_hooks import remove_orphaned_copies
from ...injection.per_thread import PerThread
from ...prompting import build_layered_generator, place_prompts, release_prompts
from ...prompting.layered_prompt import SECTIONS, prompt_positions
from .persistence import TrainedTemplateMixin

__all__ = ["GeneratedPrefixTemplate", "SECTIONS"]


def check_encoder(config) -> None:
    """Insert positions and IDPG's M(x) (the first token's state) assume a bidirectional encoder with a leading special
    token: on GPT-2 "before text_a" lands after the first word and M(x) sees one token; on T5 the logits are the
    decoder's. One line instead of a silently misplaced prompt."""
    family = getattr(config, "model_type", "")
    if getattr(config, "is_encoder_decoder", False):
        kind = "encoder-decoder"
    elif family in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and family not in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        kind = "decoder-only"
    else:
        return
    raise ValueError(f"GeneratedPrefixTemplate needs a masked-LM encoder (BERT, RoBERTa, ELECTRA, ALBERT, ...), not the "
                     f"{kind} '{family}': use InstanceWiseTemplate (its prompt goes before the whole input)")


class GeneratedPrefixTemplate(TrainedTemplateMixin, MixedTemplate):
    # shortenable_ids last, as in OpenPrompt's own templates: its head/tail truncation empties the flag lists in
    # place key by key, and reads shortenable_ids for every key after it (IndexError on an emptied part)
    registered_inputflag_names = ["soft_token_ids", "loss_ids", "text_part_ids", "shortenable_ids"]
    # the positions process_batch spliced, for post_processing_outputs: each thread's own (two threads forwarding one
    # model at once got each other's, and one of them its logits at the wrong positions)
    _keep = PerThread()

    def __init__(self, model, tokenizer, text: Optional[str] = None, generator: str = "prefix",
                 injection: Optional[str] = None, prompt_length: int = 5, insert_position: int = 0,
                 prefix_positions: str = "shift", hidden_mode: str = "replace",
                 prefix: Optional[dict] = None, ipt: Optional[dict] = None, idpg: Optional[dict] = None,
                 lpt: Optional[dict] = None, late_layer: Optional[int] = None,
                 placeholder_mapping: dict = {"<text_a>": "text_a", "<text_b>": "text_b"}):
        given = {"prefix": prefix, "ipt": ipt, "idpg": idpg, "lpt": lpt}
        check_encoder(model.config)
        remove_orphaned_copies(model)  # a copy of a PLM a template hooked carries copied hooks no template owns
        super().__init__(model=model, tokenizer=tokenizer, text=None, placeholder_mapping=placeholder_mapping)
        self._remember_backbone(model)
        self.generator, self.injector, self.placement, section = build_layered_generator(
            model, self.raw_embedding, tokenizer, generator, injection, prompt_length, insert_position,
            prefix_positions, hidden_mode, given, late_layer=late_layer)
        self.generator_name, self.injection = generator, self.placement.injection
        self.insert_position, self.prefix_positions, self.hidden_mode = int(insert_position), prefix_positions, hidden_mode
        self.position_limit = self.placement.position_limit
        self.n_prefix = prompt_positions(self.generator, self.placement)
        self.init_config = dict(text=text, generator=generator, injection=self.injection, prompt_length=int(prompt_length),
                                insert_position=self.insert_position, prefix_positions=prefix_positions,
                                hidden_mode=hidden_mode, **{section: given[section]})
        if late_layer is not None:
            self.init_config["late_layer"] = int(late_layer)
        self._keep = None
        try:
            self.text = text  # on_text_set may refuse it
        except Exception:
            if self.injector is not None:  # no hooks of a template that was never built stay on the PLM
                self.injector.remove()
            raise
        if self.injector is not None:
            self.injector.remove_with(self)
        self._place_beside_backbone()  # also without a text (on_text_set places it otherwise)

    def __deepcopy__(self, memo):
        # copied with its PLM (copy.deepcopy(prompt_model): the PLM comes first), the copy's hooks sit on the copied
        # PLM. Copied alone, they sat on a hidden copy of the PLM: put back on the PLM (a "best template" kept in a
        # notebook), it ran without its kv / hidden / late prompts, silently
        if self.injector is not None and id(self.raw_embedding) not in memo:
            raise TypeError(f"copy.deepcopy of a GeneratedPrefixTemplate alone: its '{self.injection}' prompts enter "
                            "through hooks on its PLM, so the copy would inject into a hidden copy of the PLM, not the "
                            "one it runs with; copy the whole model (copy.deepcopy(prompt_model)), or keep the "
                            "template's weights (best = {k: v.clone() for k, v in template.state_dict().items()}, "
                            "later template.load_state_dict(best))")
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__dict__, memo))
        return new

    def __setstate__(self, state):
        # a copy (copy.deepcopy, pickle / torch.save of the whole model) takes its own hooks off its own PLM when it
        # is garbage, as the original does: the finalizer was the original's only
        super().__setstate__(state)
        if self.__dict__.get("injector") is not None:
            self.injector.remove_with(self)

    # ---- OpenPrompt hooks -------------------------------------------------------------------
    def on_text_set(self):
        self._text_changed(self.generator)
        super().on_text_set()
        parts = {"text_a": 1, "text_b": 2}
        self.text_part_ids = [parts.get(d.get("placeholder"), 3) if "placeholder" in d else 0 for d in self.text]
        self._check_placeholders()
        if self.injection != "kv" and self.insert_position in (2, 3) and 2 not in self.text_part_ids:
            raise ValueError(f"insert_position {self.insert_position} ({INSERT_POSITIONS[self.insert_position]}) "
                             "needs a text_b placeholder in the template text: use 0, 1 or 4 for single sentences")
        if self.injection == "late" and self.num_soft_token:
            raise ValueError('{"soft"} tokens sit in the input, below a late prompt, where nothing trains (the backward '
                             "stops at late_layer): drop them from the template text, or use injection: input")
        if self.num_soft_token == 0:  # MixedTemplate's 1-row soft table is unused here
            self.soft_embedding.weight.requires_grad_(False)
        self._place_beside_backbone()

    def process_batch(self, batch):
        self._refuse_shared_replica()
        self._check_vocabulary(field(batch, "input_ids"))
        self._watch_updates()
        refuse_left_padding(batch["attention_mask"])
        inputs = InstanceInputs(batch["input_ids"], batch["attention_mask"], content_mask(batch, "text_part_ids"),
                                field(batch, "text_part_ids"))
        if self.num_soft_token:
            batch = self._embeds_in_plm_dtype(super().process_batch(batch))  # hard + {"soft"} tokens -> inputs_embeds
        else:  # no {"soft"} tokens: MixedTemplate's second lookup and torch.where would change nothing
            batch["inputs_embeds"], batch["input_ids"] = self.raw_embedding(inputs.input_ids), None
        self._keep = place_prompts(self.generator, self.injector, self.placement, batch, inputs)
        return batch

    def prompt_vectors(self, batch) -> torch.Tensor:
        """The (B, t, H) vectors an ``injection: input`` template splices into the input embeddings
        (the generator's slot 0). Only input injection has them in the word embedding space: kv / hidden
        prompts are per-layer keys, values or hidden states, so those raise ``ValueError``."""
        if self.injection != "input":
            raise ValueError(f"injection '{self.injection}' puts its prompts into the layers, not the input embeddings: "
                             "only injection 'input' has input-space prompt vectors")
        parts = field(batch, "text_part_ids")
        content = content_mask(batch, "text_part_ids")
        state = self.generator.begin(InstanceInputs(batch["input_ids"], batch["attention_mask"], content, parts))
        return self.generator.slot(state, 0)

    def prompt_position_names(self) -> list:
        return [f"prompt {i + 1}" for i in range(self.generator.n_positions)]

    def post_processing_outputs(self, outputs):
        outputs = release_prompts(self.injector, outputs, self._keep)
        self._keep = None
        return outputs
