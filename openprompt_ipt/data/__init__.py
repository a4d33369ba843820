"""Task data and batching."""
from .features import collate, encode_examples, make_loader
from .superglue import CB_LABELS, PAIR_TASKS, RTE_LABELS, load_cb, load_pair_task
from .lookup import get_task
from .tasks import TASKS, Task

__all__ = ["collate", "encode_examples", "make_loader", "CB_LABELS", "PAIR_TASKS", "RTE_LABELS", "load_cb",
           "load_pair_task", "TASKS", "Task", "get_task"]
