"""Trainable prompt parameters per method on the roberta-large architecture vs IDPG appendix A.1.2.

    python benchmarks/param_counts.py --output docs/param_counts.md

Builds each configuration with random weights from the config shipped in openprompt_ipt/configs
(vocab 50265, hidden 1024, 24 layers, 16 heads; no download) and counts the template's trainable
parameters (the classification head excluded). t = 5 prompt tokens throughout, as in the paper.
"""
from __future__ import annotations

import argparse
import os
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
    p.add_argument("--output", default=None, help="also write the markdown here")
    args = p.parse_args(argv)
    started = time.time()
    model, tokenizer = random_masked_lm(args.architecture)
    glove = random_glove(os.path.join(tempfile.mkdtemp(), "glove300.txt"), tokenizer)
    lines = [f"Trainable prompt parameters on the {args.architecture} architecture (t = {T}; head excluded).", "",
             f"Command: `python benchmarks/param_counts.py --output docs/param_counts.md`. Each row names the configuration",
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
    lines += ["", f"_{time.time() - started:.0f} s_"]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
