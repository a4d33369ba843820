"""PEFT's prompt tuning / prefix tuning as the peer of our methods (``pip install peft``).

One place for the efficiency benchmark (step time, memory) and the accuracy row (``peft_run.py``).
The peer is shaped like OpenPrompt's ``PromptForClassification`` (``plm`` / ``template`` /
``verbalizer``) so that our Trainer, ``build_optimizers`` and ``split_counts`` treat it exactly like
our methods: PEFT's trainable prompt is the "prompt" group (lr_prompt, the prompt count), the
SoftVerbalizer is the head (lr_head), the backbone is frozen and kept in eval mode (plm.frozen_dropout:
its dropout stays on, as in our rows from the same YAML).
"""
from __future__ import annotations

from torch import nn

KINDS = ("prompt", "prefix")


def require_peft():
    try:
        import peft
    except ImportError:
        raise SystemExit("error: the PEFT peer needs the peft package: pip install peft") from None
    return peft


class PeftTemplate(nn.Module):
    """Encodes text with a prompt-free OpenPrompt template (PEFT sees plain token ids with the mask)
    and owns PEFT's trainable prompt, so the Trainer files it under "prompt"."""

    def __init__(self, plain, prompt_encoder, n_prefix: int):
        super().__init__()
        self.prompt_encoder = prompt_encoder
        self._plain = [plain]  # not a submodule: its only table is the frozen PLM embedding
        self.n_prefix = n_prefix  # positions PEFT puts before the text (run_experiment caps the text by it)
        self.registered_inputflag_names = plain.registered_inputflag_names

    def wrap_one_example(self, example):
        return self._plain[0].wrap_one_example(example)


class PeftClassifier(nn.Module):
    """PEFT on the encoder + the same SoftVerbalizer head as ours, read at the mask position."""

    def __init__(self, plm, plain_template, verbalizer, kind: str, num_virtual_tokens: int,
                 prompt_init: str = "sample_vocab", prefix_projection: bool = False, encoder_hidden_size: int = 0,
                 frozen_dropout: bool = False):
        super().__init__()
        self.frozen_dropout = frozen_dropout  # plm.frozen_dropout: the frozen PLM's dropout stays on, as for our rows
        if kind not in KINDS:
            raise ValueError(f"unknown PEFT kind {kind!r}: choose one of {list(KINDS)}")
        peft = require_peft()
        for p in plm.parameters():  # as PromptForClassification(freeze_plm=True); PEFT freezes the encoder only
            p.requires_grad_(False)
        if kind == "prompt":
            # sample_vocab = Lester et al.'s init, the one our Prompt Tuning uses; PEFT's default is N(0, 1)
            cfg = peft.PromptTuningConfig(task_type=peft.TaskType.FEATURE_EXTRACTION, num_virtual_tokens=num_virtual_tokens,
                                          prompt_tuning_init=peft.PromptTuningInit[prompt_init.upper()])
        else:
            extra = dict(prefix_projection=True, encoder_hidden_size=encoder_hidden_size) if prefix_projection else {}
            cfg = peft.PrefixTuningConfig(task_type=peft.TaskType.FEATURE_EXTRACTION,
                                          num_virtual_tokens=num_virtual_tokens, **extra)
        self.kind, self.shift = kind, num_virtual_tokens if kind == "prompt" else 0  # prompt tuning prepends tokens
        self.template = PeftTemplate(plain_template, None, self.shift)  # registered first: names its parameters
        self.plm, self.verbalizer = plm, verbalizer
        self.peft_model = peft.get_peft_model(plm.base_model, cfg)
        self.template.prompt_encoder = self.peft_model.prompt_encoder

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.frozen_dropout:
            self.plm.eval()  # plm_eval_mode, as our frozen-PLM methods: no dropout in the frozen backbone
        return self

    def forward(self, batch):
        hidden = self.peft_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])[0]
        hidden = hidden[:, self.shift:]
        at_mask = hidden[batch["loss_ids"] > 0]
        return self.verbalizer.process_hiddens(at_mask)
