"""Analyses of trained prompts (IPT §5.4: nearest vocabulary tokens of the generated prompts) and of runs
(per-epoch learning curves)."""
from .curves import curves_figure, curves_table, epoch_curve
from .nearest_tokens import (INPUT_SPACE_ERROR, cosine_top_k, excluded_token_mask, format_markdown,
                             nearest_input_tokens, nearest_tokens_for_run, prompt_vectors_for_rows)

__all__ = ["INPUT_SPACE_ERROR", "cosine_top_k", "curves_figure", "curves_table", "epoch_curve", "excluded_token_mask",
           "format_markdown", "nearest_input_tokens",
           "nearest_tokens_for_run", "prompt_vectors_for_rows"]
