"""Where a prompt enters the PLM."""
from .input_embeddings import max_positions, prepend, trim_outputs

__all__ = ["max_positions", "prepend", "trim_outputs"]
