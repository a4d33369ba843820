"""Issue #33's opt-in options for instance-wise prompts: ``train.lr_instance`` (the generator's own learning
rate), ``instance_wise.instance_dropout`` (whole instance vectors dropped while training) and
``instance_wise.table_init: plm`` (Random IPT's rows start as the PLM's input embeddings)."""
import pytest
import torch

from helpers import batch_for, build, build_prefix, clone, config_file, examples, loader_for
from openprompt_ipt.prompting.input_prompt import PositionDropout
from openprompt_ipt.runner.config import load_config
from openprompt_ipt.training import TrainConfig, Trainer
from openprompt_ipt.training.optim import build_optimizers, instance_parameter_ids
from openprompt_ipt.training.row_sparse_adam import RowSparseAdam

pytestmark = pytest.mark.usefixtures("one_thread")


def names(template, ids):
    return sorted(n for n, p in template.named_parameters() if id(p) in ids)


def test_instance_parameters_are_the_generator_without_task_prompts(bert):
    model, tok = bert
    ipt = build(model, tok, strategy="random", prompt_length=3, task_prompt_length=2)
    assert names(ipt.template, instance_parameter_ids(ipt.template)) == ["generator.table.embedding.weight"]
    assert instance_parameter_ids(build(model, tok, strategy="none", task_prompt_length=4).template) == set()
    assert instance_parameter_ids(build_prefix(model, tok, generator="prefix").template) == set()
    prefix_ipt = build_prefix(model, tok, generator="ipt_random", prompt_length=2).template
    got = names(prefix_ipt, instance_parameter_ids(prefix_ipt))
    assert got and not any(n.startswith("generator.task.") for n in got)
    assert "generator.instance.table.embedding.weight" in got
    idpg = build_prefix(model, tok, generator="idpg", idpg={"layer": "dnn"}).template
    assert names(idpg, instance_parameter_ids(idpg)) == names(idpg, {id(p) for p in idpg.generator.parameters()
                                                                   if p.requires_grad})


def test_lr_instance_none_keeps_one_prompt_rate_and_a_value_splits_it(bert):
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=3, task_prompt_length=2, sparse=True)
    (dense, sparse) = build_optimizers(pm, lr_prompt=3e-3, lr_head=1e-3)
    assert [g["lr"] for g in dense.param_groups] == [3e-3, 1e-3] and sparse.defaults["lr"] == 3e-3
    (dense, sparse) = build_optimizers(pm, lr_prompt=3e-3, lr_head=1e-3, lr_instance=1e-4)
    assert [g["lr"] for g in dense.param_groups] == [3e-3, 1e-3]  # the task prompt keeps lr_prompt
    assert isinstance(sparse, RowSparseAdam) and sparse.defaults["lr"] == 1e-4
    dense_pm = build(model, tok, strategy="encoder", prompt_length=2, task_prompt_length=2, encoder="mlp")
    (opt,) = build_optimizers(dense_pm, lr_prompt=3e-3, lr_head=1e-3, lr_instance=5e-4)
    by_lr = {g["lr"]: {id(p) for p in g["params"]} for g in opt.param_groups}
    assert by_lr[5e-4] == instance_parameter_ids(dense_pm.template)
    assert id(dense_pm.template.task_prompt) in by_lr[3e-3]


@pytest.mark.parametrize("sparse", [True, False])
def test_lr_instance_zero_trains_the_task_prompt_and_leaves_the_table(bert, tmp_path, sparse):
    model, tok = bert
    torch.manual_seed(0)
    pm = build(model, tok, strategy="random", prompt_length=3, task_prompt_length=2, sparse=sparse)
    table0 = pm.template.generator.table.embedding.weight.detach().clone()
    task0 = pm.template.task_prompt.detach().clone()
    loader = loader_for(pm, tok, examples(8), 4)
    cfg = TrainConfig(epochs=1, lr_prompt=1e-2, lr_instance=0.0, show_progress=False, device="cpu")
    Trainer(pm, cfg, output_dir=str(tmp_path / "run")).fit(loader, loader)
    assert torch.equal(pm.template.generator.table.embedding.weight.detach(), table0)
    assert not torch.allclose(pm.template.task_prompt.detach(), task0)


def test_lr_instance_reaches_the_trainer_from_yaml_and_is_range_checked(tmp_path):
    cfg = load_config(config_file(tmp_path, "train:\n  lr_instance: 3.0e-4\n"))
    assert cfg["train"]["lr_instance"] == pytest.approx(3e-4)
    assert load_config(config_file(tmp_path, "seed: 1\n"))["train"]["lr_instance"] is None
    with pytest.raises(ValueError, match=r"train\.lr_instance"):
        load_config(config_file(tmp_path, "train:\n  lr_instance: -1\n"))


def test_position_dropout_drops_whole_vectors_in_training_only():
    torch.manual_seed(0)
    drop = PositionDropout(0.5)
    x = torch.randn(64, 16, 8) + 5.0  # no zero entries of its own
    y = drop(x)
    dropped = (y == 0).all(-1)
    assert ((y == 0).any(-1) == dropped).all()  # a vector is dropped whole or kept whole
    assert 0.4 < dropped.float().mean().item() < 0.6
    assert torch.equal(y[~dropped], x[~dropped])  # kept vectors are not rescaled
    assert torch.equal(drop.eval()(x), x)
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="instance_dropout"):
            PositionDropout(bad)


def test_instance_dropout_touches_instance_vectors_only_and_saves_with_the_template(bert, tmp_path):
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=4, task_prompt_length=2, instance_dropout=0.5)
    batch = batch_for(pm, tok, examples(6))
    pm.train()
    torch.manual_seed(1)
    vectors = pm.template.prompt_vectors(batch)
    task, instance = vectors[:, :2], vectors[:, 2:]
    assert torch.equal(task, pm.template.task_prompt.unsqueeze(0).expand_as(task))
    assert (instance == 0).all(-1).any()
    pm.eval()
    assert not (pm.template.prompt_vectors(batch)[:, 2:] == 0).all(-1).any()
    assert pm.template.init_config["instance_dropout"] == 0.5
    plain = build(model, tok, strategy="random", prompt_length=4, task_prompt_length=2)
    assert set(pm.template.state_dict()) == set(plain.template.state_dict())  # no new weights


def test_table_init_plm_copies_the_input_embeddings(bert):
    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=3, table_init="plm")
    table = pm.template.generator.table.embedding.weight
    words = model.get_input_embeddings().weight
    assert torch.equal(table[: words.shape[0]], words)
    random = build(model, tok, strategy="random", prompt_length=3).template.generator.table.embedding.weight
    assert not torch.equal(random[: words.shape[0]], words)
    with pytest.raises(ValueError, match="table_init"):
        build(model, tok, strategy="random", prompt_length=3, table_init="glove")
    with pytest.raises(ValueError, match="table_init 'plm'"):
        build(model, tok, strategy="random", prompt_length=3, table_init="plm", table_dim=8)


def test_combine_add_puts_g_of_x_onto_the_task_prompt(bert):
    """``combine: add``: Prompt Tuning's positions, each task vector plus its example's G(x)_i; a zero table
    gives exactly Prompt Tuning's logits."""
    model, tok = bert
    torch.manual_seed(0)
    pm = build(model, tok, strategy="random", prompt_length=3, task_prompt_length=3, combine="add")
    assert pm.template.n_prefix == 3 and pm.template.prompt_position_names()[0] == "task + instance 1"
    batch = batch_for(pm, tok, examples(4))
    pm.eval()
    from openprompt_ipt.injection.batch import content_mask

    g = pm.template.generator(batch["input_ids"], content_mask(batch, "instance_token_ids"), batch["attention_mask"])
    vectors = pm.template.prompt_vectors(batch)
    assert vectors.shape[1] == 3 and torch.allclose(vectors, pm.template.task_prompt.unsqueeze(0) + g)
    with torch.no_grad():
        pm.template.generator.table.embedding.weight.zero_()
        logits_add = pm(clone(batch))
    plain = build(model, tok, strategy="none", task_prompt_length=3)
    with torch.no_grad():
        plain.template.task_prompt.copy_(pm.template.task_prompt)
        plain.verbalizer.load_state_dict(pm.verbalizer.state_dict())
        assert torch.allclose(plain.eval()(clone(batch)), logits_add, atol=1e-5)
    with pytest.raises(ValueError, match=r"combine 'add' .* prompt_length \(4\) must equal task_prompt_length \(3\)"):
        build(model, tok, strategy="random", prompt_length=4, task_prompt_length=3, combine="add")
    with pytest.raises(ValueError, match="unknown combine 'sum'"):
        build(model, tok, strategy="random", prompt_length=3, task_prompt_length=3, combine="sum")


def test_combine_add_through_the_transformers_door(bert):
    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model
    from transformers import BertForSequenceClassification

    model, tok = bert
    clf = BertForSequenceClassification(model.config)
    cfg = InstancePromptConfig(method="ipt", prompt_length=2, task_prompt_length=2,
                               options={"combine": "add", "init_std": 1e-3})
    pm = get_instance_prompt_model(clf, cfg, tokenizer=tok)
    enc = tok(["the cat sat", "a dog ran fast"], padding=True, return_tensors="pt")
    out = pm(**enc)
    assert pm.n_prefix == 2 and out.logits.shape == (2, 2)
