"""Generated prompts for every layer (Prefix Tuning, P-tuning v2, IPT on Prefix Tuning, S-/M-IDPG).

``build_layered_generator`` checks the arguments and makes the generator (and, for ``kv`` /
``hidden``, the hooks that carry its prompts into the layers); ``place_prompts`` puts one batch's
prompts where ``Placement`` says, on a batch that already holds ``inputs_embeds``;
``release_prompts`` disarms the hooks and gives back the original positions of the outputs."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from ..generators.layered import INJECTIONS, GeneratorContext, InstanceInputs, make_config
from ..generators.registry import GENERATORS
from ..injection import (INSERT_POSITIONS, InjectionPlan, LatePlan, LatePromptInjector, LayerPromptInjector,
                         check_late_layer, check_positions, insert_index, max_positions, trim_late,
                         remove_positions, shifted_position_ids, splice)

SECTIONS = ("prefix", "ipt", "idpg", "lpt")


@dataclass
class Placement:
    injection: str                 # input | kv | hidden
    insert_position: int = 0       # input / hidden: where in the sequence (INSERT_POSITIONS)
    prefix_positions: str = "shift"  # kv: number the text after the prefix (shift) or not (keep)
    hidden_mode: str = "replace"   # hidden: replace or add to the dedicated positions' states
    position_limit: int = 10 ** 9
    model_config: Any = None       # the PLM's config (its family decides how positions are numbered)
    late_layer: Optional[int] = None  # late: the prompt joins after this many layers (1..L-1)


# the placement keys and the injections that read them (the runner notes a key set for another injection,
# the 🤗 door refuses it)
PLACEMENT_READS = {"insert_position": ("input", "hidden"), "prefix_positions": ("kv",), "hidden_mode": ("hidden",)}


def build_layered_generator(model: nn.Module, embedding: nn.Embedding, tokenizer, generator: str = "prefix",
                            injection: Optional[str] = None, prompt_length: int = 5, insert_position: int = 0,
                            prefix_positions: str = "shift", hidden_mode: str = "replace", sections=None,
                            late_layer: Optional[int] = None):
    """Returns ``(generator, injector or None, placement, section_name)``; ``sections`` maps
    ``prefix`` / ``ipt`` / ``idpg`` / ``lpt`` to that generator's settings (only its own may be given).
    ``late_layer`` (injection ``late`` only): the prompt joins the hidden states after that many layers."""
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator '{generator}': choose one of {list(GENERATORS)}")
    gen_cls = GENERATORS[generator]
    given = dict(sections or {})
    for name, value in given.items():
        if name not in SECTIONS:
            raise ValueError(f"unknown section '{name}': choose one of {list(SECTIONS)}")
        if value and name != gen_cls.section:
            raise ValueError(f"section '{name}' does not configure generator '{generator}': "
                             f"put its settings under '{gen_cls.section}'")
    config = make_config(gen_cls.config_class, given.get(gen_cls.section), gen_cls.section)
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
    if injection == "late":
        if late_layer is None:
            raise ValueError(f"injection: late needs late_layer, the layer after which the prompt joins "
                             f"(1..{int(model.config.num_hidden_layers) - 1}; LPT's authors: 12 of RoBERTa-large's 24)")
        check_late_layer(late_layer, int(model.config.num_hidden_layers),
                         f"'{getattr(model.config, 'model_type', type(model).__name__)}'")
        injector = LatePromptInjector(model, int(late_layer))
    elif late_layer is not None:
        raise ValueError(f"late_layer is read by injection: late only (this template's injection is '{injection}'): "
                         "drop late_layer, or set injection: late")
    else:
        injector = LayerPromptInjector(model) if injection in ("kv", "hidden") else None
    num_layers = injector.layout.num_layers if injector else int(model.config.num_hidden_layers)
    # kv / hidden / late prompts have the layers' width; only an input prompt has the word embeddings' (ELECTRA-small,
    # ALBERT: embedding_size < hidden_size, projected up after the embedding layer)
    width = embedding.embedding_dim if injection == "input" else int(model.config.hidden_size)
    if injection == "hidden" and width != embedding.embedding_dim:  # layer 0's prompt is spliced into the embeddings
        if injector is not None:
            injector.remove()
        raise ValueError(f"injection: hidden splices layer 0's prompt into the {embedding.embedding_dim}-d input embeddings, "
                         f"but the layers of '{getattr(model.config, 'model_type', type(model).__name__)}' are "
                         f"{width}-d (embedding_size != hidden_size): use injection: kv or input")
    ctx = GeneratorContext(hidden_size=width, num_layers=num_layers, injection=injection,
                           prompt_length=int(prompt_length), vocab_size=embedding.num_embeddings,
                           word_embeddings=embedding, tokenizer=tokenizer, plm=model, injector=injector,
                           init_std=float(embedding.weight.detach().float().std()))
    try:
        gen = gen_cls(ctx, config)
    except Exception:
        if injector is not None:  # a refused setting leaves no hooks on the caller's PLM
            injector.remove()
        raise
    placement = Placement(injection, int(insert_position), prefix_positions, hidden_mode, max_positions(model.config),
                          model.config, None if late_layer is None else int(late_layer))
    n_prefix = prompt_positions(gen, placement)
    if n_prefix + 3 > placement.position_limit:
        if injector is not None:
            injector.remove()
        raise ValueError(f"{n_prefix} prompt positions leave no room under the model's {placement.position_limit} "
                         f"positions: use at most {placement.position_limit - 3}")
    return gen, injector, placement, gen_cls.section


def prompt_positions(generator, placement: Placement) -> int:
    """How many numbered positions the prompt adds to the sequence (``kv`` + ``keep`` and ``late`` add none: a
    late prompt joins after the position embeddings)."""
    if placement.injection == "late" or (placement.injection == "kv" and placement.prefix_positions == "keep"):
        return 0
    return generator.n_positions


def check_room(generator, placement: Placement, n: int) -> None:
    """The ``n`` input tokens plus the prompt's numbered positions must fit the model's positions (before IDPG's
    prompt-free M(x) pass runs the PLM over the text)."""
    check_positions(prompt_positions(generator, placement), n, placement.position_limit, kv=placement.injection == "kv")


def place_prompts(generator, injector, placement: Placement, batch, inputs: InstanceInputs):
    """Put this batch's prompts in: ``batch`` (holding ``inputs_embeds``, ``attention_mask`` and maybe
    ``token_type_ids``) may gain positions and ``position_ids``; the hooks are armed. Returns ``keep``
    (the new index of each original position), the number of late prompt positions (``late``: they lead the
    sequence above late_layer), or ``None`` when no position was added."""
    check_room(generator, placement, inputs.attention_mask.size(1))  # before begin: IDPG's M(x) pass runs the PLM
    state = generator.begin(inputs)
    if placement.injection == "late":
        if generator.uses_previous:  # LPT: made from the hidden states where it joins
            late = lambda hs, mask: generator.slot(state, 0, hs, mask)  # noqa: E731
        else:  # a late IPT / IDPG prompt: made from the tokens, placed late
            late = lambda hs, mask: generator.slot(state, 0)  # noqa: E731
        injector.arm(LatePlan(late, inputs.attention_mask))
        return int(generator.n_positions)
    provider = lambda s, previous=None: generator.slot(state, s, previous)  # noqa: E731
    uses_previous = generator.uses_previous
    attention_mask = inputs.attention_mask
    if placement.injection == "kv":
        if placement.prefix_positions == "shift":
            batch["position_ids"] = shifted_position_ids(placement.model_config, attention_mask, generator.n_positions)
        injector.arm(InjectionPlan("kv", provider, uses_previous))
        return None
    parts = inputs.part_ids if inputs.part_ids is not None else torch.zeros_like(inputs.input_ids)
    if placement.insert_position in (2, 3) and not bool((parts == 2).any()):  # one host read, at these positions only
        _warn_no_second_text(placement.insert_position)
    start = insert_index(placement.insert_position, parts, attention_mask)
    batch, keep, positions = splice(batch, provider(0), start, limit=placement.position_limit)
    if placement.injection == "hidden":
        injector.arm(InjectionPlan("hidden", provider, uses_previous, positions=positions,
                                   hidden_mode=placement.hidden_mode))
    return keep


class NoSecondTextWarning(UserWarning):
    pass


def _warn_no_second_text(position: int) -> None:
    """The OpenPrompt door refuses these positions on a template without text_b when it is built; the 🤗 door
    sees its texts only per batch (a pair with an empty second text looks the same), so it says it there."""
    warnings.warn(f"insert_position {position} ({INSERT_POSITIONS[position]}): no example in this batch has a "
                  f"second text, so the prompt goes before the final special token, as insert_position 4 puts it; "
                  "give text pairs, or choose 0, 1 or 4", NoSecondTextWarning, stacklevel=3)


def release_prompts(injector, outputs, keep: Optional[torch.Tensor]):
    """Disarm the hooks and drop the spliced prompt positions from the outputs' per-position fields."""
    if injector is not None:
        injector.disarm()
    if isinstance(keep, int):
        outputs = trim_late(outputs, keep)
    elif keep is not None:
        outputs = remove_positions(outputs, keep)
    return outputs
