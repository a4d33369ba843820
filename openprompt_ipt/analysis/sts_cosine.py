"""IDPG §4.5.5 / A.6 (Figure 3, Figure 7): how prompts change sentence similarity on STS-B dev.

Each sentence of a pair is encoded on its own, the pair's score is the cosine of the two [CLS] states
(the state the [CLS] / regression head reads), pairs are ranked by it, and for each top-k the ranked
pairs are counted by their gold-score group ([0, 1), [1, 2), ..., [4, 5]). Compared: the frozen backbone
without prompts, and a trained run's model with its prompts (the run's template around each sentence).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence

import torch

GROUPS = ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5))  # gold STS-B score bins; 5.0 falls in the last


def group_of(score: float) -> int:
    """The index of ``score``'s bin in ``GROUPS`` (0-5 scale; 5.0 joins [4, 5])."""
    if not 0.0 <= score <= 5.0:
        raise ValueError(f"STS-B score {score} is outside 0-5")
    return min(int(score), len(GROUPS) - 1)


def top_k_group_counts(cosines: Sequence[float], gold: Sequence[float], ks: Sequence[int]) -> Dict[int, List[int]]:
    """For each k: how many of the k pairs with the highest cosine fall in each gold-score group (ties in
    cosine keep the input order)."""
    if len(cosines) != len(gold):
        raise ValueError(f"cosines and gold scores differ in length: {len(cosines)} vs {len(gold)}")
    order = sorted(range(len(cosines)), key=lambda i: -cosines[i])
    out = {}
    for k in ks:
        if not 0 < k <= len(order):
            raise ValueError(f"top-k {k} must be in 1..{len(order)} (the number of pairs)")
        counts = [0] * len(GROUPS)
        for i in order[:k]:
            counts[group_of(gold[i])] += 1
        out[k] = counts
    return out


def pair_cosines(encode: Callable[[List[str]], torch.Tensor], pairs: Sequence[tuple], batch_size: int = 64) -> List[float]:
    """Cosine of ``encode``'s vectors for the two sentences of each pair, encoded separately."""
    import torch.nn.functional as F

    firsts, seconds = [], []
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        firsts.append(encode([a for a, _ in chunk]))
        seconds.append(encode([b for _, b in chunk]))
    return F.cosine_similarity(torch.cat(firsts), torch.cat(seconds), dim=-1).tolist()


def plain_encoder(model, tokenizer, max_length: int = 128) -> Callable[[List[str]], torch.Tensor]:
    """The backbone alone: each sentence as ``[CLS] s [SEP]``, its last layer's first-token state."""
    @torch.no_grad()
    def encode(texts: List[str]) -> torch.Tensor:
        enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        enc = {k: v.to(next(model.parameters()).device) for k, v in enc.items()}
        return model(**enc, output_hidden_states=True).hidden_states[-1][:, 0].float().cpu()

    return encode


def prompted_encoder(predictor) -> Callable[[List[str]], torch.Tensor]:
    """A trained run (``runner.predict.load_run``): each sentence alone as ``text_a`` of the run's template
    (its prompts included), the first-token state its head reads."""
    from openprompt.data_utils import InputExample

    from ..data import encode_examples, make_loader
    from ..training.trainer import to_device

    model = predictor.model

    @torch.no_grad()
    def encode(texts: List[str]) -> torch.Tensor:
        exs = [InputExample(guid=str(i), text_a=t, text_b="", label=0) for i, t in enumerate(texts)]
        feats = encode_examples(exs, model.template, predictor.wrapper, desc="encode")
        out = []
        for batch in make_loader(feats, len(feats), predictor.tokenizer.pad_token_id or 0):
            outputs = model.prompt_model(to_device(batch, predictor.device))
            if getattr(model.verbalizer, "reads_hidden_states", False):
                out.append(model.verbalizer.gather_outputs(outputs)[:, 0].float().cpu())
            else:
                out.append(outputs.hidden_states[-1][:, 0].float().cpu())
        return torch.cat(out)

    return encode


def markdown(counts: Dict[str, Dict[int, List[int]]], n_pairs: int) -> str:
    labels = [f"[{lo}, {hi}{']' if hi == 5 else ')'}" for lo, hi in GROUPS]
    lines = [f"STS-B dev ({n_pairs} pairs): pairs per gold-score group among the top-k by cosine similarity of "
             "the two sentences' [CLS] states (IDPG §4.5.5 / Figure 3)", "",
             "| model | top-k | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for name, by_k in counts.items():
        for k, row in by_k.items():
            lines.append(f"| {name} | {k} | " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def figure(counts: Dict[str, Dict[int, List[int]]]) -> bytes:
    from ..runner.plotting import png_bytes, pyplot

    ks = sorted({k for by_k in counts.values() for k in by_k})
    fig, axes = pyplot().subplots(1, len(ks), figsize=(4 * len(ks), 3.2), squeeze=False)
    width = 0.8 / max(1, len(counts))
    for ax, k in zip(axes[0], ks):
        for j, (name, by_k) in enumerate(counts.items()):
            ax.bar([g + j * width for g in range(len(GROUPS))], by_k[k], width, label=name)
        ax.set_xticks([g + width * (len(counts) - 1) / 2 for g in range(len(GROUPS))],
                      [f"{lo}-{hi}" for lo, hi in GROUPS])
        ax.set_xlabel("gold similarity group")
        ax.set_ylabel("pairs")
        ax.set_title(f"top-{k} by cosine", fontsize=9)
        ax.legend(fontsize=7)
    return png_bytes(fig)
