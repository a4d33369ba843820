"""Experiment YAML: OpenPrompt's sections (dataset, plm, template, verbalizer, train, test) + ours.

``load_config`` reads the YAML, applies ``section.key=value`` overrides and rejects unknown keys
with the nearest valid name, because OpenPrompt's ``from_config`` silently drops them.
"""
from __future__ import annotations

import copy
import inspect
import re
from typing import Dict, Iterable, List

import yaml

from .defaults import DEFAULTS, PROTOCOLS, SELECTIONS, flat_keys  # noqa: F401  (re-exported)
from .defaults import nearest_or_valid as _nearest
from .openprompt_schema import looks_like_openprompt, to_ours
from .run_dirs import RUN_COMMAND, command_beside
from .peer_config import check_peer  # no torch, no peer library: those load when a run builds the peer
from .schema import check_sweep_values, check_values


def merge_config(base: Dict, update: Dict, where: str, strict_sections: Dict) -> Dict:
    out = copy.deepcopy(base)
    for key, value in (update or {}).items():
        if where == "" and key not in base and key not in strict_sections:
            raise KeyError(f"unknown config key '{key}'{_nearest(key, list(base) + list(strict_sections))}")
        if where == "" and (isinstance(base.get(key), dict) or key in strict_sections):
            value = _section(key, value, base.get(key) or {})
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            for sub in value:
                if sub not in base[key]:
                    raise KeyError(f"unknown config key '{key}.{sub}'{_nearest(sub, base[key])}")
            out[key] = {**base[key], **value}
        else:
            out[key] = value
    return out


def _section(key: str, value, keys: Dict) -> Dict:
    """A section's mapping; a value in its place (``dataset: cb``, ``--set train=5``; null: an empty
    ``train:``, ``--set train=``) was a TypeError deep in the checks: one line naming the section and the fix."""
    if isinstance(value, dict):
        return value
    first = next(iter(keys), None)
    example = f"{key}: {{{first}: {value}}}" if first == "name" else f"{key}: {{{first or 'key'}: ...}}"
    shown, fix = ("null (empty)", f"write its keys under it, or remove '{key}:'") if value is None else \
        (repr(value), "write them under it")
    raise ConfigFileError(f"{key} = {shown} is not allowed: '{key}' is a section of keys"
                          f"{f' ({list(keys)[:4]}...)' if keys else ''}, not a value: {fix}, e.g. {example}")


def class_arguments(cls) -> List[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "model", "tokenizer")]


class YamlLoader(yaml.SafeLoader):
    """SafeLoader reading ``1e-5`` as a float: PyYAML follows YAML 1.1, where a float needs a dot
    (``1.0e-5``), so ``lr_prompt: 1e-5`` or ``--set train.lr_prompt=1e-5`` gave the string '1e-5'.
    Only true / false are booleans (YAML 1.2): 1.1 also reads yes / no / on / off so, and
    ``dataset.labels: [no, yes]`` became [False, True], refusing every row labelled 'no' or 'yes'."""


_BOOL = "tag:yaml.org,2002:bool"
YamlLoader.yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
                                      for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
YamlLoader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                  |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                  |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                  |[-+]?\.(?:inf|Inf|INF)
                  |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def find_config(name: str, search_dirs: Iterable[str] = ()) -> str:
    """``name`` if it is a file; else the first ``<dir>/<name>`` (and ``<dir>/<name>.yaml``) in
    ``search_dirs``, so the design card's ``--config cb_prefix_ipt.yaml`` finds ``yamls/cb_prefix_ipt.yaml``."""
    import os

    if os.path.isfile(name):
        return name
    tried = [name]
    if not os.path.isabs(name):
        for folder in search_dirs:
            suffixes = ("",) if name.endswith((".yaml", ".yml")) else ("", ".yaml")  # never 'x.yaml.yaml'
            for candidate in (os.path.join(folder, name + suffix) for suffix in suffixes):
                if candidate not in tried:
                    tried.append(candidate)
                if os.path.isfile(candidate):
                    return candidate
    raise FileNotFoundError(f"config file '{name}' not found (looked in: {', '.join(tried)}): "
                            "give a path to a YAML, or a name under yamls/")


class ConfigFileError(ValueError):
    """A config file (or --set value) that is not a readable YAML mapping; the message is one line."""


def load_yaml(text_or_stream, where: str = ""):
    """The YAML value; with ``where`` (a file name) a syntax error is one ConfigFileError naming
    ``where`` and the line:column of the error instead of PyYAML's traceback."""
    if not where:
        return yaml.load(text_or_stream, Loader=YamlLoader)
    try:
        return yaml.load(text_or_stream, Loader=YamlLoader)
    except yaml.YAMLError as e:
        at, what = _yaml_problem(e)
        raise ConfigFileError(f"{where}{at}: YAML syntax error: {what}") from None


def _yaml_problem(e) -> tuple:
    """(':line:col' or '', what went wrong) of a PyYAML error, in one line."""
    if not isinstance(e, yaml.MarkedYAMLError):
        return "", " ".join(str(e).split())
    mark = e.problem_mark or e.context_mark
    at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
    what = e.problem or e.context or "unreadable YAML"
    if e.context and e.problem and e.context_mark is not None:
        what += f" ({e.context} started at {e.context_mark.line + 1}:{e.context_mark.column + 1})"
    return at, what


def parse_override(text: str):
    if "=" not in text:
        raise ValueError(f"override '{text}' must look like section.key=value")
    path, value = text.split("=", 1)
    try:
        return path.split("."), yaml.load(value, Loader=YamlLoader)
    except yaml.YAMLError as e:
        raise ConfigFileError(f"--set {text}: the value is not YAML ({_yaml_problem(e)[1]}): quote it, "
                              f"e.g. --set '{path}=\"{value}\"', or fix the brackets") from None


def read_config_file(path: str, hint: str = "") -> Dict:
    """The mapping a config YAML holds; a missing, non-UTF-8, empty or non-mapping file is one line."""
    import os

    if not os.path.isfile(path):
        raise FileNotFoundError(f"config file '{path}' not found{hint}")
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ConfigFileError(f"config file '{path}' is not UTF-8 text (line {line}: byte {data[e.start]:#04x}): "
                              "re-save it as UTF-8") from None
    raw = load_yaml(text, path)
    if raw is None:
        raise ConfigFileError(f"config file '{path}' is empty (no keys, only blanks or comments): write its "
                              f"sections{hint or ' (see yamls/quickstart.yaml, docs/training.md)'}")
    if not isinstance(raw, dict):
        raise ConfigFileError(f"config file '{path}' holds a {type(raw).__name__}, not 'section: value' lines"
                              f"{hint}")
    return raw


# the four kinds of shipped YAML (``openprompt-ipt list`` shows them all), by the keys only that kind has; {run},
# {categories}, {ppt}: those commands as the user runs them (``read_yaml_with_overrides``' run_command)
KINDS = {"experiment": ("an experiment config", "run it with {run} --config {path}"),
         "categories": ("a category-pretraining config", "run it with {categories} --config {path}"),
         "ppt": ("a PPT pre-training config", "run it with {ppt} --config {path}"),
         "corpus": ("a pretraining corpus mapping", "a category-pretraining config reads it (corpus.mapping): run one, "
                    "e.g. {categories} --config pretrain_textcnn.yaml")}


def config_kind(raw: Dict) -> str | None:
    """Which kind of YAML ``raw`` is, from keys no other kind has; None when it cannot tell."""
    corpus = set(raw["corpus"]) if isinstance(raw.get("corpus"), dict) else set()
    if "sources" in raw:
        return "corpus"
    if "experiment" in raw or corpus & {"path", "pairs", "min_words", "max_words"}:
        return "ppt"
    if "classifier" in raw or corpus & {"mapping", "max_length", "min_tokens", "max_per_category", "balance"}:
        return "categories"
    if any(k in raw for k in ("dataset", "template", "verbalizer", "protocol", "sweep", "test", "selection")):
        return "experiment"
    return None


def read_yaml_with_overrides(path: str, overrides: Iterable[str] = (), hint: str = "", expect: str = "",
                             run_command: str = RUN_COMMAND) -> Dict:
    """The YAML at ``path`` with ``section.key=value`` overrides applied (values parsed as YAML). ``expect``
    (a ``KINDS`` name): a YAML of another kind (a pretraining config given to ``run``) is one line naming
    the command that runs it (as the user runs them: ``run_command``, what trains a run where they are); it was
    'unknown config key' for the other kind's first key."""
    raw = read_config_file(path, hint)
    kind = config_kind(raw)
    if expect and kind and kind != expect:
        commands = {name: command_beside(run_command, other) for name, other in
                    (("run", "run"), ("categories", "pretrain categories"), ("ppt", "pretrain ppt"))}
        raise ConfigFileError(f"config file '{path}' is {KINDS[kind][0]}, not {KINDS[expect][0]}: "
                              + KINDS[kind][1].format(path=path, **commands))
    for item in overrides:
        keys, value = parse_override(item)
        node = raw
        for depth, k in enumerate(keys[:-1]):
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigFileError(f"--set {item}: '{'.'.join(keys[:depth + 1])}' is {node!r}, not a section")
        node[keys[-1]] = value
    return raw


def load_config(path: str, overrides: Iterable[str] = (), notes: List[str] | None = None,
                unused: List[str] | None = None, run_command: str = RUN_COMMAND) -> Dict:
    """Our schema, or OpenPrompt's experiment schema mapped onto it (``runner/openprompt_schema.py``;
    ``notes`` collects what that mapping kept without effect). ``unused`` collects a line for each key the
    YAML or --set wrote that this setup never reads (``runner/unused.py``: ``train.lr_plm`` with a frozen PLM).
    ``run_command``: what the user ran, for the notes that name it."""
    import os

    raw = read_yaml_with_overrides(path, overrides, expect="experiment", run_command=run_command)
    if looks_like_openprompt(raw):
        raw, said = to_ours(raw, base_dir=os.path.dirname(os.path.abspath(path)), run_command=run_command)
        if notes is not None:
            notes.extend(said)
    template_name = raw.get("template", DEFAULTS["template"])
    verbalizer_name = raw.get("verbalizer", DEFAULTS["verbalizer"])
    _check_unchosen_sections(raw, template_name, verbalizer_name)
    sections = {template_name: raw.get(template_name, {}), verbalizer_name: raw.get(verbalizer_name, {})}
    if "peer" in raw:  # a peer method (runner/peers.py): Adapter, Compacter, LoRA; checked without importing them
        sections["peer"] = raw["peer"] = check_peer(raw["peer"])
    sweep = flatten_sweep(raw.pop("sweep", None) or {})
    written = copy.deepcopy(raw)  # the keys the user set: the merged config shares (and fills) some sections
    config = merge_config(DEFAULTS, raw, "", sections)
    # checks that need no OpenPrompt first: their errors answer before it loads (seconds, issue #32)
    check_values(config)  # types and ranges (runner/schema.py)
    check_sweep_values(sweep)
    check_protocol(config)
    check_train(config)
    check_init(config)
    check_head(config)  # regression task vs head, before the head's own keys are checked
    _check_class_section(config, "template", template_name)
    _check_class_section(config, "verbalizer", verbalizer_name)
    from ..data.custom import normalise
    from .prompt_files import read_template_file, read_verbalizer_file
    from .template_text import check_template_text

    read_verbalizer_file(config, os.path.dirname(os.path.abspath(path)))  # before normalise: {label: words} files
    normalise(config)
    read_template_file(config, os.path.dirname(os.path.abspath(path)))
    check_template_text(config)  # a text_b placeholder on a one-text dataset; a pair's text_b never used
    from .backbones import check_model_name  # a local checkpoint's config.json is read here; a hub one at load

    check_model_name(config["plm"]["model_name"], config["plm"]["model_path"])
    check_sweep(config, sweep)
    config["sweep"] = sweep
    if unused is not None:  # what the user wrote, never what the defaults filled in
        from .unused import unused_keys

        unused.extend(unused_keys(written, config, sweep))
    return config


def _check_unchosen_sections(raw: Dict, template: str, verbalizer: str) -> None:
    """The section of a template / verbalizer the config does not use (``--set generated_prefix.x=1`` without
    ``template: generated_prefix``) would be ignored: one line naming the chosen one (it was 'unknown config
    key', or 'did you mean verbalizer')."""
    other = [k for k in raw if k not in DEFAULTS and k not in (template, verbalizer, "peer")]
    if not other:
        return  # no OpenPrompt import on the common path (issue #32)
    import openprompt_ipt  # noqa: F401  (registers our templates)
    from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS

    for key in other:
        for kind, registry, chosen in (("template", TEMPLATE_CLASS, template), ("verbalizer", VERBALIZER_CLASS, verbalizer)):
            if key in registry:
                raise KeyError(f"section '{key}' is for {kind}: {key}, but this config uses {kind}: {chosen} (its "
                               f"keys go under '{chosen}'): set {kind}: {key}, or move the keys under '{chosen}'")


def flatten_sweep(sweep) -> Dict[str, list]:
    """``{"train": {"lr_prompt": [..]}}`` or ``{"train.lr_prompt": [..]}`` -> ``{"train.lr_prompt": [..]}``."""
    if not isinstance(sweep, dict):
        raise ValueError(f"sweep must map section.key to a list of values, got {sweep!r}")
    return flat_keys(sweep)


def _all_keys(config: Dict, prefix: str = "") -> List[str]:
    keys = []
    for key, value in config.items():
        if key == "sweep":
            continue
        keys.append(prefix + key)
        if isinstance(value, dict):
            keys += _all_keys(value, prefix + key + ".")
    return keys


NOT_SWEEPABLE = ("sweep", "template", "verbalizer", "protocol", "selection", "seed", "output_dir")


def check_sweep(config: Dict, sweep: Dict[str, list]) -> None:
    """Every sweep key must name a config value (nearest-key hint) and list at least one value."""
    import openprompt_ipt  # noqa: F401  (registers our templates)
    from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS

    template, verbalizer = config["template"], config["verbalizer"]
    class_keys = {template: class_arguments(TEMPLATE_CLASS[template]),
                  verbalizer: class_arguments(VERBALIZER_CLASS[verbalizer])}
    for key, values in sweep.items():
        parts = key.split(".")
        if parts[0] in NOT_SWEEPABLE:
            raise KeyError(f"sweep key '{key}' cannot be swept: sweep values inside dataset/plm/train/test or the "
                           f"{template}/{verbalizer} sections (protocol, seeds and method are separate runs)")
        if not isinstance(values, (list, tuple)) or len(values) == 0:
            raise ValueError(f"sweep '{key}' has no values: give a non-empty list, e.g. {key}: [a, b]")
        if parts[0] in class_keys and len(parts) == 2:
            ok = parts[1] in class_keys[parts[0]]
        else:  # a value present in the merged config (nested generator sections: the parent must be set)
            node, ok = config, True
            for part in parts:
                if not isinstance(node, dict) or part not in node:
                    ok = False
                    break
                node = node[part]
            ok = ok and len(parts) > 1 and not isinstance(node, dict)
        if not ok:
            valid = [k for k in _all_keys(config) if "." in k and k.split(".")[0] not in NOT_SWEEPABLE]
            valid += [f"{sec}.{arg}" for sec, args in class_keys.items() for arg in args]
            raise KeyError(f"unknown sweep key '{key}'{_nearest(key, valid)}")


VOCAB_ROWS = ("all", "seen")  # train.vocab_rows: Random / Pretrained IPT's table rows (runner/build.py)


def check_init(config: Dict) -> None:
    if config["init_head"] not in ("auto", True, False):
        raise ValueError(f"init_head must be auto, true or false (got {config['init_head']!r})")
    for key in ("init_from", "init_prompt_from"):
        if config[key] is not None and not isinstance(config[key], str):
            raise ValueError(f"{key} must be a folder path (got {config[key]!r})")


def check_train(config: Dict) -> None:
    """The optimizer / schedule settings (train.adam_betas, adam_eps, weight_decay, scheduler) and vocab_rows."""
    from ..training.optim import check_optimizer_settings

    t = config["train"]
    check_optimizer_settings(t["adam_betas"], t["adam_eps"], t["weight_decay"], t["scheduler"])
    if t["vocab_rows"] not in VOCAB_ROWS:  # any other value trained every row, silently
        raise ValueError(f"train.vocab_rows must be one of {list(VOCAB_ROWS)} (got {t['vocab_rows']!r}): all keeps a "
                         "table row per vocabulary id, seen only the ids the training text uses")


def check_protocol(config: Dict) -> None:
    proto = config["protocol"]
    if proto["name"] not in PROTOCOLS:
        raise ValueError(f"unknown protocol '{proto['name']}'{_nearest(str(proto['name']), PROTOCOLS)}: "
                         f"valid names are {list(PROTOCOLS)}")
    if config["selection"] not in SELECTIONS:
        raise ValueError(f"unknown selection '{config['selection']}'{_nearest(str(config['selection']), SELECTIONS)}: "
                         f"valid values are {list(SELECTIONS)}")
    if proto["name"] in ("few_shot", "low_resource") and proto["k"] is None:  # its range: runner/schema.py
        raise ValueError(f"protocol '{proto['name']}' needs protocol.k, a positive integer (got null)")
    if proto["name"] == "few_shot" and proto["k_per"] not in ("label", "total"):
        raise ValueError(f"protocol.k_per must be 'label' or 'total' (got {proto['k_per']!r})")


def _check_class_section(config: Dict, kind: str, name: str) -> None:
    import openprompt_ipt  # noqa: F401  (registers our templates)
    from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS

    registry = TEMPLATE_CLASS if kind == "template" else VERBALIZER_CLASS
    if name not in registry:
        raise KeyError(f"unknown {kind} '{name}'{_nearest(name, registry)}")
    valid = class_arguments(registry[name]) + ["file_path", "choice"]
    for key in config.get(name) or {}:
        if key not in valid:
            raise KeyError(f"unknown key '{name}.{key}' for {registry[name].__name__}{_nearest(key, valid)}")


CLASSIFYING_KEYS = ("label_words", "classes")


def check_head(cfg: Dict) -> None:
    """A regression task (STS-B, text_pair_regression) needs ``verbalizer: regression_head`` and no label
    words; a classification task must not use it. One line each, at load time (``load_config``)."""
    from ..data.custom import GENERIC, REGRESSION
    from ..data.tasks import TASKS

    name, verbalizer = cfg["dataset"]["name"], cfg["verbalizer"]
    if name not in TASKS and name not in GENERIC:
        return  # unknown names fail in get_task, with the valid list
    regression = name in REGRESSION or (name in TASKS and TASKS[name].regression)
    section = cfg.get(verbalizer) or {}
    if regression and verbalizer != "regression_head":
        raise ValueError(f"{name} is a regression task (a real-valued score per example) but verbalizer: {verbalizer} "
                         "classifies: set verbalizer: regression_head (one output on [CLS], MSE)")
    if regression:
        given = [k for k in CLASSIFYING_KEYS if section.get(k) is not None]
        if given:
            raise ValueError(f"regression_head.{given[0]}: {name} is a regression task with no classes: "
                             f"remove {verbalizer}.{given[0]}")
    elif verbalizer == "regression_head":
        raise ValueError(f"verbalizer: regression_head predicts one real-valued score, but {name} is a classification "
                         "task: use cls_head (or soft_verbalizer / manual_verbalizer with label_words)")
