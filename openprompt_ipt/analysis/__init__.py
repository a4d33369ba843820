"""Analyses of trained prompts (IPT §5.4: nearest vocabulary tokens of the generated prompts)."""
from .nearest_tokens import (INPUT_SPACE_ERROR, cosine_top_k, excluded_token_mask, format_markdown,
                             nearest_input_tokens, nearest_tokens_for_run, prompt_vectors_for_rows)

__all__ = ["INPUT_SPACE_ERROR", "cosine_top_k", "excluded_token_mask", "format_markdown", "nearest_input_tokens",
           "nearest_tokens_for_run", "prompt_vectors_for_rows"]
