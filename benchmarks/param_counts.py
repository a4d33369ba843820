"""Trainable prompt parameters per method on the roberta-large architecture vs IDPG appendix A.1.2.

    python benchmarks/param_counts.py --output docs/performance/param_counts.md

Builds each configuration with random weights from the config shipped in openprompt_ipt/configs
(vocab 50265, hidden 1024, 24 layers, 16 heads; no download) and counts the template's trainable
parameters (the classification head excluded). t = 5 prompt tokens throughout, as in the paper.
With the ``peers`` extra installed (docs/methods.md: Peer methods), the Adapter and Compacter rows are counted
from AdapterHub's real modules on the same architecture (meta weights) and set against A.1.2's sums.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import openprompt_ipt  # noqa: E402,F401
from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate  # noqa: E402
from openprompt_ipt.shapes import random_masked_lm  # noqa: E402

TEXT = '{"placeholder":"text_a"} Question: {"placeholder":"text_b"}? Answer: {"mask"}.'
T = 5

# (row name, paper's own arithmetic (A.1.2) or None, template class, kwargs). Every row prints the
# configuration it counts; IDPG's rows are what yamls/idpg_table1/ runs (tests/test_paper_yamls.py checks
# that P-tuning v2 is injection: hidden in both: IDPG's code inserts d-wide hidden prompts per layer).
PAPER_ROWS = [
    ("Prompt-tuning", 5 * 1024, InstanceWiseTemplate, dict(strategy="none", task_prompt_length=T)),
    ("P-tuning v2", 5 * 24 * 1024, GeneratedPrefixTemplate,
     dict(generator="prefix", injection="hidden", prefix=dict(reparameterize=False))),
    ("S-IDPG-PHM", 107_776, GeneratedPrefixTemplate,
     dict(generator="idpg", idpg=dict(depth="single", layer="phm", hidden=256, phm_n=16))),
    ("S-IDPG-DNN", 1_578_240, GeneratedPrefixTemplate,
     dict(generator="idpg", idpg=dict(depth="single", layer="dnn", hidden=256))),
    ("M-IDPG-PHM", 137_232, GeneratedPrefixTemplate,
     dict(generator="idpg", injection="hidden",
          idpg=dict(depth="multi", layer="phm", hidden=16, phm_n=16, sharing="M", input_from="previous"))),
    ("M-IDPG-DNN", 221_200, GeneratedPrefixTemplate,
     dict(generator="idpg", injection="hidden",
          idpg=dict(depth="multi", layer="dnn", hidden=16, sharing="M", input_from="previous"))),
    ("M-IDPG-PHM-GloVe", 144_704, GeneratedPrefixTemplate,
     dict(generator="idpg", injection="hidden",
          idpg=dict(depth="multi", layer="phm", hidden=16, phm_n=4, sharing="M", encoder="glove", glove_dim=300))),
]
# Our other methods, same architecture (not in the paper's table).
EXTRA_ROWS = [
    ("P-tuning v2 with keys and values (Liu et al.'s reference code; not IDPG's row)", GeneratedPrefixTemplate,
     dict(generator="prefix", injection="kv")),
    ("Prefix Tuning, IPT's base (the authors' plain nn.Embedding(n, 2HL) prefix)", GeneratedPrefixTemplate,
     dict(generator="prefix", injection="kv", prefix=dict(reparameterize=False))),
    ("Prefix Tuning (Li & Liang's MLP reparameterisation, 512)", GeneratedPrefixTemplate,
     dict(generator="prefix", injection="kv", prefix=dict(reparameterize=True))),
    ("Prefix + Random IPT (faithful: plain prefix + vocab x 2H table)", GeneratedPrefixTemplate,
     dict(generator="ipt_random", ipt=dict(faithful=True))),
    ("Prefix + Random IPT (projected, table_dim 64)", GeneratedPrefixTemplate,
     dict(generator="ipt_random", ipt=dict(table_dim=64))),
    ("Prefix + Encoder IPT (CNN, frozen PLM embeddings)", GeneratedPrefixTemplate,
     dict(generator="ipt_encoder", ipt=dict(encoder="textcnn"))),
    ("PT + Random IPT (full table, k = 5)", InstanceWiseTemplate, dict(strategy="random", prompt_length=T)),
    ("M-IDPG-PHM (kv injection: per-layer key and value biases)", GeneratedPrefixTemplate,
     dict(generator="idpg", injection="kv",
          idpg=dict(depth="multi", layer="phm", hidden=16, phm_n=16, sharing="M", input_from="previous"))),
]


def random_glove(path: str, tokenizer, dim: int = 300) -> str:
    """The benchmark only needs the 300-d input size: random vectors for the tokenizer's words."""
    import torch
    words = {t.lstrip("\u0120").lower() for t in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))}
    g = torch.Generator().manual_seed(0)
    with open(path, "w") as f:
        for w in sorted(x for x in words if x and not x.startswith("<")):
            f.write(w + " " + " ".join(f"{v:.4f}" for v in torch.randn(dim, generator=g).tolist()) + "\n")
    return path


# IDPG A.1.2's arithmetic, term by term (d = 1024, m = 16, n = 4, 2 modules in each of 24 layers)
D, M, N, SITES = 1024, 16, 4, 24 * 2
ADAPTER_A12 = [("down-projection W + bias", (D * M + M) * SITES), ("up-projection W + bias", (M * D + D) * SITES)]
COMPACTER_A12 = [("down s_i", D // N * N * SITES), ("down t_i", M // N * N * SITES), ("hidden bias", M * SITES),
                 ("up s_i", D // N * N * SITES), ("up t_i", M // N * N * SITES), ("output bias", D * SITES),
                 ("shared A_i", N ** 3 * SITES)]


def kilo(n: int) -> str:
    """The paper's K and M are 1024 and 1024² (Table 2: 1,622,784 is "1.55M", 152,832 is "149.25K")."""
    return f"{n / 1024 ** 2:.2f}M" if n >= 1024 ** 2 else f"{n / 1024:.2f}K"


def compacter_term(name: str) -> str:
    """The A.1.2 term a parameter of adapters' Compacter is (PHMLayer: W = sum_i A_i (x) s_i t_i)."""
    if name.endswith("phm_rule"):
        return "shared A_i"
    side = "down" if ".adapter_down." in name else "up"
    if name.endswith(".b"):
        return "hidden bias" if side == "down" else "output bias"
    # W_left is (n, in/n, rank), W_right (n, rank, out/n): the d-sized factor is s_i, the m-sized t_i
    big = name.endswith("W_left") == (side == "down")
    return f"{side} {'s_i' if big else 't_i'}"


def peer_counts(architecture: str = "roberta-large"):
    """{method: {term: count}} from the real adapters modules on ``architecture`` (meta tensors: no
    weights are allocated), or None without the peers extra."""
    import json

    try:
        import adapters  # noqa: F401
    except ImportError:
        return None
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    from openprompt_ipt.runner.peers import attach, check_peer
    from openprompt_ipt.shapes import CONFIG_DIR

    with open(os.path.join(CONFIG_DIR, f"{architecture}.json")) as f:
        config = AutoConfig.for_model(**json.load(f))
    out = {}
    for method in ("adapter", "compacter"):
        with torch.device("meta"):
            model = AutoModelForMaskedLM.from_config(config)
            modules = attach(model, check_peer({"method": method, "bottleneck": M}))
        terms = {}
        for module in modules:
            for name, p in module.named_parameters():
                key = compacter_term(name) if method == "compacter" else \
                    ("down-projection W + bias" if "adapter_down" in name else "up-projection W + bias")
                terms[key] = terms.get(key, 0) + p.numel()
        out[method] = terms
    return out


def peer_lines(counts) -> list:
    if counts is None:
        return ["", "Adapter / Compacter rows: install the peers extra (docs/methods.md: Peer methods) to count them."]
    lines = ["", "Adapter (Houlsby, m = 16) and Compacter (n = 4, m = 16, shared A) from AdapterHub `adapters` "
             f"{__import__('adapters').__version__}, meta weights; K = 1024 as in Table 2.", "",
             "| method | term | ours (real modules) | A.1.2 arithmetic | difference |", "|---|---|---:|---:|---:|"]
    for method, paper in (("Adapter", ADAPTER_A12), ("Compacter", COMPACTER_A12)):
        ours = counts[method.lower()]
        for term, n in paper:
            lines.append(f"| {method} | {term} | {ours.get(term, 0):,} | {n:,} | {ours.get(term, 0) - n:+,} |")
        total, total_paper = sum(ours.values()), sum(n for _, n in paper)
        lines.append(f"| **{method}** | **total** | **{total:,} ({kilo(total)})** | **{total_paper:,} "
                     f"({kilo(total_paper)})** | **{total - total_paper:+,}** |")
    lines += ["", "Where they differ: only the Compacter's shared A_i. A.1.2 counts n³ = 64 per compacter "
              "(4³ × 24 × 2 = 3,072), but the A_i are shared by every layer (and, in `adapters`, by the down and "
              "the up projection): the real model holds one 4×4×4 tensor, 64 parameters, 3,008 fewer. Every other "
              "term matches exactly, biases included: A.1.2 counts each module's hidden bias (m) and output bias (d), "
              "as the modules have; neither Houlsby's adapter nor the Compacter adds a LayerNorm (they reuse the "
              "transformer's), and A.1.2 counts none."]
    return lines


def count(cls, model, tokenizer, kwargs) -> int:
    if cls is GeneratedPrefixTemplate:
        kwargs = dict(kwargs, prompt_length=T)
    return cls(model, tokenizer, text=TEXT, **kwargs).num_trainable_parameters()


def configuration(cls, kwargs) -> str:
    """The configuration a row counts, as YAML keys: `instance_wise: strategy=none, task_prompt_length=5`."""
    def flat(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flat(v, f"{prefix}{k}.")
            elif k != "glove_path":
                yield f"{prefix}{k}={v}"
    name = "instance_wise" if cls is InstanceWiseTemplate else "generated_prefix"
    extra = [] if cls is InstanceWiseTemplate else [f"prompt_length={T}"]
    return f"`{name}: {', '.join(list(flat(kwargs)) + extra)}`"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--architecture", default="roberta-large", help="a config shipped in openprompt_ipt/configs")
    p.add_argument("--output", default=None, help="also write the markdown here (an existing file needs --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace an --output file that exists")
    args = p.parse_args(argv)
    command = sys.argv[1:] if argv is None else argv  # the file says what made it, not what made the committed one
    from openprompt_ipt.runner.plotting import check_output_file, write_new_files

    try:
        if args.output:
            check_output_file(args.output, "--output", args.overwrite)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    started = time.time()
    model, tokenizer = random_masked_lm(args.architecture)
    glove = random_glove(os.path.join(tempfile.mkdtemp(), "glove300.txt"), tokenizer)
    lines = [f"Trainable prompt parameters on the {args.architecture} architecture (t = {T}; head excluded).", "",
             f"Command: `{shlex.join(['python', 'benchmarks/param_counts.py', *command])}`. Each row names the configuration",
             "counted; the IDPG rows are the ones yamls/idpg_table1/ runs.", "",
             "| method | configuration counted | ours | paper (A.1.2 arithmetic) | paper (Table 2) | match |",
             "|---|---|---:|---:|---:|:---:|"]
    table2 = {"Prompt-tuning": "5K", "P-tuning v2": "120K", "S-IDPG-PHM": "105K", "S-IDPG-DNN": "1.5M",
              "M-IDPG-PHM": "134K", "M-IDPG-DNN": "216K", "M-IDPG-PHM-GloVe": "141K"}
    ok = True
    for name, paper, cls, kwargs in PAPER_ROWS:
        if kwargs.get("idpg", {}).get("encoder") == "glove":
            kwargs = dict(kwargs, idpg=dict(kwargs["idpg"], glove_path=glove))
        ours = count(cls, model, tokenizer, kwargs)
        ok &= ours == paper
        lines.append(f"| {name} | {configuration(cls, kwargs)} | {ours:,} | {paper:,} | {table2[name]} | "
                     f"{'yes' if ours == paper else 'NO'} |")
    lines += ["", "| other methods (ours, same architecture) | configuration counted | trainable |", "|---|---|---:|"]
    for name, cls, kwargs in EXTRA_ROWS:
        lines.append(f"| {name} | {configuration(cls, kwargs)} | {count(cls, model, tokenizer, kwargs):,} |")
    counts = peer_counts(args.architecture)
    lines += peer_lines(counts)
    if counts is not None:  # Adapter must be A.1.2's number exactly; the Compacter's gap is explained above
        ok &= sum(counts["adapter"].values()) == sum(n for _, n in ADAPTER_A12)
    lines += ["", f"_{time.time() - started:.0f} s (Adapter / Compacter rows: run in the peers venv)_"]
    text = "\n".join(lines)
    print(text)
    if args.output:  # whole or not at all: it was written in place, half a table after a kill
        try:
            write_new_files({args.output: text + "\n"}, "--output", args.overwrite)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
