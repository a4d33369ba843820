"""Checkpoints: a run killed mid-epoch resumes to exactly the uninterrupted result; changed configs,
NaN losses and the CSV log."""
import os

import pytest
import torch
import torch.nn.functional as F

from helpers import build, examples
from openprompt_ipt.data import encode_examples, make_loader
from openprompt_ipt.training import NonFiniteLoss, TrainConfig, Trainer
from openprompt_ipt.training.checkpoint import check_resume_config, latest_checkpoint, load_checkpoint
from openprompt_ipt.training.logs import read_log


class Killed(Exception):
    pass


def tiny_run(bert_factory, out, kill_after=None, resume=None, nan_at=None, epochs=3, nan_dev_from=None, **cfg):
    """A fresh tiny model (same seed each time) trained on 10 examples in batches of 3 (4 batches an epoch,
    the last one short), with dropout on the logits so the RNG state matters."""
    torch.manual_seed(0)
    model, tok = bert_factory()
    torch.manual_seed(1)
    pm = build(model, tok, strategy="random", prompt_length=2)
    exs = examples(10)
    for e in exs:
        e.text_a = ("cat " if e.label == 0 else "dog ") + e.text_a
    from openprompt.plms.mlm import MLMTokenizerWrapper

    wrapper = MLMTokenizerWrapper(max_seq_length=64, tokenizer=tok, truncate_method="balanced")
    feats = encode_examples(exs, pm.template, wrapper)
    loader = make_loader(feats, 3, tok.pad_token_id, shuffle=True, generator=torch.Generator().manual_seed(0))
    dev = make_loader(feats[:6], 6, tok.pad_token_id, sort_by_length=True)
    forward, calls, dev_calls = pm.forward, [0], [0]

    def noisy_forward(batch):
        calls[0] += 1
        if kill_after is not None and calls[0] > kill_after and pm.training:
            raise Killed()
        logits = forward(batch)
        if nan_at is not None and calls[0] == nan_at and pm.training:
            logits = logits * float("nan")
        dev_calls[0] += not pm.training
        if nan_dev_from is not None and dev_calls[0] >= nan_dev_from:  # weights gone inf by the epoch's last step
            logits = logits * float("inf")
        return F.dropout(logits, 0.3, training=pm.training)

    pm.forward = noisy_forward
    config = TrainConfig(epochs=epochs, lr_prompt=5e-2, lr_head=5e-2, warmup_ratio=0.2, show_progress=False,
                         device="cpu", **cfg)
    trainer = Trainer(pm, config, output_dir=str(out), run_config={"seed": 0, "train": {"epochs": epochs}})
    best = trainer.fit(loader, dev, resume=resume)
    return trainer, best


def _bert_factory(tiny_dir):
    from conftest import _bert

    return lambda: _bert(tiny_dir)


@pytest.mark.parametrize("kill_after", [7, 4])  # mid-epoch 2 (after a step checkpoint) / right after epoch 1
@pytest.mark.parametrize("accumulation", [1, 2])  # 2: two batches a step, the epoch's last window 3 + 1 examples
def test_killed_run_resumes_to_identical_result(tiny_dir, tmp_path, kill_after, accumulation):
    make = _bert_factory(tiny_dir)
    every = dict(checkpoint_every=2 // accumulation, gradient_accumulation_steps=accumulation)  # after batch 2
    full, full_best = tiny_run(make, tmp_path / "full", **every)
    with pytest.raises(Killed):
        tiny_run(make, tmp_path / "killed", kill_after=kill_after, **every)
    ckpt = latest_checkpoint(str(tmp_path / "killed"))
    assert ckpt is not None
    progress = load_checkpoint(ckpt)["state"]["progress"]
    assert (progress["epoch"], progress["batches_done"]) == ((2, 2) if kill_after == 7 else (2, 0))
    resumed, resumed_best = tiny_run(make, tmp_path / "killed", resume=ckpt, **every)
    assert resumed_best == full_best
    assert resumed.config.history == full.config.history
    a, b = full.trainable_state(), resumed.trainable_state()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # the CSV log of the resumed run reads like the uninterrupted one
    assert read_log(str(tmp_path / "killed" / "log.csv")) == read_log(str(tmp_path / "full" / "log.csv"))


def test_only_the_newest_complete_checkpoint_is_kept(tiny_dir, tmp_path):
    tiny_run(_bert_factory(tiny_dir), tmp_path / "run", checkpoint_every=1, epochs=3)
    tiny_run(_bert_factory(tiny_dir), tmp_path / "run", checkpoint_every=1, epochs=2)  # a fresh run replaces them
    root = tmp_path / "run" / "checkpoints"
    assert sorted(os.listdir(root)) == ["latest", "step-0000008"]
    files = sorted(os.listdir(root / "step-0000008"))
    assert files == ["best.safetensors", "config.json", "trainable.safetensors", "training_state.pt"]
    ckpt = load_checkpoint(str(root / "step-0000008"))
    assert not any(k.startswith("prompt_model.plm.") for k in ckpt["trainable"])  # the PLM is not copied


def test_csv_log_has_loss_lr_and_dev_metrics(tiny_dir, tmp_path):
    tiny_run(_bert_factory(tiny_dir), tmp_path / "run", epochs=2)
    rows = read_log(str(tmp_path / "run" / "log.csv"))
    names = {r["name"] for r in rows}
    assert {"train/loss", "train/lr", "train/epoch_loss", "dev/accuracy", "dev/macro_f1", "dev/loss"} <= names
    assert [r["step"] for r in rows if r["name"] == "train/loss"] == list(range(1, 9))
    assert [r["epoch"] for r in rows if r["name"] == "dev/accuracy"] == [1, 2]
    assert all(r["value"] > 0 for r in rows if r["name"] == "train/lr")


def test_tensorboard_scalars_match_the_csv_log(tiny_dir, tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    tiny_run(_bert_factory(tiny_dir), tmp_path / "run", epochs=2)
    acc = event_accumulator.EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    rows = read_log(str(tmp_path / "run" / "log.csv"))
    assert {"train/loss", "train/lr", "dev/accuracy"} <= set(acc.Tags()["scalars"])
    for name in ("train/loss", "dev/accuracy"):
        events = [(e.step, round(e.value, 5)) for e in acc.Scalars(name)]
        assert events == [(r["step"], round(r["value"], 5)) for r in rows if r["name"] == name]


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tiny_dir, tmp_path):
    with pytest.raises(NonFiniteLoss, match=r"optimizer step 6 \(epoch 2, batch 2\).*step-0000005") as err:
        tiny_run(_bert_factory(tiny_dir), tmp_path / "run", nan_at=7, checkpoint_every=1)
    assert "\n" not in str(err.value)
    ckpt = latest_checkpoint(str(tmp_path / "run"))
    assert ckpt.endswith("step-0000005")
    state = load_checkpoint(ckpt)
    assert all(torch.isfinite(v).all() for v in state["trainable"].values())


def test_nan_dev_outputs_stop_before_selection_and_keep_the_best(tiny_dir, tmp_path):
    """The last step of epoch 2 leaves the outputs non-finite (its own loss, taken before it, was finite): the
    argmax of NaN logits scored a real-looking dev accuracy, was selected over epoch 1 and saved to
    best.safetensors, and the run finished with rc 0 and NaN weights as its model."""
    from safetensors.torch import load_file

    out = tmp_path / "run"
    with pytest.raises(NonFiniteLoss, match=r"^dev loss became nan after epoch 2: the model's outputs are not finite; "
                                            r"stopped; best so far: epoch 1, kept; last good checkpoint: .*step-0000007 "):
        tiny_run(_bert_factory(tiny_dir), out, nan_dev_from=2, epochs=2, checkpoint_every=1)
    best = load_file(str(out / "best.safetensors"))
    epoch1 = load_checkpoint(latest_checkpoint(str(out)))["best"]
    assert best.keys() == epoch1.keys() and all(torch.equal(best[k], epoch1[k]) for k in best)


def test_resume_with_a_changed_config_names_the_keys(tmp_path):
    from openprompt_ipt.training.checkpoint import CONFIG_FILE

    (tmp_path / CONFIG_FILE).write_text('{"seed": 1, "train": {"lr_prompt": 0.003, "epochs": 3}}')
    check_resume_config(str(tmp_path), {"seed": 1, "train": {"lr_prompt": 0.003, "epochs": 3}})
    with pytest.raises(ValueError, match=r"train.epochs: 3 -> 5; train.lr_prompt: 0.003 -> 0.01") as err:
        check_resume_config(str(tmp_path), {"seed": 1, "train": {"lr_prompt": 0.01, "epochs": 5}})
    assert "seed" not in str(err.value).split("at ", 1)[1]


def test_a_slow_first_epoch_is_checkpointed_by_wall_time(tiny_dir, tmp_path, monkeypatch):
    """With the default checkpoint_every (500 steps) a run killed in its first epoch had nothing to
    resume from; by default a checkpoint is also saved every train.checkpoint_minutes (5), and the
    resume equals the full run."""
    import time

    make = _bert_factory(tiny_dir)
    full, full_best = tiny_run(make, tmp_path / "full")
    clock = [0.0]

    def slow_clock():  # every look at the clock: ten more minutes have passed (a slow model)
        clock[0] += 600.0
        return clock[0]

    monkeypatch.setattr(time, "monotonic", slow_clock)
    with pytest.raises(Killed):
        tiny_run(make, tmp_path / "killed", kill_after=3)  # the defaults: 500 steps, 5 minutes
    monkeypatch.undo()
    ckpt = latest_checkpoint(str(tmp_path / "killed"))
    assert ckpt is not None
    progress = load_checkpoint(ckpt)["state"]["progress"]
    assert (progress["epoch"], progress["batches_done"]) == (1, 3)
    resumed, resumed_best = tiny_run(make, tmp_path / "killed", resume=ckpt)
    assert resumed_best == full_best and resumed.config.history == full.config.history
    # the default: no wall-time save inside a fast epoch, so the kill leaves nothing behind
    with pytest.raises(Killed):
        tiny_run(make, tmp_path / "fast", kill_after=3)
    assert latest_checkpoint(str(tmp_path / "fast")) is None


@pytest.mark.parametrize("damaged", ["training_state.pt", "trainable.safetensors", "best.safetensors"])
def test_a_truncated_checkpoint_file_is_one_line_naming_it(tiny_dir, tmp_path, damaged):
    from openprompt_ipt.serialization import DamagedFile

    tiny_run(_bert_factory(tiny_dir), tmp_path / "run", epochs=2)
    ckpt = latest_checkpoint(str(tmp_path / "run"))
    path = os.path.join(ckpt, damaged)
    data = open(path, "rb").read()
    with open(path, "wb") as f:  # a copy cut short / a full disk
        f.write(data[: len(data) // 2])
    with pytest.raises(DamagedFile) as err:
        load_checkpoint(ckpt)
    text = str(err.value)
    assert "\n" not in text and f"'{path}' is damaged or truncated" in text
    assert f"delete the checkpoint folder '{ckpt}'" in text and "--overwrite" in text


def test_resume_of_a_checkpoint_with_renamed_parameters_is_one_line(tiny_dir, tmp_path):
    """--resume of a checkpoint written by an older release that named a parameter otherwise was a bare
    KeyError traceback; now one line naming the file, the missing and unexpected names and the fix."""
    from safetensors.torch import load_file, save_file

    make = _bert_factory(tiny_dir)
    tiny_run(make, tmp_path / "run", epochs=2)
    ckpt = latest_checkpoint(str(tmp_path / "run"))
    path = os.path.join(ckpt, "trainable.safetensors")
    state = load_file(path)
    name = next(k for k in sorted(state) if "template" in k)
    state[name.replace("template.", "template.old_", 1)] = state.pop(name)  # the older release's name
    save_file(state, path)
    with pytest.raises(ValueError) as err:
        tiny_run(make, tmp_path / "run", resume=ckpt, epochs=2)
    text = str(err.value)
    assert "\n" not in text and f"checkpoint file '{path}'" in text
    assert f"missing {name}" in text and f"unexpected {name.replace('template.', 'template.old_', 1)}" in text
    assert "--overwrite" in text and "--output-dir" in text


def test_resume_may_change_only_the_checkpoint_schedule(tmp_path):
    from openprompt_ipt.training.checkpoint import CONFIG_FILE

    (tmp_path / CONFIG_FILE).write_text('{"seed": 1, "train": {"epochs": 3, "checkpoint_every": 500}}')
    check_resume_config(str(tmp_path), {"seed": 1, "train": {"epochs": 3, "checkpoint_every": 10,
                                                             "checkpoint_minutes": 1.0, "keep_checkpoints": 2}})


def test_a_run_saved_before_a_new_default_key_resumes(tmp_path):
    """A checkpoint written before a release added a config key (e.g. dataset.skip_bad_rows) resumes while
    that key holds its default; set to anything else it is a real difference and is named."""
    from openprompt_ipt.runner.config import DEFAULTS
    from openprompt_ipt.training.checkpoint import CONFIG_FILE

    (tmp_path / CONFIG_FILE).write_text('{"seed": 1, "dataset": {"name": "cb"}}')
    now = {"seed": 1, "dataset": {"name": "cb", "skip_bad_rows": DEFAULTS["dataset"]["skip_bad_rows"]}}
    check_resume_config(str(tmp_path), now, defaults=DEFAULTS)
    with pytest.raises(ValueError, match=r"dataset.skip_bad_rows: '<unset>' -> "):
        check_resume_config(str(tmp_path), now)  # without the defaults it is a difference
    changed = {"seed": 1, "dataset": {"name": "cb", "skip_bad_rows": not DEFAULTS["dataset"]["skip_bad_rows"]}}
    with pytest.raises(ValueError, match=r"dataset.skip_bad_rows"):
        check_resume_config(str(tmp_path), changed, defaults=DEFAULTS)


def test_quiet_runs_draw_no_tokenizing_bar(capsys):
    """``--quiet`` (show_progress=False) promises no progress bars: tokenizing a split of >= 500 examples
    drew one into every benchmark log; with show_progress it still shows."""
    from openprompt.data_utils import InputExample

    class Template:
        registered_inputflag_names = ()

        def wrap_one_example(self, ex):
            return ex

    class Wrapper:
        def tokenize_one_example(self, wrapped, teacher_forcing=False):
            return {"input_ids": [1, 2, 0], "attention_mask": [1, 1, 0]}

    exs = [InputExample(guid=str(i), text_a="a", text_b="b", label=0) for i in range(600)]
    feats = encode_examples(exs, Template(), Wrapper(), desc="train", show_progress=False)
    assert len(feats) == 600 and feats[0]["input_ids"].tolist() == [1, 2]
    assert "train" not in capsys.readouterr().err
    encode_examples(exs, Template(), Wrapper(), desc="train")
    assert "train" in capsys.readouterr().err


def test_an_interrupt_while_a_step_is_saved_again_keeps_a_checkpoint_to_resume(tmp_path, monkeypatch):
    """The same step saved twice (a step checkpoint, then the epoch's end) replaces the folder: an interrupt
    between taking the old one away and putting the new one in place must still leave ``--resume`` a checkpoint
    (it found none, and a resumed run started over)."""
    from openprompt_ipt.training.checkpoint import save_checkpoint

    run = str(tmp_path / "run")
    state = {"progress": {"global_step": 5}, "tag": "first"}
    save_checkpoint(run, {"w": torch.ones(2)}, None, state, {"seed": 0})
    real_replace = os.replace

    def interrupted(src, dst):
        if os.path.basename(src).startswith(".tmp-step-"):
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(run, {"w": torch.zeros(2)}, None, {**state, "tag": "second"}, {"seed": 0})
    monkeypatch.setattr(os, "replace", real_replace)
    ckpt = latest_checkpoint(run)
    assert ckpt is not None and load_checkpoint(ckpt)["state"]["tag"] == "first"
    save_checkpoint(run, {"w": torch.zeros(2)}, None, {**state, "tag": "second"}, {"seed": 0})  # the next save heals it
    assert load_checkpoint(latest_checkpoint(run))["state"]["tag"] == "second"
    assert sorted(os.listdir(os.path.dirname(latest_checkpoint(run)))) == ["latest", "step-0000005"]


class _CudaGenerator:
    def __init__(self):
        self.state = None

    def set_state(self, state):
        self.state = state


@pytest.mark.parametrize("part", ["prompt training", "category pretraining"])
def test_a_checkpoint_from_a_machine_with_more_gpus_resumes_on_one_with_fewer(monkeypatch, part):
    """A run checkpointed where 2 GPUs were visible (``get_rng_state_all`` saves one state per GPU) resumed with
    one (another machine, ``CUDA_VISIBLE_DEVICES=0``): was an IndexError from inside torch.cuda on resume (prompt
    training), and restored no GPU stream at all (category pretraining). The GPU there continues the saved stream
    of GPU 0; the absent GPU's state has nothing to continue."""
    if part == "prompt training":
        from openprompt_ipt.training.checkpoint import rng_state, set_rng_state
    else:
        from openprompt_ipt.pretraining.train import _rng_state as rng_state, _set_rng_state as set_rng_state

    state = rng_state()
    saved = [torch.full((16,), 7, dtype=torch.uint8), torch.full((16,), 9, dtype=torch.uint8)]
    state["cuda"] = saved
    gpu0 = _CudaGenerator()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "default_generators", (gpu0,))
    monkeypatch.setattr(torch.cuda.random, "_lazy_call", lambda callback: callback())  # CUDA "initialised"
    set_rng_state(state)
    assert torch.equal(gpu0.state, saved[0])
