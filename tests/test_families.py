"""Every BERT-style family the doors claim (``injection.layout.FAMILIES``) gets the prompt right, not just runs it.

Tiny random models of each family (hidden 32, 2 layers, 2 heads; RoBERTa-like families with the tiny RoBERTa
tokenizer, BERT-like ones with the tiny BERT tokenizer): the position ids the model reads for the text are its own
(plus the prompt's positions where the method numbers the text after the prompt), the max-positions check is the
model's real limit, an example scores the same alone as in a right- or left-padded batch, and the prompt gets
gradient. RoBERTa, XLM-R, CamemBERT, Data2Vec-text and RoBERTa-PreLayerNorm number positions from
``padding_idx + 1``; BERT, ELECTRA and ERNIE from 0."""
import copy
import warnings

import pytest
import torch

from conftest import _bert, _roberta
from helpers import TEXT, build, build_prefix, examples, loader_for
from test_hf_trainer import CASES, classifier_from
from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model
from openprompt_ipt.injection import max_positions
from openprompt_ipt.injection.layout import FAMILIES

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat and the dog ran fast", "a dog", "she said the movie was great", "good"]
ROBERTA_LIKE = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta", "camembert": "Camembert",
                "data2vec-text": "Data2VecText", "roberta-prelayernorm": "RobertaPreLayerNorm"}
SIZE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def family_mlm(family, tiny_dir):
    """(masked LM, tokenizer) of ``family``, random, tiny."""
    import transformers

    torch.manual_seed(0)
    if family in ROBERTA_LIKE:
        _, tok = _roberta(tiny_dir)
        prefix = ROBERTA_LIKE[family]
        cfg = getattr(transformers, f"{prefix}Config")(vocab_size=len(tok), max_position_embeddings=130, pad_token_id=1,
                                                       bos_token_id=0, eos_token_id=2, type_vocab_size=1, **SIZE)
        return getattr(transformers, f"{prefix}ForMaskedLM")(cfg).eval(), tok
    _, tok = _bert(tiny_dir)
    common = dict(vocab_size=len(tok), max_position_embeddings=128, pad_token_id=0, **SIZE)
    if family == "ernie":  # ERNIE 3.0's task-type embeddings on
        return transformers.ErnieForMaskedLM(transformers.ErnieConfig(use_task_id=True, task_type_vocab_size=3,
                                                                      **common)).eval(), tok
    if family == "electra":
        return transformers.ElectraForMaskedLM(transformers.ElectraConfig(embedding_size=32, **common)).eval(), tok
    return transformers.BertForMaskedLM(transformers.BertConfig(**common)).eval(), tok


@pytest.fixture(params=FAMILIES)
def family(request, tiny_dir):
    return request.param, family_mlm(request.param, tiny_dir)


NEW = [f for f in FAMILIES if f not in ("bert", "roberta")]


@pytest.fixture(params=NEW)
def other_family(request, tiny_dir):
    """The families beside BERT and RoBERTa (which the other test files cover method by method)."""
    return request.param, family_mlm(request.param, tiny_dir)


def wrap(mlm, tok, **config):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny tokenizers are not the families' own: a name warning
        return get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), InstancePromptConfig(**config),
                                         tokenizer=tok).eval()


def ids_read(model, call, table="position_embeddings"):
    """The ids the model's embedding ``table`` looks up in the last pass of ``call()``: the pass with the prompt
    (M-IDPG runs a prompt-free M(x) pass first)."""
    embeddings = model.get_base_model().base_model.embeddings if hasattr(model, "get_base_model") else model.base_model.embeddings
    seen = []
    hook = getattr(embeddings, table).register_forward_pre_hook(lambda module, args: seen.append(args[0].clone()))
    try:
        with torch.no_grad():
            call()
    finally:
        hook.remove()
    return seen[-1]


def positions_read(model, call):
    """The position ids the model's position embeddings look up in the last pass of ``call()`` (B, n')."""
    return ids_read(model, call)


# method -> (config, where the text sits in the sequence the model numbers, how far its positions move)
POSITION_CASES = {
    "kv-shift": (dict(method="p_tuning_v2", prompt_length=3), 0, 3),
    "kv-keep": (dict(method="p_tuning_v2", prompt_length=3, prefix_positions="keep"), 0, 0),
    "prefix_tuning": (dict(method="prefix_tuning", prompt_length=3, options={"reparam_hidden": 8}), 0, 3),
    "m_idpg-kv": (dict(method="m_idpg", injection="kv", prompt_length=3, options={"layer": "dnn", "hidden": 8}), 0, 3),
    "input": (dict(method="prompt_tuning", prompt_length=3), 3, 3),
}


@pytest.mark.parametrize("case", list(POSITION_CASES))
def test_the_text_is_at_the_models_own_positions(family, case):
    """The text's position ids are those the bare model gives it, moved by the prompt's positions where the method
    numbers the text after them (Prefix Tuning's shift, a prompt before the text); Data2Vec-text used to get
    BERT's numbering under a shifted kv prefix (2 positions too low, its padding slot included)."""
    name, (mlm, tok) = family
    config, start, offset = POSITION_CASES[case]
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    real, b = enc["attention_mask"].bool(), len(TEXTS)
    base = classifier_from(mlm, initializer_range=0.2)
    own = positions_read(base, lambda: base(**enc)).expand(b, -1)
    model = wrap(mlm, tok, **copy.deepcopy(config))
    read = positions_read(model, lambda: model(**enc)).expand(b, -1)[:, start:]
    assert torch.equal(read[real], own[real] + offset), f"{name}: {read[0].tolist()} vs {(own[0] + offset).tolist()}"


@pytest.mark.parametrize("case", ["kv-shift", "input"])
def test_the_position_limit_is_the_models_own(family, case):
    """A text that fills the model's positions with the prompt runs; one token more is the one line naming the
    max_length, not the position table's index error (Data2Vec-text's limit was 2 too high)."""
    name, (mlm, tok) = family
    model = wrap(mlm, tok, **copy.deepcopy(POSITION_CASES[case][0]))
    limit = max_positions(mlm.config)
    assert limit == 128, f"{name}: max_positions {limit}, the model numbers 128 text positions"
    fits = tok([" ".join(["dog"] * (limit - 3 - 2))], return_tensors="pt")  # 3 prompt positions, 2 special tokens
    with torch.no_grad():
        model(**fits)
        over = tok([" ".join(["dog"] * (limit - 3 - 1))], return_tensors="pt")
        with pytest.raises(ValueError, match=f"exceed the model's {limit} positions"):
            model(**over)


def test_the_openprompt_door_numbers_a_shifted_prefix_as_the_model_does(family):
    """GeneratedPrefixTemplate's kv prefix (shift) on the family's masked LM: the same positions rule."""
    from openprompt import PromptForClassification
    from openprompt.prompts import ManualVerbalizer

    from openprompt_ipt import GeneratedPrefixTemplate

    name, (mlm, tok) = family
    template = GeneratedPrefixTemplate(mlm, tok, text=TEXT, generator="prefix", injection="kv", prompt_length=3)
    verbalizer = ManualVerbalizer(tok, num_classes=2, label_words=[["yes"], ["no"]])
    pm = PromptForClassification(mlm, template, verbalizer, freeze_plm=True, plm_eval_mode=True)
    batch = next(iter(loader_for(pm, tok, examples(4), 4)))
    real = batch["attention_mask"].bool()
    ids = batch["input_ids"]
    own = positions_read(mlm, lambda: mlm(input_ids=ids, attention_mask=batch["attention_mask"])).expand(4, -1)
    read = positions_read(mlm, lambda: pm(batch)).expand(4, -1)
    assert torch.equal(read[real], own[real] + 3), f"{name}: {read[0].tolist()} vs {(own[0] + 3).tolist()}"


BATCH_CASES = ["prompt_tuning", "ipt-random", "ipt-encoder", "prefix_tuning", "p_tuning_v2-kv", "p_tuning_v2-hidden",
               "prefix_ipt-random", "s_idpg-dnn-cls", "m_idpg-phm-cls", "m_idpg-dnn-static-kv", "lpt-npg",
               "late_ipt-random"]


@pytest.mark.parametrize("case", BATCH_CASES)
def test_an_example_scores_the_same_alone_and_padded_and_its_prompt_trains(other_family, case):
    name, (mlm, tok) = other_family
    model = wrap(mlm, tok, **copy.deepcopy(CASES[case]))
    torch.manual_seed(3)
    with torch.no_grad():  # off their initial values: a zero-initialised part would hide a leak
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.3)
    for side in ("right", "left"):
        tok.padding_side = side
        with torch.no_grad():
            together = model(**tok(TEXTS, padding=True, return_tensors="pt")).logits
            for i, text in enumerate(TEXTS):
                alone = model(**tok([text], return_tensors="pt")).logits
                torch.testing.assert_close(alone[0], together[i], rtol=0, atol=1e-5,
                                           msg=f"{name} {side} padding: example {i} changed")
    tok.padding_side = "right"
    model.train()
    model(**tok(TEXTS, padding=True, return_tensors="pt"), labels=torch.tensor([0, 1, 0, 1])).loss.backward()
    prompt = {n: p.grad for n, p in model.named_parameters() if p.requires_grad and not n.startswith("base_model.")}
    assert prompt and all(g is not None for g in prompt.values()), f"{name}: prompt parameters without gradient"
    assert sum(g.abs().sum() for g in prompt.values()) > 0, f"{name}: the prompt's gradient is zero"


def test_the_openprompt_door_trains_with_a_soft_verbalizer_on_the_familys_head(family):
    """OpenPrompt's SoftVerbalizer takes the masked LM's last child as its head; transformers 5 puts XLM-R's and
    CamemBERT's ``lm_head`` first, and it raised "Can't not retrieve a linear layer" (compat.py shows it the head)."""
    name, (mlm, tok) = family
    pm = build(mlm, tok, strategy="random", prompt_length=3, task_prompt_length=2)
    verbalizer = pm.verbalizer
    assert torch.equal(verbalizer.original_head_last_layer, mlm.get_output_embeddings().weight.data), name
    batch = next(iter(loader_for(pm, tok, examples(4), 4)))
    pm.train()
    torch.nn.functional.cross_entropy(pm(batch), batch["label"]).backward()
    grads = [p.grad for p in pm.template.parameters() if p.requires_grad]
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads), f"{name}: the prompt gets no gradient"


def task_types_read(model, call):
    """The task type ids ERNIE's task-type embeddings look up in the last pass of ``call()``."""
    return ids_read(model, call, "task_type_embeddings")


@pytest.mark.parametrize("case", ["input", "s_idpg", "kv-shift", "lpt"])
def test_ernie_task_type_ids_reach_the_model_with_the_prompt(tiny_dir, case):
    """ERNIE 3.0's task ids (``use_task_id``): the wrapper's forward had no ``task_type_ids`` (a TypeError; the
    Trainer dropped the column unseen). They reach the model, each example's own id at its prompt's positions."""
    mlm, tok = family_mlm("ernie", tiny_dir)
    config = {"input": dict(method="prompt_tuning", prompt_length=3),
              "s_idpg": dict(method="s_idpg", prompt_length=3, insert_position=1, options={"layer": "dnn", "hidden": 8}),
              "kv-shift": POSITION_CASES["kv-shift"][0],
              "lpt": dict(method="lpt", prompt_length=3, late_layer=1, options={"bottleneck": 8})}[case]
    model = wrap(mlm, tok, **copy.deepcopy(config))
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    task = torch.tensor([[1], [2], [1], [0]]).expand_as(enc["input_ids"]).contiguous()
    read = task_types_read(model, lambda: model(**enc, task_type_ids=task))
    assert read.shape[1] == enc["input_ids"].shape[1] + (3 if case in ("input", "s_idpg") else 0)
    assert torch.equal(read, task[:, :1].expand_as(read)), "every position, the prompt's too, has the example's task id"
    with torch.no_grad():
        with model.disable_adapter():  # passed through: the base's own logits with these task ids
            torch.testing.assert_close(model(**enc, task_type_ids=task).logits,
                                       model.get_base_model()(**enc, task_type_ids=task).logits)
        tok.padding_side = "left"
        left = tok(TEXTS, padding=True, return_tensors="pt")
        left_task = torch.tensor([[1], [2], [1], [0]]).expand_as(left["input_ids"]).contiguous()
        torch.testing.assert_close(model(**left, task_type_ids=left_task).logits,
                                   model(**enc, task_type_ids=task).logits, rtol=0, atol=1e-5)
        for i, text in enumerate(TEXTS):
            one = tok([text], return_tensors="pt")
            alone = model(**one, task_type_ids=torch.full_like(one["input_ids"], int(task[i, 0]))).logits
            torch.testing.assert_close(alone[0], model(**enc, task_type_ids=task).logits[i], rtol=0, atol=1e-5)


def test_task_type_ids_on_another_family_are_one_line(tiny_dir):
    mlm, tok = family_mlm("bert", tiny_dir)
    model = wrap(mlm, tok, method="prompt_tuning", prompt_length=3)
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with pytest.raises(ValueError, match="task_type_ids are ERNIE's input; this model is 'bert'"):
        model(**enc, task_type_ids=torch.zeros_like(enc["input_ids"]))


OPENPROMPT_CASES = {
    "instance_wise-random": (build, dict(strategy="random", prompt_length=3, task_prompt_length=2)),
    "instance_wise-encoder": (build, dict(strategy="encoder", prompt_length=3, encoder="lstm", encoder_hidden=8)),
    "prefix-kv": (build_prefix, dict(generator="prefix", injection="kv", prompt_length=3)),
    "s_idpg-after_a": (build_prefix, dict(generator="idpg", insert_position=1, prompt_length=3,
                                          idpg={"depth": "single", "layer": "dnn", "hidden": 8})),
    "m_idpg-hidden": (build_prefix, dict(generator="idpg", prompt_length=3,
                                         idpg={"depth": "multi", "layer": "phm", "hidden": 8, "phm_n": 4})),
    "lpt-npg": (build_prefix, dict(generator="lpt", late_layer=1, prompt_length=3, lpt={"kind": "npg", "bottleneck": 8})),
}


@pytest.mark.parametrize("case", list(OPENPROMPT_CASES))
def test_the_openprompt_door_scores_an_example_the_same_alone_and_padded(other_family, case):
    name, (mlm, tok) = other_family
    builder, kwargs = OPENPROMPT_CASES[case]
    torch.manual_seed(0)
    pm = builder(mlm, tok, **copy.deepcopy(kwargs))
    torch.manual_seed(3)
    with torch.no_grad():
        for p in pm.template.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.3)
    pm.eval()
    exs = examples(4)
    for i, text in enumerate(TEXTS):
        exs[i].text_a = text
    with torch.no_grad():
        together = pm(next(iter(loader_for(pm, tok, exs, 4))))
        for i, ex in enumerate(exs):
            alone = pm(next(iter(loader_for(pm, tok, [ex], 1))))
            torch.testing.assert_close(alone[0], together[i], rtol=0, atol=1e-5 * together.abs().max().item(),
                                       msg=f"{name}: example {i} changed with padding")


def test_the_soft_verbalizer_shim_keeps_its_arguments():
    """The config check and OpenPrompt's ``load_verbalizer`` read SoftVerbalizer's arguments from its signature: a
    wrapper that hid them refused ``soft_verbalizer.label_words`` in every YAML (the quick start included)."""
    from openprompt.prompts import SoftVerbalizer

    from openprompt_ipt.runner.config import class_arguments

    assert {"classes", "num_classes", "label_words", "prefix", "multi_token_handler"} <= set(class_arguments(SoftVerbalizer))
