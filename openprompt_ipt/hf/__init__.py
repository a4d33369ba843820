"""The 🤗 Transformers front door: instance-wise prompts on a plain ``AutoModelFor...`` model,
trained with the ``Trainer``; no OpenPrompt involved (docs/transformers.md)."""
from .config import METHODS, InstancePromptConfig, MethodSpec, register_method
from .instance_tokens import instance_tokens
from .model import InstancePromptModel, get_instance_prompt_model

__all__ = ["METHODS", "InstancePromptConfig", "MethodSpec", "register_method", "instance_tokens",
           "InstancePromptModel", "get_instance_prompt_model"]
