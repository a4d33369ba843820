"""Where a prompt enters the PLM: input embeddings, per-layer key/values, per-layer hidden states."""
from .encoder_hooks import InjectionPlan, LayerPromptInjector
from .input_embeddings import check_positions, max_positions, prepend, trim_outputs
from .late import LatePlan, LatePromptInjector, check_late_layer, trim_late
from .layout import EncoderLayout, find_layout
from .splice import INSERT_POSITIONS, insert_index, remove_positions, shifted_position_ids, splice

__all__ = ["InjectionPlan", "LayerPromptInjector", "LatePlan", "LatePromptInjector", "check_late_layer", "trim_late", "check_positions", "max_positions", "prepend", "trim_outputs", "EncoderLayout",
           "find_layout", "INSERT_POSITIONS", "insert_index", "remove_positions", "shifted_position_ids", "splice"]
