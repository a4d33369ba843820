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
