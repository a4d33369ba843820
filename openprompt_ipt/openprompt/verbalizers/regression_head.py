"""``regression_head``: one real-valued output on the first token's final state, trained with MSE.

The IDPG authors train STS-B with fairseq's ``sentence_prediction`` task and ``--regression-target
--num-classes 1``: the same ``RobertaClassificationHead`` on ``<s>`` ([CLS]) as for classification, with
one output, and the criterion's mean squared error. So this is ``cls_head`` with one output, flagged
``regression`` so the trainer uses MSE and reports correlations (``training/trainer.py``).
"""
from __future__ import annotations

from typing import Optional, Sequence

from .cls_head import ClsHeadVerbalizer


class RegressionHeadVerbalizer(ClsHeadVerbalizer):
    regression = True  # trainer: MSE loss, Pearson / Spearman; predict: a score instead of a label

    def __init__(self, tokenizer=None, model=None, classes: Optional[Sequence[str]] = None,
                 num_classes: Optional[int] = None, dropout: Optional[float] = None):
        if (num_classes not in (None, 1)) or (classes is not None and len(classes) != 1):
            raise ValueError(f"regression_head predicts one real-valued score, but {num_classes or len(classes)} classes "
                             "were asked for: a classification task takes cls_head or a verbalizer with label_words")
        super().__init__(tokenizer=tokenizer, model=model, classes=None, num_classes=1, dropout=dropout)
