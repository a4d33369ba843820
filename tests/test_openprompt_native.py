"""Our templates inside OpenPrompt's own pipeline (issue #21), on tiny BERT and RoBERTa:

(a) ``PromptDataLoader`` (``InputFeatures`` batches padded to ``max_seq_length``) + ``PromptForClassification``
    + a hand-written training step, as in OpenPrompt's tutorial 1.x;
(b) the same batches after ``batch.to_dict()`` (what OpenPrompt's ``ClassificationRunner`` feeds the model);
(c) ``load_plm`` / ``load_template`` / ``load_verbalizer`` from an OpenPrompt-schema YAML read by
    ``openprompt.config.get_config_from_file``.
Each gives the logits of our runner's own path (``build_model`` + ``encode_examples`` / ``make_loader``)
for the same examples, weights and max_seq_length; the generator reads the example's own tokens; the
frozen PLM gets no gradient. ManualVerbalizer (MLM head) and SoftVerbalizer, every template variant.
"""
import os

import pytest
import torch
import torch.nn.functional as F
import yaml
from openprompt import PromptDataLoader, PromptForClassification
from openprompt.config import get_config_from_file, get_user_config
from openprompt.data_utils import InputFeatures
from openprompt.plms import load_plm
from openprompt.prompts import load_template, load_verbalizer

from conftest import _bert, _roberta
from helpers import examples
from openprompt_ipt.data import encode_examples, make_loader
from openprompt_ipt.generators import save_table
from openprompt_ipt.runner.experiment import build_model

MAX_LEN = 32
# helpers.TEXT has a ':' the tiny BPE vocab lacks: 4.39's slow RobertaTokenizer (OpenPrompt's load_plm) makes it
# <unk>, the fast one (our runner's AutoTokenizer) drops it; a text of in-vocabulary words tokenises alike
TEXT = '{"placeholder":"text_a"} question {"placeholder":"text_b"} ? {"mask"} .'
LABEL_WORDS = [["yes"], ["no"]]
IDPG = dict(hidden=8, phm_n=4, cache=False)
TABLE = "<table>"  # replaced by a pretrained table file written for the backbone

VARIANTS = {  # name: (template, section); our runner and OpenPrompt read the same section
    "prompt_tuning": ("instance_wise", dict(strategy="none", task_prompt_length=3)),
    "ipt_random": ("instance_wise", dict(strategy="random", prompt_length=4, task_prompt_length=2)),
    "ipt_pretrained": ("instance_wise", dict(strategy="pretrained", prompt_length=4, pretrained_path=TABLE)),
    "ipt_encoder": ("instance_wise", dict(strategy="encoder", prompt_length=3, encoder_hidden=8)),
    "p_tuning_v2_kv": ("generated_prefix", dict(generator="prefix", prompt_length=3)),
    "prefix_tuning_kv": ("generated_prefix", dict(generator="prefix", prompt_length=3,
                                                  prefix=dict(reparameterize=True, reparam_hidden=8))),
    "deep_pt_hidden": ("generated_prefix", dict(generator="prefix", prompt_length=3, injection="hidden")),
    "prefix_ipt_random_kv": ("generated_prefix", dict(generator="ipt_random", prompt_length=3)),
    "prefix_ipt_pretrained_kv": ("generated_prefix", dict(generator="ipt_pretrained", prompt_length=3,
                                                          ipt=dict(pretrained_path=TABLE))),
    "prefix_ipt_encoder_kv": ("generated_prefix", dict(generator="ipt_encoder", prompt_length=3,
                                                       ipt=dict(encoder_hidden=8))),
    "s_idpg_phm_input": ("generated_prefix", dict(generator="idpg", prompt_length=3, insert_position=1,
                                                  idpg=dict(IDPG, depth="single"))),
    "m_idpg_phm_hidden": ("generated_prefix", dict(generator="idpg", prompt_length=3, idpg=dict(IDPG, depth="multi"))),
    "m_idpg_dnn_kv": ("generated_prefix", dict(generator="idpg", prompt_length=3, injection="kv",
                                               idpg=dict(IDPG, layer="dnn", encoder="static_mean"))),
    # late prompts (issue #41), after layer 1 of the tiny models' 2
    "lpt_npg_late": ("generated_prefix", dict(generator="lpt", prompt_length=3, late_layer=1,
                                              lpt=dict(kind="npg", bottleneck=8))),
    "lpt_appg_late": ("generated_prefix", dict(generator="lpt", prompt_length=3, late_layer=1,
                                               lpt=dict(kind="appg", bottleneck=8))),
    "late_ipt_random": ("generated_prefix", dict(generator="ipt_random", prompt_length=3, injection="late",
                                                 late_layer=1)),
}
VERBALIZERS = ("manual_verbalizer", "soft_verbalizer")


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.fixture(scope="module")
def backbones(tmp_path_factory):
    """Tiny BERT / RoBERTa saved as checkpoints (our runner and OpenPrompt's ``load_plm`` read the same
    files), each with a pretrained prompt table for its vocabulary."""
    root = tmp_path_factory.mktemp("native")
    out = {}
    for name, make in (("bert", _bert), ("roberta", _roberta)):
        torch.manual_seed(0)
        model, tok = make(str(root))
        path = os.path.join(str(root), name)
        model.save_pretrained(path)
        tok.save_pretrained(path)
        table = os.path.join(path, "table.safetensors")
        save_table(table, torch.randn(len(tok), model.config.hidden_size), {"tokenizer": name})
        out[name] = (path, table)
    return out


def resolve(section, table):
    section = {k: (resolve(v, table) if isinstance(v, dict) else table if v == TABLE else v) for k, v in section.items()}
    return section


def runner_config(model_path, template, section, verbalizer):
    return {"plm": {"model_path": model_path, "freeze": True, "max_seq_length": MAX_LEN}, "train": {},
            "template": template, template: {"text": TEXT, **section},
            "verbalizer": verbalizer, verbalizer: {"label_words": LABEL_WORDS}}


def content_words(template, tokenizer):
    """Records, per forward pass, the tokens the instance generator treats as the example's own."""
    seen = []

    def record(input_ids, content):
        seen.append(["".join(tokenizer.convert_ids_to_tokens(row[mask].tolist())).replace("\u0120", "")
                     for row, mask in zip(input_ids, content.bool())])

    gen = template.generator
    if gen is None:  # plain Prompt Tuning: no instance prompt
        return seen
    if hasattr(gen, "begin"):  # GeneratedPrefixTemplate: begin(InstanceInputs) per batch
        begin = gen.begin
        gen.begin = lambda inputs: (record(inputs.input_ids, inputs.content_mask), begin(inputs))[1]
    else:  # InstanceWiseTemplate: generator(input_ids, content_mask, attention_mask)
        gen.register_forward_pre_hook(lambda module, args: record(args[0], args[1]))
    return seen


def own_words(exs):  # the placeholders' text, spaces dropped (the tiny BPE splits some words)
    return [f"{ex.text_a}{ex.text_b}".replace(" ", "") for ex in exs]


def tutorial_loader(exs, template, tokenizer, wrapper_class):
    return PromptDataLoader(dataset=exs, template=template, tokenizer=tokenizer, tokenizer_wrapper_class=wrapper_class,
                            max_seq_length=MAX_LEN, batch_size=len(exs), shuffle=False, truncate_method="balanced")


@pytest.mark.parametrize("verbalizer", VERBALIZERS)
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("backbone", ["bert", "roberta"])
def test_openprompt_paths_match_our_runner(backbones, backbone, variant, verbalizer, tmp_path):
    model_path, table = backbones[backbone]
    template_name, section = VARIANTS[variant]
    section = resolve(section, table)
    exs = examples(4)
    torch.manual_seed(1)

    # our runner's path: build_model, our features, batches padded to their own longest example
    cfg = runner_config(model_path, template_name, section, verbalizer)
    ours, tokenizer, wrapper_class = build_model(cfg, exs, 2, ["yes", "no"])
    ours.eval()
    wrapper = wrapper_class(max_seq_length=MAX_LEN, tokenizer=tokenizer, truncate_method="balanced")
    ref_batch = next(iter(make_loader(encode_examples(exs, ours.template, wrapper), len(exs), tokenizer.pad_token_id)))
    seen = content_words(ours.template, tokenizer)
    with torch.no_grad():
        reference = ours(ref_batch)

    # (a) PromptDataLoader + PromptForClassification, as in OpenPrompt's tutorial
    loader = tutorial_loader(exs, ours.template, tokenizer, wrapper_class)
    prompt_model = PromptForClassification(plm=ours.plm, template=ours.template, verbalizer=ours.verbalizer,
                                           freeze_plm=True, plm_eval_mode=True).eval()
    batch = next(iter(loader))
    assert isinstance(batch, InputFeatures) and batch["input_ids"].shape == (len(exs), MAX_LEN)
    with torch.no_grad():
        assert torch.allclose(prompt_model(batch), reference, atol=1e-5), "path a (InputFeatures) differs"
        # (b) OpenPrompt's ClassificationRunner feeds batch.to_dict()
        as_dict = next(iter(loader)).to_dict()
        assert {"instance_token_ids", "text_part_ids"} & set(as_dict) == \
            set(ours.template.registered_inputflag_names) & {"instance_token_ids", "text_part_ids"}
        assert torch.allclose(prompt_model(as_dict), reference, atol=1e-5), "path b (to_dict) differs"
    if ours.template.generator is not None:
        assert seen == [own_words(exs)] * 3, "the generator read template words / special tokens"

    # the tutorial's training step: only the prompt (and a SoftVerbalizer head) learn
    prompt_model.train()
    trainable = [p for p in prompt_model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    batch = next(iter(loader))
    loss = F.cross_entropy(prompt_model(batch), batch["label"])
    loss.backward()
    assert all(p.grad is None for p in prompt_model.plm.parameters()), "the frozen PLM received gradients"
    template_grads = [p.grad for n, p in ours.template.named_parameters() if p.requires_grad and p.grad is not None]
    assert template_grads and any(g.coalesce().values().abs().sum() > 0 if g.is_sparse else g.abs().sum() > 0
                                  for g in template_grads), "the template got no gradient"
    optimizer.step()

    # (c) an OpenPrompt-schema YAML read by OpenPrompt's own config reader and loaders
    yaml_path = tmp_path / "openprompt.yaml"
    yaml_path.write_text(yaml.safe_dump({
        "plm": {"model_name": backbone, "model_path": model_path, "optimize": {"freeze_para": True}},
        "dataloader": {"max_seq_length": MAX_LEN},
        "template": template_name, template_name: {"text": TEXT, **section, "optimize": {"lr": 0.03}},
        "verbalizer": verbalizer, verbalizer: {"label_words": LABEL_WORDS, "num_classes": 2}}))
    config = get_config_from_file(str(yaml_path))
    plm, op_tokenizer, _, op_wrapper = load_plm(config.plm.model_name, config.plm.model_path)
    template = load_template(config, model=plm, tokenizer=op_tokenizer)
    verbal = load_verbalizer(config, model=plm, tokenizer=op_tokenizer)
    assert type(template) is type(ours.template) and template.init_config == ours.template.init_config
    template.load_state_dict(ours.template.state_dict())  # step (a) trained ours: same weights from here
    verbal.load_state_dict(ours.verbalizer.state_dict())
    from_config = PromptForClassification(plm, template, verbal, freeze_plm=config.plm.optimize.freeze_para,
                                          plm_eval_mode=True).eval()
    ours.eval()
    with torch.no_grad():
        trained = ours(next(iter(make_loader(encode_examples(exs, ours.template, wrapper), len(exs),
                                              tokenizer.pad_token_id))))
        c_batch = next(iter(tutorial_loader(exs, template, op_tokenizer, op_wrapper)))
        seen_c = content_words(template, op_tokenizer)
        assert torch.allclose(from_config(c_batch), trained, atol=1e-5), "path c (get_config_from_file) differs"
    if template.generator is not None:
        assert seen_c == [own_words(exs)], "path c: the generator read template words / special tokens"


@pytest.mark.parametrize("template_name,section", [
    ("instance_wise", {"strategy": "random", "prompt_length": 4}),
    ("generated_prefix", {"generator": "ipt_random", "ipt": {"table_dim": 8}})])
def test_user_yaml_merges_onto_openprompt_defaults(bert, tmp_path, template_name, section):
    """OpenPrompt's ``get_user_config`` merges a YAML onto ``get_default_config()``: our sections are
    there, so a YAML writes only what it changes and the rest are the constructor's defaults."""
    from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate

    model, tok = bert
    path = tmp_path / "user.yaml"
    path.write_text(yaml.safe_dump({"template": template_name, template_name: {"text": TEXT, **section},
                                    "verbalizer": "soft_verbalizer", "soft_verbalizer": {"num_classes": 2}}))
    config = get_user_config(str(path))
    template = load_template(config, model=model, tokenizer=tok)
    cls = {"instance_wise": InstanceWiseTemplate, "generated_prefix": GeneratedPrefixTemplate}[template_name]
    direct = cls(model, tok, text=TEXT, **section)
    assert template.init_config == direct.init_config
    assert config[template_name].optimize.lr > 0  # OpenPrompt's trainer reads <template>.optimize


def test_registration_is_idempotent_and_keeps_the_flags():
    import openprompt_ipt.openprompt.registry as registry
    from openprompt.config import get_default_config

    registry.register()
    registry.register()
    for key in registry.BATCH_KEYS:
        assert InputFeatures.all_keys.count(key) == 1 and InputFeatures.tensorable_keys.count(key) == 1
    assert list(get_default_config().keys()).count("instance_wise") == 1
    features = InputFeatures(input_ids=[5, 6], instance_token_ids=[0, 1]).to_tensor().to("cpu")  # .to moves it too
    assert torch.equal(features.to_dict()["instance_token_ids"], torch.tensor([0, 1]))
    assert InputFeatures(input_ids=[5]).to_dict() == {"input_ids": [5]}  # unset flags stay invisible


def test_prompt_data_loader_keeps_our_flag_without_warning(bert, caplog):
    """OpenPrompt warns about every keyword outside InputFeatures' signature; ours are registered."""
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from openprompt_ipt import InstanceWiseTemplate

    model, tok = bert
    template = InstanceWiseTemplate(model, tok, text=TEXT, strategy="random", prompt_length=2)
    with caplog.at_level("WARNING"):
        loader = PromptDataLoader(dataset=examples(2), template=template, tokenizer=tok,
                                  tokenizer_wrapper_class=MLMTokenizerWrapper, max_seq_length=MAX_LEN)
    assert not [r for r in caplog.records if "unexpected key words" in r.getMessage()]
    flags = next(iter(loader))["instance_token_ids"]
    assert isinstance(flags, torch.Tensor) and flags.shape == (1, MAX_LEN)
    assert int((flags == 1).sum()) == len("the cat sat on the mat is it good".split())  # text_a + text_b tokens


@pytest.mark.parametrize("method", ["tail", "head"])
@pytest.mark.parametrize("template_name", ["instance_wise", "generated_prefix"])
def test_head_and_tail_truncation_cut_our_templates_as_openprompts_own(bert, method, template_name):
    """OpenPrompt's head / tail truncation empties the flag lists key by key, in place, and reads shortenable_ids
    for every key after it: with our flag listed after shortenable_ids, a text part cut away entirely (a short
    hypothesis after a long premise; PromptDataLoader's default is tail) raised IndexError."""
    from openprompt.data_utils import InputExample
    from openprompt.plms.mlm import MLMTokenizerWrapper
    from openprompt.prompts import MixedTemplate

    from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate

    model, tok = bert
    long = " ".join(["the cat sat on the mat"] * 8)
    exs = [InputExample(guid="0", text_a=long, text_b="a dog ran", label=0),   # tail empties text_b
           InputExample(guid="1", text_a="a dog ran", text_b=long, label=1)]   # head empties text_a
    if template_name == "instance_wise":
        ours = InstanceWiseTemplate(model, tok, text=TEXT, strategy="random", prompt_length=2)
        flag = "instance_token_ids"
    else:
        ours = GeneratedPrefixTemplate(model, tok, text=TEXT, generator="prefix", prompt_length=2)
        flag = "text_part_ids"
    batches = [next(iter(PromptDataLoader(dataset=exs, template=t, tokenizer=tok, batch_size=2, truncate_method=method,
                                          tokenizer_wrapper_class=MLMTokenizerWrapper, max_seq_length=MAX_LEN)))
               for t in (ours, MixedTemplate(model, tok, text=TEXT))]
    for key in ("input_ids", "attention_mask", "loss_ids"):
        assert torch.equal(batches[0][key], batches[1][key]), f"{method} truncation cut our {key} differently"
    words = {tok.convert_tokens_to_ids(w) for w in ("question", "?", ".")} | set(tok.all_special_ids)
    content = ~torch.isin(batches[0]["input_ids"], torch.tensor(sorted(words)))  # every kept token is text here
    assert torch.equal(batches[0][flag] > 0, content), f"the {flag} flag does not mark the text left after truncation"


def test_a_batch_without_the_flag_warns(bert):
    """A hand-built batch without the content flag used to fall back to the attention mask silently."""
    from openprompt_ipt import InstanceWiseTemplate
    from openprompt_ipt import MissingContentFlagWarning  # the public name

    model, tok = bert
    template = InstanceWiseTemplate(model, tok, text=TEXT, strategy="random", prompt_length=2)
    enc = tok(["the cat sat"], return_tensors="pt")
    with pytest.warns(MissingContentFlagWarning, match="instance_token_ids"):
        template.prompt_vectors({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})


# ---- OpenPrompt's tutorials as a user runs them: constructors' and optimizers' default arguments (#29) ----
TUTORIAL_TEMPLATES = {  # only the template's own choice of method; everything else its default
    "instance_wise_random": ("instance_wise", dict(strategy="random", prompt_length=3)),
    "instance_wise_pretrained": ("instance_wise", dict(strategy="pretrained", prompt_length=3, pretrained_path=TABLE)),
    "prefix_ipt_random": ("generated_prefix", dict(generator="ipt_random", prompt_length=3)),
    "prefix_ipt_pretrained": ("generated_prefix", dict(generator="ipt_pretrained", prompt_length=3,
                                                       ipt=dict(pretrained_path=TABLE))),
}


def tutorial_model(backbones, variant, verbalizer_cls):
    """tutorial/0_basic.py and 1.2_soft_verbalizers.py: load_plm, our template, freeze_plm=False."""
    from openprompt.prompts import ManualVerbalizer, SoftVerbalizer

    from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate

    model_path, table = backbones["bert"]
    torch.manual_seed(0)
    plm, tokenizer, _, wrapper_class = load_plm("bert", model_path)
    name, section = TUTORIAL_TEMPLATES[variant]
    cls = {"instance_wise": InstanceWiseTemplate, "generated_prefix": GeneratedPrefixTemplate}[name]
    template = cls(model=plm, tokenizer=tokenizer, text=TEXT, **resolve(section, table))
    if verbalizer_cls is SoftVerbalizer:
        verbalizer = SoftVerbalizer(tokenizer, plm, num_classes=2)
    else:
        verbalizer = ManualVerbalizer(tokenizer, num_classes=2, label_words=LABEL_WORDS)
    prompt_model = PromptForClassification(plm=plm, template=template, verbalizer=verbalizer, freeze_plm=False)
    loader = tutorial_loader(examples(4), template, tokenizer, wrapper_class)
    return prompt_model, template, loader


def template_weights(template):
    return {n: p.detach().clone() for n, p in template.named_parameters()
            if p.requires_grad and not n.startswith("raw_embedding")}


@pytest.mark.parametrize("variant", list(TUTORIAL_TEMPLATES))
def test_tutorial_0_loop_with_default_arguments(backbones, variant):
    """tutorial/0_basic.py: torch.optim.AdamW over every named parameter (decay groups as the tutorial),
    plus the gradient clipping of OpenPrompt's trainer. A sparse default table crashed here
    ("Adam does not support sparse gradients")."""
    from openprompt.prompts import ManualVerbalizer

    prompt_model, template, loader = tutorial_model(backbones, variant, ManualVerbalizer)
    no_decay = ["bias", "LayerNorm.weight"]
    groups = [{"params": [p for n, p in prompt_model.named_parameters() if not any(nd in n for nd in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in prompt_model.named_parameters() if any(nd in n for nd in no_decay)],
               "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-4)
    before = template_weights(template)
    loss_func = torch.nn.CrossEntropyLoss()
    for _ in range(2):
        for inputs in loader:
            loss = loss_func(prompt_model(inputs), inputs["label"])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(prompt_model.parameters(), 1.0)  # OpenPrompt's trainer
            optimizer.step()
            optimizer.zero_grad()
    assert torch.isfinite(loss)
    after = template_weights(template)
    assert any(not torch.equal(before[n], after[n]) for n in before), "the template did not train"


@pytest.mark.parametrize("variant", ["instance_wise_random", "prefix_ipt_random"])
def test_tutorial_1_2_optimizers_leave_the_template_untrained_and_say_so(backbones, variant):
    """tutorial/1.2_soft_verbalizers.py builds its optimizers from the PLM and the verbalizer only: our
    template then stays as made, which the warning says at ``prompt_model.eval()``; with
    ``openprompt_ipt.optimizer_groups`` the same loop trains the template and nothing is said."""
    import warnings

    from openprompt.prompts import SoftVerbalizer

    from openprompt_ipt import optimizer_groups
    from openprompt_ipt import TemplateNotTrainedWarning  # the public name

    def run(extra_groups):
        prompt_model, template, loader = tutorial_model(backbones, variant, SoftVerbalizer)
        no_decay = ["bias", "LayerNorm.weight"]
        plm_groups = [
            {"params": [p for n, p in prompt_model.plm.named_parameters() if not any(nd in n for nd in no_decay)],
             "weight_decay": 0.01},
            {"params": [p for n, p in prompt_model.plm.named_parameters() if any(nd in n for nd in no_decay)],
             "weight_decay": 0.0}]
        optimizer1 = torch.optim.AdamW(plm_groups, lr=3e-5)
        optimizer2 = torch.optim.AdamW([{"params": prompt_model.verbalizer.group_parameters_1, "lr": 3e-5},
                                        {"params": prompt_model.verbalizer.group_parameters_2, "lr": 3e-4}])
        optimizers = [optimizer1, optimizer2] + ([torch.optim.AdamW(extra_groups(prompt_model))] if extra_groups else [])
        before = template_weights(template)
        for inputs in loader:
            loss = torch.nn.CrossEntropyLoss()(prompt_model(inputs), inputs["label"])
            loss.backward()
            for opt in optimizers:
                opt.step()
                opt.zero_grad()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            prompt_model.eval()
        said = [w for w in caught if issubclass(w.category, TemplateNotTrainedWarning)]
        changed = any(not torch.equal(before[n], p) for n, p in template_weights(template).items())
        return said, changed

    said, changed = run(None)
    assert not changed and len(said) == 1 and "optimizer_groups" in str(said[0].message)
    # only the template's group: the tutorial's own optimizers keep the PLM and the verbalizer
    said, changed = run(lambda m: [g for g in optimizer_groups(m) if g["name"] == "template"])
    assert changed and not said


def test_optimizer_groups_cover_each_trainable_parameter_once(backbones):
    from openprompt.prompts import SoftVerbalizer

    from openprompt_ipt import optimizer_groups

    prompt_model, template, _ = tutorial_model(backbones, "prefix_ipt_random", SoftVerbalizer)
    groups = optimizer_groups(prompt_model, lr_template=0.03, lr_verbalizer=1e-3, lr_plm=1e-5)
    assert [(g["name"], g["lr"]) for g in groups] == [("plm", 1e-5), ("template", 0.03), ("verbalizer", 1e-3)]
    listed = [id(p) for g in groups for p in g["params"]]
    assert len(listed) == len(set(listed))  # raw_embedding is the PLM's embedding: listed once, with the PLM
    assert set(listed) == {id(p) for p in prompt_model.parameters() if p.requires_grad}
    frozen = PromptForClassification(prompt_model.plm, template, prompt_model.verbalizer, freeze_plm=True)
    assert [g["name"] for g in optimizer_groups(frozen)] == ["template", "verbalizer"]
    from openprompt_ipt.generators import use_sparse_rows

    use_sparse_rows(template)
    with pytest.raises(ValueError, match="sparse=False"):
        optimizer_groups(frozen)


def test_template_that_never_updates_warns_after_many_training_passes(bert):
    import warnings

    from openprompt_ipt.openprompt.templates import persistence
    from openprompt_ipt import TemplateNotTrainedWarning  # the public name
    from helpers import batch_for, build, clone

    model, tok = bert
    prompt_model = build(model, tok, strategy="random", prompt_length=2)
    batch = batch_for(prompt_model, tok, examples(2))
    prompt_model.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(persistence.UNUPDATED_PASSES):
            prompt_model(clone(batch))  # process_batch replaces input_ids by inputs_embeds in the batch
    assert [w for w in caught if issubclass(w.category, TemplateNotTrainedWarning)]


@pytest.mark.parametrize("template_name,section,where", [
    ("instance_wise", dict(strategy="random", prompt_length=3), None),
    ("generated_prefix", dict(generator="ipt_random", prompt_length=3), "ipt")])
def test_runner_keeps_sparse_rows_unless_the_yaml_says_otherwise(backbones, template_name, section, where):
    """The classes default to dense tables; our runner still trains them with sparse row updates (its
    results do not change), and a YAML's explicit ``sparse: false`` wins; the saved config stays dense."""
    model_path, _ = backbones["bert"]

    def tables(explicit):
        sec = dict(section)
        if explicit is not None:
            if where:
                sec[where] = {"sparse": explicit}
            else:
                sec["sparse"] = explicit
        prompt_model, _, _ = build_model(runner_config(model_path, template_name, sec, "soft_verbalizer"),
                                         examples(2), 2, ["yes", "no"])
        embeddings = [m.embedding for m in prompt_model.template.modules() if type(m).__name__ == "VocabPromptTable"]
        assert embeddings
        return [e.sparse for e in embeddings], prompt_model.template

    flags, template = tables(None)
    assert all(flags)
    saved = template.init_config if where is None else template.init_config.get(where) or {}
    assert not saved.get("sparse", False)
    assert not any(tables(False)[0])


@pytest.mark.parametrize("template_name", ["instance_wise", "generated_prefix"])
@pytest.mark.parametrize("how", ["from_file", "assigned"])
def test_save_pretrained_keeps_the_text_set_after_the_constructor(bert, tmp_path, template_name, how):
    """OpenPrompt's tutorials set the text after building the template (``Template(...).from_file(path, choice)``, as
    ``load_template`` does for ``file_path``); save_pretrained wrote the constructor's text: None (the reloaded
    template had no text) or, after ``template.text = ...``, the old text, reloaded without a word."""
    from openprompt.plms.mlm import MLMTokenizerWrapper
    from openprompt.prompts import ManualVerbalizer

    from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate

    model, tokenizer = bert
    cls, kwargs = {"instance_wise": (InstanceWiseTemplate, dict(strategy="random", prompt_length=3)),
                   "generated_prefix": (GeneratedPrefixTemplate, dict(generator="prefix", prompt_length=3))}[template_name]
    chosen = '{"mask"} news : {"placeholder":"text_a"}'
    if how == "from_file":
        path = tmp_path / "templates.txt"
        path.write_text(TEXT + "\n" + chosen + "\n")
        template = cls(model, tokenizer, **kwargs).from_file(str(path), choice=1)
    else:
        template = cls(model, tokenizer, text=TEXT, **kwargs)
        template.text = chosen
    template.save_pretrained(str(tmp_path / "saved"))
    loaded = cls.from_pretrained(str(tmp_path / "saved"), model, tokenizer)
    logits = []
    for t in (template, loaded):
        verbalizer = ManualVerbalizer(tokenizer, num_classes=2, label_words=LABEL_WORDS)
        prompt_model = PromptForClassification(model, t, verbalizer, freeze_plm=True).eval()
        loader = PromptDataLoader(dataset=examples(2), template=t, tokenizer=tokenizer,
                                  tokenizer_wrapper_class=MLMTokenizerWrapper, max_seq_length=MAX_LEN, batch_size=2)
        with torch.no_grad():
            logits.append(prompt_model(next(iter(loader))))
    plain = lambda text: [{k: v for k, v in d.items() if not callable(v)} for d in text]  # noqa: E731  (parsed lambdas)
    assert plain(loaded.text) == plain(template.text) and loaded.text[0].get("mask", 0) is None  # the chosen line
    torch.testing.assert_close(logits[0], logits[1])


OURS = {"instance_wise": dict(strategy="random", prompt_length=2),
        "generated_prefix": dict(generator="ipt_random", prompt_length=2)}


def our_template(name, model, tokenizer, **kwargs):
    from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate

    cls = {"instance_wise": InstanceWiseTemplate, "generated_prefix": GeneratedPrefixTemplate}[name]
    return cls(model, tokenizer, **{**OURS[name], **kwargs})


def first_batch(template, tokenizer, exs, **loader_kwargs):
    from openprompt.plms.mlm import MLMTokenizerWrapper

    return next(iter(PromptDataLoader(dataset=exs, template=template, tokenizer=tokenizer, batch_size=len(exs),
                                      tokenizer_wrapper_class=MLMTokenizerWrapper, **loader_kwargs)))


@pytest.mark.parametrize("template_name", list(OURS))
def test_a_new_text_moves_the_mask_the_verbalizer_reads(bert, template_name):
    """OpenPrompt caches ``loss_ids`` and ``shortenable_ids`` on the first ``wrap_one_example`` and never recomputes
    them: after ``template.text = ...`` (or ``from_file`` with another choice) on a template that had wrapped
    examples, the verbalizer read the old mask position, another token, and truncation cut the old parts."""
    model, tok = bert
    template = our_template(template_name, model, tok, text='{"placeholder":"text_a"} {"mask"} question')
    first_batch(template, tok, examples(2), max_seq_length=MAX_LEN)
    template.text = '{"placeholder":"text_a", "shortenable": False} question {"mask"}'
    batch = first_batch(template, tok, examples(2), max_seq_length=MAX_LEN)
    assert torch.equal(batch["input_ids"][batch["loss_ids"] > 0], torch.full((2,), tok.mask_token_id)), \
        "loss_ids do not mark the [MASK] of the new text"
    assert [d["shortenable_ids"] for d in template.wrap_one_example(examples(1)[0])[0]] == [0, 0, 0]


@pytest.mark.parametrize("template_name", list(OURS))
def test_a_refused_text_leaves_the_template_as_it_was(bert, template_name):
    """OpenPrompt's text setter leaves a refused text half-applied and ``_in_on_text_set`` stuck: the next, good
    text was never parsed and failed 'template text has no {"mask"}'."""
    model, tok = bert
    template = our_template(template_name, model, tok, text=TEXT)
    before = template.wrap_one_example(examples(1)[0])
    soft = template.soft_embedding
    with pytest.raises(ValueError, match="mask"):
        template.text = '{"placeholder":"text_a"} question .'
    assert template.wrap_one_example(examples(1)[0]) == before and template.soft_embedding is soft
    assert template.init_config["text"] == TEXT
    template.text = '{"mask"} {"soft"} {"placeholder":"text_a"}'  # a good text is taken after a refused one
    batch = first_batch(template, tok, examples(2), max_seq_length=MAX_LEN)
    assert torch.equal(batch["input_ids"][batch["loss_ids"] > 0], torch.full((2,), tok.mask_token_id))
    assert template.num_soft_token == 1 and template.init_config["text"] == '{"mask"} {"soft"} {"placeholder":"text_a"}'


META_ONLY = '{"meta":"sentence"} it was {"mask"} .'


@pytest.mark.parametrize("template_name,kwargs", [
    ("instance_wise", dict(strategy="random")), ("instance_wise", dict(strategy="encoder", encoder_hidden=8)),
    ("generated_prefix", dict(generator="ipt_random")),
    ("generated_prefix", dict(generator="idpg", idpg=dict(hidden=8, phm_n=4, cache=False)))])
def test_a_text_without_placeholders_is_refused_where_the_prompt_reads_them(bert, template_name, kwargs):
    """The instance prompt reads the placeholders' tokens (the content flag): with the example's text in
    ``{"meta": ...}`` only, every example silently got the same "instance-wise" prompt."""
    model, tok = bert
    with pytest.raises(ValueError, match=r'no \{"placeholder": \.\.\.\}.*the same prompt'):
        our_template(template_name, model, tok, text=META_ONLY, **kwargs)
    template = our_template(template_name, model, tok, text=TEXT, **kwargs)
    with pytest.raises(ValueError, match="placeholder"):
        template.text = META_ONLY
    assert template.init_config["text"] == TEXT


@pytest.mark.parametrize("template_name,kwargs", [
    ("instance_wise", dict(strategy="none", prompt_length=0, task_prompt_length=2)),
    ("instance_wise", dict(token_source="input_prefix", prompt_length=8)),
    ("generated_prefix", dict(generator="prefix")), ("generated_prefix", dict(ipt=dict(token_source="input_prefix")))])
def test_a_text_without_placeholders_works_where_nothing_reads_them(bert, template_name, kwargs):
    from openprompt.data_utils import InputExample

    model, tok = bert
    template = our_template(template_name, model, tok, text=META_ONLY, **kwargs)
    exs = [InputExample(guid=str(i), meta={"sentence": s}, label=0) for i, s in enumerate(["the cat sat", "a dog ran"])]
    batch = first_batch(template, tok, exs, max_seq_length=MAX_LEN)
    assert torch.equal(batch["input_ids"][batch["loss_ids"] > 0], torch.full((2,), tok.mask_token_id))
    if kwargs.get("token_source") == "input_prefix":  # raw ids: the meta text makes the prompts differ
        prompts = template.prompt_vectors(batch)
        assert not torch.equal(prompts[0], prompts[1])


@pytest.mark.parametrize("template_name", list(OURS))
def test_a_missing_text_b_is_an_empty_one(bert, template_name):
    """``InputExample(text_b=None)`` (a row without a second text) stopped OpenPrompt's ``wrap_one_example`` at
    'can only concatenate str (not "NoneType") to str'; our runner already read it as "" (OpenPrompt's default)."""
    from openprompt.data_utils import InputExample

    model, tok = bert
    template = our_template(template_name, model, tok, text=TEXT)
    missing, empty = ([InputExample(guid="0", text_a="the cat sat", text_b=b, label=0)] for b in (None, ""))
    got, want = (first_batch(template, tok, exs, max_seq_length=MAX_LEN) for exs in (missing, empty))
    for key in ("input_ids", "loss_ids", template.registered_inputflag_names[2]):
        assert torch.equal(got[key], want[key]), key
    assert missing[0].text_b is None  # the user's example is left as it was
