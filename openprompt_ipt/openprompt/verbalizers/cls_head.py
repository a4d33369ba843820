"""``cls_head``: a sentence classification head on the first token's final state (IDPG's head).

IDPG trains with fairseq's ``sentence_prediction`` task: ``RobertaClassificationHead`` reads the
``<s>`` ([CLS]) state -> dropout -> dense (H x H) -> tanh -> dropout -> out_proj (H x classes).
transformers ships the same module (``RobertaClassificationHead``), used here unchanged, so the head
is the field library's and only the OpenPrompt plumbing is ours. Label words are not used.
"""
from __future__ import annotations

import copy
from typing import Optional, Sequence

import torch
from openprompt.prompt_base import Verbalizer
from torch import nn

from ...injection.precision import autocast_dtype
from ...prompting.device import backbone_device, place_beside


class ClsHeadVerbalizer(Verbalizer):
    reads_hidden_states = True  # the runner may drop the MLM vocabulary head (runner.plm.skip_mlm_head)

    def __init__(self, tokenizer=None, model=None, classes: Optional[Sequence[str]] = None,
                 num_classes: Optional[int] = None, dropout: Optional[float] = None):
        super().__init__(tokenizer=tokenizer, classes=classes, num_classes=num_classes)
        if model is None or self.num_classes is None:
            raise ValueError("cls_head needs the PLM and num_classes (the runner passes both)")
        from transformers.models.roberta.modeling_roberta import RobertaClassificationHead

        config = copy.deepcopy(model.config)
        config.num_labels = self.num_classes
        if dropout is not None:  # default: the PLM's classifier_dropout, else hidden_dropout_prob (0.1)
            config.classifier_dropout = float(dropout)
        self.head = RobertaClassificationHead(config)
        std = getattr(config, "initializer_range", 0.02)
        for layer in (self.head.dense, self.head.out_proj):  # fairseq's init_bert_params: N(0, 0.02), zero bias
            nn.init.normal_(layer.weight, std=std)
            nn.init.zeros_(layer.bias)
        # where the PLM is (plm.cuda() before load_verbalizer), as SoftVerbalizer's copy of the PLM's head is
        place_beside(self, backbone_device(model.get_input_embeddings()))

    def gather_outputs(self, outputs) -> torch.Tensor:
        """The first token's last hidden state, broadcast over the sequence: PromptForClassification
        then picks it up 'at the mask' (a view, nothing copied), so any template with a mask works."""
        hidden = outputs.hidden_states[-1] if getattr(outputs, "hidden_states", None) is not None else outputs.logits
        return hidden[:, :1].expand_as(hidden)

    def process_outputs(self, outputs: torch.Tensor, batch=None, **kwargs) -> torch.Tensor:
        if outputs.dim() == 3:  # several masks: each holds the same first-token state
            outputs = outputs[:, 0]
        features = outputs.unsqueeze(1)  # the module reads features[:, 0, :]
        dtype = self.head.out_proj.weight.dtype
        # a PLM loaded in bf16 / fp16 gives its hidden states in that dtype, while the head was made (and trains) in
        # fp32 like the prompt: "mat1 and mat2 must have the same dtype". Under autocast the head's matmuls cast anyway
        if features.dtype != dtype and autocast_dtype(features.device.type) is None:
            features = features.to(dtype)
        return self.head(features)
