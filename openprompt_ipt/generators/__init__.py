"""How a prompt is made from an instance."""
from .encoders import ENCODER_BODIES, EncoderConfig, PromptEncoder
from .idpg import IDPGConfig, IDPGGenerator
from .ipt_prefix import IPTPrefixConfig, IPTPrefixGenerator
from .late import LatePromptGenerator, LPTConfig
from .layered import GeneratorContext, InstanceInputs, LayerPromptGenerator
from .phm import PHMLinear
from .prefix import PrefixConfig, PrefixGenerator
from .registry import GENERATORS
from .strategies import (STRATEGIES, EncoderIPT, InstancePromptGenerator, PretrainedIPT, RandomIPT, cannot_rebuild,
                         check_exported_tables, exported_tables, exports_in_weights, rebuilding_saved)
from .vocab_table import (VocabPromptTable, load_table, save_table, tokenization_fingerprint, tokenizer_fingerprint,
                          use_sparse_rows)

__all__ = ["ENCODER_BODIES", "EncoderConfig", "PromptEncoder", "IDPGConfig", "IDPGGenerator", "IPTPrefixConfig",
           "IPTPrefixGenerator", "LatePromptGenerator", "LPTConfig", "GeneratorContext", "InstanceInputs", "LayerPromptGenerator", "PHMLinear",
           "PrefixConfig", "PrefixGenerator", "GENERATORS", "STRATEGIES", "EncoderIPT", "InstancePromptGenerator",
           "PretrainedIPT", "RandomIPT", "cannot_rebuild", "check_exported_tables", "exported_tables", "exports_in_weights", "rebuilding_saved", "VocabPromptTable", "load_table", "save_table",
           "tokenization_fingerprint", "tokenizer_fingerprint", "use_sparse_rows"]
