"""Token selection, pooling and encoders in isolation."""
import pytest
import torch

from openprompt_ipt.generators import EncoderConfig, PromptEncoder, VocabPromptTable
from openprompt_ipt.generators.pooling import bin_weights
from openprompt_ipt.generators.token_select import first_content_ids, utilized_content_ids, utilized_length


def test_first_content_ids_skips_non_content_and_pads():
    ids = torch.tensor([[101, 7, 8, 50, 9, 102, 0], [101, 5, 102, 0, 0, 0, 0]])
    content = torch.tensor([[0, 1, 1, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0]]).bool()
    out = first_content_ids(ids, content, 4, pad_id=999)
    assert out.tolist() == [[7, 8, 9, 999], [5, 999, 999, 999]]
    assert first_content_ids(ids, content, 2, pad_id=999).tolist() == [[7, 8], [5, 999]]


@pytest.mark.parametrize("rate", [0.05, 0.1, 0.3, 0.5, 1.0])
def test_utilized_content_ids_takes_ceil_rate_n(rate):
    lengths = [1, 7, 20, 33]
    T = 40
    content = torch.zeros(len(lengths), T, dtype=torch.bool)
    for i, n in enumerate(lengths):
        content[i, 1: 1 + n] = True
    ids = torch.arange(T).repeat(len(lengths), 1)
    got, mask = utilized_content_ids(ids, content, rate, pad_id=-1)
    for i, n in enumerate(lengths):
        k = utilized_length(n, rate)
        assert mask[i].sum().item() == k
        assert got[i, :k].tolist() == list(range(1, 1 + k))


def test_bins_cover_every_valid_token_once_even_when_shorter_than_k():
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()
    w = bin_weights(mask, 4)
    assert w.shape == (2, 4, 5)
    assert torch.allclose(w.sum(-1), torch.ones(2, 4))  # no empty bin
    assert (w[0, :, 3:] == 0).all()  # padding never pooled


@pytest.mark.parametrize("name", ["textcnn", "lstm", "mlp"])
@pytest.mark.parametrize("k,T,hidden", [(1, 3, 16), (5, 2, 24), (16, 40, 8), (100, 30, 12)])
def test_encoder_emits_exactly_prompt_length_tokens(name, k, T, hidden):
    enc = PromptEncoder(EncoderConfig(name=name, input_dim=10, hidden=6), prompt_length=k, output_dim=hidden)
    mask = torch.ones(3, T, dtype=torch.bool)
    mask[1, T // 2 + 1:] = False
    out = enc(torch.randn(3, T, 10), mask)
    assert out.shape == (3, k, hidden)


def test_encoder_ignores_padding_content():
    enc = PromptEncoder(EncoderConfig(name="textcnn", input_dim=4, hidden=3, dropout=0.0), 2, 5).eval()
    x = torch.randn(1, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]]).bool()
    y = x.clone()
    y[:, 4:] = 100.0
    assert torch.allclose(enc(x, mask), enc(y, mask))


def test_restricted_table_shares_one_row_for_unseen_ids():
    t = VocabPromptTable(vocab_size=20, output_dim=4, rows=[3, 5])
    out = t(torch.tensor([[3, 5, 7, 9, 20]]))
    assert not torch.allclose(out[0, 0], out[0, 1])
    assert torch.allclose(out[0, 2], out[0, 3])  # 7 and 9 are both "other"
    assert not torch.allclose(out[0, 4], out[0, 2])  # the pad row is its own


def test_row_sparse_adam_matches_sparse_adam_and_keeps_state_for_touched_rows_only():
    from openprompt_ipt.training.row_sparse_adam import RowSparseAdam

    torch.manual_seed(0)
    a = torch.nn.Embedding(50, 4, sparse=True)
    b = torch.nn.Embedding(50, 4, sparse=True)
    b.weight.data.copy_(a.weight.data)
    opt_a, opt_b = RowSparseAdam(a.parameters(), lr=0.1), torch.optim.SparseAdam(b.parameters(), lr=0.1)
    for ids in ([1, 2, 3], [3, 4], [1, 9, 9]):
        for emb, opt in ((a, opt_a), (b, opt_b)):
            opt.zero_grad()
            (emb(torch.tensor(ids)) ** 2).sum().backward()
            opt.step()
    assert torch.allclose(a.weight, b.weight, atol=1e-6)
    assert RowSparseAdam.rows_with_state(opt_a) == 5  # rows 1, 2, 3, 4, 9


def test_lstm_encoder_runs_in_fp32_under_cpu_bf16_autocast(monkeypatch):
    """On a CPU without AVX-512 oneDNN cannot run a bf16 LSTM (issue #32): the LSTM body leaves autocast
    for its recurrence (fp32), the head after it is autocast again, and gradients reach every weight."""
    from helpers import cpu_without_bf16_lstm

    cpu_without_bf16_lstm(monkeypatch)
    enc = PromptEncoder(EncoderConfig(name="lstm", input_dim=10, hidden=6), prompt_length=3, output_dim=8)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 4:] = False
    x = torch.randn(2, 7, 10)
    seen = []
    enc.body.lstm.register_forward_hook(lambda m, i, o: seen.append(o[0].data.dtype))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = enc(x, mask)
    assert seen == [torch.float32] and out.dtype == torch.bfloat16 and out.shape == (2, 3, 8)
    out.float().sum().backward()
    assert all(p.grad is not None for p in enc.parameters())
    # outside autocast nothing changes
    enc.zero_grad()
    assert enc(x, mask).dtype == torch.float32
