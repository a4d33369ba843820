"""openprompt_ipt: instance-wise prompts (IPT, IDPG) for OpenPrompt.

Importing the package applies the transformers compatibility shims OpenPrompt needs and registers
our templates and heads with OpenPrompt (``openprompt_registry``): by name in ``TEMPLATE_CLASS`` /
``VERBALIZER_CLASS`` so ``load_template`` / ``load_verbalizer`` find them, their default config
sections, and the batch keys ``InputFeatures`` must keep.
"""
from . import _moved, compat

compat.apply()
_moved.install()  # old runner import paths (openprompt_ipt.config, ...) for one release

from . import openprompt_registry  # noqa: E402  (after the shims)
from .templates import GeneratedPrefixTemplate, InstanceWiseTemplate  # noqa: E402
from .verbalizers import ClsHeadVerbalizer, RegressionHeadVerbalizer  # noqa: E402,F401  (kept importable from the package)

openprompt_registry.register()

__version__ = "0.1.0"
__all__ = ["GeneratedPrefixTemplate", "InstanceWiseTemplate", "__version__"]
