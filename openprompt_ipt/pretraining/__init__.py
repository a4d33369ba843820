"""Category pretraining of IPT (§4.2, appendix A.3): a 13-category corpus, TextCNN / LSTM / MLP
classifiers, and the exports Pretrained IPT (table) and Encoder IPT (body) load."""
from .categories import CATEGORIES, canonical_category
from .classifier import CategoryClassifier, ClassifierConfig
from .corpus import Corpus, Example, build_corpus, format_histogram, load_mapping, parse_mapping
from .train import PretrainConfig, train_classifier

__all__ = ["CATEGORIES", "canonical_category", "CategoryClassifier", "ClassifierConfig", "Corpus", "Example",
           "build_corpus", "format_histogram", "load_mapping", "parse_mapping", "PretrainConfig", "train_classifier"]
