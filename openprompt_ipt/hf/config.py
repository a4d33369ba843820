"""``InstancePromptConfig``: which method, with which settings, the 🤗 Transformers door builds.

A method is a name in ``METHODS``; each names the shared builder it calls (``input``: the
InstanceWiseTemplate's prompt before the text, ``layered``: the GeneratedPrefixTemplate's
generators and injections) and the defaults that make it that method. ``options`` are the
generator's own settings, spelled as in the templates (an InstanceWiseTemplate argument for
``prompt_tuning`` / ``ipt``; the ``prefix`` / ``ipt`` / ``idpg`` section for the others)."""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..prompting import build_input_prompt
from ..prompting.layered_prompt import PLACEMENT_READS

IPT_STRATEGIES = ("random", "pretrained", "encoder")
# InstanceWiseTemplate arguments a method's options may set (the rest come from the config's fields)
INPUT_OPTIONS = tuple(p for p in inspect.signature(build_input_prompt).parameters
                      if p not in ("embedding", "tokenizer", "position_limit", "strategy", "prompt_length",
                                   "task_prompt_length"))


@dataclass(frozen=True)
class MethodSpec:
    door: str                                   # input | layered
    generator: Optional[str] = None             # layered: GENERATORS name; "ipt_{strategy}" picks by strategy
    injection: Optional[str] = None             # layered: fixed injection, or None for the config's / generator's
    injections: Tuple[str, ...] = ()            # layered: injections the method allows
    defaults: Tuple[Tuple[str, Any], ...] = ()  # options the method sets unless the user does
    fixed: Tuple[Tuple[str, Any], ...] = ()     # options that define the method (a different value is an error)
    uses_strategy: bool = False                 # reads config.strategy (random | pretrained | encoder)
    description: str = ""


METHODS: Dict[str, MethodSpec] = {}


BUILT_IN: set = set()  # the methods registered below: configs and saved models name them, so they keep their meaning


def register_method(name: str, spec: MethodSpec) -> None:
    """Add a method by name (e.g. a preset of another generator's options). Registering a name again replaces your
    own preset (a notebook cell run again); replacing a built-in one is refused, since every config and saved model
    naming it would then build the preset, silently."""
    if name in BUILT_IN and METHODS[name] != spec:
        raise ValueError(f"register_method('{name}', ...): '{name}' is a built-in method (configs and saved models name "
                         "it); register the preset under a name of its own")
    METHODS[name] = spec


register_method("prompt_tuning", MethodSpec("input", description="Prompt Tuning (Lester et al.): prompt_length task vectors"))
register_method("ipt", MethodSpec("input", uses_strategy=True,
                                  description="IPT on Prompt Tuning: [task prompt][G(x)] before the text"))
register_method("prefix_tuning", MethodSpec("layered", generator="prefix", injection="kv", injections=("kv",),
                                            defaults=(("reparameterize", True),),
                                            description="Prefix Tuning (Li & Liang): MLP-reparameterised k/v prefixes"))
register_method("p_tuning_v2", MethodSpec("layered", generator="prefix", injections=("kv", "hidden"),
                                          defaults=(("reparameterize", False),),
                                          description="P-tuning v2: plain per-layer prefixes (kv) or deep prompts (hidden)"))
register_method("prefix_ipt", MethodSpec("layered", generator="ipt_{strategy}", injections=("kv", "hidden"),
                                         uses_strategy=True,
                                         description="IPT on Prefix Tuning: task prefix + G(x) in every layer"))
register_method("s_idpg", MethodSpec("layered", generator="idpg", injection="input", injections=("input", "late"),
                                     fixed=(("depth", "single"),),
                                     description="S-IDPG: t generated vectors in the input (dnn|phm, plm_cls|static_mean|glove)"))
register_method("m_idpg", MethodSpec("layered", generator="idpg", injections=("hidden", "kv"),
                                     fixed=(("depth", "multi"),),
                                     description="M-IDPG: generated prompts in every layer (dnn|phm, plm_cls|static_mean|glove)"))
register_method("lpt", MethodSpec("layered", generator="lpt", injection="late", injections=("late",),
                                  defaults=(("kind", "npg"),),
                                  description="Late Prompt Tuning (Liu et al. 2022): t prompts generated from layer l's "
                                              "hidden states (options.kind npg|appg|mppg|plain) join after layer l"))
register_method("late_ipt", MethodSpec("layered", generator="ipt_{strategy}", injection="late", injections=("late",),
                                       uses_strategy=True,
                                       description="IPT's task prompt + G(x), placed after layer l instead of the input"))
BUILT_IN.update(METHODS)


@dataclass
class InstancePromptConfig:
    method: str                                 # a METHODS name
    prompt_length: int = 8                      # prompt tokens (Prompt Tuning: task vectors; IPT: G(x) vectors)
    strategy: str = "random"                    # ipt / prefix_ipt: random | pretrained | encoder
    injection: Optional[str] = None             # p_tuning_v2: kv | hidden; m_idpg: hidden | kv; prefix_ipt: kv | hidden
    task_prompt_length: int = 0                 # ipt: task-level vectors before G(x)
    insert_position: int = 0                    # s_idpg / m_idpg: where in the text (0 = before text_a)
    prefix_positions: str = "shift"             # kv methods: number the text after the prefix, or keep
    hidden_mode: str = "replace"                # hidden injection: replace or add
    late_layer: Optional[int] = None            # late injection (lpt, late_ipt, s_idpg late): the prompt joins after
                                                # this layer, 1..L-1; None: half the model's layers (the LPT authors')
    options: Dict[str, Any] = field(default_factory=dict)  # the generator's own settings
    modules_to_save: Tuple[str, ...] = ("classifier",)  # head modules that train with the prompt (as PEFT's)
    label_words: Optional[List[List[str]]] = None  # masked LMs: one word list per class, read at the mask token

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown method '{self.method}': choose one of {sorted(METHODS)}")
        spec = METHODS[self.method]
        for key, low in (("prompt_length", 1), ("task_prompt_length", 0), ("insert_position", 0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{key}={value!r} is not allowed: give an integer >= {low}")
        if spec.uses_strategy and self.strategy not in IPT_STRATEGIES:
            raise ValueError(f"unknown strategy '{self.strategy}' for method '{self.method}': "
                             f"choose one of {list(IPT_STRATEGIES)}")
        if self.late_layer is not None and (self.injection or spec.injection) != "late":
            raise ValueError(f"late_layer is read by late injection only (method '{self.method}' injects "
                             f"'{self.injection or spec.injection}'): drop late_layer, or use method 'lpt' / 'late_ipt'")
        if spec.injections and self.injection is not None and self.injection not in spec.injections:
            raise ValueError(f"method '{self.method}' takes injection {' or '.join(spec.injections)}, "
                             f"not '{self.injection}'")
        for key, value in spec.fixed:
            if key in self.options and self.options[key] != value:
                raise ValueError(f"options.{key}={self.options[key]!r} contradicts method '{self.method}' "
                                 f"({key}={value!r}): choose the other method instead")
        self.modules_to_save = tuple(self.modules_to_save)
        if spec.door == "input" or self.injection or spec.injection:
            self.check_placement_read(self.injection or spec.injection)

    def check_placement_read(self, injection: Optional[str]) -> None:
        """A placement setting the method's injection never reads is refused, not ignored (``injection`` None:
        the prompt goes before the text; the model checks again once a generator's default injection is known)."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for key, readers in PLACEMENT_READS.items():
            value = getattr(self, key)
            if value != defaults[key] and injection not in readers:
                where = f"injects '{injection}'" if injection else "puts its prompt before the text"
                raise ValueError(f"{key}={value!r} is read by {' / '.join(readers)} injection only (method "
                                 f"'{self.method}' {where}): drop {key}, or choose a method that reads it")

    def template_arguments(self) -> Tuple[str, dict]:
        """``(template, kwargs)``: the OpenPrompt template (``InstanceWiseTemplate`` or
        ``GeneratedPrefixTemplate``) and its constructor arguments (besides model, tokenizer, text) that
        make the same prompt. The 🤗 door builds from exactly these, so both doors agree by construction."""
        spec = METHODS[self.method]
        if spec.door == "input":
            options = dict(dict(spec.defaults), **self.options)
            unknown = sorted(set(options) - set(INPUT_OPTIONS))
            if unknown:
                raise ValueError(f"unknown option(s) {unknown} for method '{self.method}': valid are {list(INPUT_OPTIONS)}")
            options.setdefault("sparse", False)  # dense gradients: stock AdamW and gradient clipping
            if self.method == "prompt_tuning":
                lengths = dict(strategy="none", prompt_length=0, task_prompt_length=self.prompt_length)
            else:
                lengths = dict(strategy=self.strategy, prompt_length=self.prompt_length,
                               task_prompt_length=self.task_prompt_length)
            return "InstanceWiseTemplate", dict(lengths, **options)
        generator = spec.generator.format(strategy=self.strategy)
        section = "ipt" if generator.startswith("ipt_") else generator
        options = dict(dict(spec.defaults), **self.options, **dict(spec.fixed))
        if section == "ipt":
            options.setdefault("sparse", False)
        injection = self.injection or spec.injection
        late = {"late_layer": self.late_layer} if injection == "late" else {}
        return "GeneratedPrefixTemplate", dict(generator=generator, injection=injection,
                                               prompt_length=self.prompt_length, insert_position=self.insert_position,
                                               prefix_positions=self.prefix_positions, hidden_mode=self.hidden_mode,
                                               **late, **{section: options})

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["modules_to_save"] = list(self.modules_to_save)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "InstancePromptConfig":
        if not isinstance(values, dict):  # e.g. a JSON list: one line, not an AttributeError
            raise ValueError(f"an InstancePromptConfig is built from a mapping of its keys (e.g. {{\"method\": "
                             f"\"random_ipt\", \"prompt_length\": 4}}), got a {type(values).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown InstancePromptConfig key(s) {unknown}: valid are {sorted(names)}")
        return cls(**values)


def default_late_layer(model) -> int:
    """A late prompt's layer when the config names none: the middle of the model (the LPT authors')."""
    return max(1, int(model.config.num_hidden_layers) // 2)
