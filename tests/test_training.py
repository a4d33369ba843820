"""Data loading, dynamic padding and the training loop on tiny models and files the tests write."""
import json

import pytest
import torch

from helpers import build, examples
from openprompt_ipt.data import collate, encode_examples, load_cb, make_loader
from openprompt_ipt.data.splits import stratified_split
from openprompt_ipt.training import TrainConfig, Trainer, evaluate


def write_cb(folder, n_train=12, n_val=6):
    folder.mkdir(parents=True, exist_ok=True)
    labels = ["entailment", "contradiction", "neutral"]
    for name, n in (("train", n_train), ("val", n_val)):
        with open(folder / f"{name}.jsonl", "w") as f:
            for i in range(n):
                f.write(json.dumps({"premise": f"the cat sat {i}", "hypothesis": "it sat", "label": labels[i % 3],
                                    "idx": i}) + "\n")
    return str(folder)


def test_cb_local_jsonl_and_stratified_split(tmp_path):
    path = write_cb(tmp_path / "CB")
    train = load_cb(path, "train")
    assert len(train) == 12 and {e.label for e in train} == {0, 1, 2}
    tr, dev = stratified_split(train, 0.25, seed=1)
    assert len(dev) == 3 and sorted(e.label for e in dev) == [0, 1, 2]
    assert not {e.guid for e in tr} & {e.guid for e in dev}
    assert [e.guid for e in stratified_split(train, 0.25, seed=1)[1]] == [e.guid for e in dev]


def test_missing_cb_split_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset.path"):
        load_cb(str(tmp_path), "train")


def test_batches_pad_to_their_own_longest_example(bert):
    from openprompt.plms.mlm import MLMTokenizerWrapper

    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=3)
    wrapper = MLMTokenizerWrapper(max_seq_length=120, tokenizer=tok, truncate_method="balanced")
    feats = encode_examples(examples(6), pm.template, wrapper)
    lengths = [f["input_ids"].numel() for f in feats]
    batch = collate(feats[:2], tok.pad_token_id)
    assert batch["input_ids"].shape[1] == max(lengths[:2]) < 120
    assert (batch["attention_mask"].sum(1) == torch.tensor(lengths[:2])).all()
    with pytest.raises(ValueError, match="no examples"):
        encode_examples([], pm.template, wrapper)


def test_trainer_learns_a_separable_toy_task_and_keeps_best(bert, tmp_path):
    from openprompt.plms.mlm import MLMTokenizerWrapper

    model, tok = bert
    torch.manual_seed(0)
    pm = build(model, tok, strategy="random", prompt_length=2)
    exs = examples(12)
    for e in exs:  # label is determined by the first word: learnable from the instance prompt alone
        e.text_a = ("cat " if e.label == 0 else "dog ") + e.text_a
    wrapper = MLMTokenizerWrapper(max_seq_length=64, tokenizer=tok, truncate_method="balanced")
    feats = encode_examples(exs, pm.template, wrapper)
    loader = make_loader(feats, 4, tok.pad_token_id, shuffle=True, generator=torch.Generator().manual_seed(0))
    dev = make_loader(feats, 6, tok.pad_token_id, sort_by_length=True)
    start = evaluate(pm, dev, show_progress=False)
    cfg = TrainConfig(epochs=20, lr_prompt=1e-1, lr_head=5e-2, warmup_ratio=0.0, show_progress=False, device="cpu")
    trainer = Trainer(pm, cfg, output_dir=str(tmp_path / "run"))
    best = trainer.fit(loader, dev)
    # a frozen random 2-layer PLM caps what is learnable; chance is 0.5
    assert best["accuracy"] >= 0.8 and best["loss"] < 0.75 * start["loss"]
    assert len(cfg.history) == 20
    assert (tmp_path / "run" / "best.safetensors").exists()
    assert evaluate(pm, dev, show_progress=False)["accuracy"] == best["accuracy"]  # best state restored
    assert not any(k.startswith("prompt_model.plm.") for k in trainer.best_state)


@pytest.mark.parametrize("template", ["instance_wise", "mixed_template"])
def test_single_sentence_examples_encode(bert, tmp_path, template):
    """Regression: the task loaders give single-sentence tasks (SST-2, MR, CR, ...) text_b=None, and
    OpenPrompt's wrap_one_example crashed on it ('list.remove(x): x not in list') for every template."""
    from openprompt.data_utils import InputExample
    from openprompt.plms.mlm import MLMTokenizerWrapper
    from openprompt.prompts import MixedTemplate

    from openprompt_ipt import InstanceWiseTemplate

    model, tok = bert
    text = '{"placeholder":"text_a"} It was {"mask"}.'
    tpl = (InstanceWiseTemplate(model, tok, text=text, strategy="none", task_prompt_length=2) if template == "instance_wise"
           else MixedTemplate(model, tok, text=text))
    exs = [InputExample(guid="0", text_a="a dog ran fast", text_b=None, label=1)]
    feats = encode_examples(exs, tpl, MLMTokenizerWrapper(max_seq_length=32, tokenizer=tok))
    assert feats[0]["input_ids"].numel() > 4 and int((feats[0]["loss_ids"] == 1).sum()) == 1
    assert exs[0].text_b is None  # the example itself is unchanged


def _trained(bert_factory, batch_size, accumulation, n=10, tmp=None):
    """A fresh tiny Random IPT model (sparse vocab table, as the runner trains it) after one epoch on ``n``
    examples in order; returns its trained parameters and the log's per-step losses and epoch loss."""
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from openprompt_ipt.generators import use_sparse_rows
    from openprompt_ipt.training.logs import read_log

    torch.manual_seed(0)
    model, tok = bert_factory()
    torch.manual_seed(1)
    pm = build(model, tok, strategy="random", prompt_length=2)
    use_sparse_rows(pm.template)
    feats = encode_examples(examples(n), pm.template, MLMTokenizerWrapper(max_seq_length=64, tokenizer=tok))
    cfg = TrainConfig(epochs=1, lr_prompt=1e-2, lr_head=1e-2, warmup_ratio=0.0, max_grad_norm=0.5, show_progress=False,
                      device="cpu", checkpoint_every=-1, gradient_accumulation_steps=accumulation)
    Trainer(pm, cfg, output_dir=str(tmp)).fit(make_loader(feats, batch_size, tok.pad_token_id),
                                              make_loader(feats[:4], 4, tok.pad_token_id))
    log = read_log(str(tmp / "log.csv"))
    losses = [float(r["value"]) for r in log if r["name"] == "train/loss"]
    return {k: p.detach().clone() for k, p in pm.named_parameters() if p.requires_grad}, losses, cfg.history[0]["train_loss"]


@pytest.mark.parametrize("micro, n", [(3, 10), (2, 10)])  # 3+3 | 3+1 ; 2+2 | 2+2 | 2 (a one-batch last window)
def test_gradient_accumulation_equals_the_whole_batch(tiny_dir, tmp_path, micro, n):
    """k micro-batches of b train (and log) as one batch of k*b, also when the last batch is short or the epoch's
    last window has fewer than k batches: each loss is summed and divided by the window's examples."""
    from conftest import _bert

    whole, whole_losses, whole_epoch = _trained(lambda: _bert(tiny_dir), 2 * micro, 1, n, tmp_path / "whole")
    accum, accum_losses, accum_epoch = _trained(lambda: _bert(tiny_dir), micro, 2, n, tmp_path / "accum")
    assert len(accum_losses) == len(whole_losses) == -(-n // (2 * micro))  # optimizer steps, not micro-batches
    assert accum_losses == pytest.approx(whole_losses, abs=1e-6)
    assert accum_epoch == pytest.approx(whole_epoch, abs=1e-6)
    for name, value in whole.items():
        assert torch.allclose(accum[name], value, atol=1e-6), name
