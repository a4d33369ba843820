"""Where a prompt enters the PLM, as OpenPrompt templates."""
from .generated_prefix import GeneratedPrefixTemplate
from .instance_wise import InstanceWiseTemplate

__all__ = ["GeneratedPrefixTemplate", "InstanceWiseTemplate"]
