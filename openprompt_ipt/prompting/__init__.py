"""A prompt assembled from a generator and its injection, with no host in sight.

Both front doors call these functions: the OpenPrompt templates (``templates/``) and the
🤗 Transformers wrapper (``hf/``). What differs between the doors is only where the instance's
tokens and the input embeddings come from (template flags vs. the tokenizer's own output).
"""
from .input_prompt import STRATEGY_NAMES, build_input_prompt, input_prompt_vectors
from .layered_prompt import Placement, build_layered_generator, place_prompts, release_prompts

__all__ = ["STRATEGY_NAMES", "build_input_prompt", "input_prompt_vectors", "Placement", "build_layered_generator",
           "place_prompts", "release_prompts"]
