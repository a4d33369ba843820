"""An example's prediction does not depend on its batch-mates: scored alone or padded among longer and shorter
examples (right padding, eval mode), its logits agree to float noise, for every generator, injection and strategy,
in both doors, on BERT and RoBERTa. A failure means padding leaks into the prompt (an IPT lookup reading pads, an
encoder or sentence pooling averaging them, a mask not widened for the prompt, positions shifted by it).
The 🤗 door also gives the same prompt whether or not the batch carries ``special_tokens_mask``."""
import copy

import pytest
import torch
from openprompt.data_utils import InputExample

from helpers import batch_for, build, build_prefix
from test_hf_trainer import CASES as HF_CASES, _glove, _table, classifier_from, config_for
from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat and the dog ran fast", "a dog", "she said the movie was great", "good"]
PAIRS = ["is it good", "yes the film was great and good", "no", "what why how"]
ATOL = 1e-5

HF_EXTRA = {  # beyond the Trainer test's cases: the other encoders, sources, positions and M-IDPG inputs
    "ipt-encoder-textcnn": dict(method="ipt", strategy="encoder", prompt_length=3,
                                options={"encoder": "textcnn", "encoder_hidden": 8}),
    "ipt-encoder-lstm": dict(method="ipt", strategy="encoder", prompt_length=3,
                             options={"encoder": "lstm", "encoder_hidden": 8}),
    "ipt-input_prefix": dict(method="ipt", prompt_length=6, options={"token_source": "input_prefix"}),
    "prefix_ipt-faithful": dict(method="prefix_ipt", prompt_length=3, options={"faithful": True}),
    "prefix_ipt-encoder-hidden": dict(method="prefix_ipt", strategy="encoder", injection="hidden", prompt_length=3,
                                      options={"encoder": "lstm", "encoder_hidden": 8, "projection_hidden": 8}),
    "s_idpg-phm-after_a": dict(method="s_idpg", prompt_length=3, insert_position=1,
                               options={"layer": "phm", "phm_n": 4, "hidden": 8}),
    "m_idpg-previous-hidden": dict(method="m_idpg", prompt_length=3,
                                   options={"layer": "phm", "phm_n": 4, "hidden": 8, "input_from": "previous"}),
    "m_idpg-previous-kv": dict(method="m_idpg", injection="kv", prompt_length=3,
                               options={"layer": "dnn", "hidden": 8, "input_from": "previous"}),
    "p_tuning_v2-kv-keep": dict(method="p_tuning_v2", prompt_length=3, prefix_positions="keep"),
}


def perturbed(module, seed=3, scale=0.3):
    """Move every trained tensor off its initial value (a zero-initialised part would hide a leak)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * scale)
    return module


def hf_model(plm, case, tmp_path):
    mlm, tok = plm
    cases = {**HF_CASES, **HF_EXTRA}
    kw = copy.deepcopy(cases[case])
    for key, value in kw.get("options", {}).items():
        kw["options"][key] = {"{table}": lambda: _table(tmp_path, mlm), "{glove}": lambda: _glove(tmp_path)}.get(
            value, lambda: value)()
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), InstancePromptConfig(**kw),
                                      tokenizer=tok)
    return perturbed(model).eval(), tok


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("pair", [False, True], ids=["single", "pair"])
@pytest.mark.parametrize("case", list(HF_CASES) + list(HF_EXTRA))
def test_hf_door_an_example_scores_the_same_alone_and_in_a_padded_batch(plm, case, pair, side, tmp_path):
    """Left padding too (``tokenizer.padding_side = "left"``): the base classifiers read position 0, a pad there,
    but the wrapped model reads a left-padded batch as right-padded (hf/padding.py)."""
    model, tok = hf_model(plm, case, tmp_path)
    tok.padding_side = side
    args = (TEXTS, PAIRS) if pair else (TEXTS,)
    with torch.no_grad():
        together = model(**tok(*args, padding=True, return_tensors="pt")).logits
        for i in range(len(TEXTS)):
            one = ([a[i]] for a in args)
            alone = model(**tok(*one, return_tensors="pt")).logits
            torch.testing.assert_close(alone[0], together[i], rtol=0, atol=ATOL, msg=f"example {i} changed with padding")
    assert together.std(dim=0).max() > 1e-3, "the examples' logits do not differ: the check would pass vacuously"


EXAMPLES = [InputExample(guid=str(i), text_a=a, text_b=b, label=i % 2) for i, (a, b) in enumerate(zip(TEXTS, PAIRS))]
OP_CASES = {
    **{f"instance_wise-{name}": (build, kw) for name, kw in {
        "prompt_tuning": dict(strategy="none", task_prompt_length=4),
        "random": dict(strategy="random", prompt_length=3, task_prompt_length=2),
        "random-add": dict(strategy="random", prompt_length=3, task_prompt_length=3, combine="add"),
        "pretrained": dict(strategy="pretrained", prompt_length=3, pretrained_path="{table}"),
        "encoder-textcnn": dict(strategy="encoder", prompt_length=3, encoder="textcnn", encoder_hidden=8),
        "encoder-lstm": dict(strategy="encoder", prompt_length=3, encoder="lstm", encoder_hidden=8),
        "encoder-mlp-half": dict(strategy="encoder", prompt_length=3, encoder="mlp", encoder_hidden=8,
                                 sequence_utilization_rate=0.5),
    }.items()},
    **{f"generated_prefix-{name}": (build_prefix, dict(kw, prompt_length=3)) for name, kw in {
        "prefix-reparam": dict(generator="prefix", prefix={"reparameterize": True, "reparam_hidden": 8}),
        "p_tuning_v2-hidden": dict(generator="prefix", injection="hidden"),
        "ipt_random-kv": dict(generator="ipt_random", ipt={"projection_hidden": 8}),
        "ipt_random-faithful": dict(generator="ipt_random", ipt={"faithful": True}),
        "ipt_pretrained-faithful": dict(generator="ipt_pretrained", ipt={"faithful": True, "pretrained_path": "{table}"}),
        "ipt_encoder-hidden": dict(generator="ipt_encoder", injection="hidden",
                                   ipt={"encoder": "textcnn", "encoder_hidden": 8, "projection_hidden": 8}),
        "ipt_encoder-lstm-faithful": dict(generator="ipt_encoder", ipt={"faithful": True, "encoder": "lstm",
                                                                        "encoder_hidden": 8}),
        **{f"s_idpg-{layer}-at{p}": dict(generator="idpg", insert_position=p,
                                         idpg={"depth": "single", "layer": layer, "hidden": 8, "phm_n": 4})
           for layer in ("dnn", "phm") for p in range(5)},
        "s_idpg-static_mean": dict(generator="idpg", idpg={"depth": "single", "layer": "phm", "hidden": 8, "phm_n": 4,
                                                           "encoder": "static_mean"}),
        "s_idpg-glove": dict(generator="idpg", idpg={"depth": "single", "layer": "dnn", "hidden": 8, "encoder": "glove",
                                                     "glove_path": "{glove}"}),
        "m_idpg-hidden": dict(generator="idpg", idpg={"depth": "multi", "layer": "phm", "hidden": 8, "phm_n": 4}),
        "m_idpg-hidden-previous": dict(generator="idpg", idpg={"depth": "multi", "layer": "phm", "hidden": 8, "phm_n": 4,
                                                               "input_from": "previous"}),
        "m_idpg-kv-previous": dict(generator="idpg", injection="kv",
                                   idpg={"depth": "multi", "layer": "dnn", "hidden": 8, "input_from": "previous"}),
        "m_idpg-L-residual-layernorm": dict(generator="idpg", idpg={"depth": "multi", "layer": "dnn", "hidden": 8,
                                                                    "sharing": "L", "residual": True, "layernorm": True}),
        "m_idpg-add-after_b": dict(generator="idpg", insert_position=3, hidden_mode="add",
                                   idpg={"depth": "multi", "layer": "dnn", "hidden": 8}),
        **{f"lpt-{k}": dict(generator="lpt", late_layer=1, lpt={"kind": k, "bottleneck": 8})
           for k in ("npg", "appg", "mppg", "plain")},
        "late-ipt_encoder": dict(generator="ipt_encoder", injection="late", late_layer=1,
                                 ipt={"encoder": "mlp", "encoder_hidden": 8, "projection_hidden": 8}),
        "late-s_idpg": dict(generator="idpg", injection="late", late_layer=1,
                            idpg={"depth": "single", "layer": "phm", "hidden": 8, "phm_n": 4}),
    }.items()},
}


def _files(kw, tmp_path, mlm):
    kw = copy.deepcopy(kw)
    for section in [kw] + [v for v in kw.values() if isinstance(v, dict)]:
        for key, value in section.items():
            if value == "{table}":
                section[key] = _table(tmp_path, mlm)
            elif value == "{glove}":
                section[key] = _glove(tmp_path)
    return kw


@pytest.mark.parametrize("case", list(OP_CASES))
def test_openprompt_door_an_example_scores_the_same_alone_and_in_a_padded_batch(plm, case, tmp_path):
    mlm, tok = plm
    builder, kw = OP_CASES[case]
    torch.manual_seed(0)
    pm = builder(mlm, tok, **_files(kw, tmp_path, mlm))
    perturbed(pm.template).eval()
    pm.eval()
    with torch.no_grad():
        together = pm(batch_for(pm, tok, EXAMPLES))
        for i, ex in enumerate(EXAMPLES):
            alone = pm(batch_for(pm, tok, [ex]))
            torch.testing.assert_close(alone[0], together[i], rtol=0, atol=ATOL * together.abs().max().item(),
                                       msg=f"example {i} changed with padding")


@pytest.mark.parametrize("case", ["ipt-random", "ipt-encoder-textcnn", "s_idpg-dnn-cls", "m_idpg-dnn-static-kv"])
def test_hf_door_prompt_is_the_same_with_or_without_special_tokens_mask(plm, case, tmp_path):
    """A [MASK] or [UNK] typed in the text is the example's own token in ``special_tokens_mask`` (it marks what the
    tokenizer added); the fallback without it excluded every special id, so a model trained on batches with the
    mask (the Trainer keeps it) made another prompt at predict time (``model(**tokenizer(texts))``)."""
    model, tok = hf_model(plm, case, tmp_path)
    texts = [f"{tok.unk_token} a good film it was {tok.mask_token} .", f"{tok.mask_token} bad cat", "the dog ran fast"]
    enc = tok(texts, padding=True, return_tensors="pt", return_special_tokens_mask=True)
    with torch.no_grad():
        with_mask = model(**enc).logits
        enc.pop("special_tokens_mask")
        without = model(**enc).logits
    torch.testing.assert_close(without, with_mask, rtol=0, atol=ATOL)


@pytest.mark.parametrize("case", ["prompt_tuning", "ipt-random", "s_idpg-dnn-cls", "m_idpg-previous-kv", "lpt-npg",
                                  "p_tuning_v2-kv-keep"])
def test_hf_door_left_padding_keeps_a_masked_lms_per_token_outputs(plm, case, tmp_path):
    """A masked LM (RoBERTa numbers positions by the attended tokens) gives the same token logits, hidden states and
    loss for a left-padded example as alone, as the base model itself does: RoBERTa's positions, the first-token
    reads (M-IDPG from the previous layer, LPT's NPG) and the splice index all used to count the padding."""
    mlm, tok = plm
    model = perturbed(get_instance_prompt_model(mlm, InstancePromptConfig(**copy.deepcopy({**HF_CASES, **HF_EXTRA}[case])),
                                                tokenizer=tok)).eval()
    tok.padding_side = "left"
    texts = [f"{t} it was {tok.mask_token}" for t in TEXTS]
    enc = tok(texts, padding=True, return_tensors="pt")
    labels = torch.where(enc["attention_mask"].bool(), enc["input_ids"], torch.full_like(enc["input_ids"], -100))
    with torch.no_grad():
        together = model(**enc, labels=labels, output_hidden_states=True)
        for i, text in enumerate(texts):
            one = tok([text], return_tensors="pt")
            alone = model(**one, labels=one["input_ids"], output_hidden_states=True)
            real = enc["attention_mask"][i].bool()
            torch.testing.assert_close(together.logits[i][real], alone.logits[0], rtol=0, atol=ATOL)
            for h_batch, h_alone in zip(together.hidden_states, alone.hidden_states):
                torch.testing.assert_close(h_batch[i][real], h_alone[0], rtol=0, atol=ATOL)
        tok.padding_side = "right"
        right = tok(texts, padding=True, return_tensors="pt")
        right_labels = torch.where(right["attention_mask"].bool(), right["input_ids"], torch.full_like(right["input_ids"], -100))
        torch.testing.assert_close(model(**right, labels=right_labels).loss, together.loss, rtol=0, atol=ATOL)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("case", ["prompt_tuning", "ipt-random", "s_idpg-dnn-cls", "m_idpg-phm-cls", "p_tuning_v2-kv",
                                  "p_tuning_v2-hidden", "lpt-npg"])
def test_hf_door_padding_past_the_room_the_prompt_leaves_is_not_a_refusal(plm, case, side, tmp_path):
    """``padding="max_length"`` at the tokenizer's limit, or ``pad_to_multiple_of=8`` rounding the ``max_length`` the
    position check names (123) up to 128: only padding overflows the model's positions with the prompt's. It was the
    same refusal for every batch, naming the max_length the user had already set; the spare padding is cut now (and
    comes back as zeros in per-token outputs), and a token past the room is still one line."""
    from transformers import DataCollatorWithPadding

    from openprompt_ipt.injection import max_positions

    model, tok = hf_model(plm, case, tmp_path)
    tok.padding_side = side
    room = max_positions(model.config) - model._prompt_positions()
    with torch.no_grad():
        alone = torch.cat([model(**tok([t], return_tensors="pt")).logits for t in TEXTS])
        full = tok(TEXTS, padding="max_length", truncation=True, max_length=tok.model_max_length, return_tensors="pt")
        assert full["input_ids"].size(1) + model._prompt_positions() > max_positions(model.config) or case == "lpt-npg"
        torch.testing.assert_close(model(**full).logits, alone, rtol=0, atol=ATOL)
        long = " ".join(["the movie was great"] * 60)
        feats = [tok(t, truncation=True, max_length=room) for t in TEXTS + [long]]
        batch = DataCollatorWithPadding(tok, pad_to_multiple_of=8, return_tensors="pt")(feats)
        torch.testing.assert_close(model(**batch).logits[:-1], alone, rtol=0, atol=ATOL)
        if model._prompt_positions():
            over = tok(TEXTS + [long], padding=True, truncation=True, max_length=room + 1, return_tensors="pt")
            with pytest.raises(ValueError, match=rf"{room + 1} input tokens exceed the model's .* max_seq_length <= {room}"):
                model(**over)


@pytest.mark.parametrize("case", ["ipt-random", "s_idpg-dnn-cls", "p_tuning_v2-hidden"])
def test_hf_door_a_masked_lm_padded_past_the_room_gives_outputs_at_the_callers_width(plm, case, tmp_path):
    """The cut padding comes back in the per-token outputs (token logits, hidden states): the caller's width, its
    loss over the same labels, the real tokens' outputs as alone."""
    mlm, tok = plm
    model = perturbed(get_instance_prompt_model(mlm, InstancePromptConfig(**copy.deepcopy({**HF_CASES, **HF_EXTRA}[case])),
                                                tokenizer=tok)).eval()
    texts = [f"{t} it was {tok.mask_token}" for t in TEXTS]
    enc = tok(texts, padding="max_length", max_length=tok.model_max_length, return_tensors="pt")
    labels = torch.where(enc["attention_mask"].bool(), enc["input_ids"], torch.full_like(enc["input_ids"], -100))
    with torch.no_grad():
        out = model(**enc, labels=labels, output_hidden_states=True)
        assert out.logits.shape[:2] == enc["input_ids"].shape
        assert all(h.shape[:2] == enc["input_ids"].shape for h in out.hidden_states)
        longest = tok(texts, padding=True, return_tensors="pt")
        right = torch.where(longest["attention_mask"].bool(), longest["input_ids"], torch.full_like(longest["input_ids"], -100))
        torch.testing.assert_close(out.loss, model(**longest, labels=right).loss, rtol=0, atol=ATOL)
        for i, text in enumerate(texts):
            real = enc["attention_mask"][i].bool()
            torch.testing.assert_close(out.logits[i][real], model(**tok([text], return_tensors="pt")).logits[0],
                                       rtol=0, atol=ATOL)


def _left_padded(batch):
    """``batch`` (right-padded, from our collate) with each row's padding moved before its tokens."""
    mask = batch["attention_mask"]
    n, out = mask.size(1), dict(batch)
    shift = n - mask.sum(dim=1, keepdim=True)
    order = (torch.arange(n).unsqueeze(0) - shift) % n  # position j takes the row's token j - shift
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.size(1) == n:
            out[key] = value.gather(1, order)
    return out


@pytest.mark.parametrize("case", ["instance_wise-prompt_tuning", "instance_wise-random", "generated_prefix-s_idpg-dnn-at0",
                                  "generated_prefix-m_idpg-hidden", "generated_prefix-p_tuning_v2-hidden",
                                  "generated_prefix-lpt-npg"])
def test_openprompt_door_a_left_padded_batch_is_one_line(plm, case, tmp_path):
    """OpenPrompt's loaders (and ours) pad on the right whatever ``tokenizer.padding_side`` says; a batch padded on
    the left by hand moved every example's positions (the prompt's place, BERT's position ids, the first tokens): its
    logits changed by ~0.1 without a word. One line naming ``tokenizer.padding_side = "right"``; right-padded batches
    and a batch without padding pass."""
    mlm, tok = plm
    builder, kw = OP_CASES[case]
    torch.manual_seed(0)
    pm = builder(mlm, tok, **_files(kw, tmp_path, mlm))
    pm.eval()
    batch = batch_for(pm, tok, EXAMPLES)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r'starts with padding \(left padding\).*tokenizer.padding_side = "right"'):
            pm(_left_padded(batch))
        pm(batch_for(pm, tok, EXAMPLES[:1]))
        pm(batch)
