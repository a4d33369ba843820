"""On a CUDA GPU, every template variant computes what it computes on CPU, trains through our optimizers
and OpenPrompt's tutorial loop, and our runner trains, checkpoints and resumes in fp32 / bf16 / fp16.

CI has no GPU, so this module skips there; it runs on a GPU machine (docs/gpu.md has the command and
what it printed). The rest of the suite pins ``device: cpu``, so without this module nothing would
catch a tensor made on the wrong device inside a template, a generator or the sparse optimizer.
"""
import copy
import json

import pytest
import torch
import torch.nn.functional as F

from helpers import examples
from openprompt_ipt.data import encode_examples, make_loader
from openprompt_ipt.runner.experiment import build_model
from openprompt_ipt.training.optim import build_optimizers
from test_openprompt_native import (MAX_LEN, VARIANTS, backbones, resolve, runner_config,  # noqa: F401  (fixture)
                                    tutorial_loader)
from test_predict_and_runs import tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_training import write_cb

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (docs/gpu.md)")
CUDA = torch.device("cuda")
ATOL = 1e-4  # CPU and GPU kernels sum in different orders; TF32 stays off (PyTorch's default for matmuls)


def to(batch, device):
    return {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}


def build(backbones, backbone, variant, verbalizer="soft_verbalizer"):
    model_path, table = backbones[backbone]
    template_name, section = VARIANTS[variant]
    exs = examples(4)
    torch.manual_seed(1)
    model, tokenizer, wrapper_class = build_model(runner_config(model_path, template_name, resolve(section, table),
                                                                verbalizer), exs, 2, ["yes", "no"])
    wrapper = wrapper_class(max_seq_length=MAX_LEN, tokenizer=tokenizer, truncate_method="balanced")
    batch = next(iter(make_loader(encode_examples(exs, model.template, wrapper), len(exs), tokenizer.pad_token_id)))
    return model.eval(), batch, exs, tokenizer, wrapper_class


def step(model, batch):
    """One training step with our optimizers (AdamW + RowSparseAdam for vocab tables); dropout off so
    CPU and GPU take the same step."""
    optimizers = build_optimizers(model, 0.05, 0.05)
    loss = F.cross_entropy(model(dict(batch)), batch["label"])
    loss.backward()
    assert all(p.grad is None for p in model.plm.parameters()), "the frozen PLM received gradients"
    for opt in optimizers:
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.item()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("backbone", ["bert", "roberta"])
def test_every_variant_on_cuda_matches_cpu_forward_and_training_step(backbones, backbone, variant):
    cpu, batch, *_ = build(backbones, backbone, variant)
    gpu = copy.deepcopy(cpu).to(CUDA)
    assert all(t.device.type == "cuda" for t in list(gpu.parameters()) + list(gpu.buffers()))
    with torch.no_grad():
        ref, out = cpu(dict(batch)), gpu(to(batch, CUDA))
    assert out.device.type == "cuda" and torch.allclose(out.cpu(), ref, atol=ATOL), (out.cpu() - ref).abs().max()

    assert step(gpu, to(batch, CUDA)) == pytest.approx(step(cpu, batch), abs=ATOL)
    trained = dict(cpu.template.named_parameters())
    moved = [n for n, p in gpu.template.named_parameters() if p.requires_grad]
    assert moved, "the template has nothing to train"
    for name in moved:  # the same update, including the sparse table's touched rows
        assert torch.allclose(dict(gpu.template.named_parameters())[name].detach().cpu(), trained[name].detach(),
                              atol=ATOL), name
    with torch.no_grad():  # and the trained models still agree
        assert torch.allclose(gpu(to(batch, CUDA)).cpu(), cpu(dict(batch)), atol=ATOL)


@pytest.mark.parametrize("variant", ["ipt_random", "ipt_encoder", "prefix_ipt_random_kv", "m_idpg_phm_hidden",
                                     "m_idpg_dnn_kv"])
def test_openprompt_tutorial_loop_on_cuda(backbones, variant):
    """OpenPrompt's tutorial moves the model with ``.cuda()`` and each ``InputFeatures`` batch with
    ``batch.cuda()``; its ``ClassificationRunner`` feeds ``batch.to_dict()``."""
    from openprompt import PromptForClassification

    cpu, batch, exs, tokenizer, wrapper_class = build(backbones, "roberta", variant, "manual_verbalizer")
    with torch.no_grad():
        reference = cpu(dict(batch))
    twin = copy.deepcopy(cpu)  # one copy: the template's hooks sit on this copy's PLM
    prompt_model = PromptForClassification(plm=twin.plm, template=twin.template, verbalizer=twin.verbalizer,
                                           freeze_plm=True, plm_eval_mode=True).cuda().eval()
    loader = tutorial_loader(exs, prompt_model.template, tokenizer, wrapper_class)
    with torch.no_grad():
        # a fresh batch each time: the forward pass replaces input_ids with inputs_embeds in the batch itself
        assert torch.allclose(prompt_model(next(iter(loader)).cuda()).cpu(), reference, atol=ATOL)
        assert torch.allclose(prompt_model(next(iter(loader)).cuda().to_dict()).cpu(), reference, atol=ATOL)
    prompt_model.train()
    optimizers = build_optimizers(prompt_model, 0.01, 0.01)  # the runner's optimizers (sparse tables when opted in)
    inputs = next(iter(loader)).cuda()
    loss = F.cross_entropy(prompt_model(inputs), inputs["label"])
    loss.backward()
    grads = [p.grad for p in prompt_model.template.parameters() if p.requires_grad and p.grad is not None]
    assert grads and all(g.device.type == "cuda" for g in grads)
    before = [p.detach().clone() for p in prompt_model.template.parameters() if p.requires_grad]
    for opt in optimizers:
        opt.step()
    after = [p.detach() for p in prompt_model.template.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(after, before)), "the step changed no prompt weight"


@pytest.mark.parametrize("precision", ["no", "bf16", "fp16"])
def test_runner_trains_checkpoints_and_resumes_on_cuda(tiny_model_dir, tmp_path, precision):  # noqa: F811
    from safetensors.torch import load_file

    from openprompt_ipt.runner.experiment import run_experiment

    data = write_cb(tmp_path / "CB", n_train=22)
    cfg = tiny_cfg(tiny_model_dir, data, device="cuda", mixed_precision=precision, checkpoint_every=1,
                   keep_checkpoints=20)
    gpu = run_experiment(copy.deepcopy(cfg), output_dir=str(tmp_path / "gpu"), show_progress=False)
    assert gpu["training"]["mixed_precision"] == precision
    losses = [h["train_loss"] for h in gpu["history"]]
    assert all(loss == loss and loss < 10 for loss in losses), losses  # finite (fp16: the scaler skipped no step for good)
    if precision == "no":  # fp32 on GPU trains as on CPU, to kernel rounding
        cpu = run_experiment(tiny_cfg(tiny_model_dir, data), output_dir=str(tmp_path / "cpu"), show_progress=False)
        assert losses == pytest.approx([h["train_loss"] for h in cpu["history"]], abs=1e-3)
        assert gpu["test"]["loss"] == pytest.approx(cpu["test"]["loss"], abs=1e-3)
    run_dir = tmp_path / "gpu"
    weights = load_file(str(run_dir / "best.safetensors"))  # saved from CUDA, readable anywhere
    assert weights and all(t.device.type == "cpu" for t in weights.values())

    # resume from a mid-run checkpoint on the GPU: the run ends where the uninterrupted one did
    (run_dir / "checkpoints" / "latest").write_text("step-0000003")
    again = run_experiment(copy.deepcopy(cfg), output_dir=str(run_dir), show_progress=False, resume=True)
    assert again["training"]["resumed_from_step"] == 3
    assert [h["train_loss"] for h in again["history"]] == pytest.approx(losses, abs=1e-5)
    assert again["test"]["accuracy"] == gpu["test"]["accuracy"]
    saved = json.load(open(run_dir / "metrics.json"))
    assert saved["training"]["mixed_precision"] == precision


@pytest.mark.parametrize("case", ["p_tuning_v2-kv", "lpt-mppg"])
def test_hf_pipeline_predicts_with_the_prompt_on_cuda(bert, case, tmp_path):
    """Issue #42: ``pipeline("text-classification", model=model.to("cuda"), ...)`` scores with the prompt in
    place, as the model's own forward on the GPU does."""
    from transformers import pipeline

    from test_hf_trainer import classifier_from, config_for

    from openprompt_ipt.hf import get_instance_prompt_model

    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm, initializer_range=0.2), config_for(case, tmp_path, mlm),
                                      tokenizer=tok).to(CUDA).eval()
    assert model.device.type == "cuda"
    texts = ["the movie was great", "a good film", "terrible movie", "bad film"]
    rows = pipeline("text-classification", model=model, tokenizer=tok, top_k=None, device=model.device)(texts)
    with torch.no_grad():
        probs = model(**to(tok(texts, padding=True, return_tensors="pt"), CUDA)).logits.softmax(-1).cpu()
    for row, p in zip(rows, probs):
        got = {d["label"]: d["score"] for d in row}
        torch.testing.assert_close(torch.tensor([got["LABEL_0"], got["LABEL_1"]]), p, rtol=0, atol=1e-5)


@pytest.mark.parametrize("max_grad_norm", [1.0, 0.0])
def test_an_fp16_overflow_skips_every_optimizer_step_on_cuda(bert, max_grad_norm):
    """The GPU's own fp16 grad scaler (tests/test_optim_settings.py stands a CPU one in): an inf in the head's
    gradient at step 2 skips AdamW's step *and* the sparse vocab table's."""
    from openprompt_ipt.training.distributed import Runtime
    from test_optim_settings import overflow_at_step_two

    calls, dense, sparse, pm = overflow_at_step_two(*bert, max_grad_norm, device="cuda",
                                                    runtime=Runtime.create("cuda", "fp16"))
    assert calls == 2
    assert [int(s["step"]) for s in dense.state.values()] == [1] * len(dense.state)
    assert sparse.state[pm.template.generator.table.embedding.weight]["step"] == 1
