"""train.adam_betas / adam_eps / weight_decay / scheduler (IDPG Table 4)."""
import csv

import pytest
import torch
from torch import nn

from helpers import build, config_file, examples, loader_for
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.training import TrainConfig, Trainer
from openprompt_ipt.training.optim import build_optimizers, linear_warmup
from openprompt_ipt.training.row_sparse_adam import RowSparseAdam


class FakePromptModel(nn.Module):
    """What build_optimizers reads: template (with a sparse vocab table), verbalizer, plm."""

    def __init__(self):
        super().__init__()
        self.template = nn.ModuleDict({"table": nn.Embedding(10, 4, sparse=True), "proj": nn.Linear(4, 4)})
        self.verbalizer = nn.Linear(4, 2)
        self.plm = nn.Linear(4, 4)
        self.plm.requires_grad_(False)


def lrs(scheduler, steps):
    opt = torch.optim.AdamW([nn.Parameter(torch.zeros(1))], lr=1.0)
    (sched,) = linear_warmup([opt], warmup_steps=2, total_steps=10, scheduler=scheduler)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_linear_schedule_warms_up_then_decays_to_zero():
    assert lrs("linear", 10) == pytest.approx([0.5, 1.0, 1.0, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8])


def test_constant_schedule_warms_up_then_stays_flat():
    assert lrs("constant", 10) == pytest.approx([0.5, 1.0] + [1.0] * 8)


def test_betas_eps_and_weight_decay_reach_the_torch_optimizers():
    dense, sparse = build_optimizers(FakePromptModel(), 1e-3, 2e-3, weight_decay=0.1, adam_betas=[0.9, 0.98],
                                     adam_eps=1e-6)
    assert isinstance(dense, torch.optim.AdamW) and isinstance(sparse, RowSparseAdam)
    assert [g["lr"] for g in dense.param_groups] == [1e-3, 2e-3]
    for g in dense.param_groups:
        assert g["betas"] == (0.9, 0.98) and g["eps"] == 1e-6 and g["weight_decay"] == 0.1
    assert sparse.param_groups[0]["betas"] == (0.9, 0.98) and sparse.param_groups[0]["eps"] == 1e-6
    assert sparse.param_groups[0]["weight_decay"] == 0.1  # the sparse vocab table decays too (lazily)


def test_defaults_keep_adamw_defaults(tmp_path):
    cfg = load_config(config_file(tmp_path, "train:\n  epochs: 1\n"))
    t = cfg["train"]
    assert (t["adam_betas"], t["adam_eps"], t["weight_decay"], t["scheduler"]) == ([0.9, 0.999], 1e-8, 0.0, "linear")
    (dense, _) = build_optimizers(FakePromptModel(), 1e-3, 1e-3, t["lr_plm"], t["weight_decay"], t["adam_betas"],
                                  t["adam_eps"])
    assert dense.param_groups[0]["betas"] == (0.9, 0.999) and dense.param_groups[0]["eps"] == 1e-8


def test_yaml_and_overrides_set_the_optimizer(tmp_path):
    cfg = load_config(config_file(tmp_path,
                                  "train:\n  adam_betas: [0.9, 0.98]\n  adam_eps: 1e-6\n  scheduler: constant\n"),
                      ["train.weight_decay=0.1"])
    t = cfg["train"]
    assert t["adam_betas"] == [0.9, 0.98] and t["adam_eps"] == 1e-6 and t["scheduler"] == "constant"
    assert t["weight_decay"] == 0.1


@pytest.mark.parametrize("override,match", [
    ("train.adam_betas=[0.9]", r"train.adam_betas must be two numbers in \[0, 1\)"),
    ("train.adam_betas=[0.9, 1.0]", "train.adam_betas"),
    ("train.adam_betas=0.9", "train.adam_betas"),
    ("train.adam_betas=[0.9, abc]", "train.adam_betas"),
    ("train.adam_eps=0", r"train.adam_eps = 0 is not allowed: give a number > 0"),  # runner/schema.py
    ("train.adam_eps=-1e-8", "train.adam_eps"),
    ("train.weight_decay=-0.1", "train.weight_decay = -0.1 is not allowed: give a number >= 0"),
    ("train.scheduler=cosine", r"train.scheduler must be one of \['linear', 'constant'\]"),
    ("train.vocab_rows=sometimes", r"train.vocab_rows must be one of \['all', 'seen'\] \(got 'sometimes'\)"),  # trained all
])
def test_bad_optimizer_settings_are_rejected(tmp_path, override, match):
    with pytest.raises(ValueError, match=match):
        load_config(config_file(tmp_path, "train:\n  epochs: 1\n"), [override])


def test_scheduler_typo_names_the_nearest_key(tmp_path):
    with pytest.raises(KeyError, match="did you mean 'scheduler'"):
        load_config(config_file(tmp_path, "train:\n  schedular: constant\n"))


def test_trainer_uses_the_constant_schedule_and_rejects_a_bad_one(bert, tmp_path):
    model, tok = bert
    pm = build(model, tok)
    loader = loader_for(pm, tok, examples(8), 4)
    cfg = TrainConfig(epochs=2, lr_prompt=1e-2, lr_head=1e-2, warmup_ratio=0.0, scheduler="constant",
                      adam_betas=(0.9, 0.98), adam_eps=1e-6, show_progress=False, device="cpu")
    Trainer(pm, cfg, output_dir=str(tmp_path / "run")).fit(loader, loader)
    with open(tmp_path / "run" / "log.csv") as f:
        rates = [float(r["value"]) for r in csv.DictReader(f) if r["name"] == "train/lr"]
    assert rates == pytest.approx([1e-2] * 4)
    with pytest.raises(ValueError, match="train.scheduler"):
        Trainer(pm, TrainConfig(epochs=1, scheduler="cosine", show_progress=False, device="cpu")).fit(loader, loader)


def test_the_logged_rate_is_the_prompts_and_each_group_has_its_own(bert, tmp_path):
    """train/lr was the first parameter group's rate: in Random IPT without a task prompt (the table is the
    sparse optimizer's) that group is the head's, so the log showed lr_head as the prompt's rate."""
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=4, sparse=True)  # no task prompt group
    loader = loader_for(pm, tok, examples(8), 4)
    cfg = TrainConfig(epochs=1, lr_prompt=1e-2, lr_head=3e-3, warmup_ratio=0.0, scheduler="constant",
                      show_progress=False, device="cpu")
    Trainer(pm, cfg, output_dir=str(tmp_path / "run")).fit(loader, loader)
    with open(tmp_path / "run" / "log.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["name"].startswith("train/lr")]
    rates = {}
    for r in rows:
        rates.setdefault(r["name"], []).append(float(r["value"]))
    assert rates == {"train/lr": pytest.approx([1e-2] * 2), "train/lr_instance": pytest.approx([1e-2] * 2),
                     "train/lr_head": pytest.approx([3e-3] * 2)}


def test_clipping_norm_is_global_over_dense_and_sparse_gradients():
    from openprompt_ipt.training.optim import clip_grad_norm

    model = FakePromptModel()
    x = torch.randn(5, 4)
    out = model.template["proj"](model.template["table"](torch.tensor([1, 2, 2, 7, 1])) + x)
    model.verbalizer(out).square().sum().mul(10).backward()
    params = [p for p in model.parameters() if p.requires_grad]
    assert model.template["table"].weight.grad.is_sparse
    dense_copies = [nn.Parameter(p.detach().clone()) for p in params]
    for copy, p in zip(dense_copies, params):
        copy.grad = p.grad.to_dense().clone()
    expected_norm = torch.nn.utils.clip_grad_norm_(dense_copies, 0.5)
    norm = clip_grad_norm(params, 0.5)
    assert norm > 0.5 and torch.allclose(norm, expected_norm, rtol=1e-5)
    for copy, p in zip(dense_copies, params):  # every gradient, the sparse table's included, scaled alike
        assert torch.allclose(p.grad.to_dense(), copy.grad, atol=1e-6)
    assert torch.allclose(torch.stack([p.grad.to_dense().norm() for p in params]).norm(), torch.tensor(0.5), atol=1e-4)


def test_trainer_clips_the_sparse_table_gradient_with_the_rest(bert, monkeypatch):
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=4, sparse=True)  # what our runner picks
    loader = loader_for(pm, tok, examples(8), 4)
    seen, step = [], RowSparseAdam.step

    def spy(self, closure=None):
        seen.append(float(torch.stack([p.grad.coalesce().values().norm() for g in self.param_groups
                                       for p in g["params"] if p.grad is not None]).norm()))
        return step(self, closure)

    monkeypatch.setattr(RowSparseAdam, "step", spy)
    cfg = TrainConfig(epochs=1, max_grad_norm=1e-4, warmup_ratio=0.0, show_progress=False, device="cpu")
    Trainer(pm, cfg).fit(loader, loader)
    assert len(seen) == 2 and all(0 < n <= 1e-4 * (1 + 1e-4) for n in seen)


def test_warmup_is_a_fraction_of_the_run_and_a_too_long_warmup_warns(bert, tmp_path):
    from openprompt_ipt.training.optim import resolve_warmup

    assert resolve_warmup(0, 0.25, 40) == 10          # a fraction of the run's optimizer steps
    assert resolve_warmup(3, 0.25, 40) == 3           # explicit steps win
    with pytest.raises(ValueError, match="train.warmup_ratio must be in"):
        resolve_warmup(0, 1.5, 40)
    model, tok = bert
    pm = build(model, tok)
    loader = loader_for(pm, tok, examples(8), 4)
    # IPT A.3's 2000 warmup steps on a 4-step run: the peak rate is never reached -> the trainer says so
    cfg = TrainConfig(epochs=2, lr_prompt=1e-2, lr_head=1e-2, warmup_steps=2000, show_progress=False, device="cpu")
    with pytest.warns(UserWarning, match=r"warmup \(2000 optimizer steps\) >= the whole run \(4 steps\)"):
        Trainer(pm, cfg, output_dir=str(tmp_path / "run")).fit(loader, loader)
    with open(tmp_path / "run" / "log.csv") as f:
        rates = [float(r["value"]) for r in csv.DictReader(f) if r["name"] == "train/lr"]
    assert max(rates) < 1e-4  # what the warning is about


def test_a_null_head_rate_is_the_prompt_rate(bert, tmp_path, monkeypatch):
    """IDPG trains prompt generator and [CLS] head with fairseq's one learning rate: lr_head: null."""
    import openprompt_ipt.training.trainer as trainer_module

    seen = {}
    real = trainer_module.build_optimizers

    def spy(model, lr_prompt, lr_head, *args, **kwargs):
        seen["rates"] = (lr_prompt, lr_head)
        return real(model, lr_prompt, lr_head, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "build_optimizers", spy)
    model, tok = bert
    pm = build(model, tok)
    loader = loader_for(pm, tok, examples(4), 4)
    Trainer(pm, TrainConfig(epochs=1, lr_prompt=5e-3, lr_head=None, show_progress=False, device="cpu")).fit(loader, loader)
    assert seen["rates"] == (5e-3, 5e-3)
    cfg = load_config(config_file(tmp_path, "train:\n  lr_head: null\n"))
    assert cfg["train"]["lr_head"] is None


def overflow_at_step_two(model, tok, max_grad_norm, device="cpu", runtime=None):
    """Train a Random IPT (sparse table) prompt for 2 steps with an inf in the head's gradient at step 2; returns
    (hook calls, the dense optimizer, the sparse one, the prompt model). Also tests/test_cuda.py (the GPU scaler)."""
    import openprompt_ipt.training.trainer as trainer_module
    from openprompt_ipt.generators import use_sparse_rows

    built, real = [], trainer_module.build_optimizers
    trainer_module.build_optimizers = lambda *a, **k: built.append(real(*a, **k)) or built[-1]
    try:
        torch.manual_seed(0)
        pm = build(model, tok, strategy="random", prompt_length=2)
        use_sparse_rows(pm.template)
        head = pm.verbalizer.head.predictions.transform.dense.weight
        calls = [0]

        def overflow_on_the_second_step(grad):
            calls[0] += 1
            return grad * float("inf") if calls[0] == 2 else grad

        head.register_hook(overflow_on_the_second_step)
        loader = loader_for(pm, tok, examples(4), 2)
        cfg = TrainConfig(epochs=1, warmup_ratio=0.0, max_grad_norm=max_grad_norm, show_progress=False,
                          device=device, checkpoint_every=-1)
        Trainer(pm, cfg, runtime=runtime).fit(loader, loader)
    finally:
        trainer_module.build_optimizers = real
    dense, sparse = built[0]
    return calls[0], dense, sparse, pm


@pytest.mark.parametrize("max_grad_norm", [1.0, 0.0])
def test_an_fp16_overflow_skips_every_optimizer_step(bert, monkeypatch, max_grad_norm):
    """fp16's gradient scaler decides per optimizer: an overflow in the head's gradient skipped AdamW's step while
    RowSparseAdam stepped the vocab table (on gradients zeroed by clipping at an inf norm: momentum alone, its step
    count ahead of AdamW's). One overflow skips the whole step, as with one optimizer. (A CPU scaler stands in for
    the GPU's: the decision is the same.)"""
    from openprompt_ipt.training.distributed import Runtime

    scaler = torch.amp.GradScaler("cpu", init_scale=1.0)
    monkeypatch.setattr(Runtime, "grad_scaler", lambda self: scaler)
    calls, dense, sparse, pm = overflow_at_step_two(*bert, max_grad_norm)
    assert calls == 2 and scaler.get_scale() == 0.5  # the overflow was seen, the scale backed off
    assert [int(s["step"]) for s in dense.state.values()] == [1] * len(dense.state)
    assert sparse.state[pm.template.generator.table.embedding.weight]["step"] == 1  # only step 1 was taken
