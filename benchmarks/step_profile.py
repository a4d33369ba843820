"""Where a training step's time goes, per method: a profile that survives a busy machine.

    python benchmarks/step_profile.py [--methods "Prompt Tuning,PEFT prompt tuning"] [--rounds 15]
                                      [--output docs/performance/step_profile.md]

The wall-clock step time of efficiency.py moves by ±30 % on the shared 2-core machine. Two measures
here do not: (1) the torch ops a step dispatches (a count, deterministic) and how the profiler splits
their self time between the unavoidable work (matmuls, attention) and everything else (the overhead
a method adds); (2) the step's CPU time on its own thread (``time.thread_time``, one torch thread:
forward, backward and the optimizer all run on the calling thread), which waiting for a busy core
does not inflate. Same methods, backbone and batch as efficiency.py, interleaved round by round.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import efficiency  # noqa: E402  (the methods, backbone and fixed batch of the efficiency benchmark)

# self time of these ops is the work any method of the same shape must do
WORK_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_dot_product",
            "aten::_flash_attention", "aten::convolution", "aten::_convolution", "aten::mkldnn_convolution")


def is_work(op: str) -> bool:
    return op.startswith(WORK_OPS)


def profile_step(step) -> dict:
    """One step under torch.profiler: op count, work vs other self CPU time, the costliest other ops."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    counts, self_us = Counter(), defaultdict(float)
    for ev in prof.events():
        if ev.name.startswith("aten::"):
            counts[ev.name] += 1
            self_us[ev.name] += ev.self_cpu_time_total
    work = sum(t for op, t in self_us.items() if is_work(op))
    other = {op: t for op, t in self_us.items() if not is_work(op)}
    top = sorted(other.items(), key=lambda kv: -kv[1])[:4]
    return {"ops": sum(counts.values()), "work_ms": work / 1e3, "other_ms": sum(other.values()) / 1e3,
            "top_other": [(op, t / 1e3, counts[op]) for op, t in top]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--methods", default="Prompt Tuning,PEFT prompt tuning",
                   help="comma-separated subset of efficiency.py's methods")
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds of one timed step per method")
    p.add_argument("--data-root", default=os.environ.get("IPT_ASSETS", os.path.join("..", "shared", "assets")))
    p.add_argument("--output", default=None, help="write the markdown report here (an existing one needs --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an --output report that exists")
    args = p.parse_args(argv)
    try:
        efficiency.check_report(args)  # an earlier profile: kept unless told, before the rounds
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    names = efficiency.method_names(args.methods)
    if any(efficiency.METHODS[n][0].startswith("peft_") for n in names):
        from peft_peer import require_peft
        require_peft()
    torch.set_num_threads(1)  # every op on the calling thread, so thread_time sees the whole step
    torch.manual_seed(0)
    args.device, args.keep_mlm_head, args.tables = "cpu", False, "sparse"  # tables: as the runner trains them
    runs, _, _ = efficiency.prepare(args, names)
    steps = {n: efficiency.step_fn(m, opts, batch, batch["label"]) for n, (m, batch, opts) in runs.items()}
    for step in steps.values():
        step()  # warm-up
    cpu, wall = defaultdict(list), defaultdict(list)
    from tqdm.auto import tqdm
    for r in tqdm(range(args.rounds), desc="rounds"):
        # interleaved, the order reversed every other round: load on the machine and a method's place in
        # the round hit every method alike; ratios are taken within a round (paired), then the median
        for n in (names if r % 2 == 0 else names[::-1]):
            t0, c0 = time.perf_counter(), time.thread_time()
            steps[n]()
            cpu[n].append(time.thread_time() - c0)
            wall[n].append(time.perf_counter() - t0)
    prof = {n: profile_step(steps[n]) for n in names}
    flops = {n: efficiency.count_flops(*runs[n]) for n in names}
    base = names[0]

    def paired(times, n):
        # median of the per-round ratios, with their interquartile range: how far apart the two
        # methods really are against how much one round differs from the next
        ratios = [t / b for t, b in zip(times[n], times[base])]
        if len(ratios) < 4:
            return f"{statistics.median(ratios):.3f}"
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        return f"{statistics.median(ratios):.3f} ({q1:.3f}–{q3:.3f})"
    lines = [f"backbone `{args.backbone}`, CPU, 1 torch thread, batch {args.batch_size} x {args.seq_len} tokens, "
             f"{efficiency.T} prompt positions, sparse vocab tables, {args.rounds} interleaved rounds; × = median over rounds of the "
             f"ratio to {base} in the same round (interquartile range of those ratios)", "",
             "| method | GFLOP / step | torch ops / step | matmul + attention self ms | other ops self ms "
             "| step CPU ms (median) | × | step wall ms (median) | × |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in names:
        lines.append(f"| {n} | {flops[n] / 1e9:.4g} | {prof[n]['ops']} | {prof[n]['work_ms']:.0f} | "
                     f"{prof[n]['other_ms']:.0f} | {statistics.median(cpu[n]) * 1e3:.0f} | {paired(cpu, n)} | "
                     f"{statistics.median(wall[n]) * 1e3:.0f} | {paired(wall, n)} |")
    lines += ["", "costliest ops outside matmul / attention (self ms, calls), one profiled step:", ""]
    for n in names:
        lines.append(f"- {n}: " + ", ".join(f"`{op}` {ms:.0f} ms ×{c}" for op, ms, c in prof[n]["top_other"]))
    text = "\n".join(lines)
    print(text)
    efficiency.write_report(args, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
