"""Engineering: optimizers, the loop, metrics, checkpoints, logs, processes."""
from .metrics import METRICS, answer_metrics, binary_metrics, classification_metrics, regression_metrics
from .optim import build_optimizers
from .distributed import Runtime
from .trainer import NonFiniteLoss, TrainConfig, Trainer, evaluate, set_seed

__all__ = ["METRICS", "answer_metrics", "binary_metrics", "classification_metrics", "regression_metrics", "build_optimizers", "NonFiniteLoss", "Runtime", "TrainConfig", "Trainer", "evaluate", "set_seed"]
