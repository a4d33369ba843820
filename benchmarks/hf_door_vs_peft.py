"""Training-step time of the 🤗 Transformers door (``openprompt_ipt.hf``) against PEFT's prompt methods on the
same ``AutoModelForSequenceClassification`` and the same batch, in one process run.

    python benchmarks/hf_door_vs_peft.py [--backbone minilm] [--batch-size 16] [--seq-len 128] [--rounds 5]
                                         [--steps 3] [--threads 1] [--output docs/performance/hf_door.md]

A step is what the Trainer does per batch: forward with labels, backward, AdamW (lr 1e-3) step. Every model
is its own copy of the backbone with a fresh classification head; all train the head too (PEFT's
``modules_to_save`` for SEQ_CLS, ours ``modules_to_save``); t = 20 prompt positions everywhere (IPT: 4 task
+ 16 instance). Methods are interleaved round by round, the order reversed every other round, so machine noise
hits all alike; the time is the median over rounds of the mean of ``--steps`` steps, and each pair's ratio is also
given per round (median, IQR, rounds at or below 1.0); ``--output`` writes the per-round times to a JSON beside
it. Pairs: our Prompt Tuning vs PEFT prompt tuning, our P-tuning v2 (kv) vs PEFT prefix tuning, our Prefix
Tuning (MLP, 512) vs PEFT prefix tuning with ``prefix_projection`` (512); IPT and M-IDPG-PHM are shown against PEFT prompt tuning. PEFT's prefix tuning
runs on the classifier's encoder with the classifier's own head (``PeftPrefixClassifier``: PEFT cannot wrap a
BERT classifier for prefix tuning under transformers 5.x).
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

T = 20
OURS = {
    "ours Prompt Tuning": dict(method="prompt_tuning", prompt_length=T),
    "ours P-tuning v2 (kv)": dict(method="p_tuning_v2", prompt_length=T),
    "ours Prefix Tuning (MLP 512)": dict(method="prefix_tuning", prompt_length=T, options={"reparam_hidden": 512}),
    "ours Random IPT (4 + 16)": dict(method="ipt", prompt_length=16, task_prompt_length=4),
    "ours M-IDPG-PHM": dict(method="m_idpg", prompt_length=T, options={"layer": "phm", "hidden": 16, "phm_n": 16}),
}
PEFT = {
    "PEFT prompt tuning": ("prompt", {}),
    "PEFT prefix tuning": ("prefix", {}),
    "PEFT prefix tuning (projection 512)": ("prefix", dict(prefix_projection=True, encoder_hidden_size=512)),
}
PAIRS = [("ours Prompt Tuning", "PEFT prompt tuning"), ("ours P-tuning v2 (kv)", "PEFT prefix tuning"),
         ("ours Prefix Tuning (MLP 512)", "PEFT prefix tuning (projection 512)"),
         ("ours Random IPT (4 + 16)", "PEFT prompt tuning"), ("ours M-IDPG-PHM", "PEFT prompt tuning")]
SENTENCES = ["The history of the region is long and the mountains rise above the river valley",
             "A theorem in mathematics states a property of numbers that holds for every prime",
             "The painter worked in oil on canvas and exhibited in the city museum for years"]


class PeftPrefixClassifier(torch.nn.Module):
    """PEFT prefix tuning cannot wrap ``BertForSequenceClassification`` under transformers 5.x (its forward takes no
    ``past_key_values``: PEFT raises "Model does not support past key values which are required for prefix
    tuning"), so it wraps the encoder (FEATURE_EXTRACTION) and this applies the classifier's own head (BERT:
    dropout + classifier on the pooled output; the pooler frozen, as under PEFT's SEQ_CLS)."""

    def __init__(self, classifier_model, cfg):
        super().__init__()
        import peft

        classifier_model.requires_grad_(False)
        self.peft_model = peft.get_peft_model(classifier_model.base_model, cfg)
        self.dropout, self.classifier = classifier_model.dropout, classifier_model.classifier
        self.classifier.requires_grad_(True)

    def forward(self, input_ids, attention_mask, labels):
        pooled = self.peft_model(input_ids=input_ids, attention_mask=attention_mask).pooler_output
        logits = self.classifier(self.dropout(pooled))
        from types import SimpleNamespace
        return SimpleNamespace(logits=logits, loss=torch.nn.functional.cross_entropy(logits, labels))


def build(name, base, tokenizer):
    model = copy.deepcopy(base)
    if name in OURS:
        from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model
        return get_instance_prompt_model(model, InstancePromptConfig(**OURS[name]), tokenizer)
    import peft
    kind, extra = PEFT[name]
    if kind == "prompt":
        cfg = peft.PromptTuningConfig(task_type=peft.TaskType.SEQ_CLS, num_virtual_tokens=T)
        return peft.get_peft_model(model, cfg)
    cfg = peft.PrefixTuningConfig(task_type=peft.TaskType.FEATURE_EXTRACTION, num_virtual_tokens=T, **extra)
    return PeftPrefixClassifier(model, cfg)


def fixed_batch(tokenizer, batch_size, seq_len):
    text = [" ".join([SENTENCES[i % 3]] * 20) for i in range(batch_size)]
    enc = tokenizer(text, truncation=True, max_length=seq_len, padding="max_length", return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
            "labels": torch.arange(batch_size) % 3}


def step_fn(model, batch):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model.train()

    def step():
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def main(argv=None):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from openprompt_ipt.runner.plm import resolve_backbone

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--output", default=None, help="write the table (markdown) here as well (an existing one needs "
                   "--overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an --output table that exists")
    args = p.parse_args(argv)
    from openprompt_ipt.runner.plotting import check_output_file, write_new_files

    try:
        if args.output:  # an earlier measurement: kept unless told, before the rounds
            check_output_file(args.output, "--output", args.overwrite, [os.path.splitext(args.output)[0] + ".json"])
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    hf_logging.set_verbosity_error()
    path = resolve_backbone(args.backbone)
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    base = AutoModelForSequenceClassification.from_pretrained(path, num_labels=3)
    batch = fixed_batch(tokenizer, args.batch_size, args.seq_len)
    names = list(OURS) + list(PEFT)
    models = {n: build(n, base, tokenizer) for n in names}
    steps = {n: step_fn(models[n], batch) for n in names}
    for n in names:  # warm-up (allocations, lazy init)
        steps[n]()
    times = {n: [] for n in names}
    for r in range(args.rounds):
        for n in round_order(names, r):
            t0 = time.perf_counter()
            for _ in range(args.steps):
                steps[n]()
            times[n].append((time.perf_counter() - t0) / args.steps * 1000)
    med = {n: statistics.median(v) for n, v in times.items()}
    trainable = {n: sum(q.numel() for q in models[n].parameters() if q.requires_grad) for n in names}
    cmd = "python benchmarks/hf_door_vs_peft.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"`{cmd.strip()}`: {args.backbone}, batch {args.batch_size} x {args.seq_len} tokens, "
             f"{args.threads} CPU thread(s), median of {args.rounds} interleaved rounds x {args.steps} steps; "
             f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, "
             f"peft {__import__('peft').__version__}", "",
             "| method | trainable (incl. head) | ms / step | spread (min-max) |", "|---|---:|---:|---:|"]
    for n in names:
        lines.append(f"| {n} | {trainable[n]:,} | {med[n]:.0f} | {min(times[n]):.0f}-{max(times[n]):.0f} |")
    lines += ["", "| ours / PEFT (same run) | ratio of medians | per round: median (IQR) | rounds at or below 1.0 |",
              "|---|---:|---:|---:|"]
    for a, b in PAIRS:
        lines.append(f"| {a} / {b} | {med[a] / med[b]:.2f} | {paired(times[a], times[b])} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        import json

        payload = json.dumps({"command": cmd.strip(), "args": vars(args), "ms_per_step_per_round": times}, indent=1)
        try:
            write_new_files({args.output: text, os.path.splitext(args.output)[0] + ".json": payload}, "--output",
                            args.overwrite)
        except ValueError as e:  # another process wrote it while this one measured
            print(f"error: {e}", file=sys.stderr)
            return 2
    return 0


def round_order(names, r):
    """Round r's order, reversed every other round: a method's place in the round (what ran just before it,
    a drift during the round) then hits every method alike."""
    return list(names) if r % 2 == 0 else list(names)[::-1]


def paired(ours, peer) -> str:
    """Per-round ratios ours / peer (run seconds apart): their median, interquartile range (4+ rounds) and how many
    are at or below 1.0, as two cells. A machine's drift moves both sides of a round alike, not a ratio of medians."""
    ratios = sorted(a / b for a, b in zip(ours, peer))
    spread = ""
    if len(ratios) >= 4:
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        spread = f" ({q1:.3f}–{q3:.3f})"
    return f"{statistics.median(ratios):.3f}{spread} | {sum(x <= 1.0 for x in ratios)} of {len(ratios)}"


if __name__ == "__main__":
    sys.exit(main())
