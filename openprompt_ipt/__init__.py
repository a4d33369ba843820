"""openprompt_ipt: instance-wise prompts (IPT, IDPG) for OpenPrompt.

Importing the package applies the transformers compatibility shims OpenPrompt needs and registers
our templates in OpenPrompt's own ``TEMPLATE_CLASS`` so ``load_template`` finds them by name.
"""
from . import _moved, compat

compat.apply()
_moved.install()  # old runner import paths (openprompt_ipt.config, ...) for one release

from openprompt.prompts import TEMPLATE_CLASS  # noqa: E402  (after the shims)

from .templates import GeneratedPrefixTemplate, InstanceWiseTemplate  # noqa: E402

TEMPLATE_CLASS["instance_wise"] = InstanceWiseTemplate
TEMPLATE_CLASS["generated_prefix"] = GeneratedPrefixTemplate

from openprompt.prompts import VERBALIZER_CLASS  # noqa: E402

from .verbalizers import ClsHeadVerbalizer  # noqa: E402

VERBALIZER_CLASS["cls_head"] = ClsHeadVerbalizer  # IDPG's [CLS] classification head

__version__ = "0.1.0"
__all__ = ["GeneratedPrefixTemplate", "InstanceWiseTemplate", "__version__"]
