"""openprompt_ipt: instance-wise prompts (IPT, IDPG, LPT) for OpenPrompt (``openprompt/``) and 🤗 Transformers (``hf/``).

Importing the package is cheap (no OpenPrompt, transformers or datasets): a command that only parses
its arguments or reads a config answers at once (issue #32). What OpenPrompt needs still happens
before any use of it: ``openprompt/hook.py`` applies the transformers compatibility shims just before
OpenPrompt is first imported, and registers our templates and heads (``openprompt/registry.py``: by
name in ``TEMPLATE_CLASS`` / ``VERBALIZER_CLASS`` for ``load_template`` / ``load_verbalizer``, their
default config sections, the batch keys ``InputFeatures`` must keep) as soon as it is.

Public names are imported on first use: ``_LAZY`` maps each to the module that defines it. A new
top-level name is one line there (and in ``__all__`` if it is part of the API).
"""
import importlib

from .openprompt import hook as openprompt_hook

openprompt_hook.install()

__version__ = "0.1.0"

# public name -> module (relative to this package) that defines it
_LAZY = {
    "InstanceWiseTemplate": ".openprompt.templates",
    "GeneratedPrefixTemplate": ".openprompt.templates",
    "ClsHeadVerbalizer": ".openprompt.verbalizers",
    "RegressionHeadVerbalizer": ".openprompt.verbalizers",
    "load_backbone": ".runner.backbones",  # a backbone by the names the YAMLs accept, as load_plm returns
    "backbone_path": ".runner.backbones",  # the folder a backbone name resolves to (the offline MiniLM's, a local dir)
    "optimizer_groups": ".openprompt.param_groups",  # template + verbalizer + PLM groups for a stock optimizer
    # warning categories of the OpenPrompt door, for warnings.filterwarnings(..., category=...)
    "TemplateNotTrainedWarning": ".openprompt.templates.persistence",
    "MissingContentFlagWarning": ".injection.batch",
    # the 🤗 Transformers door (docs/transformers.md)
    "InstancePromptConfig": ".hf",
    "InstancePromptModel": ".hf",
    "get_instance_prompt_model": ".hf",
}

__all__ = ["GeneratedPrefixTemplate", "InstanceWiseTemplate", "load_backbone", "optimizer_groups", "backbone_path",
           "InstancePromptConfig", "InstancePromptModel", "get_instance_prompt_model", "TemplateNotTrainedWarning",
           "MissingContentFlagWarning", "__version__"]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
