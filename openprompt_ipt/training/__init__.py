"""Engineering: optimizers, the loop, metrics."""
from .metrics import METRICS, answer_metrics, classification_metrics
from .optim import build_optimizers
from .trainer import TrainConfig, Trainer, evaluate, set_seed

__all__ = ["METRICS", "answer_metrics", "classification_metrics", "build_optimizers", "TrainConfig", "Trainer", "evaluate", "set_seed"]
