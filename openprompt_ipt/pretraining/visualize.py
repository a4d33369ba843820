"""IPT Figure 4: held-out sentences represented by (a) the PLM and (b) the pretrained prompt table,
projected to 2-D (PCA, t-SNE) and coloured by category, with a silhouette score per representation
(higher = categories better separated)."""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

import numpy as np
import torch

REPRESENTATIONS = {
    "plm_output": "(a) PLM: mean-pooled last hidden states",
    "plm_input": "(a') PLM: mean of its input embeddings, first L tokens",
    "prompt": "(b) pretrained prompt: mean of the exported table rows, first L tokens",
}


def read_heldout(export_dir: str, n: int, seed: int):
    path = os.path.join(export_dir, "heldout_test.jsonl")
    if not os.path.isfile(os.path.join(export_dir, "DONE")) or not os.path.isfile(path):
        from ..generators.encoder_io import IN_A_CLONE, PRETRAIN

        raise FileNotFoundError(f"'{export_dir}' is not a finished export with heldout_test.jsonl: run "
                                f"{PRETRAIN} {IN_A_CLONE} first")
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    rng = np.random.default_rng(seed)
    if len(rows) > n:
        rows = [rows[i] for i in sorted(rng.choice(len(rows), n, replace=False))]
    return [r["text"] for r in rows], [r["category"] for r in rows]


@torch.no_grad()
def represent(texts: List[str], tokenizer, plm, table: torch.Tensor, prompt_length: int, max_length: int = 128,
              batch_size: int = 64) -> Dict[str, np.ndarray]:
    out = {k: [] for k in REPRESENTATIONS}
    plm.eval()
    emb = plm.get_input_embeddings().weight
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        enc = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        hidden = plm(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        out["plm_output"].append(((hidden * m).sum(1) / m.sum(1)).numpy())
        for ids in tokenizer(chunk, add_special_tokens=False, truncation=True, max_length=prompt_length)["input_ids"]:
            ids = torch.tensor(ids or [tokenizer.unk_token_id], dtype=torch.long)
            out["prompt"].append(table[ids].mean(0, keepdim=True).numpy())
            out["plm_input"].append(emb[ids].mean(0, keepdim=True).numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def silhouettes(reps: Dict[str, np.ndarray], labels: List[str], seed: int = 0, perplexity: float = 30.0):
    """Silhouette (cosine) in the full space and in each 2-D projection; returns scores and projections."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from sklearn.metrics import silhouette_score

    y = np.asarray(labels)
    scores, proj = {}, {}
    for name, x in reps.items():
        pca = PCA(n_components=2, random_state=seed).fit_transform(x)
        tsne = TSNE(n_components=2, random_state=seed, init="pca", perplexity=min(perplexity, (len(x) - 1) / 3)
                    ).fit_transform(x)
        proj[name] = {"PCA": pca, "t-SNE": tsne}
        scores[name] = {"full_cosine": float(silhouette_score(x, y, metric="cosine")),
                        "pca_2d": float(silhouette_score(pca, y)), "tsne_2d": float(silhouette_score(tsne, y))}
    return scores, proj


def plot(proj, labels: List[str], categories: List[str], scores, path: str, names: Optional[List[str]] = None) -> str:
    """The figure written to ``path`` atomically (a kill while it is drawn leaves no half PNG); returns ``path``."""
    from ..serialization import write_bytes_atomic

    write_bytes_atomic(path, figure_png(proj, labels, categories, scores, names))
    return path


def figure_png(proj, labels: List[str], categories: List[str], scores, names: Optional[List[str]] = None) -> bytes:
    """PCA and t-SNE panels per representation, coloured by category, as PNG bytes."""
    import io

    from ..runner.plotting import pyplot

    plt = pyplot()
    names = names or list(proj)
    cmap = plt.get_cmap("tab20")
    colour = {c: cmap(i % 20) for i, c in enumerate(categories)}
    fig, axes = plt.subplots(2, len(names), figsize=(5.2 * len(names), 9.5), squeeze=False)
    for j, name in enumerate(names):
        for i, method in enumerate(("PCA", "t-SNE")):
            ax = axes[i][j]
            xy = proj[name][method]
            for c in categories:
                idx = [k for k, lab in enumerate(labels) if lab == c]
                if idx:
                    ax.scatter(xy[idx, 0], xy[idx, 1], s=5, color=colour[c], label=c, alpha=0.8)
            key = "pca_2d" if method == "PCA" else "tsne_2d"
            ax.set_title(f"{REPRESENTATIONS[name]}\n{method}: silhouette {scores[name][key]:.3f} "
                         f"(full-dim cosine {scores[name]['full_cosine']:.3f})", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    handles, labs = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labs, loc="lower center", ncol=5, fontsize=8, markerscale=3)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=85)
    plt.close(fig)
    return buf.getvalue()
