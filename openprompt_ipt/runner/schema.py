"""The type and range of every numeric (and on/off) config key, in one table.

``load_config`` checks the merged config against ``SCHEMA`` before anything is built or written, so
``train.epochs=abc``, ``train.epochs=0``, a negative learning rate or ``prompt_length=2.7`` are one
line naming the key, the value and what is allowed (docs/bad_input.md). Keys are dotted config paths;
template / generator / peer sections are listed under the section names the runner reads; ``PRETRAIN``
and ``PPT`` are the pretraining YAMLs' tables. A key not in the table is not checked here (strings and lists have their own checks). Kept import-light: no
torch, no OpenPrompt, so a bad value answers before the heavy imports.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional


class ConfigValueError(ValueError):
    """A config value of the wrong type or out of range; the message is one line."""


@dataclass(frozen=True)
class Number:
    """An int or float key: ``low``/``high`` bounds (``*_open``: the bound itself is excluded)."""
    kind: type = float
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    null: str = ""  # what null means when null is allowed ("" = null is not allowed)

    def allowed(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            what += f" in {'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}{')' if self.high_open else ']'}"
        elif self.low is not None:
            what += f" {'>' if self.low_open else '>='} {_num(self.low)}"
        elif self.high is not None:
            what += f" {'<' if self.high_open else '<='} {_num(self.high)}"
        return what + (f", or null ({self.null})" if self.null else "")

    def normalise(self, value):
        """``value`` as this key's type (an integral float such as 2.0 -> 2), or None if not allowed."""
        if value is None:
            return None if not self.null else ("null", None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        if self.kind is int:
            if isinstance(value, float) and not value.is_integer():
                return None  # 2.7 must not become 2
            value = int(value)  # an int for an int key (10.0 -> 10); a float key keeps an int as written
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return None
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            return None
        return ("ok", value)


@dataclass(frozen=True)
class Flag:
    """An on/off key: YAML true / false only (a quoted "false" would read as on)."""
    null: str = ""

    def allowed(self) -> str:
        return "true or false" + (f", or null ({self.null})" if self.null else "")

    def normalise(self, value):
        if value is None:
            return ("null", None) if self.null else None
        return ("ok", value) if isinstance(value, bool) else None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


INT_POS = Number(int, low=1)
INT_NONNEG = Number(int, low=0)
SEED = Number(int, low=0, high=2**32 - 1)  # numpy's np.random.seed refuses any other (after a seed's run)
POSITIVE = Number(float, low=0, low_open=True)
FRACTION_OPEN = Number(float, low=0, high=1, low_open=True, high_open=True)
DROPOUT = Number(float, low=0, high=1, high_open=True)
INIT_STD = Number(float, low=0, low_open=True, null="the PLM's embedding std")
TABLE_DIM = Number(int, low=1, null="the PLM's hidden size")

# the IPT generator's keys: instance_wise (Prompt Tuning + IPT) and generated_prefix.ipt (Prefix + IPT)
IPT = {"table_dim": TABLE_DIM, "init_std": INIT_STD, "sparse": Flag(),
       "encoder_hidden": INT_POS, "encoder_dropout": DROPOUT,
       "sequence_utilization_rate": Number(float, low=0, high=1, low_open=True),
       "max_source_tokens": INT_POS}

SCHEMA: Dict[str, object] = {
    "seed": SEED,
    # dataset
    "dataset.dev_from_train": FRACTION_OPEN,
    "dataset.test_from_train": Number(float, low=0, high=1, low_open=True, high_open=True,
                                      null="the task's own test split"),
    "dataset.max_train": Number(int, low=1, null="no cap"),
    "dataset.max_eval": Number(int, low=1, null="no cap"),
    "dataset.skip_bad_rows": Flag(),
    # plm
    "plm.freeze": Flag(),
    "plm.frozen_dropout": Flag(),
    "plm.max_seq_length": Number(int, low=8),
    # train
    "train.epochs": INT_POS,
    "train.max_steps": Number(int, low=1, null="train.epochs decides"),
    "train.batch_size": INT_POS,
    "train.lr_prompt": POSITIVE,
    "train.lr_head": Number(float, low=0, low_open=True, null="train.lr_prompt's rate"),
    "train.lr_plm": POSITIVE,
    "train.lr_instance": Number(float, low=0, null="train.lr_prompt's rate"),
    "train.weight_decay": Number(float, low=0),
    "train.adam_eps": POSITIVE,
    "train.warmup_steps": INT_NONNEG,
    "train.warmup_ratio": Number(float, low=0, high=1, high_open=True),
    "train.gradient_accumulation_steps": INT_POS,
    "train.max_grad_norm": Number(float, low=0),  # 0: no clipping
    "train.checkpoint_every": Number(int, low=-1),  # 0: at epoch ends only; -1: no checkpoints
    "train.checkpoint_minutes": Number(float, low=0, null="by steps only"),  # 0 / null: by steps only
    "train.keep_checkpoints": INT_POS,
    "test.batch_size": INT_POS,
    # protocol (docs/protocols.md)
    "protocol.k": Number(int, low=1, null="full protocol"),
    "protocol.dev_k": Number(int, low=1, null="protocol.k"),
    "protocol.cv_folds": Number(int, low=2),
    "protocol.dev_size": INT_POS,
    # templates
    "instance_wise.prompt_length": INT_NONNEG,  # 0 only with strategy none (the template says so)
    "instance_wise.task_prompt_length": INT_NONNEG,
    "instance_wise.instance_dropout": DROPOUT,
    **{f"instance_wise.{k}": v for k, v in IPT.items()},
    "generated_prefix.prompt_length": INT_POS,
    "generated_prefix.insert_position": INT_NONNEG,
    "generated_prefix.prefix.reparameterize": Flag(),
    "generated_prefix.prefix.reparam_hidden": INT_POS,
    "generated_prefix.prefix.init_std": INIT_STD,
    "generated_prefix.ipt.task_length": Number(int, low=1, null="the template's prompt_length"),
    "generated_prefix.ipt.instance_length": Number(int, low=1, null="the template's prompt_length"),
    "generated_prefix.ipt.faithful": Flag(),
    "generated_prefix.ipt.faithful_scale": Number(float, low=0),
    "generated_prefix.ipt.projection_hidden": INT_POS,
    "generated_prefix.ipt.reparameterize": Flag(),
    "generated_prefix.ipt.reparam_hidden": INT_POS,
    **{f"generated_prefix.ipt.{k}": v for k, v in IPT.items()},
    "generated_prefix.idpg.hidden": INT_POS,
    "generated_prefix.idpg.phm_n": INT_POS,
    "generated_prefix.idpg.phm_share_a": Flag(null="yes for single depth, no for multi"),
    "generated_prefix.idpg.glove_dim": Number(int, low=1, null="the file's width"),
    "generated_prefix.idpg.cache": Flag(),
    "generated_prefix.idpg.cache_size": INT_POS,
    "generated_prefix.idpg.residual": Flag(),
    "generated_prefix.idpg.layernorm": Flag(),
    "generated_prefix.idpg.init_std": INIT_STD,
    # the model's layer count bounds late_layer from above; the template checks that when the PLM is loaded
    "generated_prefix.late_layer": Number(int, low=1, null="no late placement (injection late needs it)"),
    "generated_prefix.lpt.bottleneck": INT_POS,
    "generated_prefix.lpt.dropout": DROPOUT,
    "generated_prefix.lpt.init_std": INIT_STD,
    # verbalizers
    "cls_head.dropout": Number(float, low=0, high=1, high_open=True, null="the PLM's classifier dropout"),
    # peer methods (runner/peers.py)
    "peer.bottleneck": INT_POS,
    "peer.phm_dim": INT_POS,
    "peer.r": INT_POS,
    "peer.alpha": POSITIVE,
    "peer.shared_phm_rule": Flag(),
}


# the pretraining YAMLs (pretraining/config.py: yamls/pretrain_{textcnn,lstm,mlp}.yaml; pretraining/ppt.py:
# yamls/pretrain_ppt*.yaml) have their own sections, checked by the same rules
PRETRAIN: Dict[str, object] = {
    "seed": SEED,
    "corpus.max_length": INT_POS,
    "corpus.min_tokens": INT_NONNEG,
    "corpus.max_per_category": Number(int, low=1, null="no cap"),
    "corpus.dev_fraction": FRACTION_OPEN,
    "corpus.test_fraction": FRACTION_OPEN,
    "classifier.dim": TABLE_DIM,
    "classifier.hidden": INT_POS,
    "classifier.dropout": DROPOUT,
    "classifier.sparse": Flag(),
    "train.epochs": INT_POS,
    "train.batch_size": INT_POS,
    "train.lr": POSITIVE,
    "train.lr_embedding": POSITIVE,
    "train.weight_decay": Number(float, low=0),
    "train.patience": INT_POS,
    "train.max_grad_norm": Number(float, low=0),
    "train.max_minutes": Number(float, low=0, low_open=True, null="no time limit"),
}
PPT: Dict[str, object] = {
    "seed": SEED,
    "corpus.pairs": INT_POS,
    "corpus.min_words": INT_POS,
    "corpus.max_words": INT_POS,
    "corpus.dev_fraction": Number(float, low=0, high=0.5, low_open=True, high_open=True),
    "corpus.test_fraction": Number(float, low=0, high=0.5, low_open=True, high_open=True),
    "train.epochs": INT_POS,
    "train.batch_size": INT_POS,
    "train.lr_prompt": POSITIVE,
    "train.lr_head": POSITIVE,
    "train.max_seq_length": Number(int, low=8),
    "train.checkpoint_every": Number(int, low=-1),
}


def check_value(key: str, value, spec=None):
    """``value`` normalised for ``key`` (``spec`` default: ``SCHEMA[key]``; unlisted keys pass as
    they are); a ConfigValueError naming the key, the value and what is allowed otherwise."""
    spec = spec or SCHEMA.get(key)
    if spec is None:
        return value
    result = spec.normalise(value)
    if result is None:
        shown = "null" if value is None else repr(value)
        raise ConfigValueError(f"{key} = {shown} is not allowed: give {spec.allowed()}")
    return result[1]


def check_values(config: Dict, prefix: str = "", schema: Dict[str, object] = SCHEMA) -> None:
    """Every key of ``config`` (nested sections included) that ``schema`` lists, normalised in place."""
    for key, value in config.items():
        if key == "sweep":
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            check_values(value, path + ".", schema)
        elif path in schema:
            config[key] = check_value(path, value, schema[path])
    if not prefix and schema is SCHEMA:
        _check_dependent(config)


def _check_dependent(config: Dict) -> None:
    """Ranges that depend on another key: an instance-wise prompt needs prompt_length >= 1."""
    section = config.get("instance_wise")
    if config.get("template") == "instance_wise" and isinstance(section, dict) \
            and section.get("strategy", "random") != "none" and section.get("prompt_length") == 0:
        raise ConfigValueError(f"instance_wise.prompt_length = 0 is not allowed with strategy "
                               f"{section.get('strategy', 'random')}: give an integer >= 1 (0 only with strategy: none)")


def check_sweep_values(sweep: Dict[str, list]) -> None:
    """Each value a ``sweep:`` grid lists for a key, checked as that key (normalised in place)."""
    for key, values in sweep.items():
        if key in SCHEMA and isinstance(values, (list, tuple)):
            sweep[key] = [check_value(f"sweep {key}", v, SCHEMA[key]) for v in values]
