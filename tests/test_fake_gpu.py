"""Every method through both doors on a second device, checked on a CPU-only machine (tests/fake_gpu.py): a
tensor made on the CPU inside a forward, a generator, an injection hook, a loss, the sparse optimizer or the
runner's loop, then combined with the moved model's tensors, fails here as it would on CUDA; and the moved
model computes what the CPU one does. ``tests/test_cuda.py`` runs the same on a real GPU, when there is one."""
import copy
import json
import os

import pytest
import torch
import torch.nn.functional as F

from fake_gpu import GPU, DeviceMismatch, fake_gpu, unavailable
from helpers import examples
from openprompt_ipt.data import encode_examples, make_loader
from openprompt_ipt.runner.experiment import build_model
from openprompt_ipt.training.optim import build_optimizers
from test_hf_trainer import CASES, classifier_from, config_for
from test_openprompt_native import IDPG, MAX_LEN, VARIANTS, backbones, resolve, runner_config  # noqa: F401 (fixture)
from test_predict_and_runs import tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_training import write_cb

pytestmark = [pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "-"),
              pytest.mark.usefixtures("one_thread")]
ATOL = 1e-5
CPU_DEVICE = torch.device("cpu")
TEXTS = ["the movie was great", "a good film", "terrible movie", "bad film"]
# the cached M(x) of IDPG (its default; the conformance variants turn it off) and a cached S-IDPG
OPENPROMPT = {**VARIANTS,
              "m_idpg_phm_cached": ("generated_prefix", dict(generator="idpg", prompt_length=3,
                                                             idpg=dict(IDPG, depth="multi", cache=True))),
              "s_idpg_dnn_cached": ("generated_prefix", dict(generator="idpg", prompt_length=3,
                                                             idpg=dict(IDPG, depth="single", layer="dnn", cache=True)))}


def on(batch, device):
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}


def trained_on_gpu(params):
    """After one backward and step: the trained tensors and their gradients are on the GPU, and moved."""
    assert params, "nothing to train"
    assert all(p.grad is not None and p.grad.device == GPU and p.device == GPU for p in params)


def test_the_fake_gpu_refuses_what_cuda_refuses():
    with fake_gpu():
        x = torch.arange(6.0).reshape(2, 3).to(GPU)
        with pytest.raises(DeviceMismatch):
            x + torch.ones(3)                          # a CPU factory inside a forward
        with pytest.raises(DeviceMismatch):
            torch.cat([x, torch.zeros(1, 3)])
        with pytest.raises(TypeError):
            x.numpy()
        # what CUDA allows: a 0-dim CPU tensor, CPU indices, reading values, moving back
        assert (x * torch.tensor(2.0)).tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
        assert x[torch.tensor([1])].device == GPU and x[:, torch.tensor([True, False, True])].sum().item() == 10.0
        assert torch.zeros(2, device=GPU).device == GPU and x.cpu().device.type == "cpu"


@pytest.mark.parametrize("case", list(CASES))
def test_hf_door_on_a_gpu(plm, case, tmp_path):
    """``model.to(device)`` after ``get_instance_prompt_model``: the same logits for right-, left- and unpadded
    batches (each takes other mask and position paths), and one training step."""
    mlm, tok = plm
    model = get_model(mlm, tok, case, tmp_path)
    batches = {side: padded(tok, side) for side in ("right", "left")}
    batches["unpadded"] = dict(tok(TEXTS[:1], return_tensors="pt"), labels=torch.tensor([1]))
    with torch.no_grad():
        references = {name: model(**batch).logits for name, batch in batches.items()}
    with fake_gpu():
        model.to(GPU)
        for name, batch in batches.items():
            with torch.no_grad():
                logits = model(**on(batch, GPU)).logits
            assert logits.device == GPU
            torch.testing.assert_close(logits.cpu(), references[name], rtol=0, atol=ATOL, msg=name)
        model.train()
        model(**on(batches["right"], GPU)).loss.backward()
        trainable = [p for p in model.parameters() if p.requires_grad]
        trained_on_gpu(trainable)
        torch.optim.AdamW(trainable, lr=1e-2).step()


def padded(tok, side):
    before, tok.padding_side = tok.padding_side, side
    try:
        return dict(tok(TEXTS, padding=True, return_tensors="pt"), labels=torch.tensor([1, 1, 0, 0]))
    finally:
        tok.padding_side = before


def get_model(mlm, tok, case, tmp_path):
    from openprompt_ipt.hf import get_instance_prompt_model

    return get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), config_for(case, tmp_path, mlm),
                                     tokenizer=tok).eval()


@pytest.mark.parametrize("variant", list(OPENPROMPT))
@pytest.mark.parametrize("backbone", ["bert", "roberta"])
def test_openprompt_door_on_a_gpu(backbones, backbone, variant):  # noqa: F811
    """A template model moved after a CPU forward (IDPG's cache then holds CPU rows): the same logits, and one
    step of our optimizers (AdamW + RowSparseAdam for vocabulary tables)."""
    model, batch = openprompt_model(backbones, variant, backbone)
    with torch.no_grad():
        reference = model(dict(batch))
    with fake_gpu():
        model.to(GPU)
        with torch.no_grad():
            logits = model(on(batch, GPU))
        assert logits.device == GPU
        torch.testing.assert_close(logits.cpu(), reference, rtol=0, atol=ATOL)
        model.train()
        optimizers = build_optimizers(model, 0.05, 0.05)
        F.cross_entropy(model(on(batch, GPU)), batch["label"].to(GPU)).backward()
        trained_on_gpu([p for p in model.template.parameters() if p.requires_grad and p.grad is not None])
        for opt in optimizers:
            opt.step()


def test_runner_trains_resumes_and_predicts_on_a_gpu(tiny_model_dir, tmp_path):  # noqa: F811
    """Our runner with ``train.device`` set to the GPU: the CPU run's losses, a checkpoint readable on CPU, a
    resumed run that ends where the uninterrupted one did, and predictions from the run folder."""
    from safetensors.torch import load_file

    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    data = write_cb(tmp_path / "CB", n_train=22)
    cpu = run_experiment(tiny_cfg(tiny_model_dir, data), output_dir=str(tmp_path / "cpu"), show_progress=False)
    cfg = tiny_cfg(tiny_model_dir, data, device=GPU.type, checkpoint_every=1, keep_checkpoints=20)
    run_dir = tmp_path / "gpu"
    with fake_gpu():
        gpu = run_experiment(copy.deepcopy(cfg), output_dir=str(run_dir), show_progress=False)
        losses = [h["train_loss"] for h in gpu["history"]]
        assert losses == pytest.approx([h["train_loss"] for h in cpu["history"]], abs=1e-3)
        assert gpu["test"]["loss"] == pytest.approx(cpu["test"]["loss"], abs=1e-3)
        (run_dir / "checkpoints" / "latest").write_text("step-0000003")
        again = run_experiment(copy.deepcopy(cfg), output_dir=str(run_dir), show_progress=False, resume=True)
        assert again["training"]["resumed_from_step"] == 3
        assert [h["train_loss"] for h in again["history"]] == pytest.approx(losses, abs=1e-5)
        rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
        preds = load_run(str(run_dir), device=GPU.type).predict(rows)
    assert all(t.device.type == "cpu" for t in load_file(str(run_dir / "best.safetensors")).values())
    accuracy = sum(p["label"] == r["label"] for p, r in zip(preds, rows)) / len(rows)
    assert accuracy == pytest.approx(gpu["test"]["accuracy"])


# 🤗 door methods whose nn.DataParallel copies compute their own logits: the prompt is made and spliced in the
# copied modules alone; every other method refuses DataParallel in one line (openprompt_ipt/hf/replicas.py)
DATA_PARALLEL_SAFE = ("prompt_tuning", "ipt-random", "ipt-pretrained")


@pytest.fixture
def replicate(monkeypatch):
    """nn.DataParallel's own ``replicate`` onto two devices, the CPU ("GPU 0") and the fake GPU ("GPU 1")."""
    import importlib

    module = importlib.import_module("torch.nn.parallel.replicate")

    def broadcast(tensors, devices, detach=False):
        kept = [t.detach() if detach else t for t in tensors]
        return [kept, [t.to(GPU) for t in kept]]
    monkeypatch.setattr(module, "_broadcast_coalesced_reshape", broadcast)
    monkeypatch.setattr(module, "_get_device_index", lambda device, optional=False: device)
    return lambda model: module.replicate(model, [0, 1])


@pytest.mark.parametrize("case", list(CASES))
def test_hf_door_under_data_parallel_computes_each_copys_logits_or_refuses(bert, case, tmp_path, replicate):
    """The stock Trainer wraps the model in nn.DataParallel when one process sees several GPUs. Kv / hidden / late
    prompts went through hooks all copies share (run at once, one copy's prompts, or none, reached another's
    layers: wrong logits without a word), and IDPG / encoder generators read the backbone outside the copies (a
    device error, or a StopIteration from a copy's empty ``parameters()``)."""
    mlm, tok = bert
    model = get_model(mlm, tok, case, tmp_path)
    batch = padded(tok, "right")
    with torch.no_grad():
        reference = model(**batch).logits
        with fake_gpu():
            first, second = replicate(model)
            if case not in DATA_PARALLEL_SAFE:
                with pytest.raises(RuntimeError, match=r"nn\.DataParallel .*torchrun --nproc_per_node N"):
                    second(**on(batch, GPU))
                return
            torch.testing.assert_close(second(**on(batch, GPU)).logits.cpu(), reference, rtol=0, atol=ATOL)
            torch.testing.assert_close(first(**batch).logits, reference, rtol=0, atol=ATOL)


@pytest.mark.parametrize("layer", ["dnn", "phm"])
def test_s_idpg_on_glove_under_data_parallel_computes_each_copys_logits(bert, tmp_path, replicate, layer):
    """S-IDPG reading GloVe vectors makes and splices its prompt in the copied modules, so DataParallel lets it run,
    but a copy's forward stopped with a bare StopIteration (the dtype came from ``parameters()``, which a copy does
    not list), and past that its PHM layers read the A set they share from the original generator (a device error
    on the second GPU). Each copy now computes the original's logits."""
    from openprompt_ipt.hf import InstancePromptConfig, get_instance_prompt_model
    from test_hf_trainer import _glove

    mlm, tok = bert
    config = InstancePromptConfig(method="s_idpg", prompt_length=3, options={
        "layer": layer, "phm_n": 4, "hidden": 8, "encoder": "glove", "glove_path": _glove(tmp_path)})
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), config, tokenizer=tok).eval()
    batch = padded(tok, "right")
    with torch.no_grad():
        reference = model(**batch).logits
        with fake_gpu():
            first, second = replicate(model)
            torch.testing.assert_close(second(**on(batch, GPU)).logits.cpu(), reference, rtol=0, atol=ATOL)
            torch.testing.assert_close(first(**batch).logits, reference, rtol=0, atol=ATOL)

@pytest.mark.parametrize("case", list(CASES))
def test_hf_door_wraps_a_base_already_on_the_gpu(bert, case, tmp_path):
    """``from_pretrained(path, device_map="cuda")`` (or ``base.cuda()``), then ``get_instance_prompt_model``: the
    prompt is made where the base is, as PEFT places its adapters; it was made on the CPU, and a forward outside
    the Trainer (which moves the whole model) failed on tensors on two devices."""
    from openprompt_ipt.hf import get_instance_prompt_model

    mlm, tok = bert
    batch = padded(tok, "right")
    config = config_for(case, tmp_path, mlm)
    reference_base = classifier_from(mlm, initializer_range=0.2)
    torch.manual_seed(3)  # the same prompt initialisation on both devices
    reference_model = get_instance_prompt_model(reference_base, config, tok).eval()
    with torch.no_grad():
        reference = reference_model(**batch).logits
    base = classifier_from(mlm, initializer_range=0.2)
    with fake_gpu():
        base.to(GPU)
        torch.manual_seed(3)
        model = get_instance_prompt_model(base, config, tokenizer=tok).eval()
        assert all(t.device == GPU for t in list(model.parameters()) + list(model.buffers()))
        with torch.no_grad():
            logits = model(**on(batch, GPU)).logits
    torch.testing.assert_close(logits.cpu(), reference, rtol=0, atol=ATOL)


def build_on(device, backbone_path, template_name, section, verbalizer, exs, monkeypatch):
    """``build_model`` with the PLM moved to ``device`` as soon as it is loaded, before the template and the
    verbalizer are made over it (``plm.cuda()`` first, then OpenPrompt's ``load_template`` / ``load_verbalizer``)."""
    import openprompt_ipt.runner.plm as plm_module

    real = plm_module.load_backbone

    def loaded_then_moved(*args, **kwargs):
        model, tokenizer, wrapper_class = real(*args, **kwargs)
        torch.manual_seed(1)  # the same prompt initialisation on both devices (loading under fake_gpu draws numbers)
        return model.to(device), tokenizer, wrapper_class
    monkeypatch.setattr(plm_module, "load_backbone", loaded_then_moved)
    cfg = runner_config(backbone_path, template_name, section, verbalizer)
    if verbalizer == "cls_head":
        cfg["cls_head"] = {}
    return build_model(cfg, exs, 2, ["yes", "no"])


# Random IPT's table started from the PLM's own embeddings, rows kept for some ids (copied from the GPU's table)
PLM_ROWS = {"ipt_random_plm_rows": ("instance_wise", dict(strategy="random", prompt_length=4, table_init="plm",
                                                          vocab_rows=list(range(5, 40))))}


@pytest.mark.parametrize("variant", list(OPENPROMPT) + list(PLM_ROWS))
def test_openprompt_door_over_a_plm_already_on_the_gpu(backbones, variant, monkeypatch):  # noqa: F811
    """``plm.cuda()``, then our template and ``cls_head`` over it (OpenPrompt's ``load_plm`` then ``load_template``,
    without a ``.cuda()`` of the whole PromptForClassification): their new parameters are made where the PLM's
    input embeddings are, as OpenPrompt's SoftTemplate takes its vectors from the PLM's; they were made on the
    CPU, and the first forward failed on tensors on two devices. The logits are the CPU-built model's.
    (OpenPrompt's own Manual- / SoftVerbalizer keep CPU tensors there, and need the ``.cuda()`` of the whole.)"""
    verbalizer = "cls_head"
    model_path, table = backbones["roberta"]
    template_name, section = {**OPENPROMPT, **PLM_ROWS}[variant]
    section = resolve(section, table)
    exs = examples(4)
    reference_model, tokenizer, wrapper_class = build_on(CPU_DEVICE, model_path, template_name, section, verbalizer,
                                                         exs, monkeypatch)
    wrapper = wrapper_class(max_seq_length=MAX_LEN, tokenizer=tokenizer, truncate_method="balanced")
    batch = next(iter(make_loader(encode_examples(exs, reference_model.template, wrapper), len(exs),
                                  tokenizer.pad_token_id)))
    reference_model.eval()
    with torch.no_grad():
        reference = reference_model(dict(batch))
    with fake_gpu():
        model, _, _ = build_on(GPU, model_path, template_name, section, verbalizer, exs, monkeypatch)
        model.eval()
        moved = [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.device != GPU]
        assert not moved, moved
        with torch.no_grad():
            logits = model(on(batch, GPU))
        if model.template.__dict__.get("injection") != "late":  # a new text with {"soft"} tokens: MixedTemplate
            model.template.text = '{"soft"} {"soft"} ' + model.template.init_config["text"]  # makes their table anew
            assert model.template.soft_embedding.weight.device == GPU
    torch.testing.assert_close(logits.cpu(), reference, rtol=0, atol=ATOL)


# OpenPrompt door templates whose nn.DataParallel copies compute their own logits (as in the 🤗 door)
OPENPROMPT_DATA_PARALLEL_SAFE = ("prompt_tuning", "ipt_random", "ipt_pretrained")


def openprompt_model(backbones, variant, backbone="bert"):  # noqa: F811
    model_path, table = backbones[backbone]
    template_name, section = OPENPROMPT[variant]
    exs = examples(4)
    torch.manual_seed(1)
    model, tokenizer, wrapper_class = build_model(runner_config(model_path, template_name, resolve(section, table),
                                                                "soft_verbalizer"), exs, 2, ["yes", "no"])
    wrapper = wrapper_class(max_seq_length=MAX_LEN, tokenizer=tokenizer, truncate_method="balanced")
    batch = next(iter(make_loader(encode_examples(exs, model.template, wrapper), len(exs), tokenizer.pad_token_id)))
    return model.eval(), batch


@pytest.mark.parametrize("variant", list(OPENPROMPT))
def test_openprompt_door_under_data_parallel_computes_each_copys_logits_or_refuses(backbones, variant, replicate):  # noqa: F811
    """OpenPrompt's ClassificationRunner wraps the PromptForClassification in nn.DataParallel when
    ``environment.num_gpus > 1``, and its copies run at once in threads. Here copy 1 runs its whole forward while
    copy 0 is between its template's ``process_batch`` and its PLM pass (as threads interleave): kv / hidden / late
    prompts went through hooks both copies share (copy 0's layers then got copy 1's prompts, or none: wrong logits
    without a word), and IDPG / encoder generators read the backbone outside the copies. Those now refuse in one
    line; the others give each copy the one-device logits."""
    model, batch = openprompt_model(backbones, variant)
    with torch.no_grad():
        reference = model(dict(batch))
        with fake_gpu():
            first, second = replicate(model)
            copied = first.prompt_model.template
            real_process_batch = copied.process_batch
            seen = {}

            def interleaved(b):
                out = real_process_batch(b)
                seen["second"] = second(on(batch, GPU))  # copy 1's forward, while copy 0's prompts are armed
                return out
            copied.process_batch = interleaved
            if variant not in OPENPROMPT_DATA_PARALLEL_SAFE:
                with pytest.raises(RuntimeError, match=r"Template \(.*\) does not run under nn\.DataParallel .*"
                                   r"environment\.num_gpus: 1, or CUDA_VISIBLE_DEVICES=0\), or one process per GPU"):
                    first(dict(batch))
                return
            logits = first(dict(batch))
    torch.testing.assert_close(seen["second"].cpu(), reference, rtol=0, atol=ATOL)
    torch.testing.assert_close(logits, reference, rtol=0, atol=ATOL)


def test_vocab_table_rows_copied_across_devices():
    """A restricted vocabulary table (``vocab_rows``) on the GPU given rows from the CPU (a saved table, an
    ``init_from`` run), and one on the CPU given the GPU's: the rows land as on one device (an index_put across
    devices raised before)."""
    from openprompt_ipt.generators.vocab_table import VocabPromptTable, table_rows_by_id

    torch.manual_seed(0)
    weight = torch.randn(12, 4)
    saved = torch.randn(5, 4)  # a table that kept ids 2, 3, 7 (+ the shared row and the pad row)
    reference = VocabPromptTable(12, 4, 4, rows=[1, 2, 3, 7])
    reference.load_vocab_weight(weight)
    expected, *ids = table_rows_by_id(reference, saved, [2, 3, 7])
    with fake_gpu():
        on_gpu = VocabPromptTable(12, 4, 4, rows=[1, 2, 3, 7])
        on_gpu.embedding.weight.data.copy_(reference.embedding.weight.data)
        on_gpu.to(GPU)
        on_gpu.load_vocab_weight(weight)  # CPU rows into the GPU's table
        rows, *gpu_ids = table_rows_by_id(on_gpu, saved, [2, 3, 7])
        assert rows.device == GPU and gpu_ids == ids
        torch.testing.assert_close(rows.cpu(), expected, rtol=0, atol=0)
        on_cpu = VocabPromptTable(12, 4, 4, rows=[1, 2, 3, 7])
        on_cpu.load_vocab_weight(weight.to(GPU))  # the GPU's rows into a CPU table
        torch.testing.assert_close(on_cpu.embedding.weight[1:5].detach(), reference.embedding.weight[1:5].detach(),
                                   rtol=0, atol=0)
