"""Prefix generators by name (the ``generator:`` key of GeneratedPrefixTemplate)."""
from __future__ import annotations

from typing import Dict, Type

from .idpg import IDPGGenerator
from .ipt_prefix import EncoderIPTPrefix, PretrainedIPTPrefix, RandomIPTPrefix
from .late import LatePromptGenerator
from .layered import LayerPromptGenerator
from .prefix import PrefixGenerator

GENERATORS: Dict[str, Type[LayerPromptGenerator]] = {
    "prefix": PrefixGenerator,            # Prefix Tuning (reparameterize) / P-tuning v2
    "ipt_random": RandomIPTPrefix,
    "ipt_pretrained": PretrainedIPTPrefix,
    "ipt_encoder": EncoderIPTPrefix,
    "idpg": IDPGGenerator,                # S-IDPG / M-IDPG, dnn | phm, plm_cls | static_mean | glove
    "lpt": LatePromptGenerator,           # LPT: npg | appg | mppg | plain, at late_layer
}
