"""Make our templates first-class citizens of OpenPrompt's own pipeline (issue #21). ``register_ready``
runs when OpenPrompt, or our templates / verbalizers package, has been imported (``hook.py``:
not when ``openprompt_ipt`` is, which must stay fast); ``register()`` does everything at once. Every
step is idempotent.

* **Templates by name**: ``instance_wise`` / ``generated_prefix`` in ``TEMPLATE_CLASS``, so
  ``openprompt.prompts.load_template(config, model=..., tokenizer=...)`` builds them.
* **Heads by name**: ``cls_head`` (IDPG's [CLS] classification head) and ``regression_head`` (its
  one-output MSE twin, STS-B) in ``VERBALIZER_CLASS``, so
  ``load_verbalizer`` builds it.
* **Default config sections**: OpenPrompt's ``get_default_config()`` (used by ``get_user_config`` /
  ``get_config``) gains an ``instance_wise`` and a ``generated_prefix`` section (``parent_config:
  template``, the constructor defaults, an ``optimize`` block like ``mixed_template``'s), so a user YAML
  only writes what it changes. The generator sub-sections (``prefix`` / ``ipt`` / ``idpg``) default to
  empty nodes: yacs cannot merge a mapping onto ``None``.
* **Batch keys**: the input flags our templates add (``instance_token_ids``, ``text_part_ids``) and the
  ``position_ids`` kv-prefix templates set. ``InputFeatures`` only keeps, tensorises and passes on
  keys in its class lists: without them ``PromptDataLoader`` left the flag a Python list,
  ``to_dict()`` dropped it and the generator silently read [CLS] and template words (issue #21).
"""
from __future__ import annotations

import inspect
import logging
import sys
from typing import Collection

from . import label_word_notice

BATCH_KEYS = ("instance_token_ids", "text_part_ids", "position_ids")
_SKIP_ARGS = {"self", "model", "tokenizer", "vocab_rows"}  # given by load_template's kwargs / the runner
_GENERATOR_SECTIONS = ("prefix", "ipt", "idpg", "lpt")


def _templates():
    from .templates import GeneratedPrefixTemplate, InstanceWiseTemplate

    return {"instance_wise": InstanceWiseTemplate, "generated_prefix": GeneratedPrefixTemplate}


def register_templates() -> None:
    from openprompt.prompts import TEMPLATE_CLASS

    TEMPLATE_CLASS.update(_templates())


def register_verbalizers() -> None:
    from openprompt.prompts import VERBALIZER_CLASS

    from .verbalizers import ClsHeadVerbalizer, RegressionHeadVerbalizer

    VERBALIZER_CLASS["cls_head"] = ClsHeadVerbalizer
    VERBALIZER_CLASS["regression_head"] = RegressionHeadVerbalizer


class _OurKeysAreExpected(logging.Filter):
    """``InputFeatures.__init__`` warns about every keyword outside its signature, registered or not;
    drop that warning for our registered keys only (OpenPrompt logs on the root logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(f"unexpected key words: {key} to InputFeatures" in message for key in BATCH_KEYS)


def register_batch_keys() -> None:
    from openprompt.data_utils import InputFeatures

    for key in BATCH_KEYS:
        if key not in InputFeatures.all_keys:
            InputFeatures.add_keys(key)
        if key not in InputFeatures.tensorable_keys:
            InputFeatures.add_tensorable_keys(key)
        if not hasattr(InputFeatures, key):  # keys()/to_dict()/to() getattr every registered key
            setattr(InputFeatures, key, None)
    root = logging.getLogger()
    if not any(isinstance(f, _OurKeysAreExpected) for f in root.filters):
        root.addFilter(_OurKeysAreExpected())


def default_section(cls):
    """The OpenPrompt config section of one of our templates: its constructor defaults."""
    from yacs.config import CfgNode

    node = CfgNode(new_allowed=True)
    node.parent_config = "template"
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name in _SKIP_ARGS or param.default is inspect.Parameter.empty:
            continue
        if name in _GENERATOR_SECTIONS or isinstance(param.default, dict):
            node[name] = CfgNode(dict(param.default or {}), new_allowed=True)
        else:
            node[name] = param.default
    node.optimize = CfgNode({"name": "AdamW", "lr": 0.00005, "betas": [0.9, 0.999], "adam_epsilon": 1.0e-8,
                             "weight_decay": 0.0, "no_decay": ["bias", "LayerNorm.weight"],
                             "scheduler": {"num_warmup_steps": 0}}, new_allowed=True)
    return node


def register_default_config() -> None:
    import openprompt.config as op_config
    import openprompt.default_config as op_default

    original = op_default.get_default_config
    if getattr(original, "_ipt_sections", False):
        return

    def get_default_config():
        cfg = original()
        for name, cls in _templates().items():
            cfg[name] = default_section(cls)
        return cfg

    get_default_config._ipt_sections = True
    get_default_config.__doc__ = original.__doc__
    op_default.get_default_config = get_default_config
    op_config.get_default_config = get_default_config  # imported there by name


def register() -> None:
    register_templates()
    register_verbalizers()
    register_batch_keys()
    register_default_config()
    label_word_notice.install()


# our packages OpenPrompt finds by name -> what registers them
_PACKAGES = {"openprompt_ipt.openprompt.templates": register_templates, "openprompt_ipt.openprompt.verbalizers": register_verbalizers}


def register_ready(finished: Collection[str]) -> None:
    """Register what is complete (``finished``: the modules whose import has run to the end). Nothing
    before OpenPrompt is loaded; one of our packages still being imported (it is what imported
    OpenPrompt) is left to the call made when it finishes."""
    if "openprompt" not in finished:
        return
    register_batch_keys()
    register_default_config()
    label_word_notice.install()
    for name, register_package in _PACKAGES.items():
        if name in sys.modules and name not in finished:
            continue
        register_package()  # imports the package when nobody has yet
