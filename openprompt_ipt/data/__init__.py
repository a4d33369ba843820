"""Task data and batching."""
from .features import collate, encode_examples, make_loader
from .superglue import CB_LABELS, load_cb

__all__ = ["collate", "encode_examples", "make_loader", "CB_LABELS", "load_cb"]
