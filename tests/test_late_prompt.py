"""Late prompts (LPT and the late placement of IPT / S-IDPG): the layers below never see the prompt, the backward
stops there, padding is excluded, outputs keep the text's positions, and bad input is one line."""
import copy
import json
import os

import pytest
import torch
from torch import nn

from helpers import batch_for, build_prefix, clone, examples
from openprompt_ipt import GeneratedPrefixTemplate
from openprompt_ipt.generators.pooling import bin_mask as pooling_bins

KINDS = ("npg", "appg", "mppg", "plain")
CASES = {
    **{f"lpt-{k}": dict(generator="lpt", lpt={"kind": k, "bottleneck": 8}) for k in KINDS},
    "late-ipt_random": dict(generator="ipt_random", injection="late", ipt={"projection_hidden": 8}),
    "late-s_idpg": dict(generator="idpg", injection="late", idpg={"depth": "single", "layer": "dnn", "hidden": 8}),
}


def deeper(plm, layers=4):
    """The fixture's tiny model with ``layers`` blocks (so late_layer has room to move)."""
    model, tok = plm
    cfg = copy.deepcopy(model.config)
    cfg.num_hidden_layers = layers
    torch.manual_seed(0)
    return type(model)(cfg).eval(), tok


@pytest.mark.parametrize("case", list(CASES))
def test_every_late_generator_trains_and_only_it(plm, case):
    model, tok = plm
    pm = build_prefix(model, tok, late_layer=1, **CASES[case])
    batch = batch_for(pm, tok, examples())
    out = pm.prompt_model(clone(batch))
    n = batch["input_ids"].size(1)
    assert out.logits.shape[:2] == (6, n), "the late prompt's positions must be trimmed from the logits"
    pm(clone(batch)).logsumexp(-1).sum().backward()
    assert all(p.grad is None for p in model.parameters())
    for name, p in pm.template.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {name}"


@pytest.mark.parametrize("layer", [1, 2, 3])
@pytest.mark.parametrize("kind", ["npg", "appg"])
def test_layers_below_the_prompt_equal_the_frozen_model_bit_for_bit(plm, layer, kind):
    model, tok = deeper(plm)
    pm = build_prefix(model, tok, generator="lpt", late_layer=layer, lpt={"kind": kind, "bottleneck": 8})
    batch = batch_for(pm, tok, examples())
    with torch.no_grad():
        prompted = pm.prompt_model(clone(batch)).hidden_states
        # as OpenPrompt's PromptModel calls the PLM (input embeddings and the mask), with nothing armed
        plain = model(inputs_embeds=model.get_input_embeddings()(batch["input_ids"]),
                      attention_mask=batch["attention_mask"], output_hidden_states=True).hidden_states
    assert len(prompted) == len(plain) == 5
    for i in range(layer + 1):  # the embeddings, then layers 1..l
        assert torch.equal(prompted[i], plain[i]), f"hidden state {i} (at or below late_layer {layer}) changed"
    for i in range(layer + 1, 5):
        assert prompted[i].shape == plain[i].shape, "the prompt positions must be trimmed from every hidden state"
        assert not torch.allclose(prompted[i], plain[i], atol=1e-4), f"layer {i} above the prompt did not see it"


def test_the_backward_stops_at_the_prompt_even_where_lower_layers_could_train(bert):
    """With every PLM weight trainable (no freezing), only the blocks above late_layer get a gradient: the hidden
    states are detached where the prompt joins, so the blocks below build no graph for the backward."""
    model, tok = deeper((bert[0], bert[1]))
    pm = build_prefix(model, tok, generator="lpt", late_layer=2, lpt={"kind": "npg", "bottleneck": 8})
    model.requires_grad_(True)
    batch = batch_for(pm, tok, examples())
    pm.prompt_model(clone(batch)).logits.sum().backward()
    blocks = model.bert.encoder.layer
    for i, block in enumerate(blocks):
        got = any(p.grad is not None and p.grad.abs().sum() > 0 for p in block.parameters())
        assert got == (i >= 2), f"block {i + 1}: gradient {'missing' if i >= 2 else 'present'}"
    assert model.bert.embeddings.position_embeddings.weight.grad is None


@pytest.mark.parametrize("kind", KINDS)
def test_padding_does_not_change_an_examples_prediction(plm, kind):
    """The widened mask lets the prompt attend to real tokens only, and pooling skips padding: an example scores
    the same in a padded batch as alone."""
    model, tok = deeper(plm, 3)
    pm = build_prefix(model, tok, generator="lpt", late_layer=1, lpt={"kind": kind, "bottleneck": 8, "dropout": 0.0})
    pm.eval()
    exs = examples()
    with torch.no_grad():
        together = pm(batch_for(pm, tok, exs))
        for i, ex in enumerate(exs):
            alone = pm(batch_for(pm, tok, [ex]))
            assert torch.allclose(alone[0], together[i], atol=1e-5), f"example {i} changed with padding"


@pytest.mark.parametrize("m,t", [(7, 3), (5, 5), (9, 4), (2, 5), (1, 3), (12, 5)])
def test_pooling_bins_equal_torchs_adaptive_pooling_on_the_real_tokens(m, t):
    torch.manual_seed(0)
    n = 14
    x = torch.randn(1, n, 3)
    mask = torch.zeros(1, n, dtype=torch.long)
    mask[0, :m] = 1
    bins = pooling_bins(mask, t)[0].float()                             # (t, n)
    avg = bins @ x[0] / bins.sum(-1, keepdim=True)
    mx = x[0].unsqueeze(0).masked_fill(~bins.bool().unsqueeze(-1), float("-inf")).max(dim=1).values
    real = x[:, :m].transpose(1, 2)
    assert torch.allclose(avg, nn.AdaptiveAvgPool1d(t)(real)[0].T, atol=1e-6)
    assert torch.equal(mx, nn.AdaptiveMaxPool1d(t)(real)[0].T)


def test_save_load_and_a_deep_copy_keep_the_late_prompt(bert, tmp_path):
    model, tok = bert
    pm = build_prefix(model, tok, generator="lpt", late_layer=1, lpt={"kind": "appg", "bottleneck": 8})
    with torch.no_grad():
        for p in pm.template.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    pm.eval()
    batch = batch_for(pm, tok, examples())
    expected = pm.prompt_model(clone(batch)).logits
    pm.template.save_pretrained(str(tmp_path / "t"))
    loaded = GeneratedPrefixTemplate.from_pretrained(str(tmp_path / "t"), model, tok)
    assert loaded.injection == "late" and loaded.placement.late_layer == 1
    loaded.eval()
    twin = copy.deepcopy(pm)
    pm.prompt_model.template = loaded
    with torch.no_grad():
        assert torch.allclose(pm.prompt_model(clone(batch)).logits, expected, atol=1e-6)
        for p in twin.template.parameters():
            if p.requires_grad:
                p.add_(1.0)
        assert not torch.allclose(twin.prompt_model(clone(batch)).logits, expected, atol=1e-4), \
            "a deep copy ran without its own late prompt"


@pytest.mark.parametrize("kwargs,message", [
    (dict(generator="lpt", late_layer=0), "late_layer must be an integer in 1..1"),
    (dict(generator="lpt", late_layer=2), "has 2 layers"),
    (dict(generator="lpt", late_layer=1.5), "late_layer must be an integer"),
    (dict(generator="lpt"), "injection: late needs late_layer"),
    (dict(generator="prefix", late_layer=1), "late_layer is read by injection: late only"),
    (dict(generator="lpt", injection="kv", late_layer=None), "use injection: late"),
    (dict(generator="lpt", late_layer=1, prompt_length=0), "prompt_length must be a positive integer"),
    (dict(generator="lpt", late_layer=1, lpt={"kind": "avg"}), "unknown lpt.kind 'avg'"),
    (dict(generator="lpt", late_layer=1, lpt={"pooling": "npg"}), "unknown key 'lpt.pooling'"),
    (dict(generator="lpt", late_layer=1, text='{"soft"} {"placeholder":"text_a"} {"mask"} .'), '{"soft"} tokens'),
    (dict(generator="idpg", injection="late", late_layer=1, idpg={"depth": "multi"}), "idpg.depth 'multi'"),
    # a count that is not whole was truncated without a word (1.5 -> a bottleneck of 1)
    (dict(generator="lpt", late_layer=1, lpt={"bottleneck": 1.5}), "lpt.bottleneck must be a positive integer, got 1.5"),
    (dict(generator="lpt", late_layer=1, lpt={"bottleneck": True}), "lpt.bottleneck must be a positive integer, got True"),
])
def test_bad_late_settings_are_one_line(bert, kwargs, message):
    model, tok = bert
    with pytest.raises((ValueError, KeyError)) as info:
        build_prefix(model, tok, **kwargs)
    text = str(info.value)
    assert message in text and "\n" not in text
    # a refused template leaves no hooks on the PLM (a notebook retrying settings piled up dead ones)
    hooks = [m for m in model.modules() if m._forward_pre_hooks or m._forward_hooks]
    assert not hooks, f"{len(hooks)} module(s) kept hooks of a template that was refused"


def test_a_model_whose_layers_cannot_be_found_is_refused(bert):
    from openprompt_ipt.injection import LatePromptInjector

    class NoEncoder(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.blocks = nn.ModuleList([nn.Linear(2, 2)])

    with pytest.raises(ValueError, match="cannot find the attention layout"):
        LatePromptInjector(NoEncoder(bert[0].config), 1)


def test_pooling_with_more_prompt_positions_than_tokens_repeats_tokens_and_warns(bert, caplog):
    model, tok = bert
    pm = build_prefix(model, tok, generator="lpt", late_layer=1, prompt_length=40,
                      lpt={"kind": "mppg", "bottleneck": 8})
    batch = batch_for(pm, tok, examples(2))
    with caplog.at_level("WARNING"):
        logits = pm(clone(batch))
    assert torch.isfinite(logits).all()
    assert any("repeats their tokens" in r.getMessage() for r in caplog.records)


# ---- the 🤗 door ----------------------------------------------------------------------------------------
def test_hf_lpt_defaults_to_the_middle_layer_and_refuses_a_bad_one_in_one_line(bert):
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    mlm, tok = deeper(bert)
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig(method="lpt", prompt_length=3), tok)
    assert model.injector.layer == 2  # 4 layers: the prompt joins after layer 2
    batch = tok(["the cat sat", "a dog ran fast on the mat"], padding=True, return_tensors="pt")
    out = model(**batch, output_hidden_states=True)
    assert out.logits.shape == (2, 2) and all(h.shape[1] == batch["input_ids"].shape[1] for h in out.hidden_states)
    with pytest.raises(ValueError) as info:
        get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig(method="lpt", late_layer=4), tok)
    assert "late_layer must be an integer in 1..3" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="late_layer is read by late injection only"):
        InstancePromptConfig(method="p_tuning_v2", late_layer=2)


def test_hf_lpt_trains_with_a_stock_adamw_loop(bert):
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.5),
                                      InstancePromptConfig(method="lpt", prompt_length=3, options={"kind": "appg"}), tok)
    batch = tok(["the movie was great", "good film", "terrible movie", "bad film"], padding=True, return_tensors="pt")
    labels = torch.tensor([1, 1, 0, 0])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(30):
        loss = model(**batch, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses[::10]


# ---- the runner: predict, resume, init_from -------------------------------------------------------------
def _late_cfg(model_dir, data_dir, **train):
    from test_predict_and_runs import tiny_raw

    from openprompt_ipt.runner.config import DEFAULTS, merge_config

    raw = tiny_raw(model_dir, data_dir, **train)
    raw["template"] = "generated_prefix"
    raw["generated_prefix"] = {"text": raw.pop("instance_wise")["text"], "generator": "lpt", "prompt_length": 2,
                               "late_layer": 1, "lpt": {"kind": "appg", "bottleneck": 8}}
    return merge_config(DEFAULTS, raw, "", {"generated_prefix": raw["generated_prefix"],
                                            "soft_verbalizer": raw["soft_verbalizer"]})


def test_runner_predicts_resumes_and_inits_from_a_late_run(tmp_path, monkeypatch):
    import os

    from conftest import _bert
    from helpers import interrupt_at_eval
    from test_training import write_cb

    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    torch.manual_seed(0)
    model, _ = _bert(str(tmp_path / "plm"))
    model_dir = str(tmp_path / "plm" / "bert")  # beside the tokenizer files _bert wrote
    model.save_pretrained(model_dir)
    data = write_cb(tmp_path / "CB")
    cfg = _late_cfg(model_dir, data, checkpoint_every=1)
    full = run_experiment(cfg, output_dir=str(tmp_path / "full"), show_progress=False)
    assert full["method"] == "LPT-APPG"
    rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
    preds = load_run(str(tmp_path / "full")).predict(rows)
    accuracy = sum(p["label"] == r["label"] for p, r in zip(preds, rows)) / len(rows)
    assert accuracy == pytest.approx(full["test"]["accuracy"])

    restore = interrupt_at_eval(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(cfg, output_dir=str(tmp_path / "killed"), show_progress=False)
    restore()
    resumed = run_experiment(cfg, output_dir=str(tmp_path / "killed"), show_progress=False, resume=True)
    for key in ("best_dev", "test", "history"):
        assert resumed[key] == full[key]

    again = run_experiment({**cfg, "init_from": str(tmp_path / "full")}, output_dir=str(tmp_path / "again"),
                           show_progress=False)
    assert again["init_from"]  # the run records the finished run its prompt (+ head) started from


def test_runner_refuses_a_late_prompt_on_an_unfrozen_plm(tmp_path):
    from conftest import _bert
    from test_training import write_cb

    from openprompt_ipt.runner.experiment import run_experiment

    model, _ = _bert(str(tmp_path / "plm"))
    model.save_pretrained(str(tmp_path / "plm" / "bert"))
    cfg = _late_cfg(str(tmp_path / "plm" / "bert"), write_cb(tmp_path / "CB"))
    cfg["plm"]["freeze"] = False
    with pytest.raises(ValueError, match="plm.freeze: false with injection: late"):
        run_experiment(cfg, output_dir=str(tmp_path / "run"), show_progress=False)
    assert not os.path.exists(tmp_path / "run" / "metrics.json")


@pytest.mark.parametrize("method", ["lpt", "late_ipt"])
def test_hf_sequence_classifier_reads_the_cls_state_not_the_late_prompt(plm, method):
    """The base's head (BERT: pooler + classifier; RoBERTa: classifier on <s>) reads position 0 of the encoder's
    output: with the late prompt still leading the sequence there, it read the first prompt vector, while the
    hidden states the model returns (and the OpenPrompt door's cls_head) put [CLS] at position 0."""
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    mlm, tok = deeper(plm)
    clf = classifier_from(mlm, initializer_range=0.5)
    options = {"dropout": 0.0} if method == "lpt" else {}
    model = get_instance_prompt_model(clf, InstancePromptConfig(method=method, prompt_length=3, late_layer=2,
                                                                options=options), tok).eval()
    batch = tok(["the cat sat", "a dog ran fast on the mat"], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
        last = out.hidden_states[-1]
        pooler = getattr(clf.base_model, "pooler", None)
        expected = clf.classifier(pooler(last)) if pooler is not None else clf.classifier(last)
    torch.testing.assert_close(out.logits, expected, rtol=0, atol=1e-5)


def test_hf_refused_label_words_leave_the_base_as_it_was(bert):
    """label_words on a classifier without a vocabulary head are refused after the late prompt's hooks went onto
    the base and the base was frozen: the caller's model kept dead hooks and no longer trained."""
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    mlm, tok = deeper(bert)
    clf = classifier_from(mlm)
    with pytest.raises(ValueError, match="label_words need a masked LM"):
        get_instance_prompt_model(clf, InstancePromptConfig(method="lpt", prompt_length=3,
                                                            label_words=[["bad"], ["good"]]), tok)
    assert not [m for m in clf.modules() if m._forward_pre_hooks or m._forward_hooks]
    assert all(p.requires_grad for p in clf.parameters())


@pytest.mark.parametrize("config", [dict(method="lpt", prompt_length=3, late_layer=99),
                                    dict(method="lpt", prompt_length=3, options={"kind": "nope"})])
def test_hf_any_refused_setting_leaves_the_base_as_it_was(bert, config):
    """A setting refused after the base was frozen (a late layer past the top, an unknown generator kind) left the
    caller's model frozen, so a retry or a plain fine-tune of it trained nothing."""
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

    mlm, tok = deeper(bert)
    clf = classifier_from(mlm)
    clf.bert.embeddings.requires_grad_(False)  # the caller's own choice: kept frozen
    with pytest.raises(ValueError):
        get_instance_prompt_model(clf, InstancePromptConfig(**config), tok)
    assert not [m for m in clf.modules() if m._forward_pre_hooks or m._forward_hooks]
    assert all(p.requires_grad for n, p in clf.named_parameters() if "embeddings" not in n)
    assert not any(p.requires_grad for p in clf.bert.embeddings.parameters())


def test_hf_default_late_layer_is_saved_as_the_layer_it_is(bert, tmp_path):
    """late_layer=None resolves to the model's middle when built, but the saved config kept None: a release with
    another default would load the prompt at another layer. Folders saved with None still load (as the middle)."""
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

    mlm, tok = deeper(bert)
    pm = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig(method="lpt", prompt_length=2), tok)
    assert pm.prompt_config.late_layer == 2
    pm.save_pretrained(str(tmp_path / "new"))
    assert json.load(open(tmp_path / "new" / "instance_prompt_config.json"))["prompt"]["late_layer"] == 2
    pm.prompt_config.late_layer = None  # what the previous release wrote
    pm.save_pretrained(str(tmp_path / "old"))
    batch = tok(["a b c", "d e"], return_tensors="pt", padding=True)
    with torch.no_grad():
        want = pm.eval()(**batch).logits
        for folder in ("new", "old"):
            torch.manual_seed(1)
            loaded = InstancePromptModel.from_pretrained(classifier_from(deeper(bert)[0]), str(tmp_path / folder), tok)
            assert loaded.prompt_config.late_layer == 2
            torch.testing.assert_close(loaded(**batch).logits, want)
