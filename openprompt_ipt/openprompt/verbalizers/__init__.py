"""Heads that OpenPrompt's ``load_verbalizer`` finds by name (registered in ``VERBALIZER_CLASS`` on import)."""
from .cls_head import ClsHeadVerbalizer
from .regression_head import RegressionHeadVerbalizer

__all__ = ["ClsHeadVerbalizer", "RegressionHeadVerbalizer"]
