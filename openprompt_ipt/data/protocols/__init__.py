"""Sampling protocols for small data (docs/protocols.md): ``few_shot`` (IPT §5.1: K per label for train and dev,
k-fold CV) and ``low_resource`` (IDPG §4.4: K examples and a dev set). ``data/prepare.py`` chooses among them."""
from .few_shot import cv_folds, few_shot_splits, sample_per_label
from .low_resource import low_resource_splits

__all__ = ["cv_folds", "few_shot_splits", "sample_per_label", "low_resource_splits"]
