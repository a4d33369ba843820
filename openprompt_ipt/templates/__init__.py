"""Where a prompt enters the PLM, as OpenPrompt templates."""
from .instance_wise import InstanceWiseTemplate

__all__ = ["InstanceWiseTemplate"]
