"""The 🤗 Transformers front door: instance-wise prompts on a plain ``AutoModelFor...`` model,
trained with the ``Trainer``; no OpenPrompt involved (docs/transformers.md)."""
from ..prompting.layered_prompt import NoSecondTextWarning  # the door's per-batch warning, to filter by category
from .config import METHODS, InstancePromptConfig, MethodSpec, register_method
from .instance_tokens import instance_tokens
from .model import InstancePromptModel, NonFiniteWeightsWarning, SharedBaseWarning, get_instance_prompt_model
from .trainer_compat import allow_numpy_in_rng_states

allow_numpy_in_rng_states()  # transformers < 4.47 on torch >= 2.6: the Trainer's resume reads numpy RNG states

__all__ = ["METHODS", "InstancePromptConfig", "MethodSpec", "register_method", "instance_tokens",
           "InstancePromptModel", "NonFiniteWeightsWarning", "NoSecondTextWarning", "SharedBaseWarning",
           "get_instance_prompt_model"]
