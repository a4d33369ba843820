"""Shared builders for the tests (tiny models come from conftest fixtures)."""
from __future__ import annotations

import torch
from openprompt import PromptForClassification
from openprompt.data_utils import InputExample
from openprompt.plms.mlm import MLMTokenizerWrapper
from openprompt.prompts import SoftVerbalizer

from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.data import encode_examples, make_loader

TEXT = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'
SENTENCES = ["the cat sat on the mat", "a dog ran fast", "she said the movie was great",
             "they think it is not good", "we know that music is art", "he was slow"]


def examples(n=6, labels=2):
    return [InputExample(guid=str(i), text_a=SENTENCES[i % len(SENTENCES)], text_b="is it good", label=i % labels)
            for i in range(n)]


def build(model, tokenizer, num_classes=2, **template_kwargs):
    template_kwargs.setdefault("text", TEXT)
    template = InstanceWiseTemplate(model, tokenizer, **template_kwargs)
    verbalizer = SoftVerbalizer(tokenizer, model, num_classes=num_classes, label_words=[["yes"], ["no"], ["maybe"]][:num_classes])
    return PromptForClassification(model, template, verbalizer, freeze_plm=True, plm_eval_mode=True)


def loader_for(prompt_model, tokenizer, exs, batch_size, max_len=64):
    wrapper = MLMTokenizerWrapper(max_seq_length=max_len, tokenizer=tokenizer, truncate_method="balanced")
    feats = encode_examples(exs, prompt_model.template, wrapper)
    return make_loader(feats, batch_size, tokenizer.pad_token_id)


def batch_for(prompt_model, tokenizer, exs, max_len=64):
    return next(iter(loader_for(prompt_model, tokenizer, exs, len(exs), max_len)))


def config_file(tmp_path, text):
    """``text`` as the YAML file ``tmp_path/c.yaml``; returns its path."""
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return str(p)


def clone(batch):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def build_prefix(model, tokenizer, num_classes=2, **template_kwargs):
    from openprompt_ipt import GeneratedPrefixTemplate

    template_kwargs.setdefault("text", TEXT)
    template = GeneratedPrefixTemplate(model, tokenizer, **template_kwargs)
    verbalizer = SoftVerbalizer(tokenizer, model, num_classes=num_classes, label_words=[["yes"], ["no"], ["maybe"]][:num_classes])
    return PromptForClassification(model, template, verbalizer, freeze_plm=True, plm_eval_mode=True)


def interrupt_at_eval(monkeypatch, n: int = 2):
    """Make the trainer's n-th dev evaluation raise KeyboardInterrupt (a run killed mid-way); returns
    ``restore()``, which puts the real evaluation back for the resumed run."""
    from openprompt_ipt.training import trainer as trainer_mod

    real_eval, calls = trainer_mod.evaluate, [0]

    def dying_eval(*a, **k):
        calls[0] += 1
        if calls[0] == n:
            raise KeyboardInterrupt
        return real_eval(*a, **k)

    monkeypatch.setattr(trainer_mod, "evaluate", dying_eval)
    return lambda: monkeypatch.setattr(trainer_mod, "evaluate", real_eval)


ONEDNN_LSTM_ERROR = "could not create a primitive descriptor for the LSTM forward propagation primitive"


def cpu_without_bf16_lstm(monkeypatch):
    """Act like an AVX2-only CPU (no AVX-512), whatever this one is: oneDNN has no bf16 LSTM there, so an
    LSTM kernel called while CPU bf16 autocast is on raises oneDNN's error."""
    from torch.nn.modules import rnn

    real = rnn._VF.lstm

    def lstm(*args, **kwargs):
        if torch.is_autocast_cpu_enabled() and torch.get_autocast_cpu_dtype() == torch.bfloat16:
            raise RuntimeError(ONEDNN_LSTM_ERROR)
        return real(*args, **kwargs)
    monkeypatch.setattr(rnn._VF, "lstm", lstm)


def run_process_group(cmd, env, timeout: int = 300):
    """``subprocess.run(cmd, capture_output=True, text=True)`` for a torchrun job, in a session of its own: on a
    timeout the whole group is killed, workers included (a torchrun killed alone left a worker waiting on its
    peer for over an hour, seen once under a loaded parallel suite), and the failure says it timed out."""
    import os
    import signal
    import subprocess

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"timed out after {timeout} s (killed with its workers): {' '.join(map(str, cmd))}\n"
                             f"{err[-3000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def write_encoder_export(template, folder, meta: dict) -> None:
    """An Encoder IPT body export (classifier.safetensors + classifier.json) as category pretraining writes it,
    taken from ``template``'s own encoder body."""
    import json
    import os

    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    body = template.generator.encoder.body.state_dict()
    save_file({"body." + k: v.contiguous() for k, v in body.items()}, os.path.join(folder, "classifier.safetensors"))
    with open(os.path.join(folder, "classifier.json"), "w") as f:
        json.dump(meta, f)
