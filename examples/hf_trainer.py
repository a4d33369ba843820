"""Instance-wise prompts from plain 🤗 Transformers: the quick start's task (Wikipedia topics, 11 classes)
with M-IDPG-PHM and Prefix Tuning + Random IPT, each trained by the stock ``Trainer``.

    python examples/hf_trainer.py                       # offline MiniLM, 4 epochs per method
    python examples/hf_trainer.py --model roberta-base --epochs 10

On the offline MiniLM (2026-11-25, a shared 2-core CPU, one thread, ~23 minutes for both methods; before --seed,
from an unseeded prompt): M-IDPG-PHM test accuracy 0.613, Prefix Tuning + Random IPT 0.688 (11 topics,
chance 0.091; docs/transformers.md).

No OpenPrompt in the loop: a tokenizer, ``AutoModelForSequenceClassification``, ``get_instance_prompt_model``
and the ``Trainer``. The data is the quick start's (yamls/quickstart.yaml: same splits, same seed)."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

METHODS = {  # the two the example trains; any InstancePromptConfig works the same way
    "m_idpg_phm": dict(method="m_idpg", prompt_length=5, options={"layer": "phm", "hidden": 16, "phm_n": 16}),
    "prefix_ipt": dict(method="prefix_ipt", strategy="random", prompt_length=8),
}


def quickstart_data(tokenizer, max_train=None, max_length=96):
    """train / dev / test of yamls/quickstart.yaml as tokenized 🤗 datasets, and the label names."""
    from datasets import Dataset

    from openprompt_ipt.runner.config import load_config
    from openprompt_ipt.data.prepare import load_task

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
    cfg = load_config(os.path.join(root, "yamls", "quickstart.yaml"))
    if max_train:
        cfg["dataset"]["max_train"] = cfg["dataset"]["max_eval"] = max_train
    train, dev, test, labels = load_task(cfg, None)

    def to_dataset(examples):
        ds = Dataset.from_dict({"text": [e.text_a for e in examples], "label": [int(e.label) for e in examples]})
        return ds.map(lambda rows: tokenizer(rows["text"], truncation=True, max_length=max_length), batched=True)

    return to_dataset(train), to_dataset(dev), to_dataset(test), labels


def accuracy(prediction):
    return {"accuracy": float((np.argmax(prediction.predictions, axis=-1) == prediction.label_ids).mean())}


def main(argv=None):
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments, set_seed)

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model
    from openprompt_ipt.runner.plm import resolve_backbone

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm", help="a checkpoint folder, hub name, or 'minilm' (offline)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--epochs", type=float, default=4)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--max-train", type=int, default=None, help="fewer summaries (a smoke run)")
    p.add_argument("--output-dir", default="out/hf_trainer")
    p.add_argument("--seed", type=int, default=42, help="seeds the new head and the prompt (drawn when the model is "
                   "built, before the Trainer) and the Trainer's data order")
    args = p.parse_args(argv)

    path = resolve_backbone(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    train, dev, test, labels = quickstart_data(tokenizer, args.max_train)
    results = {}
    for name in args.methods:
        def classifier():
            return AutoModelForSequenceClassification.from_pretrained(path, num_labels=len(labels))

        # TrainingArguments.seed seeds train() only: the new head and the prompt are drawn here, from whatever the
        # global RNG holds (torch 2.13 seeds it afresh in every process), so seed them too
        set_seed(args.seed)
        model = get_instance_prompt_model(classifier(), InstancePromptConfig(**METHODS[name]), tokenizer)
        model.print_trainable_parameters()  # as a PEFT model does
        out = os.path.join(args.output_dir, name)
        training = TrainingArguments(output_dir=out, num_train_epochs=args.epochs, learning_rate=args.lr,
                                     per_device_train_batch_size=16, save_strategy="no", report_to="none",
                                     seed=args.seed)
        collator = DataCollatorWithPadding(tokenizer)
        trainer = Trainer(model=model, args=training, train_dataset=train, eval_dataset=dev, data_collator=collator,
                          compute_metrics=accuracy)
        trainer.train()
        dev_accuracy = trainer.evaluate()["eval_accuracy"]
        model.save_pretrained(os.path.join(out, "prompt"))
        # reload in one call: the backbone from the path the folder records (only the prompt, its generator and
        # the head were saved), then test it
        reloaded = InstancePromptModel.from_pretrained(os.path.join(out, "prompt"))
        tester = Trainer(model=reloaded, args=training, data_collator=collator, compute_metrics=accuracy)
        results[name] = tester.evaluate(test, metric_key_prefix="test")["test_accuracy"]
        print(f"{name}: dev accuracy {dev_accuracy:.3f}, test accuracy {results[name]:.3f} "
              f"({model.num_trainable_parameters()} trained parameters; {len(labels)} topics, chance "
              f"{1 / len(labels):.3f})", flush=True)
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
