"""Keys a user wrote that the chosen setup never reads: one ``note`` each, said at the start of the run.

``unused_keys(written, config)`` compares the keys of the YAML / ``--set`` (before the defaults are merged,
so a default is never reported) with what the merged ``config`` chooses: ``train.lr_plm`` with a frozen PLM,
``init_head`` without ``init_from``, ``protocol.k`` under the full protocol, an encoder key under Random IPT...
These are notes, not errors: the papers' YAMLs keep one set of rates for every row (``lr_plm`` with
``freeze: true``), and a YAML run with ``--set protocol.name=full`` keeps its few-shot keys. Import-light (no
torch, no OpenPrompt): ``load_config`` calls it before anything is built.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from ..prompting.layered_prompt import PLACEMENT_READS
from .defaults import flat_keys

# what each protocol reads (data/prepare.py; cv_folds: runs.py, few-shot sweeps only)
PROTOCOL_READS = {"full": (), "few_shot": ("k", "k_per", "dev_k", "train_source", "cv_folds"),
                  "low_resource": ("k", "dev_size")}

# what each IPT strategy's G(x) reads (prompting/input_prompt.py, generators/ipt_prefix.py); the pretrained
# table's width is the file's, so table_dim is Random IPT's only
GENERATOR_KEYS = {
    "random": ("token_source", "table_dim", "vocab_rows", "init_std", "sparse", "table_init"),
    "pretrained": ("token_source", "pretrained_path", "vocab_rows", "init_std", "sparse"),
    "encoder": ("token_source", "pretrained_path", "encoder", "encoder_hidden", "encoder_dropout", "encoder_path",
                "sequence_utilization_rate", "max_source_tokens"),
}
ALL_GENERATOR_KEYS = {k for keys in GENERATOR_KEYS.values() for k in keys}



def unused_keys(written: Dict, config: Dict, sweep: Optional[Dict] = None) -> List[str]:
    """One line per key of ``written`` (the user's YAML + --set, nested) or of ``sweep`` (dotted keys) that
    ``config`` (merged, checked) does not read: ``train.lr_plm = 1e-05 is not used: plm.freeze is true (...)``."""
    notes = []
    for key, value in flat_keys({k: v for k, v in written.items() if k != "sweep"}).items():
        why = why_unused(key, config) if value is not None else ""  # null: unset, as the defaults
        if why:
            notes.append(f"{key} = {_show(value)} is not used: {why}")
    for key, values in (sweep or {}).items():
        why = why_unused(key, config)
        if why:  # every point of such a grid trains the same model
            notes.append(f"sweep {key} = {_show(values)} is not used: {why} (each sweep point trains the same model)")
    return notes


def _show(value) -> str:
    return "null" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))


def why_unused(key: str, cfg: Dict) -> str:
    """Why ``cfg`` never reads the dotted ``key`` ('' when it does)."""
    if key in CHECKS:
        return CHECKS[key](cfg)
    section, _, rest = key.partition(".")
    return SECTION_CHECKS[section](rest, cfg) if rest and section in SECTION_CHECKS else ""


def _frozen(cfg: Dict) -> bool:
    return bool(cfg["plm"]["freeze"]) and not (cfg.get("peer") or {}).get("method")


def _lr_plm(cfg):
    return "plm.freeze is true (the PLM does not train)" if _frozen(cfg) else ""


def _lr_head(cfg):
    if cfg["verbalizer"] == "manual_verbalizer":
        return ("verbalizer manual_verbalizer has no parameters of its own (it reads the PLM's MLM head, which "
                "trains at train.lr_plm when plm.freeze is false)")
    return ""


def _frozen_dropout(cfg):
    return "plm.freeze is false (a trained PLM keeps its dropout)" if not cfg["plm"]["freeze"] else ""


def _init_head(cfg):
    return "init_from is not set (init_head says whether the head comes from that run)" if not cfg["init_from"] else ""


def _lr_instance(cfg):
    if not _has_instance_prompt(cfg):
        return f"{_method(cfg)} has no instance-wise generator (lr_instance is its rate)"
    return ""


def _warmup_ratio(cfg):
    steps = cfg["train"]["warmup_steps"]
    return f"train.warmup_steps = {steps} sets the warmup (the ratio counts when warmup_steps is 0)" if steps else ""


def _epochs(cfg):
    steps = cfg["train"]["max_steps"]
    return f"train.max_steps = {steps} sets the length of the run" if steps else ""


def _vocab_rows(cfg):
    if cfg["train"]["vocab_rows"] == "seen" and _vocab_table(cfg) is None:
        return f"{_method(cfg)} has no vocabulary table (vocab_rows: seen restricts Random / Pretrained IPT's table)"
    return ""


def _sampled_protocol(what: str) -> Callable:
    def check(cfg):
        name = cfg["protocol"]["name"]
        return f"protocol {name} samples {what} from the task's whole train split" if name != "full" else ""
    return check


def _protocol(sub: str, cfg: Dict) -> str:
    name = cfg["protocol"]["name"]
    if sub == "name" or name not in PROTOCOL_READS or sub in PROTOCOL_READS[name] and sub != "cv_folds":
        return ""
    if sub == "cv_folds" and name == "few_shot":
        return "" if cfg.get("sweep") else "there is no sweep (cv_folds picks a sweep point by k-fold CV)"
    if name == "full":
        return "protocol.name is full (the task's own splits; set protocol.name: few_shot or low_resource)"
    return f"protocol {name} reads {', '.join('protocol.' + k for k in PROTOCOL_READS[name])} only"


def _instance_wise(sub: str, cfg: Dict) -> str:
    if cfg["template"] != "instance_wise":
        return ""  # another template's section is refused by load_config
    section = cfg.get("instance_wise") or {}
    strategy = section.get("strategy", "random")
    if strategy == "none":
        if sub in ALL_GENERATOR_KEYS or sub in ("instance_dropout", "combine") or (
                sub == "prompt_length" and section.get("prompt_length")):
            return "instance_wise.strategy is none (Prompt Tuning: no instance prompt G(x))"
        return ""
    if sub in ALL_GENERATOR_KEYS and sub not in GENERATOR_KEYS.get(strategy, ALL_GENERATOR_KEYS):
        return f"instance_wise.strategy {strategy} reads {', '.join(GENERATOR_KEYS[strategy])} of these keys only"
    return ""


def _generated_prefix(sub: str, cfg: Dict) -> str:
    if cfg["template"] != "generated_prefix":
        return ""
    section = cfg.get("generated_prefix") or {}
    generator = section.get("generator", "prefix")
    part, _, key = sub.partition(".")
    injection = _injection(section)
    if part in PLACEMENT_READS and injection and injection not in PLACEMENT_READS[part]:
        return (f"injection is {injection} ({part} is read by injection "
                f"{' / '.join(PLACEMENT_READS[part])} only)")
    node = section.get(part) or {}
    if part == "prefix" and key == "reparam_hidden" and not node.get("reparameterize"):
        return "generated_prefix.prefix.reparameterize is false (no MLP)"
    if part == "ipt":
        return _ipt_prefix(key, node, generator)
    if part == "idpg":
        return _idpg(key, node)
    if part == "lpt":
        return _lpt(key, node)
    return ""


def _ipt_prefix(key: str, node: Dict, generator: str) -> str:
    strategy = generator[len("ipt_"):] if generator.startswith("ipt_") else ""
    if key in ALL_GENERATOR_KEYS and strategy in GENERATOR_KEYS and key not in GENERATOR_KEYS[strategy]:
        return f"generator {generator} reads {', '.join(GENERATOR_KEYS[strategy])} of these keys only"
    if key == "reparam_hidden" and not node.get("reparameterize"):
        return "generated_prefix.ipt.reparameterize is false (no MLP)"
    if key == "faithful_scale" and not node.get("faithful"):
        return "generated_prefix.ipt.faithful is false (G(x) reaches the layers through the projection)"
    if key == "projection_hidden" and node.get("faithful"):
        return "generated_prefix.ipt.faithful is true (G(x) is added to layer 0, no projection)"
    return ""


def _idpg(key: str, node: Dict) -> str:
    if key in ("phm_n", "phm_share_a") and node.get("layer", "phm") != "phm":
        return f"generated_prefix.idpg.layer is {node.get('layer')} (the PHM keys are read by layer: phm only)"
    encoder = node.get("encoder", "plm_cls")
    if key in ("glove_path", "glove_dim") and encoder != "glove":
        return f"generated_prefix.idpg.encoder is {encoder} (the GloVe keys are read by encoder: glove only)"
    if key in ("cache", "cache_size") and encoder != "plm_cls":
        return f"generated_prefix.idpg.encoder is {encoder} (cache keeps plm_cls representations only)"
    if key == "cache_size" and node.get("cache") is False:
        return "generated_prefix.idpg.cache is false (nothing is kept)"
    if key in ("sharing", "input_from") and node.get("depth", "multi") == "single":
        return "generated_prefix.idpg.depth is single (one generator at the input)"
    return ""


def _lpt(key: str, node: Dict) -> str:
    """generators/late.py: the plain late prompt has no generator; only it reads init_std."""
    kind = node.get("kind", "npg")
    if key in ("bottleneck", "dropout") and kind == "plain":
        return "generated_prefix.lpt.kind is plain (t trained vectors, no generator)"
    if key == "init_std" and kind != "plain":
        return f"generated_prefix.lpt.kind is {kind} (init_std starts the plain late prompt only)"
    return ""


def _injection(section: Dict) -> str:
    """The generated_prefix template's injection, its generator's default when unset (prompting/layered_prompt.py)."""
    if section.get("injection"):
        return str(section["injection"])
    generator = section.get("generator", "prefix")
    if generator == "idpg":
        return "input" if (section.get("idpg") or {}).get("depth") == "single" else "hidden"
    return {"lpt": "late"}.get(generator, "kv" if generator == "prefix" or generator.startswith("ipt_") else "")


OPENPROMPT_TEMPLATES = ("manual_template", "mixed_template", "ptuning_template", "soft_template", "ptr_template",
                        "prefix_tuning_template")


def _has_instance_prompt(cfg: Dict) -> bool:
    section = cfg.get(cfg["template"]) or {}
    if (cfg.get("peer") or {}).get("method"):
        return False
    if cfg["template"] == "instance_wise":
        return section.get("strategy", "random") != "none"
    if cfg["template"] == "generated_prefix":
        return section.get("generator", "prefix") != "prefix"
    # OpenPrompt's own templates make one prompt per task; a template registered by a user: not ours to say
    return cfg["template"] not in OPENPROMPT_TEMPLATES


def _vocab_table(cfg: Dict) -> Optional[str]:
    section = cfg.get(cfg["template"]) or {}
    if (cfg.get("peer") or {}).get("method"):
        return None
    if cfg["template"] == "instance_wise":
        return "yes" if section.get("strategy", "random") in ("random", "pretrained") else None
    if cfg["template"] == "generated_prefix":
        return "yes" if section.get("generator") in ("ipt_random", "ipt_pretrained") else None
    return None if cfg["template"] in OPENPROMPT_TEMPLATES else "unknown"


def _method(cfg: Dict) -> str:
    """The template and its strategy / generator as the YAML names them."""
    section = cfg.get(cfg["template"]) or {}
    if (cfg.get("peer") or {}).get("method"):
        return f"peer.method {cfg['peer']['method']}"
    if cfg["template"] == "instance_wise":
        return f"instance_wise.strategy {section.get('strategy', 'random')}"
    if cfg["template"] == "generated_prefix":
        return f"generated_prefix.generator {section.get('generator', 'prefix')}"
    return f"template {cfg['template']}"


CHECKS: Dict[str, Callable[[Dict], str]] = {
    "train.lr_plm": _lr_plm,
    "train.lr_head": _lr_head,
    "plm.frozen_dropout": _frozen_dropout,
    "init_head": _init_head,
    "train.lr_instance": _lr_instance,
    "train.warmup_ratio": _warmup_ratio,
    "train.epochs": _epochs,
    "train.vocab_rows": _vocab_rows,
    "dataset.max_train": _sampled_protocol("K examples"),
    "dataset.dev_from_train": _sampled_protocol("its dev set"),
}
SECTION_CHECKS: Dict[str, Callable[[str, Dict], str]] = {
    "protocol": _protocol,
    "instance_wise": _instance_wise,
    "generated_prefix": _generated_prefix,
}
