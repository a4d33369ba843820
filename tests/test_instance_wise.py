"""InstanceWiseTemplate: every strategy through PromptForClassification on tiny BERT and RoBERTa."""
import os

import pytest
import torch
import torch.nn.functional as F

from helpers import SENTENCES, TEXT, batch_for, build, build_prefix, clone, examples
from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.generators import save_table
from openprompt_ipt.training import build_optimizers

STRATEGIES = [dict(strategy="none", task_prompt_length=4),
              dict(strategy="random", prompt_length=5),
              dict(strategy="random", prompt_length=5, token_source="input_prefix"),
              dict(strategy="random", prompt_length=5, table_dim=8, task_prompt_length=2),
              dict(strategy="encoder", prompt_length=4, encoder="textcnn", encoder_hidden=8),
              dict(strategy="encoder", prompt_length=4, encoder="lstm", encoder_hidden=8),
              dict(strategy="encoder", prompt_length=4, encoder="mlp", encoder_hidden=8)]


def table_file(tmp_path, model, dim=None):
    vocab, hidden = model.get_input_embeddings().weight.shape
    weight = torch.randn(vocab, dim or hidden)
    path = str(tmp_path / "table.safetensors")
    save_table(path, weight, {"tokenizer": "tiny"})
    return path, weight


@pytest.mark.parametrize("kwargs", STRATEGIES, ids=lambda k: "-".join(str(v) for v in k.values()))
def test_forward_backward_plm_frozen_and_unchanged(plm, kwargs):
    model, tok = plm
    pm = build(model, tok, **kwargs)
    before = {n: p.detach().clone() for n, p in pm.plm.named_parameters()}
    batch = batch_for(pm, tok, examples(4))
    logits = pm(clone(batch))
    assert logits.shape == (4, 2)
    F.cross_entropy(logits, batch["label"]).backward()
    assert all(p.grad is None for p in pm.plm.parameters()), "the frozen PLM received gradients"
    trained = [p for n, p in pm.template.named_parameters() if p.requires_grad and not n.startswith("raw_embedding")]
    assert trained and all(p.grad is not None for p in trained)
    for opt in build_optimizers(pm, 1e-2, 1e-2):
        opt.step()
    for n, p in pm.plm.named_parameters():
        assert torch.equal(p, before[n]), f"PLM weight {n} changed"


def test_pretrained_strategy_loads_table_rows(plm, tmp_path):
    model, tok = plm
    path, weight = table_file(tmp_path, model)
    pm = build(model, tok, strategy="pretrained", prompt_length=4, pretrained_path=path)
    table = pm.template.generator.table
    assert torch.allclose(table.embedding.weight[: weight.shape[0]], weight)
    F.cross_entropy(pm(batch_for(pm, tok, examples(2))), torch.tensor([0, 1])).backward()


def test_pretrained_narrow_table_gets_projection(bert, tmp_path):
    model, tok = bert
    path, _ = table_file(tmp_path, model, dim=8)
    pm = build(model, tok, strategy="pretrained", prompt_length=4, pretrained_path=path)
    assert pm.template.generator.table.project is not None
    assert pm(batch_for(pm, tok, examples(2))).shape == (2, 2)


def test_encoder_strategy_with_pretrained_frozen_table(bert, tmp_path):
    model, tok = bert
    path, _ = table_file(tmp_path, model, dim=16)
    pm = build(model, tok, strategy="encoder", prompt_length=3, pretrained_path=path, encoder_hidden=8)
    assert not pm.template.generator.source.weight.requires_grad
    F.cross_entropy(pm(batch_for(pm, tok, examples(2))), torch.tensor([0, 1])).backward()
    assert pm.template.generator.source.weight.grad is None


@pytest.mark.parametrize("kwargs", [s for s in STRATEGIES if s["strategy"] != "none"],
                         ids=lambda k: "-".join(str(v) for v in k.values()))
def test_prompts_are_instance_wise(bert, kwargs):
    model, tok = bert
    pm = build(model, tok, **kwargs)
    pm.eval()
    exs = examples(3)
    exs[2].text_a = exs[0].text_a  # same input twice
    batch = batch_for(pm, tok, exs)
    out = pm.template.process_batch(clone(batch))["inputs_embeds"][:, : pm.template.n_prefix]
    assert not torch.allclose(out[0], out[1]), "different inputs got the same prompt"
    assert torch.allclose(out[0], out[2]), "the same input got different prompts"


def test_hidden_states_and_logits_trimmed_to_input_positions(plm):
    model, tok = plm
    pm = build(model, tok, strategy="random", prompt_length=5, task_prompt_length=2)
    batch = batch_for(pm, tok, examples(2))
    length = batch["input_ids"].shape[1]
    outputs = pm.prompt_model(clone(batch))
    assert outputs.logits.shape[1] == length
    assert all(h.shape[1] == length for h in outputs.hidden_states)
    # the verbalizer must read the hidden state of the <mask> token itself
    mask_pos = (batch["input_ids"] == tok.mask_token_id).nonzero()
    processed = pm.template.process_batch(clone(batch))
    raw = pm.plm(inputs_embeds=processed["inputs_embeds"], attention_mask=processed["attention_mask"],
                 output_hidden_states=True).hidden_states[-1]
    for b, pos in mask_pos.tolist():
        assert torch.allclose(outputs.hidden_states[-1][b, pos], raw[b, pos + 7], atol=1e-6)


def test_sparse_update_touches_only_looked_up_rows(bert):
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=4, sparse=True)  # opt-in: the default is dense
    batch = batch_for(pm, tok, examples(2))
    weight = pm.template.generator.table.embedding.weight
    before = weight.detach().clone()
    F.cross_entropy(pm(clone(batch)), batch["label"]).backward()
    assert weight.grad.is_sparse
    optimizers = build_optimizers(pm, 1e-1, 1e-1)
    from openprompt_ipt.training.row_sparse_adam import RowSparseAdam

    sparse_opt = [o for o in optimizers if isinstance(o, RowSparseAdam)]
    assert sparse_opt
    for o in optimizers:
        o.step()
    ids = pm.template.generator.lookup_ids(batch["input_ids"], batch["instance_token_ids"] == 1,
                                           batch["attention_mask"])
    touched = set(ids.flatten().tolist())
    changed = set((weight.detach() != before).any(dim=1).nonzero().flatten().tolist())
    assert changed and changed <= touched
    assert len(changed) < weight.shape[0] / 2
    # optimizer state exists only for the touched rows, not the whole table
    assert RowSparseAdam.rows_with_state(sparse_opt[0]) == len(touched)


def test_restricted_vocab_rows_shrink_the_table(bert):
    model, tok = bert
    seen = sorted({i for s in SENTENCES for i in tok(s, add_special_tokens=False)["input_ids"]})
    full = build(model, tok, strategy="random", prompt_length=4).template.num_trainable_parameters()
    small_pm = build(model, tok, strategy="random", prompt_length=4, vocab_rows=seen)
    small = small_pm.template.num_trainable_parameters()
    hidden = model.config.hidden_size
    assert small == (len(seen) + 2) * hidden < full
    assert small_pm(batch_for(small_pm, tok, examples(2))).shape == (2, 2)


def test_parameter_budget_counts(bert):
    model, tok = bert
    vocab, hidden = model.get_input_embeddings().weight.shape
    t = build(model, tok, strategy="random", prompt_length=4, table_dim=8, task_prompt_length=3).template
    assert t.num_trainable_parameters() == (vocab + 1) * 8 + 8 * hidden + hidden + 3 * hidden


def test_save_load_round_trip_gives_identical_logits(plm, tmp_path):
    model, tok = plm
    pm = build(model, tok, strategy="encoder", prompt_length=3, encoder="lstm", encoder_hidden=8, task_prompt_length=2)
    with torch.no_grad():
        for p in pm.template.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    pm.eval()
    batch = batch_for(pm, tok, examples(3))
    expected = pm(clone(batch))
    pm.template.save_pretrained(str(tmp_path / "tpl"))
    assert sorted(os.listdir(tmp_path / "tpl")) == ["template.safetensors", "template_config.json"]
    torch.manual_seed(123)  # a different init must be overwritten by the load
    loaded = InstanceWiseTemplate.from_pretrained(str(tmp_path / "tpl"), model, tok)
    pm.prompt_model.template = loaded
    pm.eval()
    assert torch.allclose(pm(clone(batch)), expected, atol=1e-6)


def test_max_length_overflow_is_a_clear_error(bert):
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=100)
    batch = batch_for(pm, tok, examples(2, labels=2), max_len=64)
    batch["input_ids"] = batch["input_ids"].repeat(1, 2)
    for k in ("attention_mask", "loss_ids", "instance_token_ids", "soft_token_ids"):
        batch[k] = batch[k].repeat(1, 2)
    with pytest.raises(ValueError, match="max_seq_length"):
        pm(batch)


SOFT_TEXT = '{"soft"} {"soft"} ' + TEXT


@pytest.mark.parametrize("case", ["instance_wise", "instance_wise-soft", "generated_prefix-soft"])
def test_a_plm_loaded_in_bf16_takes_the_prompt_in_its_dtype(plm, case):
    """A PLM loaded in bf16 (``from_pretrained(..., dtype=torch.bfloat16)``) under an fp32 prompt: MixedTemplate's
    ``torch.where`` of its fp32 ``{"soft"}`` table with the PLM's bf16 embeddings gave fp32 ``inputs_embeds``, and
    the PLM's first LayerNorm stopped ("mixed dtype (CPU): expect parameter to have scalar type of Float"), for
    every InstanceWiseTemplate and a GeneratedPrefixTemplate with {"soft"} tokens. The trained tensors stay fp32 (as
    PEFT keeps a prompt's weights) and enter in the PLM's dtype: the logits are those of the fp32 model cast to bf16
    as a whole, and one AdamW step at a small lr moves every task-prompt value."""
    import copy

    model, tok = plm
    with torch.no_grad():  # weights large enough that the prompt moves the logits well past bf16's rounding
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
    kind, soft = case.split("-")[0], case.endswith("-soft")
    text = SOFT_TEXT if soft else TEXT

    def make(m):
        torch.manual_seed(3)
        if kind == "generated_prefix":
            return build_prefix(m, tok, text=text, generator="idpg", prompt_length=4,
                                idpg={"depth": "single", "layer": "dnn", "hidden": 8})
        return build(m, tok, text=text, strategy="random", prompt_length=3, task_prompt_length=2)

    full = make(model)
    ours = make(copy.deepcopy(model).to(torch.bfloat16))
    ours.load_state_dict(full.state_dict())
    trained = {n: p for n, p in ours.template.named_parameters() if p.requires_grad and not n.startswith("raw_embedding")}
    assert {p.dtype for p in trained.values()} == {torch.float32}
    reference = copy.deepcopy(full).to(torch.bfloat16)  # everything, the prompt included, in bf16
    batch = batch_for(full, tok, examples(4))
    with torch.no_grad():
        logits, expected = ours(clone(batch)), reference(clone(batch))
        without = copy.deepcopy(reference)
        for n, p in without.template.named_parameters():
            if n in trained:
                p.zero_()
        moved = (without(clone(batch)).float() - expected.float()).abs().max()
    assert logits.dtype == torch.bfloat16
    atol = 0.0 if kind == "instance_wise" else 0.05  # IDPG's generator computes in fp32 here, in bf16 there
    torch.testing.assert_close(logits.float(), expected.float(), rtol=0, atol=atol)
    assert moved > 0.1, moved  # the prompt counts (2x the tolerance above): not two prompt-free outputs matching
    ours.train()
    optimizer = torch.optim.AdamW(trained.values(), lr=5e-5)
    before = {n: p.detach().clone() for n, p in trained.items()}
    F.cross_entropy(ours(clone(batch)).float(), batch["label"]).backward()
    assert all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in trained.values())
    optimizer.step()
    assert all(not torch.equal(p, before[n]) for n, p in trained.items())
    if "task_prompt" in trained:
        assert bool((ours.template.task_prompt != before["task_prompt"]).all())  # no step rounded away


@pytest.mark.parametrize("template", ["instance_wise", "generated_prefix"])
def test_a_plm_resized_after_the_template_is_one_line_before_any_lookup(bert, template, tmp_path):
    """``plm.resize_token_embeddings`` after the template was built: the first new id read IPT's pad row (another
    prompt, no error), the next was an IndexError inside the table (on CUDA a device-side assert). Now
    ``process_batch`` (and ``save_pretrained``) is one line naming the order that works; resizing first trains."""
    import copy

    from openprompt.data_utils import InputExample

    mlm, tok = bert
    tok = copy.deepcopy(tok)
    make = (lambda m, t: build(m, t, prompt_length=3)) if template == "instance_wise" else \
        (lambda m, t: build_prefix(m, t, generator="ipt_random", prompt_length=3))
    pm = make(mlm, tok)
    tok.add_tokens(["newword", "otherword"])
    mlm.resize_token_embeddings(len(tok))
    for text in ("the newword movie", "the otherword movie"):
        batch = batch_for(pm, tok, [InputExample(guid="0", text_a=text, text_b="is it good", label=0)])
        # transformers 4 resizes into a new module (the template keeps the old one): the batch's id tells the size
        with pytest.raises(ValueError, match=r"vocabulary changed from 57 to (59|at least 5[89]) tokens after the "
                                             r"template was built.*resize the PLM first") as e:
            pm(batch)
        assert "\n" not in str(e.value)
    if pm.template.raw_embedding is mlm.get_input_embeddings():  # resized in place (transformers 5)
        with pytest.raises(ValueError, match="resize the PLM first"):
            pm.template.save_pretrained(str(tmp_path / "t"))
    pm = make(mlm, tok)  # built on the resized PLM: the new ids have rows of their own
    with torch.no_grad():
        pm(batch_for(pm, tok, [InputExample(guid="0", text_a="the otherword movie", text_b="is it good", label=0)]))


def test_a_tokenizer_larger_than_the_plm_is_one_line_at_build(bert):
    """``tokenizer.add_tokens`` without ``plm.resize_token_embeddings``: the first batch with a new token stopped at
    an IndexError inside the lookups; a padded vocabulary (more rows than tokens) builds and runs."""
    import copy

    mlm, tok = bert
    more = copy.deepcopy(tok)
    more.add_tokens(["newword"])
    with pytest.raises(ValueError, match=r"has 58 tokens but the PLM's input embeddings have 57 rows.*"
                                         r"plm.resize_token_embeddings\(len\(tokenizer\)\)") as e:
        build(mlm, more, prompt_length=3)
    assert "\n" not in str(e.value)
    mlm.resize_token_embeddings(64)  # padded to a multiple: 57 tokens, 64 rows
    pm = build(mlm, tok, prompt_length=3)
    with torch.no_grad():
        pm(batch_for(pm, tok, examples(2)))
