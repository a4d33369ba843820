"""RowSparseAdam: resume in half precision, lazy decoupled weight decay (issue #24 items 7 and 8)."""
import pytest
import torch
from torch import nn

from openprompt_ipt.training.row_sparse_adam import RowSparseAdam

ROWS, DIM = 8000, 4


def _steps(table, opt, batches):
    for rows in batches:  # gradient of a row = how often the batch looks it up: moments differ per row,
        table(rows).float().sum().backward()  # and stay clear of fp16 underflow (v -> 0, eps -> 0 in fp16)
        opt.step()
        opt.zero_grad(set_to_none=True)


def _batches(seed, n):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, ROWS, (1000,), generator=g) for _ in range(n)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_resume_in_half_precision_restores_the_state_and_continues_like_an_uninterrupted_run(dtype, tmp_path):
    torch.manual_seed(0)
    table = nn.Embedding(ROWS, DIM, sparse=True).to(dtype)
    opt = RowSparseAdam(table.parameters(), lr=1e-2)
    _steps(table, opt, _batches(0, 8))   # ~5,000 rows: slots past the exact integers of bf16 (256) and fp16 (2048)
    torch.save({"table": table.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt.pt")
    saved = torch.load(tmp_path / "ckpt.pt")

    resumed = nn.Embedding(ROWS, DIM, sparse=True).to(dtype)
    resumed.load_state_dict(saved["table"])
    opt2 = RowSparseAdam(resumed.parameters(), lr=1e-2)
    opt2.load_state_dict(saved["opt"])
    before, after = saved["opt"]["state"][0], opt2.state[resumed.weight]
    assert after["slot_of"].dtype == torch.long and torch.equal(after["slot_of"], before["slot_of"])
    assert (after["step"], after["used"]) == (before["step"], before["used"])
    for key in ("exp_avg", "exp_avg_sq"):
        assert after[key].dtype == dtype and torch.equal(after[key], before[key])

    more = _batches(1, 4)
    _steps(table, opt, more)
    _steps(resumed, opt2, more)
    assert torch.equal(resumed.weight, table.weight)


def _one_step(weight_decay, lr=0.1):
    table = nn.Embedding(6, 2, sparse=True)
    with torch.no_grad():
        table.weight.copy_(torch.arange(12, dtype=torch.float).view(6, 2) + 1)
    start = table.weight.detach().clone()
    opt = RowSparseAdam(table.parameters(), lr=lr, weight_decay=weight_decay)
    table(torch.tensor([1, 3])).sum().backward()
    opt.step()
    return start, table.weight.detach()


def test_weight_decay_is_decoupled_and_reaches_only_the_touched_rows():
    start, plain = _one_step(0.0)
    _, decayed = _one_step(0.5)
    touched, untouched = [1, 3], [0, 2, 4, 5]
    # AdamW's rule: w <- w - lr * wd * w, then the Adam step (identical with and without decay)
    assert torch.allclose(decayed[touched], plain[touched] - 0.1 * 0.5 * start[touched], atol=1e-6)
    assert torch.equal(decayed[untouched], start[untouched])  # lazy: rows without a gradient keep their values
    assert not torch.equal(decayed[touched], plain[touched])


def test_bad_weight_decay_is_one_clear_error():
    with pytest.raises(ValueError, match="weight_decay must be a number >= 0"):
        RowSparseAdam(nn.Embedding(3, 2, sparse=True).parameters(), weight_decay=-1.0)


def _pair(eps):
    """The same 6x3 table twice: sparse with RowSparseAdam, dense with torch.optim.AdamW (weight decay 0: a row
    never touched stays put under both)."""
    torch.manual_seed(0)
    start = torch.randn(6, 3)
    sparse, dense = nn.Embedding(6, 3, sparse=True), nn.Embedding(6, 3)
    with torch.no_grad():
        sparse.weight.copy_(start)
        dense.weight.copy_(start)
    kw = dict(lr=1e-2, betas=(0.9, 0.98), eps=eps, weight_decay=0.0)
    return start, sparse, dense, RowSparseAdam(sparse.parameters(), **kw), torch.optim.AdamW(dense.parameters(), **kw)


@pytest.mark.parametrize("eps, scale", [(1e-8, 1.0), (1e-8, 1e-4), (1e-6, 1e-3)])  # IDPG's eps, small gradients
def test_rows_touched_every_step_from_their_first_take_adamws_steps(eps, scale):
    """Rows 0-1 are looked up every step, row 2 from step 4 on: both move as under dense AdamW (its eps placement and
    its bias corrections by the table's step count), to float noise; rows 3-5 never move."""
    start, sparse, dense, opt_s, opt_d = _pair(eps)
    g = torch.Generator().manual_seed(1)
    for step in range(12):
        rows = torch.tensor([0, 1, 1] + ([2] if step >= 3 else []))
        w = torch.randn(len(rows), 3, generator=g) * scale
        for table, opt in ((sparse, opt_s), (dense, opt_d)):
            (table(rows) * w).sum().backward()
            opt.step()
            opt.zero_grad()
    moved = (dense.weight[:3] - start[:3]).abs().max()
    assert (sparse.weight[:3] - dense.weight[:3]).abs().max() <= 1e-5 * moved
    assert torch.equal(sparse.weight[3:], start[3:]) and torch.equal(dense.weight[3:], start[3:])


def test_a_row_left_out_of_a_step_keeps_its_value_where_adamw_moves_it_on_its_momentum():
    """The lazy part (docs/training.md): after its last lookup a row stops; dense AdamW keeps moving it."""
    start, sparse, dense, opt_s, opt_d = _pair(1e-8)
    for step in range(4):
        rows = torch.tensor([0, 1] if step == 0 else [0])
        for table, opt in ((sparse, opt_s), (dense, opt_d)):
            table(rows).sum().backward()
            opt.step()
            opt.zero_grad()
    after_one = start[1] - 1e-2  # AdamW's first step: lr * sign(g)
    assert torch.allclose(sparse.weight[1], after_one, atol=1e-6)
    assert (dense.weight[1] < after_one - 1e-3).all()  # three more steps on the momentum of step 1
