"""GeneratedPrefixTemplate: a prompt computed per instance for every transformer layer.

An OpenPrompt ``MixedTemplate`` (hard words, ``{"mask"}``, placeholders keep working) whose
``process_batch`` asks a *generator* (``prefix``, ``ipt_random|pretrained|encoder``, ``idpg``; each
with its own config section) for prompts and puts them where ``injection`` says:

* ``input``  -- t vectors spliced into the input embeddings at ``insert_position`` (S-IDPG);
* ``kv``     -- per-layer key/value prefixes (Prefix Tuning, P-tuning v2, IPT on Prefix Tuning);
  ``prefix_positions: shift`` numbers the text after the prefix as the reference implementations
  do (prefix + text must fit the model's positions), ``keep`` leaves the text's positions alone;
* ``hidden`` -- t dedicated positions whose hidden states each layer's prompt replaces (or is added
  to, ``hidden_mode: add``) before that layer runs (deep prompt tuning, M-IDPG).

``post_processing_outputs`` disarms the hooks and removes spliced positions from logits *and*
hidden states, so verbalizers see the original positions.
"""
from __future__ import annotations

from typing import Optional

import torch
from openprompt.prompts import MixedTemplate

from ..batch import content_mask, field
from ..generators.layered import INJECTIONS, GeneratorContext, InstanceInputs, make_config
from ..generators.registry import GENERATORS
from ..injection import (INSERT_POSITIONS, InjectionPlan, LayerPromptInjector, insert_index, max_positions,
                         remove_positions, shifted_position_ids, splice)
from .persistence import TrainedTemplateMixin

SECTIONS = ("prefix", "ipt", "idpg")


class GeneratedPrefixTemplate(TrainedTemplateMixin, MixedTemplate):
    registered_inputflag_names = ["soft_token_ids", "loss_ids", "shortenable_ids", "text_part_ids"]

    def __init__(self, model, tokenizer, text: Optional[str] = None, generator: str = "prefix",
                 injection: Optional[str] = None, prompt_length: int = 5, insert_position: int = 0,
                 prefix_positions: str = "shift", hidden_mode: str = "replace",
                 prefix: Optional[dict] = None, ipt: Optional[dict] = None, idpg: Optional[dict] = None,
                 placeholder_mapping: dict = {"<text_a>": "text_a", "<text_b>": "text_b"}):
        if generator not in GENERATORS:
            raise ValueError(f"unknown generator '{generator}': choose one of {list(GENERATORS)}")
        gen_cls = GENERATORS[generator]
        given = {"prefix": prefix, "ipt": ipt, "idpg": idpg}
        for name, value in given.items():
            if value and name != gen_cls.section:
                raise ValueError(f"section '{name}' does not configure generator '{generator}': "
                                 f"put its settings under '{gen_cls.section}'")
        config = make_config(gen_cls.config_class, given[gen_cls.section], gen_cls.section)
        injection = injection or gen_cls.default_injection(config)
        if injection not in INJECTIONS:
            raise ValueError(f"unknown injection '{injection}': choose one of {list(INJECTIONS)}")
        if prefix_positions not in ("shift", "keep"):
            raise ValueError(f"unknown prefix_positions '{prefix_positions}': choose 'shift' or 'keep'")
        if hidden_mode not in ("replace", "add"):
            raise ValueError(f"unknown hidden_mode '{hidden_mode}': choose 'replace' or 'add'")
        if insert_position not in INSERT_POSITIONS:
            raise ValueError(f"insert_position must be one of {sorted(INSERT_POSITIONS)} ({INSERT_POSITIONS}), "
                             f"got {insert_position}")
        if int(prompt_length) <= 0:
            raise ValueError(f"prompt_length must be a positive integer, got {prompt_length}")
        super().__init__(model=model, tokenizer=tokenizer, text=None, placeholder_mapping=placeholder_mapping)
        self.generator_name, self.injection = generator, injection
        self.insert_position, self.prefix_positions, self.hidden_mode = int(insert_position), prefix_positions, hidden_mode
        self.injector = LayerPromptInjector(model) if injection in ("kv", "hidden") else None
        num_layers = self.injector.layout.num_layers if self.injector else int(model.config.num_hidden_layers)
        ctx = GeneratorContext(hidden_size=self.embedding_size, num_layers=num_layers, injection=injection,
                               prompt_length=int(prompt_length), vocab_size=self.raw_embedding.num_embeddings,
                               word_embeddings=self.raw_embedding, tokenizer=tokenizer, plm=model,
                               injector=self.injector,
                               init_std=float(self.raw_embedding.weight.detach().float().std()))
        self.generator = gen_cls(ctx, config)
        self.__dict__["plm_config"] = model.config
        self.position_limit = max_positions(model.config)
        t = self.generator.n_positions
        self.n_prefix = 0 if (injection == "kv" and prefix_positions == "keep") else t
        if self.n_prefix + 3 > self.position_limit:
            raise ValueError(f"{self.n_prefix} prompt positions leave no room under the model's {self.position_limit} "
                             f"positions: use at most {self.position_limit - 3}")
        self.init_config = dict(text=text, generator=generator, injection=injection, prompt_length=int(prompt_length),
                                insert_position=self.insert_position, prefix_positions=prefix_positions,
                                hidden_mode=hidden_mode, **{gen_cls.section: given[gen_cls.section]})
        self._keep = None
        self.text = text

    # ---- OpenPrompt hooks -------------------------------------------------------------------
    def on_text_set(self):
        super().on_text_set()
        parts = {"text_a": 1, "text_b": 2}
        self.text_part_ids = [parts.get(d.get("placeholder"), 3) if "placeholder" in d else 0 for d in self.text]
        if self.injection != "kv" and self.insert_position in (2, 3) and 2 not in self.text_part_ids:
            raise ValueError(f"insert_position {self.insert_position} ({INSERT_POSITIONS[self.insert_position]}) "
                             "needs a text_b placeholder in the template text: use 0, 1 or 4 for single sentences")
        if self.num_soft_token == 0:  # MixedTemplate's 1-row soft table is unused here
            self.soft_embedding.weight.requires_grad_(False)

    def process_batch(self, batch):
        input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
        parts = field(batch, "text_part_ids")
        content = content_mask(batch, "text_part_ids")
        if self.num_soft_token:
            batch = super().process_batch(batch)  # hard + {"soft"} tokens -> inputs_embeds
        else:  # no {"soft"} tokens: MixedTemplate's second lookup and torch.where would change nothing
            batch["inputs_embeds"], batch["input_ids"] = self.raw_embedding(input_ids), None
        state = self.generator.begin(InstanceInputs(input_ids, attention_mask, content, parts))
        provider = lambda s, previous=None: self.generator.slot(state, s, previous)  # noqa: E731
        uses_previous = self.generator.uses_previous
        if self.injection == "kv":
            p, n = self.generator.n_positions, input_ids.size(1)
            if self.prefix_positions == "shift":
                if p + n > self.position_limit:
                    raise ValueError(f"{p} prefix positions + {n} input tokens exceed the model's {self.position_limit} "
                                     f"positions: set max_seq_length <= {self.position_limit - p}, use fewer prefix "
                                     "tokens, or prefix_positions: keep")
                batch["position_ids"] = shifted_position_ids(self.plm_config, attention_mask, p)
            self.injector.arm(InjectionPlan("kv", provider, uses_previous))
            return batch
        if parts is None:
            parts = torch.zeros_like(input_ids)
        start = insert_index(self.insert_position, parts, attention_mask)
        batch, self._keep, positions = splice(batch, provider(0), start, limit=self.position_limit)
        if self.injection == "hidden":
            self.injector.arm(InjectionPlan("hidden", provider, uses_previous, positions=positions,
                                            hidden_mode=self.hidden_mode))
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
        if self.injector is not None:
            self.injector.disarm()
        if self._keep is not None:
            outputs = remove_positions(outputs, self._keep)
            self._keep = None
        return outputs
