"""GeneratedPrefixTemplate: every generator x injection mode trains, injection is exact, prompts are per instance."""
import pytest
import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import batch_for, build_prefix, clone, examples
from openprompt_ipt import GeneratedPrefixTemplate
from openprompt_ipt.injection import InjectionPlan, LayerPromptInjector, shifted_position_ids

CASES = {
    "prefix-kv": dict(generator="prefix"),
    "ptuning_v2-hidden": dict(generator="prefix", injection="hidden"),
    "prefix-reparam": dict(generator="prefix", prefix={"reparameterize": True, "reparam_hidden": 8}),
    "prefix-input": dict(generator="prefix", injection="input"),
    "ipt_random-kv": dict(generator="ipt_random"),
    "ipt_random-faithful": dict(generator="ipt_random", ipt={"faithful": True}),
    "ipt_random-hidden": dict(generator="ipt_random", injection="hidden"),
    "ipt_encoder-kv-lstm": dict(generator="ipt_encoder", ipt={"encoder": "lstm", "encoder_hidden": 8}),
    "ipt_encoder-hidden-mlp": dict(generator="ipt_encoder", injection="hidden", ipt={"encoder": "mlp", "encoder_hidden": 8}),
    "s_idpg-phm": dict(generator="idpg", idpg={"depth": "single", "layer": "phm", "phm_n": 4, "hidden": 8}),
    "s_idpg-dnn-pos1": dict(generator="idpg", insert_position=1, idpg={"depth": "single", "layer": "dnn", "hidden": 8}),
    "m_idpg-phm-hidden": dict(generator="idpg", idpg={"layer": "phm", "phm_n": 4, "hidden": 8}),
    "m_idpg-dnn-kv-previous": dict(generator="idpg", injection="kv", idpg={"layer": "dnn", "input_from": "previous"}),
    "m_idpg-L-static": dict(generator="idpg", idpg={"encoder": "static_mean", "sharing": "L", "layer": "dnn"}),
    "m_idpg-S-previous-ln": dict(generator="idpg", idpg={"sharing": "S", "input_from": "previous", "residual": True,
                                                          "layernorm": True, "layer": "dnn", "hidden": 4}),
}


def _lstm(d_in, h, layers=3):  # bidirectional: 4 gates x (input + recurrent weights + two biases), per direction
    return sum(2 * (4 * h * ((d_in if i == 0 else 2 * h) + h) + 8 * h) for i in range(layers))


def closed_form(case, D, L, V, T=5):
    """Trainable parameters of each CASES entry, written out from the architectures (not from the modules)."""
    out = T * D

    def proj(slots):  # IPT's G(x) -> per-slot bottleneck, projection_hidden 64
        return (D * 64 + 64) + (64 * slots * D + slots * D)

    def dnn(m, up_bias=True):
        return (D * m + m) + (m * out + (out if up_bias else 0))

    return {
        "prefix-kv": 2 * L * T * D,
        "ptuning_v2-hidden": L * T * D,
        "prefix-reparam": T * D + (D * 8 + 8) + (8 * 2 * L * D + 2 * L * D),
        "prefix-input": T * D,
        "ipt_random-kv": 2 * L * T * D + (V + 1) * D + proj(2 * L),
        "ipt_random-faithful": 2 * L * T * D + (V + 1) * 2 * D,                  # plain prefix + vocab x 2H k/v table
        "ipt_random-hidden": L * T * D + (V + 1) * D + proj(L),
        "ipt_encoder-kv-lstm": 2 * L * T * D + _lstm(D, 8) + (16 * 8 + 8) + (8 * 8 + 8) + (8 * D + D) + proj(2 * L),
        "ipt_encoder-hidden-mlp": L * T * D + (D * 8 + 8) + (8 * 8 + 8) + (8 * D + D) + proj(L),
        "s_idpg-phm": (D * 8 // 4 + 8) + (8 * out // 4 + out) + 4 ** 3,           # one A set shared by both layers
        "s_idpg-dnn-pos1": dnn(8),
        "m_idpg-phm-hidden": (D * 8 // 4 + 8 + 4 ** 3) + (8 * out // 4 + 4 ** 3) + L * out,  # + per-layer bias
        "m_idpg-dnn-kv-previous": dnn(16, up_bias=False) + 2 * L * out,           # shared W, a bias per k/v slot
        "m_idpg-L-static": L * dnn(16),                                            # a whole generator per layer
        "m_idpg-S-previous-ln": dnn(4) + 3 * 2 * D,                                # + three LayerNorms (residual)
    }[case]


@pytest.mark.parametrize("case", list(CASES))
def test_forward_backward_trains_only_the_generator(plm, case):
    model, tok = plm
    pm = build_prefix(model, tok, **CASES[case])
    batch = batch_for(pm, tok, examples())
    logits = pm(batch)
    assert logits.shape == (6, 2) and torch.isfinite(logits).all()
    logits.logsumexp(-1).sum().backward()
    assert all(p.grad is None for p in model.parameters())  # PLM frozen
    params = {n: p for n, p in pm.template.named_parameters() if p.requires_grad}
    cfg = model.config
    expected = closed_form(case, cfg.hidden_size, cfg.num_hidden_layers, model.get_input_embeddings().num_embeddings)
    assert params and pm.template.num_trainable_parameters() == expected
    for name, p in params.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {name}"


def test_every_layer_slot_is_used(bert):
    """A per-slot prompt table: each layer's (key, value) / hidden prompt gets its own gradient."""
    model, tok = bert
    for injection, slots in (("kv", 4), ("hidden", 2)):
        pm = build_prefix(model, tok, generator="prefix", injection=injection)
        pm(batch_for(pm, tok, examples())).sum().backward()
        grad = pm.template.generator.task.prompts.grad
        assert grad.shape[0] == slots and all(grad[s].abs().sum() > 0 for s in range(slots))


def _mlm_logits(model, enc, **kw):
    return model(**enc, **kw).logits


@pytest.mark.parametrize("positions", ["keep", "shift"])
def test_kv_masked_prefix_leaves_logits_unchanged_and_visible_prefix_changes_them(plm, positions):
    model, tok = plm
    enc = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    L, H, p = model.config.num_hidden_layers, model.config.hidden_size, 3
    kv = torch.randn(2 * L, 2, p, H)
    injector = LayerPromptInjector(model)
    kw = {"position_ids": shifted_position_ids(model.config, enc["attention_mask"], p)} if positions == "shift" else {}
    base = _mlm_logits(model, enc, **kw)
    injector.arm(InjectionPlan("kv", lambda s, prev=None: kv[s], prefix_mask=torch.zeros(2, p)))
    masked = _mlm_logits(model, enc, **kw)
    injector.arm(InjectionPlan("kv", lambda s, prev=None: kv[s]))
    visible = _mlm_logits(model, enc, **kw)
    injector.disarm()
    assert torch.allclose(masked, base, atol=1e-5)
    assert not torch.allclose(visible, base, atol=1e-3)
    assert torch.equal(_mlm_logits(model, enc, **kw), base)  # disarmed: idle hooks


def test_kv_hooks_equal_the_models_own_past_key_values_path(plm):
    """BertModel / RobertaModel accept past_key_values (4.x tuples, 5.x Cache): ours must match exactly."""
    model, tok = plm
    enc = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    L, H, heads, p = (model.config.num_hidden_layers, model.config.hidden_size, model.config.num_attention_heads, 3)
    kv = torch.randn(2 * L, 2, p, H)
    injector = LayerPromptInjector(model)
    injector.arm(InjectionPlan("kv", lambda s, prev=None: kv[s]))
    ours = model.base_model(**enc, position_ids=shifted_position_ids(model.config, enc["attention_mask"], p))[0]
    injector.disarm()
    per = [tuple(kv[2 * i + j].view(2, p, heads, -1).transpose(1, 2) for j in (0, 1)) for i in range(L)]
    if transformers.__version__.startswith("4."):
        native = tuple(per)
    else:
        native = transformers.DynamicCache()
        for i, (k, v) in enumerate(per):
            native.update(k, v, i)
    mask = torch.cat([torch.ones(2, p, dtype=enc["attention_mask"].dtype), enc["attention_mask"]], 1)
    reference = model.base_model(input_ids=enc["input_ids"], attention_mask=mask, past_key_values=native)[0]
    assert torch.allclose(ours, reference, atol=1e-5)


def _native_cache(kv, heads):
    """(2L, B, p, H) prefix keys/values as the model's own past_key_values (4.x tuples, 5.x DynamicCache)."""
    b, p = kv.shape[1:3]
    per = [tuple(kv[2 * i + j].view(b, p, heads, -1).transpose(1, 2) for j in (0, 1)) for i in range(kv.size(0) // 2)]
    if transformers.__version__.startswith("4."):
        return tuple(per)
    native = transformers.DynamicCache()
    for i, (k, v) in enumerate(per):
        native.update(k, v, i)
    return native


def _p_tuning_v2_and_reference(model, tok):
    """P-tuning v2 through the whole template (padded batch) and the same prefix through the model's own
    past_key_values path, read by the same SoftVerbalizer head."""
    pm = build_prefix(model, tok, generator="prefix")
    with torch.no_grad():
        pm.template.generator.task.prompts.normal_()  # a prefix that moves the logits a lot
    batch = batch_for(pm, tok, examples())
    assert not batch["attention_mask"].bool().all()  # padding: the widened mask matters

    def reference():
        kv = pm.template.generator.task.prompts.unsqueeze(1).expand(-1, batch["input_ids"].size(0), -1, -1)
        p = kv.size(2)
        mask = torch.cat([torch.ones(kv.size(1), p, dtype=batch["attention_mask"].dtype), batch["attention_mask"]], 1)
        hidden = model.base_model(input_ids=batch["input_ids"], attention_mask=mask,
                                  past_key_values=_native_cache(kv, model.config.num_attention_heads))[0]
        return pm.verbalizer.process_outputs(hidden[batch["loss_ids"] > 0], batch=batch)
    return pm, batch, reference


def test_p_tuning_v2_template_equals_the_models_own_past_key_values_path(plm):
    model, tok = plm
    pm, batch, reference = _p_tuning_v2_and_reference(model, tok)
    model.eval()
    with torch.no_grad():
        ours, ref = pm(clone(batch)), reference()
    assert torch.allclose(ours, ref, atol=1e-5)
    assert not torch.allclose(ours, pm.verbalizer.process_outputs(
        model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])[0][batch["loss_ids"] > 0],
        batch=batch), atol=1e-3)  # the prefix is really there


class _Cats(TorchDispatchMode):
    """(dtype, shape) of every aten.cat's result, below autocast: what the kernels really compute."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.cat.default:
            self.seen.append((out.dtype, tuple(out.shape)))
        return out


def test_kv_prefix_enters_in_the_autocast_dtype_and_equals_the_reference(plm):
    """Under bf16 autocast the prefix is cast to the key projection's dtype: the cache joins bf16 with bf16
    (an fp32 prefix made the cat upcast every layer's keys and values, and the attention cast them back),
    with the same logits as the model's own past_key_values path under the same autocast."""
    model, tok = plm
    pm, batch, reference = _p_tuning_v2_and_reference(model, tok)
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        with _Cats() as cats:
            ours = pm(clone(batch))
        ref = reference()
    # (B, heads, p + n, d); not a (B, 1, 1, p + n) mask (transformers 4.x widens the extended mask with a cat)
    heads = model.config.num_attention_heads
    kv_cats = [dtype for dtype, shape in cats.seen if len(shape) == 4 and shape[1] == heads and dtype.is_floating_point]
    assert len(kv_cats) == 2 * model.config.num_hidden_layers and set(kv_cats) == {torch.bfloat16}, kv_cats
    # the prefix is rounded to bf16 once either way (here before the cat, there by the attention's autocast)
    assert torch.equal(ours, ref)


def test_kv_mask_is_widened_once_per_forward(bert, monkeypatch):
    from openprompt_ipt.injection import encoder_hooks

    model, tok = bert
    pm, batch, _ = _p_tuning_v2_and_reference(model, tok)
    calls = []
    real = encoder_hooks.pad_attention_mask
    monkeypatch.setattr(encoder_hooks, "pad_attention_mask", lambda *a, **k: calls.append(1) or real(*a, **k))
    pm(clone(batch))
    pm(clone(batch))
    assert model.config.num_hidden_layers > 1 and len(calls) == 2


def _slot_prompts(pm, tok, exs):
    batch = batch_for(pm, tok, exs)
    t = pm.template
    batch = t.process_batch(batch)
    t.post_processing_outputs(type("O", (), {"logits": None, "hidden_states": None})())
    from openprompt_ipt.generators import InstanceInputs
    raw = batch_for(pm, tok, exs)
    state = t.generator.begin(InstanceInputs(raw["input_ids"], raw["attention_mask"], raw["text_part_ids"] > 0))
    return t.generator.slot(state, 0)


@pytest.mark.parametrize("case", ["ipt_random-kv", "ipt_encoder-kv-lstm", "ipt_random-faithful", "m_idpg-phm-hidden",
                                  "s_idpg-phm", "m_idpg-L-static"])
def test_instance_wise_generators_give_different_prompts_to_different_inputs(bert, case):
    model, tok = bert
    pm = build_prefix(model, tok, **CASES[case])
    prompts = _slot_prompts(pm, tok, examples(2))
    assert not torch.allclose(prompts[0], prompts[1])


def test_task_prefix_is_the_same_for_every_input(bert):
    model, tok = bert
    pm = build_prefix(model, tok, generator="prefix")
    prompts = _slot_prompts(pm, tok, examples(2))
    assert torch.equal(prompts[0], prompts[1])


def test_cached_and_uncached_plm_cls_give_identical_logits(bert):
    model, tok = bert
    torch.manual_seed(1)
    cached = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache": True})
    state = {k: v.clone() for k, v in cached.template.state_dict().items()}
    torch.manual_seed(1)
    fresh = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache": False})
    fresh.template.load_state_dict(state)
    batch = batch_for(cached, tok, examples())
    model.train()  # dropout on in the main pass is irrelevant here: compare in eval, but the rep pass must not care
    first = cached(clone(batch))
    enc = cached.template.generator.sentence
    passes = enc.passes
    model.eval()
    cached.eval(), fresh.eval()
    again = cached(clone(batch))
    assert enc.passes == passes == 6  # second epoch: no PLM pass for representations
    assert torch.allclose(again, fresh(clone(batch)), atol=1e-6)
    assert first.shape == again.shape


def test_cached_plm_cls_follows_changes_of_the_plms_weights(bert):
    """A cached M(x) was made with the PLM's weights of its first pass: after the PLM changes (fine-tuning with
    freeze_plm=False, or trained weights loaded after a first forward) the cache must not answer any more."""
    model, tok = bert
    torch.manual_seed(1)
    cached = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache": True})
    torch.manual_seed(1)
    fresh = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache": False})
    fresh.template.load_state_dict(cached.template.state_dict())
    cached.eval(), fresh.eval()
    batch = batch_for(cached, tok, examples())
    enc = cached.template.generator.sentence
    with torch.no_grad():
        cached(clone(batch))
        cached(clone(batch))
        assert enc.passes == 6  # the weights did not change: the second pass reads the cache
        trained = {k: v + 0.05 * torch.randn_like(v) for k, v in model.state_dict().items() if v.is_floating_point()}
        model.load_state_dict(trained, strict=False)  # as a checkpoint of a fine-tuned PLM, loaded after a first forward
        assert torch.allclose(cached(clone(batch)), fresh(clone(batch)), atol=1e-6)
        assert enc.passes == 12
        model.bert.encoder.layer[0].attention.self.query.weight.add_(0.1)  # one optimizer step on the PLM
        assert torch.allclose(cached(clone(batch)), fresh(clone(batch)), atol=1e-6)



def test_plm_cls_cache_is_bounded_and_each_entry_holds_one_vector(bert):
    """The cache grew with every new text (predicting over a large file filled the device), and each entry was a
    view that kept its whole pass's (rows, tokens, H) hidden states alive, not its own H-vector."""
    model, tok = bert
    torch.manual_seed(1)
    cached = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache_size": 4}).eval()
    torch.manual_seed(1)
    fresh = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache": False}).eval()
    fresh.template.load_state_dict(cached.template.state_dict())
    batch = batch_for(cached, tok, examples())
    enc = cached.template.generator.sentence
    with torch.no_grad():
        for passes in (6, 8):  # the second time, only the 2 texts that found no room go through the PLM again
            assert torch.allclose(cached(clone(batch)), fresh(clone(batch)), atol=1e-6)
            assert enc.passes == passes and len(enc.cache) == 4
    for vector in enc.cache.values():
        assert vector.untyped_storage().nbytes() == model.config.hidden_size * vector.element_size()


@pytest.mark.parametrize("size", [0, True, 2.5, "many"])
def test_a_bad_plm_cls_cache_size_is_one_line(bert, size):
    model, tok = bert
    with pytest.raises(ValueError, match=r"^idpg.cache_size must be a positive integer .* got " + repr(size)):
        build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "cache_size": size})

LONG_INPUT_CASES = {
    "m_idpg-hidden": dict(generator="idpg", idpg={"layer": "dnn", "hidden": 8}),
    "s_idpg-input": dict(generator="idpg", idpg={"depth": "single", "layer": "dnn", "hidden": 8}),
    "s_idpg-late": dict(generator="idpg", injection="late", late_layer=1,
                        idpg={"depth": "single", "layer": "dnn", "hidden": 8}),
    "lpt-late": dict(generator="lpt", late_layer=1, lpt={"kind": "appg", "bottleneck": 8}),
    "prefix-kv-keep": dict(generator="prefix", prefix_positions="keep"),
}


@pytest.mark.parametrize("case", list(LONG_INPUT_CASES))
def test_input_longer_than_the_models_positions_is_one_clear_error(plm, case):
    """max_seq_length above the model's positions: one line naming max_seq_length, before anything runs the PLM
    (IDPG's M(x) pass used to fail first inside the PLM's position table; late / keep prompts add no position
    and had no check at all)."""
    from openprompt.data_utils import InputExample

    model, tok = plm
    pm = build_prefix(model, tok, prompt_length=3, **LONG_INPUT_CASES[case])
    long = [InputExample(guid="0", text_a=" ".join(["the cat sat on the mat"] * 30), text_b="is it good", label=0)]
    batch = batch_for(pm, tok, long, max_len=200)
    n = batch["input_ids"].size(1)
    limit = pm.template.position_limit
    assert n > limit == 128
    room = limit - pm.template.n_prefix
    with pytest.raises(ValueError, match=rf"{n} input tokens exceed the model's {limit} positions: "
                                         rf"set max_seq_length <= {room}"):
        pm(batch)


INTERRUPTED_CASES = {"prefix-kv": CASES["prefix-kv"], "ptuning_v2-hidden": CASES["ptuning_v2-hidden"],
                     "lpt-late": dict(generator="lpt", late_layer=1, lpt={"kind": "plain"})}


@pytest.mark.parametrize("case", list(INTERRUPTED_CASES))
def test_a_forward_that_never_finished_leaves_no_prompt_in_the_next_one(plm, case):
    """Ctrl-C or out of memory inside the PLM: post_processing_outputs never runs, so nothing disarmed the hooks,
    and the next forward through the shared PLM (a ManualTemplate baseline, another template) silently got the
    interrupted batch's prompt."""
    from openprompt import PromptForClassification
    from openprompt.prompts import ManualTemplate, ManualVerbalizer

    from helpers import TEXT

    model, tok = plm
    pm = build_prefix(model, tok, prompt_length=3, **INTERRUPTED_CASES[case]).eval()
    baseline = PromptForClassification(model, ManualTemplate(tok, text=TEXT),
                                       ManualVerbalizer(tok, num_classes=2, label_words=[["yes"], ["no"]])).eval()
    batch = batch_for(pm, tok, examples())
    with torch.no_grad():
        expected, prompted = baseline(clone(batch)), pm(clone(batch))
        interrupted_inside(model, pm, batch)
        assert torch.equal(baseline(clone(batch)), expected), "the interrupted forward's prompt reached the next one"
        assert torch.equal(pm(clone(batch)), prompted)  # the template itself arms afresh


def interrupted_inside(model, prompt_model, batch):
    """``prompt_model``'s forward stopped by a KeyboardInterrupt inside the PLM's second layer (Ctrl-C, out of memory)."""
    def interrupt(*args):
        raise KeyboardInterrupt
    handle = model.base_model.encoder.layer[1].register_forward_pre_hook(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            prompt_model(clone(batch))
    finally:
        handle.remove()


def test_save_load_round_trip_gives_identical_logits(bert, tmp_path):
    model, tok = bert
    for kw in (CASES["ipt_random-kv"], CASES["m_idpg-phm-hidden"], CASES["prefix-reparam"]):
        pm = build_prefix(model, tok, **kw)
        with torch.no_grad():
            for p in pm.template.parameters():
                if p.requires_grad:
                    p.add_(torch.randn_like(p) * 0.1)
        batch = batch_for(pm, tok, examples())
        expected = pm.prompt_model(clone(batch)).logits
        pm.template.save_pretrained(str(tmp_path / "t"))
        loaded = GeneratedPrefixTemplate.from_pretrained(str(tmp_path / "t"), model, tok)
        pm.prompt_model.template = loaded
        assert torch.allclose(pm.prompt_model(clone(batch)).logits, expected, atol=1e-6)


@pytest.mark.parametrize("case", ["ipt_random-kv", "m_idpg-phm-hidden", "prefix-reparam"])
def test_a_deep_copy_injects_its_own_prompts(bert, case):
    """copy.deepcopy(model) (then e.g. ``.to("cuda")``) must inject the copy's prompts: hooks written as
    closures kept reading the original's injector, so the copy ran without prompts, silently."""
    import copy

    model, tok = bert
    pm = build_prefix(model, tok, **CASES[case])
    batch = batch_for(pm, tok, examples())
    twin = copy.deepcopy(pm)
    with torch.no_grad():
        for p in twin.template.parameters():  # only the copy's prompts change
            if p.requires_grad:
                p.add_(torch.randn_like(p))
        before = pm(clone(batch))
        changed = twin(clone(batch))
        assert not torch.allclose(changed, before, atol=1e-4), "the copy ignored its own prompts"
        assert torch.equal(pm(clone(batch)), before), "the copy's prompts leaked into the original"
    twin(clone(batch)).logsumexp(-1).sum().backward()
    assert all(p.grad is None for p in pm.template.parameters()), "the copy's loss reached the original"
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in twin.template.parameters() if p.requires_grad)



def test_a_deleted_copy_takes_its_hooks_off_the_plm_it_owns(bert):
    """Only the original template took its hooks off its PLM when it was garbage: a deep copy's PLM kept the copy's
    hooks once the copy was gone (idle, run on every forward), and a template built on a PLM copied alone stacked its
    hooks on the copied ones. A copy now does as the original, and a new template takes the orphans off."""
    import copy
    import gc

    model, tok = bert
    pm = build_prefix(model, tok, **CASES["prefix-kv"])
    twin = copy.deepcopy(pm)
    plm = twin.plm

    def hooks(m):
        return sum(isinstance(getattr(getattr(h, "func", h), "__self__", None), LayerPromptInjector)
                   for mod in m.modules() for h in (*mod._forward_pre_hooks.values(), *mod._forward_hooks.values()))

    assert hooks(plm) == hooks(pm.plm) > 0
    del twin
    gc.collect()
    assert hooks(plm) == 0 and hooks(pm.plm) > 0
    batch = batch_for(pm, tok, examples())
    assert pm(clone(batch)).shape == (len(examples()), 2)  # the original still works
    # a PLM copied alone carries the copied hooks, which no template owns: a template built on it has only its own
    spare = copy.deepcopy(pm.plm)
    assert hooks(spare) == hooks(pm.plm)
    again = build_prefix(spare, tok, **CASES["prefix-kv"])
    assert hooks(spare) == hooks(pm.plm)
    assert again(clone(batch_for(again, tok, examples()))).shape == (len(examples()), 2)


@pytest.mark.parametrize("case", ["prefix-kv", "m_idpg-phm-hidden", "prefix-input"])
def test_a_template_copied_alone_is_refused_where_its_copy_would_drop_its_prompts(bert, case):
    """``best = copy.deepcopy(pm.template)``, later put back on the PLM: the copy's hooks sat on a hidden copy of
    the PLM, so kv / hidden prompts were never injected (other logits, silently). Copying such a template alone is
    one line naming what to do; an input-injection template (no hooks) still copies and restores its logits."""
    import copy

    model, tok = bert
    pm = build_prefix(model, tok, **CASES[case]).eval()
    batch = batch_for(pm, tok, examples())
    with torch.no_grad():
        before = pm(clone(batch))
    if pm.template.injector is not None:
        with pytest.raises(TypeError, match=r"deepcopy of a GeneratedPrefixTemplate alone.*copy the whole model") as e:
            copy.deepcopy(pm.template)
        assert "\n" not in str(e.value)
        return
    best = copy.deepcopy(pm.template)
    with torch.no_grad():
        for p in pm.template.parameters():
            if p.requires_grad:
                p.add_(1.0)
        pm.prompt_model.template = pm.template = best
        torch.testing.assert_close(pm(clone(batch)), before, rtol=0, atol=0)

def test_inserted_positions_are_removed_from_logits_and_hidden_states(bert):
    model, tok = bert
    pm = build_prefix(model, tok, generator="idpg", insert_position=1,
                      idpg={"depth": "single", "layer": "dnn", "hidden": 4})
    batch = batch_for(pm, tok, examples())
    out = pm.prompt_model(clone(batch))
    n = batch["input_ids"].size(1)
    assert out.logits.shape[1] == n and all(h.shape[1] == n for h in out.hidden_states)
    # position 1 = after text_a: the prompt sits right after the last text_a token
    from openprompt_ipt.injection import insert_index
    start = insert_index(1, batch["text_part_ids"], batch["attention_mask"])
    last_a = [max(i for i, v in enumerate(row) if v == 1) for row in batch["text_part_ids"].tolist()]
    assert start.tolist() == [i + 1 for i in last_a]


@pytest.mark.parametrize("kwargs", [dict(generator="ipt_random", prompt_length=2, ipt={"projection_hidden": 8}),
                                    dict(generator="idpg", prompt_length=2,
                                         idpg={"layer": "dnn", "hidden": 8, "encoder": "static_mean"})])
def test_instance_wise_prefix_learns_a_toy_task_the_first_word_decides(bert, kwargs):
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from openprompt_ipt.data import encode_examples, make_loader
    from openprompt_ipt.training import TrainConfig, Trainer, evaluate

    model, tok = bert
    torch.manual_seed(0)
    pm = build_prefix(model, tok, **kwargs)
    exs = examples(12)
    for e in exs:
        e.text_a = ("cat " if e.label == 0 else "dog ") + e.text_a
    wrapper = MLMTokenizerWrapper(max_seq_length=64, tokenizer=tok, truncate_method="balanced")
    feats = encode_examples(exs, pm.template, wrapper)
    loader = make_loader(feats, 4, tok.pad_token_id, shuffle=True, generator=torch.Generator().manual_seed(0))
    dev = make_loader(feats, 6, tok.pad_token_id, sort_by_length=True)
    start = evaluate(pm, dev, show_progress=False)
    best = Trainer(pm, TrainConfig(epochs=20, lr_prompt=5e-2, lr_head=5e-2, warmup_ratio=0.0, show_progress=False,
                                   device="cpu")).fit(loader, dev)
    assert best["accuracy"] >= 0.8 and best["loss"] < 0.75 * start["loss"]


def test_hidden_injection_writes_each_layers_prompt_into_the_prompt_positions(plm):
    model, tok = plm
    pm = build_prefix(model, tok, generator="prefix", injection="hidden", insert_position=1)
    seen = {}
    layers = pm.template.injector.layout.layers
    handles = [layer.register_forward_pre_hook(lambda m, a, k, i=i: seen.__setitem__(i, (a[0] if a else k["hidden_states"]).detach()),
                                               with_kwargs=True) for i, layer in enumerate(layers)]
    batch = batch_for(pm, tok, examples(3))
    from openprompt_ipt.injection import insert_index
    start = insert_index(1, batch["text_part_ids"], batch["attention_mask"])
    pm(clone(batch))
    for h in handles:
        h.remove()
    prompts = pm.template.generator.task.prompts.detach()
    t = prompts.size(1)
    for i in range(1, len(layers)):  # our hook ran first (registered earlier): the block sees layer i's prompt
        for b in range(3):
            s = int(start[b])
            assert torch.allclose(seen[i][b, s:s + t], prompts[i], atol=1e-6)


def _record_slots_and_layer_outputs(pm):
    """Wrap the generator's slot() and hook every layer: (slot, previous) calls and each layer's first-token output."""
    gen, calls, outputs = pm.template.generator, [], {}
    slot = gen.slot

    def spy(state, s, previous=None):
        calls.append((s, None if previous is None else previous.detach().clone()))
        return slot(state, s, previous)

    gen.slot = spy
    layers = pm.template.injector.layout.layers
    handles = [layer.register_forward_hook(lambda m, a, out, i=i: outputs.__setitem__(
        i, (out[0] if isinstance(out, tuple) else out)[:, 0].detach().clone())) for i, layer in enumerate(layers)]
    return calls, outputs, handles


@pytest.mark.parametrize("case", ["m_idpg-dnn-kv-previous", "m_idpg-S-previous-ln"])
def test_input_from_previous_feeds_layer_i_the_first_token_output_of_layer_i_minus_1(plm, case):
    """IDPG's --middle-previous: the input-layer prompt comes from M(x); layer i's from layer i-1's [CLS] output."""
    model, tok = plm
    pm = build_prefix(model, tok, **CASES[case])
    calls, outputs, handles = _record_slots_and_layer_outputs(pm)
    pm(batch_for(pm, tok, examples(3)))
    for h in handles:
        h.remove()
    per_layer = 2 if pm.template.injection == "kv" else 1
    layers = len(outputs)
    assert sorted({s for s, _ in calls}) == list(range(per_layer * layers))  # every slot, none beyond
    for s, previous in calls:
        i = s // per_layer
        if i == 0:
            assert previous is None  # layer 0: the prompt made from M(x)
        else:
            assert previous is not None and torch.equal(previous, outputs[i - 1])


@pytest.mark.parametrize("case", ["m_idpg-phm-hidden", "m_idpg-dnn-kv-previous", "s_idpg-phm"])
def test_idpg_slots_beyond_the_generator_are_an_error_not_a_clamp(bert, case):
    model, tok = bert
    pm = build_prefix(model, tok, **CASES[case])
    gen = pm.template.generator
    from openprompt_ipt.generators import InstanceInputs
    raw = batch_for(pm, tok, examples(2))
    state = gen.begin(InstanceInputs(raw["input_ids"], raw["attention_mask"], raw["text_part_ids"] > 0,
                                     raw["text_part_ids"]))
    assert gen.slot(state, gen.slots - 1).shape[0] == 2
    with pytest.raises(IndexError, match=f"IDPG prompt slot {gen.slots} requested, but the generator has {gen.slots}"):
        gen.slot(state, gen.slots)


@pytest.mark.parametrize("injection", ["kv", "hidden"])
def test_m_idpg_phm_from_previous_builds_its_weights_once_and_runs_once_per_layer(bert, monkeypatch, injection):
    """Under input_from: previous each layer runs the shared generator on its own input. Its PHM weights (a
    Kronecker sum, one einsum each) are built once per batch, not once per slot, and a layer's key and value
    slots (kv) share one generator pass. Logits and gradients equal those of rebuilding everything per slot."""
    from openprompt_ipt.generators import PHMLinear
    from openprompt_ipt.generators.idpg import Bottleneck, IDPGGenerator
    model, tok = bert
    kw = dict(generator="idpg", injection=injection,
              idpg={"layer": "phm", "hidden": 8, "phm_n": 4, "sharing": "M", "input_from": "previous",
                    "encoder": "static_mean"})
    torch.manual_seed(0)
    pm = build_prefix(model, tok, **kw)
    batch = batch_for(pm, tok, examples(3))
    calls = {"weight": 0, "pass": 0}
    for cls, name, key in ((PHMLinear, "weight", "weight"), (Bottleneck, "forward", "pass")):
        def counted(self, *a, _real=getattr(cls, name), _key=key, **k):
            calls[_key] += 1
            return _real(self, *a, **k)
        monkeypatch.setattr(cls, name, counted)

    def run():
        pm.zero_grad()
        calls.update({"weight": 0, "pass": 0})
        logits = pm(clone(batch))  # the forward consumes its batch's fields
        logits.sum().backward()
        grads = {n: p.grad.clone() for n, p in pm.named_parameters() if p.grad is not None}
        return logits.detach(), grads, dict(calls)

    logits, grads, once = run()
    per_layer, layers = (2 if injection == "kv" else 1), len(pm.template.injector.layout.layers)
    assert pm.template.generator.slots == per_layer * layers
    assert once["weight"] == 2                      # the down and the up projection, once each
    assert once["pass"] == layers                   # M(x) for layer 0, then one pass per later layer

    # the reference: every slot builds its own weights and runs its own pass
    monkeypatch.setattr(Bottleneck, "weights", lambda self, shared_a=None: None)
    real_slot = IDPGGenerator.slot

    def slot_alone(self, state, s, previous=None):
        state.pop("previous_out", None)
        return real_slot(self, state, s, previous)
    monkeypatch.setattr(IDPGGenerator, "slot", slot_alone)
    logits_each, grads_each, each = run()
    assert each["pass"] == 1 + per_layer * (layers - 1) and each["weight"] == 2 * each["pass"]
    assert torch.allclose(logits, logits_each, atol=1e-6)
    assert grads.keys() == grads_each.keys() and any("generators" in n for n in grads)
    for name in grads:
        assert torch.allclose(grads[name], grads_each[name], atol=1e-6), name


@pytest.mark.parametrize("case,shape_of", [
    ("m_idpg-phm-kv", lambda gen: tuple(gen.slot_bias.shape)),                         # (slots, t*d)
    ("m_idpg-dnn-kv-previous", lambda gen: tuple(gen.slot_bias.shape)),
    ("ipt_random-kv", None),                                                           # (B, k, slots, d)
])
def test_a_per_slot_table_gets_its_gradient_in_one_op_not_one_zero_fill_per_slot(bert, case, shape_of):
    """Indexing a (slots, ...) tensor once per slot makes each slot's backward fill a zero tensor of the whole
    table: 2L fills of it per step on kv (on roberta-large M-IDPG's 48 x 20480 bias: 48 fills of 3.9 MB, a
    quarter of a CPU step). Unbound once in begin(), the backward stacks the slots' gradients in one op."""
    from torch.profiler import ProfilerActivity, profile
    model, tok = bert
    kw = dict(CASES.get(case) or dict(generator="idpg", injection="kv", idpg={"layer": "phm", "phm_n": 4, "hidden": 8}))
    pm = build_prefix(model, tok, **kw)
    gen = pm.template.generator
    batch = batch_for(pm, tok, examples(3))
    if shape_of is None:  # the IPT prefix's per-slot projection of the instance prompt: (B, k, slots, d)
        b, k = batch["input_ids"].size(0), gen.instance_length
        shape = (b, k, gen.ctx.slots, model.config.hidden_size)
    else:
        shape = shape_of(gen)
    assert gen.ctx.slots == 2 * len(pm.template.injector.layout.layers)
    logits = pm(clone(batch))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        logits.sum().backward()
    table_sized = [e for e in prof.events() if e.name in ("aten::fill_", "aten::zero_", "aten::zeros")
                   and e.input_shapes and tuple(e.input_shapes[0]) == shape]
    assert len(table_sized) <= 1, (shape, [(e.name, e.input_shapes) for e in table_sized])


CHECKPOINTED_CASES = {"prefix-kv": CASES["prefix-kv"], "ipt_random-kv": CASES["ipt_random-kv"],
                      "m_idpg-dnn-kv-previous": CASES["m_idpg-dnn-kv-previous"],
                      "ptuning_v2-hidden": CASES["ptuning_v2-hidden"], "m_idpg-phm-hidden": CASES["m_idpg-phm-hidden"],
                      "prefix-input": CASES["prefix-input"], "lpt-late": INTERRUPTED_CASES["lpt-late"]}


def _checkpointing(model, reentrant) -> None:
    """The PLM's gradient checkpointing off (``reentrant`` None) or on, as a user turns it on."""
    if reentrant is None:
        model.gradient_checkpointing_disable()
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})


def _prompt_gradients(model, tok, **kwargs):
    """One backward of a freshly seeded template on ``model`` (training mode: transformers checkpoints only then);
    {name: grad} of what trains."""
    from openprompt import PromptForClassification
    from openprompt.prompts import SoftVerbalizer

    from helpers import TEXT

    torch.manual_seed(1)
    template = GeneratedPrefixTemplate(model, tok, text=TEXT, prompt_length=3, **kwargs)
    verbalizer = SoftVerbalizer(tok, model, num_classes=2, label_words=[["yes"], ["no"]])
    pm = PromptForClassification(model, template, verbalizer, freeze_plm=True, plm_eval_mode=False).train()
    torch.manual_seed(2)  # the same dropout masks in every run (the checkpoint replays the RNG state)
    pm(batch_for(pm, tok, examples())).logsumexp(-1).sum().backward()
    if template.injector is not None:
        template.injector.remove()  # the next run's template hooks the same PLM
    return {n: p.grad for n, p in template.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("case", list(CHECKPOINTED_CASES))
def test_gradient_checkpointing_on_the_plm_gives_the_same_gradients(plm, case):
    """``plm.gradient_checkpointing_enable()``: the backward recomputes each layer after post_processing_outputs
    disarmed the hooks. The recompute ran without the prompt: CheckpointError (use_reentrant=False), or, reentrant,
    a prompt that got no gradient (kv) or a wrong one (transformers 4.x, hidden), silently."""
    model, tok = plm
    expected = _prompt_gradients(model, tok, **CHECKPOINTED_CASES[case])
    assert expected and all(g is not None and g.abs().sum() > 0 for g in expected.values())
    for reentrant in (False, True):
        _checkpointing(model, reentrant)
        got = _prompt_gradients(model, tok, **CHECKPOINTED_CASES[case])
        assert got.keys() == expected.keys()
        for name, grad in got.items():
            assert grad is not None, f"use_reentrant={reentrant}: no gradient reaches {name}"
            torch.testing.assert_close(grad, expected[name], rtol=1e-5, atol=1e-6,
                                       msg=lambda m: f"use_reentrant={reentrant}, {name}: {m}")


def test_two_templates_on_one_checkpointed_plm_each_carry_their_own_prompt(bert):
    """Several templates may share one frozen PLM: each one's recompute runs with its own prompt, and a template
    removed from the PLM is no longer carried."""
    model, tok = bert
    expected = _prompt_gradients(model, tok, **CASES["prefix-kv"])
    _checkpointing(model, False)
    other = build_prefix(model, tok, prompt_length=3, **CASES["ptuning_v2-hidden"]).train()
    other.plm.train()
    other(batch_for(other, tok, examples())).sum().backward()  # the carriers now hold the other injector
    got = _prompt_gradients(model, tok, **CASES["prefix-kv"])
    for name, grad in got.items():
        torch.testing.assert_close(grad, expected[name], rtol=1e-5, atol=1e-6)
    carriers = [m._gradient_checkpointing_func for m in model.modules() if getattr(m, "gradient_checkpointing", False)]
    assert carriers and all(c.injectors == [other.template.injector] for c in carriers)


def test_an_interrupted_forward_leaves_no_prompt_in_another_templates_mx_pass(plm):
    """After template A's forward was interrupted inside the PLM, the next pass through the shared PLM's encoder was
    M-IDPG template C's prompt-free M(x) pass (it runs ``plm.base_model`` alone, not the head model A's hooks
    watched): it read A's stale prefix, so C's M(x) (cached for the whole run) and its logits were silently off."""
    model, tok = plm
    a = build_prefix(model, tok, prompt_length=3, **CASES["prefix-kv"]).eval()
    c = build_prefix(model, tok, generator="idpg", injection="hidden", prompt_length=3, idpg={"cache": False}).eval()
    with torch.no_grad():
        for p in list(a.template.parameters()) + list(c.template.parameters()):
            p.normal_(0, 1.0)  # prompts far from their init, so a stray one shows
        batch_a, batch_c = batch_for(a, tok, examples()), batch_for(c, tok, examples())
        expected = c(clone(batch_c))
        bare = model.base_model(input_ids=batch_a["input_ids"], attention_mask=batch_a["attention_mask"])[0]
        interrupted_inside(model, a, batch_a)
        assert torch.equal(c(clone(batch_c)), expected), "A's interrupted prefix reached C's M(x) pass"
        interrupted_inside(model, a, batch_a)  # once more: now the user's own encoder pass comes next
        again = model.base_model(input_ids=batch_a["input_ids"], attention_mask=batch_a["attention_mask"])[0]
        assert torch.equal(again, bare), "A's interrupted prefix reached the bare encoder's forward"


def test_a_deleted_template_takes_its_hooks_off_the_plm(bert):
    """Templates built one after another on one PLM (a notebook, the README's loop) kept every deleted one's hooks on
    it; now only the live templates' hooks stay."""
    import gc

    from openprompt_ipt.injection.encoder_hooks import ArmedHooks

    model, tok = bert

    def hooks():  # ours: transformers 5 adds output-capturing hooks of its own at the first forward
        return sum(isinstance(getattr(getattr(h, "func", h), "__self__", None), ArmedHooks)
                   for m in model.modules() for h in (*m._forward_pre_hooks.values(), *m._forward_hooks.values()))

    gc.collect()
    before = hooks()  # other tests' live templates on the shared fixture
    kept = build_prefix(model, tok, prompt_length=3, **CASES["prefix-kv"])
    alive = hooks()
    for case in ("ptuning_v2-hidden", "m_idpg-phm-hidden"):
        pm = build_prefix(model, tok, prompt_length=3, **CASES[case])
        pm(batch_for(pm, tok, examples()))
        del pm
        gc.collect()
        assert hooks() == alive, f"{case}: a deleted template's hooks stayed on the PLM"
    del kept
    gc.collect()
    assert hooks() == before
