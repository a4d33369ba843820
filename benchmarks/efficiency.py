"""Training-step time, peak memory and inference speed per prompt method, in one process run.

    python benchmarks/efficiency.py [--backbone minilm] [--batch-size 16] [--seq-len 128]
                                    [--rounds 3] [--steps 5] [--output docs/performance/README.md]

Every method trains on the same fixed batch (real CB text, truncated to exactly --seq-len tokens)
with the same number of prompt positions (t = 20; IPT: 4 task + 16 instance). Methods are
interleaved round by round so machine noise hits all of them alike; the step time is the median
over all rounds. Methods share one backbone, each measured with only its own injection hooks on it
(``Runs.alone``). Peak memory: each method in a fresh subprocess (CPU: peak RSS; GPU: max allocated); ``--memory-only`` runs just those processes (no timing), cheap enough for a realistic batch of
the roberta-large shape on CPU. Vocabulary tables (the IPT rows) train as our runner trains them, with sparse row gradients and
``RowSparseAdam`` (``use_sparse_rows``); ``--tables dense`` keeps the constructors' dense default, which a
stock ``torch.optim.AdamW`` trains with dense moments for the whole table. PEFT's prompt tuning and prefix tuning (``pip install peft``) run as the peer, on the
same backbone with the same SoftVerbalizer head; so do Adapter, Compacter and LoRA (the ``peers`` extra,
``openprompt_ipt/runner/peers.py``), each on its own copy of the backbone, which their libraries modify.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import openprompt_ipt  # noqa: E402,F401
from peft_peer import PeftClassifier  # noqa: E402  (shared with the accuracy row, peft_run.py)

T = 20
TEXT = '{"placeholder":"text_a"} Question: {"placeholder":"text_b"}? Answer: {"mask"}.'
IW, GP = "instance_wise", "generated_prefix"
LATE_LAYER = None  # --late-layer; None: half the backbone's layers
ENCODER = dict(strategy="encoder", prompt_length=16, task_prompt_length=4, sequence_utilization_rate=0.3)
M_IDPG = dict(depth="multi", layer="phm", hidden=16, phm_n=16, sharing="M", input_from="previous")

# name -> (template, kwargs); "finetune" and "peft_*" are special-cased
METHODS = {
    "Fine-tuning": ("finetune", {}),
    "Prompt Tuning": (IW, dict(strategy="none", task_prompt_length=T)),
    "PT + Random IPT": (IW, dict(strategy="random", prompt_length=16, task_prompt_length=4)),
    "PT + Pretrained IPT": (IW, dict(strategy="pretrained", prompt_length=16, task_prompt_length=4)),
    # Encoder IPT reads the first 30% of the tokens, as the per-method YAMLs do (IPT Table 6: accuracy
    # plateaus from 26%); the r=1.0 row shows what reading every token costs the sequential LSTM.
    "PT + Encoder IPT (CNN)": (IW, dict(ENCODER, encoder="textcnn")),
    "PT + Encoder IPT (RNN)": (IW, dict(ENCODER, encoder="lstm")),
    "PT + Encoder IPT (MLP)": (IW, dict(ENCODER, encoder="mlp")),
    "PT + Encoder IPT (RNN) r=1.0": (IW, dict(ENCODER, encoder="lstm", sequence_utilization_rate=1.0)),
    "Prefix Tuning": (GP, dict(generator="prefix", prefix=dict(reparameterize=True, reparam_hidden=128))),
    "P-tuning v2": (GP, dict(generator="prefix")),
    "Prefix + Random IPT": (GP, dict(generator="ipt_random", ipt=dict(task_length=4, instance_length=16))),
    "S-IDPG-PHM": (GP, dict(generator="idpg", idpg=dict(depth="single", layer="phm", hidden=256, phm_n=16))),
    "M-IDPG-PHM (cached [CLS])": (GP, dict(generator="idpg", injection="kv", idpg=dict(M_IDPG, cache=True))),
    "M-IDPG-PHM (uncached [CLS])": (GP, dict(generator="idpg", injection="kv", idpg=dict(M_IDPG, cache=False))),
    "M-IDPG-PHM (hidden injection)": (GP, dict(generator="idpg", injection="hidden", idpg=dict(M_IDPG, cache=True))),
    "M-IDPG-PHM (static_mean)": (GP, dict(generator="idpg", injection="kv",
                                          idpg=dict(M_IDPG, encoder="static_mean"))),
    "M-IDPG-PHM-GloVe": (GP, dict(generator="idpg", injection="kv",
                                  idpg=dict(M_IDPG, encoder="glove", phm_n=2, input_from="layer0"))),
    # LPT (issue #41): the prompt joins after late_layer ("half": L / 2, the authors' 12 of roberta-large's 24;
    # --late-layer sets it); the backward stops there
    "LPT-NPG": (GP, dict(generator="lpt", lpt=dict(kind="npg"), late_layer="half")),
    "LPT-APPG": (GP, dict(generator="lpt", lpt=dict(kind="appg"), late_layer="half")),
    "LPT-MPPG": (GP, dict(generator="lpt", lpt=dict(kind="mppg"), late_layer="half")),
    "Late prompt (plain)": (GP, dict(generator="lpt", lpt=dict(kind="plain"), late_layer="half")),
    "Late Random IPT": (GP, dict(generator="ipt_random", injection="late", late_layer="half",
                                 ipt=dict(task_length=4, instance_length=16))),
    "PEFT prompt tuning": ("peft_prompt", {}),
    "PEFT prefix tuning": ("peft_prefix", {}),
    # peer methods from their libraries (YAML defaults: m = 16, n = 4; LoRA r = 8 on query / value)
    "Adapter": ("peer_adapter", {}),
    "Compacter": ("peer_compacter", {}),
    "LoRA": ("peer_lora", {}),
}


# our method -> its PEFT peer (same work: tests/test_benchmarks.py checks the FLOPs)
PEFT_PEERS = {"Prompt Tuning": "PEFT prompt tuning", "P-tuning v2": "PEFT prefix tuning"}


def paired_ratios(times, steps: int):
    """ours / PEFT's step time, per round (the median of each side's steps in that round, run minutes
    apart at most), for every pair both timed: a median with its interquartile range over rounds says
    more on a shared machine than a ratio of two medians."""
    lines = []
    for ours, peer in PEFT_PEERS.items():
        if ours not in times or peer not in times:
            continue
        rounds = len(times[ours]) // steps
        ratios = sorted(statistics.median(times[ours][r * steps:(r + 1) * steps]) /
                        statistics.median(times[peer][r * steps:(r + 1) * steps]) for r in range(rounds))
        spread = ""
        if rounds >= 4:
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            spread = f" (IQR {q1:.3f}–{q3:.3f})"
        lines.append(f"| {ours} / {peer} | {statistics.median(ratios):.3f}{spread} | "
                     f"{sum(r <= 1.0 for r in ratios)} of {rounds} |")
    if not lines:
        return []
    return ["", "| ours / PEFT, per round | median of the rounds' ratios | rounds at or below 1.0 |",
            "|---|---:|---:|", *lines]


def table_file(tokenizer, dim: int) -> str:
    """An exported table if the pretraining ran, else a same-shaped one (timing does not care)."""
    exported = os.path.join("exports", "textcnn-minilm", "embedding.safetensors")
    if os.path.isfile(exported):
        from safetensors import safe_open
        with safe_open(exported, framework="pt") as f:
            shape = tuple(f.get_slice("embedding").get_shape())
        if shape == (len(tokenizer), dim):  # the export is for this backbone's vocabulary and width
            return exported
    from openprompt_ipt.generators.vocab_table import save_table, tokenizer_fingerprint
    path = os.path.join(tempfile.mkdtemp(), "embedding.safetensors")
    save_table(path, torch.randn(len(tokenizer), dim) * 0.02,
               {"tokenizer": "benchmark", "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer)})
    return path


def method_names(text):
    """--methods "A,B" -> ["A", "B"] (all methods when empty); an unknown name is one clear error."""
    names = [n.strip() for n in text.split(",") if n.strip()] if text else list(METHODS)
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise SystemExit(f"error: unknown method(s) {unknown}: choose from {list(METHODS)}")
    return names


def build(name, model, tokenizer, num_classes=3):
    from openprompt import PromptForClassification
    from openprompt.prompts import SoftVerbalizer

    kind, kwargs = METHODS[name]
    words = [["yes"], ["no"], ["maybe"]][:num_classes]
    kwargs = copy.deepcopy(kwargs)

    def head():
        # SoftVerbalizer deep-copies the PLM's head, requires_grad included: once an earlier method has
        # frozen the shared backbone, the copy would come out frozen. Every method trains its whole head.
        verbalizer = SoftVerbalizer(tokenizer, model, num_classes=num_classes, label_words=words)
        verbalizer.head.requires_grad_(True)
        return verbalizer
    if kind.startswith("peft_"):
        from openprompt_ipt import InstanceWiseTemplate
        verbalizer = head()
        plain = InstanceWiseTemplate(model, tokenizer, text=TEXT, strategy="none")  # PEFT reads plain token ids
        return PeftClassifier(model, plain, verbalizer, kind[5:], T), IW
    if kind.startswith("peer_"):
        from openprompt_ipt import InstanceWiseTemplate
        from openprompt_ipt.runner.peers import PeerClassifier, attach, check_peer
        own = copy.deepcopy(model)  # the library inserts its modules into the backbone: not the shared one
        plain = InstanceWiseTemplate(own, tokenizer, text=TEXT, strategy="none")
        pm = PromptForClassification(own, plain, head(), freeze_plm=True, plm_eval_mode=True)
        return PeerClassifier(pm, attach(own, check_peer({"method": kind[5:]}))), IW
    if kind == "finetune":
        model = copy.deepcopy(model).requires_grad_(True)  # the shared backbone may be frozen by now
        from openprompt_ipt import InstanceWiseTemplate
        template = InstanceWiseTemplate(model, tokenizer, text=TEXT, strategy="none")
        verbalizer = head()
        return PromptForClassification(model, template, verbalizer, freeze_plm=False), IW
    from openprompt.prompts import TEMPLATE_CLASS
    if kwargs.get("strategy") == "pretrained":
        kwargs["pretrained_path"] = table_file(tokenizer, model.config.hidden_size)
    if kind == GP:
        kwargs["prompt_length"] = T
    if kwargs.get("late_layer") == "half":
        kwargs["late_layer"] = LATE_LAYER or model.config.num_hidden_layers // 2
    template = TEMPLATE_CLASS[kind](model, tokenizer, text=TEXT, **kwargs)
    verbalizer = head()
    return PromptForClassification(model, template, verbalizer, freeze_plm=True, plm_eval_mode=True), kind


def fixed_batch(method_model, tokenizer, wrapper_class, examples, batch_size, seq_len):
    from openprompt_ipt.data import collate, encode_examples
    template = method_model.template  # the PEFT peer's encodes with its prompt-free template
    wrapper = wrapper_class(max_seq_length=seq_len, tokenizer=tokenizer, truncate_method="balanced")
    feats = encode_examples(examples[:batch_size], template, wrapper)
    return collate(feats, tokenizer.pad_token_id or 0)


def long_examples(root, n):
    """CB examples whose premise is long enough that every row fills --seq-len exactly."""
    from openprompt.data_utils import InputExample
    from openprompt_ipt.data import load_pair_task
    try:
        rows = load_pair_task("cb", os.path.join(root, "superglue", "CB"), "train")
    except Exception:  # no data root: synthetic text
        rows = [InputExample(text_a="the cat sat on the mat " * 5, text_b="is it good", label=i % 3) for i in range(n)]
    premise = " ".join(r.text_a for r in rows[:40])
    return [InputExample(guid=str(i), text_a=premise, text_b=rows[i % len(rows)].text_b, label=rows[i % len(rows)].label)
            for i in range(n)]


def optimizers_for(model):
    """The runner's optimizers for every method, the PEFT peer included (its prompt is the "prompt" group,
    as in its accuracy row): the same AdamW with the same parameter groups on both sides."""
    from openprompt_ipt.training.optim import build_optimizers
    return build_optimizers(model, 1e-3, 1e-3, 1e-5)


def autocast(args):
    """bf16 autocast on the step's forward (what a GPU user runs); a no-op for --mixed-precision no."""
    on = args is not None and getattr(args, "mixed_precision", "no") == "bf16"
    return torch.autocast(torch.device(args.device).type if on else "cpu", dtype=torch.bfloat16, enabled=on)


def step_fn(model, optimizers, batch, labels, args=None):
    def step():
        with autocast(args):
            logits = model(dict(batch))  # templates replace keys of the batch
        loss = nn.functional.cross_entropy(logits.float(), labels)
        loss.backward()
        for opt in optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
    return step


def forget_seen_examples(m) -> None:
    """Empty every cache of M(x) (M-IDPG's plm_cls with cache: true). Inference is timed on the training batch,
    whose representations the training steps cached: read from the cache, the [CLS] pass that every unseen
    example pays would be left out of the cached row's inference speed."""
    from openprompt_ipt.generators.sentence import PLMClsEncoder
    for module in m.modules():
        if isinstance(module, PLMClsEncoder):
            module.cache.clear()


def inference_rate(m, batch, args, device) -> float:
    """Examples per second of eval-mode forwards (no grad), as on examples the model has not seen."""
    m.eval()
    with torch.no_grad(), autocast(args):
        forget_seen_examples(m)
        m(dict(batch))  # warm-up
        sync(device)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            forget_seen_examples(m)
            m(dict(batch))
        sync(device)
        return args.batch_size * args.steps / (time.perf_counter() - t0)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def setup(args):
    from openprompt_ipt.runner.plm import load_backbone, skip_mlm_head
    if args.backbone.startswith("random:"):
        from openprompt.plms.mlm import MLMTokenizerWrapper
        from openprompt_ipt.shapes import random_masked_lm
        model, tokenizer = random_masked_lm(args.backbone.split(":", 1)[1])
        wrapper_class = MLMTokenizerWrapper
    else:
        model, tokenizer, wrapper_class = load_backbone(args.backbone)
    return model, tokenizer, wrapper_class, skip_mlm_head


HOOK_TABLES = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
               "_forward_hooks_always_called", "_backward_pre_hooks", "_backward_hooks")


def hook_entries(model) -> set:
    """Every hook on ``model``'s modules, as (module, table name, hook id)."""
    return {(m, t, k) for m in model.modules() for t in HOOK_TABLES for k in getattr(m, t, {})}


@contextmanager
def hooks_set_aside(entries):
    """The hooks ``entries`` off their modules for the block; put back after, in their order."""
    tables = {}
    for m, t, k in entries:
        table = getattr(m, t)
        tables.setdefault(id(table), (table, dict(table)))
        table.pop(k, None)
    try:
        yield
    finally:
        for table, before in tables.values():
            added = {k: v for k, v in table.items() if k not in before}
            table.clear()
            table.update(before)
            table.update(added)


class Runs(dict):
    """name -> (method model, batch, optimizers). The methods share one backbone, and the injecting ones leave their
    hooks on it: ``alone(name)`` sets the other methods' hooks aside, so a method is timed (and counted) with only
    its own, as when it runs by itself (idle hooks of every method built before it were timed with it)."""

    def __init__(self):
        super().__init__()
        self.hooks = {}  # name -> the hooks it put on the shared backbone

    def alone(self, name):
        return hooks_set_aside(set().union(*(h for n, h in self.hooks.items() if n != name)))


def prepare(args, names):
    """Build every method on one backbone (heads copied before the vocab head is skipped), each on the backbone
    without the hooks of those built before it (a copy of it carried them too)."""
    from openprompt_ipt.generators import use_sparse_rows
    device = torch.device(args.device)
    model, tokenizer, wrapper_class, skip_mlm_head = setup(args)
    examples = long_examples(args.data_root, args.batch_size)
    built, runs = {}, Runs()
    for name in names:
        with hooks_set_aside(hook_entries(model)):
            m, kind = build(name, model, tokenizer)
            runs.hooks[name] = hook_entries(model)
        if getattr(args, "tables", "sparse") == "sparse" and hasattr(m, "template"):
            use_sparse_rows(m.template)  # what our runner trains with (runner/build.py)
        built[name] = m
    if not args.keep_mlm_head:
        skip_mlm_head(model)
        for m in built.values():
            plm = getattr(getattr(m, "prompt_model", m), "plm", None)  # a peer's plm is a view: its module
            if plm is not None and plm is not model:  # the fine-tuning and peer copies
                skip_mlm_head(plm)
    for name, m in built.items():
        m.to(device).train()
        batch = {k: v.to(device) if torch.is_tensor(v) else v
                 for k, v in fixed_batch(m, tokenizer, wrapper_class, examples, args.batch_size, args.seq_len).items()}
        runs[name] = (m, batch, optimizers_for(m))
    return runs, model, device


def count_flops(m, batch, opts) -> float:
    """FLOPs of one training step (forward + backward) as torch's FlopCounterMode counts them: matmuls,
    convolutions and attention, the work a step cannot avoid. Deterministic, so a step-time ratio
    that differs from the FLOP ratio is overhead or machine noise, not work. (CPU LSTM kernels are not
    decomposed into matmuls and are not counted.)"""
    from torch.utils.flop_counter import FlopCounterMode
    m.train()
    with FlopCounterMode(display=False) as counter:
        loss = nn.functional.cross_entropy(m(dict(batch)), batch["label"])
        loss.backward()
    for opt in opts:
        opt.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def saved_for_backward_mb(m, batch, opts, args=None) -> float:
    """MB of the tensors autograd keeps from one training step's forward for its backward (each storage once;
    the parameters' own storages excluded, they are resident anyway). Device-independent (it depends on the
    dtype), so it reads the same on CPU and GPU: the part of peak training memory that LPT's stop at layer l
    (no graph below it) is meant to cut, apart from the frozen weights every method holds alike."""
    params = {p.untyped_storage().data_ptr() for p in m.parameters()}
    seen = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    m.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with autocast(args):
            logits = m(dict(batch))
        loss = nn.functional.cross_entropy(logits.float(), batch["label"])
    loss.backward()
    for opt in opts:
        opt.zero_grad(set_to_none=True)
    return sum(seen.values()) / 2 ** 20


def trainable(m):
    from openprompt_ipt.training.optim import split_counts
    p, h, plm = split_counts(m)  # the PEFT peer's prompt counts as its "prompt"
    return p + plm


def _memory_cmd(args, name) -> list:
    return [sys.executable, os.path.abspath(__file__), "--memory-of", name, "--backbone", args.backbone,
            "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len), "--device", args.device,
            "--data-root", args.data_root, "--mixed-precision", args.mixed_precision, "--tables", args.tables,
            *(["--late-layer", str(args.late_layer)] if args.late_layer else []),
            *(["--keep-mlm-head"] if args.keep_mlm_head else []),  # the head's logits are memory too
            *(["--threads", str(args.threads)] if args.threads else [])]


def measure_memory(args, name) -> float:
    """Peak memory (MB) of building + training ``name`` alone, in a fresh process."""
    return _memory_subprocess(_memory_cmd(args, name))[1]


def _memory_subprocess(cmd) -> tuple:
    """(MB resident before the first step, peak MB) printed by a ``--memory-of`` process; NaNs if it failed."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-2000:])
        return float("nan"), float("nan")
    lines = out.stdout.strip().splitlines()
    before = float(lines[-2]) if len(lines) > 1 else float("nan")
    return before, float(lines[-1])


def _rss_mb(field: str) -> float:
    import resource
    try:  # VmHWM is this process's own peak; ru_maxrss also counts the parent's RSS at fork time
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_only(args) -> None:
    """Prints two lines: MB in use before the first training step (model built), then the peak MB over 3 steps."""
    runs, _, device = prepare(args, [args.memory_of])
    m, batch, opts = runs[args.memory_of]
    if device.type == "cuda":
        sync(device)
        before = torch.cuda.memory_allocated() / 2 ** 20
        torch.cuda.reset_peak_memory_stats()
    else:
        before = _rss_mb("VmRSS")
    step = step_fn(m, opts, batch, batch["label"], args)
    for _ in range(3):
        step()
    sync(device)
    print(before)
    print(torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == "cuda" else _rss_mb("VmHWM"))


def memory_report(args, names) -> int:
    """--memory-only: each method's measured peak in its own fresh process, no timing in this one."""
    from tqdm.auto import tqdm
    measured = {n: _memory_subprocess(_memory_cmd(args, n)) for n in tqdm(names, desc="methods")}
    peak = {n: v[1] for n, v in measured.items()}
    step = {n: v[1] - v[0] for n, v in measured.items()}
    cuda = args.device.startswith("cuda")
    unit = "max allocated" if cuda else "peak RSS"
    lines = [f"backbone `{args.backbone}`, device {args.device}, batch {args.batch_size} x {args.seq_len} tokens, {T} prompt "
             f"positions, mixed precision {args.mixed_precision}, late layer {args.late_layer or 'half the layers'}. "
             f"Measured: each method built and trained for 3 steps (AdamW) in a fresh process; {unit} over the whole "
             "process, and its rise above what was in use once the model was built (the step's own memory: saved "
             "activations, gradients, optimiser state, transients)" + ("" if cuda else "; RSS includes the Python and "
             "torch runtime, the same for every row"), "",
             f"| method | before the first step MB | {unit} MB | × PT | rise during training MB | × PT |",
             "|---|---:|---:|---:|---:|---:|"]
    failed = [n for n in names if peak[n] != peak[n]]  # NaN: its process failed (its stderr is above)
    if len(failed) == len(names):  # a table of NaNs is no report: nothing is written
        print(f"--memory-only: every method's process failed ({', '.join(failed)}); their errors are above. "
              "Nothing written.", file=sys.stderr)
        return 1
    for n in names:
        if n in failed:
            lines.append(f"| {n} | failed | failed | - | failed | - |")
            continue
        lines.append(f"| {n} | {measured[n][0]:.0f} | {peak[n]:.0f} | {_ratio(peak, n)} | "
                     f"{step[n]:.0f} | {_ratio(step, n)} |")
    if failed:
        lines += ["", f"Failed (their errors were printed by the run): {', '.join(failed)}."]
    _emit(args, lines, {"before_first_step_mb": {n: v[0] for n, v in measured.items()}, "peak_mb": peak, "rise_mb": step,
                        "failed": failed})
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backbone", default="minilm", help="minilm, a hub name / local dir, or random:roberta-large")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=5, help="timed steps per method per round")
    p.add_argument("--methods", default=None, help="comma-separated subset of: " + ", ".join(METHODS))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--data-root", default=os.environ.get("IPT_ASSETS", os.path.join("..", "shared", "assets")))
    p.add_argument("--mixed-precision", choices=("no", "bf16"), default="no",
                   help="bf16: autocast the forward passes (a GPU's usual setting; the loss stays fp32)")
    p.add_argument("--no-memory", action="store_true", help="skip the per-method memory subprocesses")
    p.add_argument("--tables", choices=("sparse", "dense"), default="sparse",
                   help="vocabulary tables: sparse row updates as our runner trains them (default), or the "
                        "constructors' dense default (a stock AdamW keeps moments for every row)")
    p.add_argument("--keep-mlm-head", action="store_true", help="compute the unused vocabulary head (for comparison)")
    p.add_argument("--output", default=None, help="write the markdown report here (and its numbers as <output>.json); "
                   "existing ones need --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an --output report (and its .json) that exists")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (1 = no thread barriers: steadier step times on a busy 2-core machine)")
    p.add_argument("--late-layer", type=int, default=None,
                   help="where the late rows' prompt joins (default: half the backbone's layers)")
    p.add_argument("--activations-only", action="store_true",
                   help="only the trainable counts and the MB saved for backward per method (no timing): cheap enough "
                        "for a realistic batch of the roberta-large shape on CPU")
    p.add_argument("--memory-only", action="store_true",
                   help="only the measured peak memory per method, each in a fresh process (no timing)")
    p.add_argument("--memory-of", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.command = command_line(sys.argv[1:] if argv is None else argv)
    from openprompt_ipt.training.distributed import resolve_device

    try:  # the runner's check: a name torch does not know, or a GPU this machine lacks, is one line
        args.device = str(resolve_device(args.device, key="--device"))  # auto: a GPU when there is one
        check_report(args, [report_json(args.output)])  # an earlier measurement: kept unless told, before minutes of work
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    global LATE_LAYER
    LATE_LAYER = args.late_layer
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.memory_of:
        memory_only(args)
        return 0
    names = method_names(args.methods)
    try:
        import peft  # noqa: F401
    except ImportError:
        print("peft not installed (pip install peft): the PEFT peer rows are skipped")
        names = [n for n in names if not METHODS[n][0].startswith("peft_")]
    from openprompt_ipt.runner.peers import METHODS as PEERS
    for peer, (library, _) in PEERS.items():
        try:
            __import__(library)
        except ImportError:
            print(f"{library} not installed (pip install -e \".[peers]\"): the {peer} row is skipped")
            names = [n for n in names if METHODS[n][0] != f"peer_{peer}"]
    if args.memory_only:
        return memory_report(args, names)
    torch.manual_seed(0)
    runs, model, device = prepare(args, names)
    saved = {}
    for n in names:
        with runs.alone(n):
            saved[n] = saved_for_backward_mb(*runs[n], args)
    if args.activations_only:
        return activations_report(args, names, runs, saved, device)
    times = {n: [] for n in names}
    from tqdm.auto import tqdm
    load = [os.getloadavg()[0]]
    for r in tqdm(range(args.rounds), desc="rounds"):
        # interleaved, the order reversed every other round: machine noise and a method's place in the
        # round hit every method alike
        for name in (names if r % 2 == 0 else names[::-1]):
            m, batch, opts = runs[name]
            step = step_fn(m, opts, batch, batch["label"], args)
            with runs.alone(name):
                step()  # warm-up (and, for cached [CLS], the one PLM pass that fills the cache)
                for _ in range(args.steps):
                    sync(device)
                    t0 = time.perf_counter()
                    step()
                    sync(device)
                    times[name].append(time.perf_counter() - t0)
    load.append(os.getloadavg()[0])
    infer, flops = {}, {}
    for n in names:
        with runs.alone(n):
            infer[n] = inference_rate(runs[n][0], runs[n][1], args, device)
            flops[n] = count_flops(*runs[n])
    memory = {n: (float("nan") if args.no_memory else measure_memory(args, n)) for n in names}
    med = {n: statistics.median(v) for n, v in times.items()}
    base = med.get("Prompt Tuning")
    base_mem = memory.get("Prompt Tuning")
    unit = "max allocated MB" if device.type == "cuda" else "peak RSS MB"
    lines = [f"backbone `{args.backbone}`, device {device}, batch {args.batch_size} x {args.seq_len} tokens, "
             f"{T} prompt positions, {args.rounds} rounds x {args.steps} steps (median), torch threads "
             f"{torch.get_num_threads()}, mixed precision {args.mixed_precision}, vocab tables {args.tables}, load average {load[0]:.1f} at the "
             f"start of the timed rounds and {load[1]:.1f} at their end ({os.cpu_count()} CPUs)", "",
             f"| method | trainable | step ms | × PT | GFLOP / step | × PT FLOPs | {unit} | × PT mem | saved for backward MB | × PT | inference ex/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    base_flops = flops.get("Prompt Tuning")
    for n in names:
        ratio = f"{med[n] / base:.2f}" if base else "-"
        mratio = f"{memory[n] / base_mem:.2f}" if base_mem and memory[n] == memory[n] else "-"
        fratio = f"{flops[n] / base_flops:.3f}" if base_flops else "-"
        ms = med[n] * 1000
        lines.append(f"| {n} | {trainable(runs[n][0]):,} | {ms:.{1 if ms < 100 else 0}f} | {ratio} | {flops[n] / 1e9:.4g} | {fratio} | "
                     f"{memory[n]:.0f} | "
                     f"{mratio} | {saved[n]:.0f} | {_ratio(saved, n)} | {infer[n]:.1f} |")
    lines += paired_ratios(times, args.steps) + ["", f"Command: `{args.command}`"]
    text = "\n".join(lines)
    print(text)
    write_report(args, text, {"load_average": load, "step_seconds": times, "flops": flops, "inference_ex_s": infer,
                              "memory": memory, "saved_for_backward_mb": saved})
    return 0


def command_line(argv) -> str:
    """The command that made a report, quoted to paste back into a shell (method names hold spaces and brackets)."""
    import shlex
    return shlex.join(["python", "benchmarks/efficiency.py", *argv])


def report_json(output):
    return os.path.splitext(output)[0] + ".json" if output else None


def check_report(args, also=()) -> None:
    """Before the measurement: ``--output`` (and ``also``) can be written, and an earlier report there is kept
    unless ``--overwrite`` (a measurement cannot be made again as it was): a ValueError naming it."""
    from openprompt_ipt.runner.plotting import check_output_file

    if args.output:
        check_output_file(args.output, "--output", args.overwrite, also)


def write_report(args, text, payload=None) -> None:
    """The report (and with ``payload`` its numbers as <output>.json, one set with it) written to ``--output``."""
    from openprompt_ipt.runner.plotting import write_new_files

    if not args.output:
        return
    files = {args.output: text + "\n"}
    if payload is not None:
        files[report_json(args.output)] = json.dumps({"args": vars(args), **payload}, indent=1)
    try:
        write_new_files(files, "--output", args.overwrite)
    except ValueError as e:  # another process wrote it while this one measured
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2)


def _emit(args, lines, payload) -> None:
    """Print the report; with --output, write it and a JSON of the arguments and the numbers beside it."""
    text = "\n".join(lines + ["", f"Command: `{args.command}`"])
    print(text)
    write_report(args, text, payload)


def _ratio(values, name) -> str:
    base = values.get("Prompt Tuning")
    return f"{values[name] / base:.2f}" if base and base == base else "-"  # base == base: not NaN


def resident_mb(m) -> tuple:
    """(MB of every parameter the method's model holds, frozen ones included, each storage once;
    MB its AdamW training adds per trainable parameter: the gradient and two moments, in the parameter's dtype)."""
    seen, extra = {}, 0
    for p in m.parameters():
        seen[p.untyped_storage().data_ptr()] = p.untyped_storage().nbytes()
        if p.requires_grad:
            extra += 3 * p.numel() * p.element_size()
    return sum(seen.values()) / 2 ** 20, extra / 2 ** 20


def activations_report(args, names, runs, saved, device) -> int:
    resident = {n: resident_mb(runs[n][0]) for n in names}
    estimate = {n: resident[n][0] + resident[n][1] + saved[n] for n in names}
    lines = [f"backbone `{args.backbone}`, device {device}, batch {args.batch_size} x {args.seq_len} tokens, {T} prompt "
             f"positions, mixed precision {args.mixed_precision}, late layer {args.late_layer or 'half the layers'}. "
             "Saved for backward: the MB autograd keeps from one training step's forward for its backward (parameters "
             "excluded). Estimated peak: weights + gradients and AdamW moments of the trainable ones + saved for "
             "backward; an estimate, not a measurement (a GPU's allocator adds workspace and transient tensors)", "",
             "| method | trainable | saved for backward MB | × PT | weights MB | grads + moments MB | est. peak MB | × PT |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in names:
        lines.append(f"| {n} | {trainable(runs[n][0]):,} | {saved[n]:.0f} | {_ratio(saved, n)} | {resident[n][0]:.0f} | "
                     f"{resident[n][1]:.1f} | {estimate[n]:.0f} | {_ratio(estimate, n)} |")
    _emit(args, lines, {"saved_for_backward_mb": saved, "resident_mb": resident, "estimated_peak_mb": estimate})
    return 0


if __name__ == "__main__":
    sys.exit(main())
