"""Train a tiny BERT classifier with an instance prompt through the default ``Trainer``; run by
tests/test_hf_trainer.py::test_two_processes_match_one under one process and under torchrun (2 CPU processes).

    python tests/hf_trainer_ddp.py <masked LM folder> <out dir> <case> <per-device batch>

The masked LM folder is written beforehand (save_pretrained), so the processes only read it."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_hf_trainer import CASES, classifier_from, config_for, dataset, trainer_for  # noqa: E402


def main(mlm_dir, out_dir, case, per_device):
    import pathlib

    from transformers import AutoModelForMaskedLM, AutoTokenizer

    mlm, tok = AutoModelForMaskedLM.from_pretrained(mlm_dir), AutoTokenizer.from_pretrained(mlm_dir)
    mlm.config.hidden_dropout_prob = mlm.config.attention_probs_dropout_prob = 0.0  # ranks draw other masks
    model = classifier_from(mlm, initializer_range=0.2)
    from openprompt_ipt.hf import get_instance_prompt_model

    model = get_instance_prompt_model(model, config_for(case, pathlib.Path(out_dir), mlm), tokenizer=tok)
    trainer = trainer_for(model, tok, dataset(tok), os.path.join(out_dir, "run"), num_train_epochs=3,
                          per_device_train_batch_size=int(per_device))
    trainer.train()
    if trainer.is_world_process_zero():
        model.save_pretrained(os.path.join(out_dir, "prompt"))
        print(f"processes {trainer.args.world_size}", flush=True)
    if torch.distributed.is_initialized():  # leave the group before exit: a gloo teardown race once aborted a rank
        torch.distributed.barrier()         # (transformers 4.39 + accelerate 0.34, "terminate called without an
        torch.distributed.destroy_process_group()  # active exception") after training had finished


if __name__ == "__main__":
    assert sys.argv[3] in CASES
    main(*sys.argv[1:5])
