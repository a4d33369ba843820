"""How a prompt is made from an instance."""
from .encoders import ENCODER_BODIES, EncoderConfig, PromptEncoder
from .strategies import STRATEGIES, EncoderIPT, InstancePromptGenerator, PretrainedIPT, RandomIPT
from .vocab_table import VocabPromptTable, load_table, save_table, tokenizer_fingerprint

__all__ = ["ENCODER_BODIES", "EncoderConfig", "PromptEncoder", "STRATEGIES", "EncoderIPT",
           "InstancePromptGenerator", "PretrainedIPT", "RandomIPT", "VocabPromptTable", "load_table", "save_table",
           "tokenizer_fingerprint"]
