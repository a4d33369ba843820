"""Nearest vocabulary tokens of generated prompt vectors (IPT §5.4, Table 4 case study).

Each prompt vector a run puts into the input sequence lives in the PLM's input word-embedding space,
so it can be read through the tokens whose embeddings (``model.get_input_embeddings().weight``) are
nearest to it by cosine similarity. That holds for ``template: instance_wise`` (task prompt + instance
prompt G(x); ``strategy: none`` is plain Prompt Tuning) and ``generated_prefix`` with
``injection: input``, and for the OpenPrompt ``{"soft"}`` tokens of either template's text (trained rows of
its ``soft_embedding``, listed after the prompts as ``soft 1..``); kv / hidden prompts are per-layer keys, values or hidden states, not word
embeddings, and are refused with :data:`INPUT_SPACE_ERROR`.

The pure helpers (:func:`excluded_token_mask`, :func:`cosine_top_k`, :func:`format_markdown`) need no
run; :func:`nearest_tokens_for_run` ties them to a :class:`openprompt_ipt.runner.predict.Predictor`.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from ..injection.batch import field

INPUT_SPACE_ERROR = ("nearest-token analysis needs prompts in the input embedding space "
                     "(template instance_wise, or generated_prefix with injection: input)")

# vocabulary entries that are placeholders, not words: BERT's [unused17], fairseq's madeupword0001, <unused3>
_PLACEHOLDER = re.compile(r"^(\[unused\d+\]|<unused\d*>|madeupword\d+)$")


def excluded_token_mask(tokenizer, vocab_size: int) -> torch.Tensor:
    """(vocab_size,) bool, True for rows no nearest-token list should show: special tokens ([PAD], [CLS],
    <s>, <mask>, ...), unused / placeholder entries, and embedding rows beyond the tokenizer's vocabulary."""
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    n = min(len(tokenizer), vocab_size)
    mask[n:] = True
    for i in getattr(tokenizer, "all_special_ids", []) or []:
        if i is not None and 0 <= i < vocab_size:
            mask[i] = True
    for i, tok in enumerate(tokenizer.convert_ids_to_tokens(list(range(n)))):
        if tok is None or _PLACEHOLDER.match(tok):
            mask[i] = True
    return mask


def _byte_level(tokenizer) -> bool:
    """GPT-2 / RoBERTa byte-level BPE: tokens spell bytes as characters (é is 'Ã©')."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return hasattr(tokenizer, "byte_encoder") or "ByteLevel" in repr(getattr(backend, "pre_tokenizer", None))


def readable_tokens(tokenizer, tokens: Sequence[str]) -> List[str]:
    """Tokens as the tables show them. A byte-level token with non-ASCII bytes is decoded ('ĠcafÃ©' ->
    'Ġcafé'; the leading-space marker is kept); one that is only part of a character stays as it is.
    WordPiece / SentencePiece tokens are already readable and are returned unchanged."""
    if not _byte_level(tokenizer):
        return list(tokens)
    out = []
    for tok in tokens:
        marker = "\u0120" if tok.startswith("\u0120") else ""
        rest = tok[len(marker):]
        if rest and any(ord(c) > 126 for c in rest):
            text = tokenizer.convert_tokens_to_string([rest])
            if text and text.isprintable() and "\ufffd" not in text and text == text.strip():
                tok = marker + text
        out.append(tok)
    return out


def cosine_top_k(vectors: torch.Tensor, embeddings: torch.Tensor, k: int,
                 exclude: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Top-``k`` rows of ``embeddings`` (V, H) by cosine similarity to each of ``vectors`` (N, H).

    ``exclude`` is a (V,) bool mask of rows never returned. Returns ``(scores, ids)``, both (N, k),
    best first. A zero vector has cosine 0 to every row."""
    if vectors.dim() != 2 or embeddings.dim() != 2 or vectors.size(1) != embeddings.size(1):
        raise ValueError(f"vectors {tuple(vectors.shape)} and embeddings {tuple(embeddings.shape)} "
                         "must be (N, H) and (V, H) with the same H")
    allowed = embeddings.size(0) - (int(exclude.sum()) if exclude is not None else 0)
    if int(k) < 1:
        raise ValueError(f"top-k must be at least 1, got {k}")
    if int(k) > allowed:
        raise ValueError(f"top-k {k} is more than the {allowed} vocabulary rows left after skipping special tokens")
    v = torch.nn.functional.normalize(vectors.detach().float(), dim=-1)
    e = torch.nn.functional.normalize(embeddings.detach().float().to(v.device), dim=-1)
    sims = v @ e.T
    if exclude is not None:
        sims = sims.masked_fill(exclude.to(sims.device).unsqueeze(0), float("-inf"))
    scores, ids = sims.topk(int(k), dim=-1)
    return scores, ids


def _prompt_source(template) -> str:
    name = type(template).__name__
    if not hasattr(template, "prompt_vectors"):
        raise ValueError(f"{INPUT_SPACE_ERROR}; this run's template is {name}, which generates no prompt vectors")
    injection = getattr(template, "injection", None)
    if injection is not None and injection != "input":
        raise ValueError(f"{INPUT_SPACE_ERROR}; this run's template is generated_prefix with injection: {injection}")
    soft = _soft_count(template)
    if getattr(template, "n_prefix", 1) == 0 and not soft:
        raise ValueError(f"{INPUT_SPACE_ERROR}; this run's template has no prompt positions "
                         "(strategy none with task_prompt_length 0, and no {\"soft\"} tokens in its text)")
    also = f", and {soft} {{\"soft\"}} tokens of its text" if soft else ""
    if injection is not None:
        return (f"generated_prefix (generator {template.generator_name}, injection input, "
                f"{template.generator.n_positions} vectors{also})")
    return (f"instance_wise (strategy {template.strategy}, {template.task_prompt_length} task + "
            f"{template.prompt_length} instance vectors{also})")


def _soft_count(template) -> int:
    """The number of distinct ``{"soft"}`` tokens in the template's text (MixedTemplate's soft table rows 1..)."""
    return int(getattr(template, "num_soft_token", 0) or 0)


def soft_token_vectors(template) -> Tuple[torch.Tensor, List[str]]:
    """The (S, H) trained ``{"soft"}`` token vectors of an OpenPrompt MixedTemplate's text (the same for every
    input; a shared ``soft_id`` is one row) and their names, ``soft 1..`` in the order the text first uses them,
    with the word a row started from when the text gave one (``soft 2 (was)``)."""
    n = _soft_count(template)
    words = {}
    for part, sid in zip(template.text or [], getattr(template, "soft_token_ids", None) or []):
        if sid and isinstance(part, dict) and part.get("soft"):
            words.setdefault(sid, part["soft"])
    names = [f"soft {i}" + (f" ({words[i]})" if i in words else "") for i in range(1, n + 1)]
    return template.soft_embedding.weight[1:n + 1].detach(), names


def _content_ids(batch, tokenizer) -> List[List[int]]:
    """Per example, the ids of its own (placeholder) tokens: no template words, no special tokens."""
    ids, mask = batch["input_ids"], batch["attention_mask"].bool()
    flags, parts = field(batch, "instance_token_ids"), field(batch, "text_part_ids")
    if flags is not None:
        mask = mask & (flags == 1)
    elif parts is not None:
        mask = mask & (parts > 0)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    return [[int(i) for i, m in zip(row.tolist(), keep.tolist()) if m and int(i) not in special]
            for row, keep in zip(ids.cpu(), mask.cpu())]


@torch.no_grad()
def _collect(predictor, rows, batch_size):
    from ..data import encode_examples, make_loader
    from ..training.trainer import to_device

    template = predictor.model.template
    _prompt_source(template)
    exs = predictor.examples(rows)
    feats = encode_examples(exs, template, predictor.wrapper, desc="nearest tokens")
    loader = make_loader(feats, batch_size or predictor.cfg["test"]["batch_size"], predictor.tokenizer.pad_token_id or 0)
    predictor.model.eval()
    soft, soft_names = soft_token_vectors(template) if _soft_count(template) else (None, [])
    names = (template.prompt_position_names() if getattr(template, "n_prefix", 1) else []) + soft_names
    vectors, content = [], []
    for batch in loader:
        content += _content_ids(batch, predictor.tokenizer)
        rows = template.prompt_vectors(to_device(batch, predictor.device))  # None: soft tokens only
        parts = ([] if rows is None else [rows.float().cpu()]) + \
            ([] if soft is None else [soft.float().cpu().expand(len(batch["input_ids"]), -1, -1)])
        vectors.append(torch.cat(parts, dim=1))
    return exs, torch.cat(vectors, dim=0), names, content


def prompt_vectors_for_rows(predictor, rows: Iterable[Dict], batch_size: Optional[int] = None):
    """``(examples, vectors, names)`` for rows in the task's format: the InputExamples, the (N, P, H)
    prompt vectors the run's template generates for them (eval mode), and the P position names."""
    return _collect(predictor, rows, batch_size)[:3]


def nearest_input_tokens(vectors: torch.Tensor, embeddings: torch.Tensor, content_ids: Sequence[int],
                         k: int) -> List[Tuple[int, float, int]]:
    """IPT Table 4 style: the example's own tokens nearest to its prompts. Each distinct input token is
    scored by its best cosine over the (P, H) prompt vectors; returns up to ``k`` ``(token id, cosine,
    prompt position index)``, best first."""
    ids = sorted(set(content_ids))
    if not ids:
        return []
    v = torch.nn.functional.normalize(vectors.float(), dim=-1)
    e = torch.nn.functional.normalize(embeddings[ids].float(), dim=-1)
    best, where = (v @ e.T).max(dim=0)  # per input token: its nearest prompt position
    order = best.argsort(descending=True)[:k].tolist()
    return [(ids[i], float(best[i]), int(where[i])) for i in order]


def nearest_tokens_for_run(predictor, rows: Sequence[Dict], top_k: int = 5,
                           batch_size: Optional[int] = None) -> Dict:
    """Per example and prompt position, the ``top_k`` nearest vocabulary tokens (cosine to the PLM's
    input word embeddings, special / unused tokens skipped), with the run's prediction. JSON-ready."""
    rows = list(rows)
    template = predictor.model.template
    source = _prompt_source(template)
    if int(top_k) < 1:
        raise ValueError(f"--top-k must be at least 1, got {top_k}")
    exs, vectors, names, content = _collect(predictor, rows, batch_size)
    embeddings = predictor.model.plm.get_input_embeddings().weight.detach().float().cpu()
    exclude = excluded_token_mask(predictor.tokenizer, embeddings.size(0))
    n, p, h = vectors.shape
    scores, ids = cosine_top_k(vectors.reshape(n * p, h), embeddings, top_k, exclude)
    scores, ids = scores.reshape(n, p, -1), ids.reshape(n, p, -1)
    norms = vectors.norm(dim=-1)
    predictions = predictor.predict(rows, batch_size)
    tokens = readable_tokens(predictor.tokenizer, predictor.tokenizer.convert_ids_to_tokens(ids.reshape(-1).tolist()))
    tokens = [tokens[i:i + top_k] for i in range(0, len(tokens), top_k)]
    examples = []
    for e, (ex, pred) in enumerate(zip(exs, predictions)):
        prompts = []
        for j, name in enumerate(names):
            row = tokens[e * p + j]
            prompts.append({"position": name, "norm": round(float(norms[e, j]), 4),
                            "tokens": [{"token": t, "id": int(i), "cosine": round(float(s), 4)}
                                       for t, i, s in zip(row, ids[e, j].tolist(), scores[e, j].tolist())]})
        near = nearest_input_tokens(vectors[e], embeddings, content[e], top_k)
        words = readable_tokens(predictor.tokenizer, predictor.tokenizer.convert_ids_to_tokens([n[0] for n in near]))
        inputs = [{"token": t, "id": i, "cosine": round(c, 4), "position": names[j]} for (i, c, j), t in zip(near, words)]
        examples.append({"guid": ex.guid, "text_a": ex.text_a, "text_b": ex.text_b,
                         "gold": _gold(predictor, ex) if _has_label(predictor.task, rows, e, exs) else None,
                         "prediction": _predicted(pred), "prompts": prompts, "nearest_input_tokens": inputs})
    kept = embeddings[~exclude]
    return {"run": predictor.run_dir, "task": predictor.task.name, "prompts": source,
            "backbone": predictor.cfg["plm"]["model_path"], "top_k": int(top_k),
            "embedding_norm_mean": round(float(kept.norm(dim=-1).mean()), 4),
            "skipped_tokens": int(exclude.sum()), "examples": examples}


def _has_label(task, rows: Sequence[Dict], e: int, exs: Sequence) -> bool:
    """Whether example ``e`` came from a row with a label or score under one of the task's label keys
    (MRPC's ``Quality``, STS-B's ``score``, a custom ``columns`` mapping): only then is its gold shown."""
    if len(rows) != len(exs) or not isinstance(rows[e], dict):
        return False
    keys = [c for r, c in getattr(task, "columns", ()) if r == "label"] or list(getattr(task, "label_field", ("label",)))
    return any(rows[e].get(k) is not None for k in keys)


def _gold(predictor, ex):
    """A class name, or a regression run's score on the task's own scale (STS-B: 0-5)."""
    if predictor.task.regression:
        return round(float(predictor.task.unscale(ex.label)), 4)
    return predictor.labels[ex.label]


def _predicted(pred: Dict):
    """``predict``'s label, or its score for a regression run (which has no label)."""
    return pred["label"] if "label" in pred else round(float(pred["score"]), 4)


def _cell(text: str) -> str:
    text = str(text).replace("\n", " ").replace("|", "\\|")
    return f"``{text}``" if "`" in text else f"`{text}`"


def _quote(text: Optional[str]) -> str:
    return " ".join(str(text).split()).replace("|", "\\|") if text else ""


def format_markdown(report: Dict) -> str:
    """A markdown section per example: its text, gold / predicted label, the example's own tokens nearest
    to its prompts (IPT Table 4 style), and a table whose rows are the prompt positions and whose columns
    are the top-k vocabulary tokens with their cosine scores."""
    k = report["top_k"]
    lines = ["# Nearest vocabulary tokens of the prompt vectors", "",
             f"- run: `{report['run']}` (task {report['task']}, backbone `{report['backbone']}`)",
             f"- prompts: {report['prompts']}",
             f"- top-{k} tokens by cosine similarity to the PLM's input word embeddings; "
             f"{report['skipped_tokens']} special / unused rows skipped",
             f"- norm: the prompt vector's L2 norm (mean word-embedding norm: {report['embedding_norm_mean']:.3f})", ""]
    for n, ex in enumerate(report["examples"], 1):
        lines += [f"## Example {n} (guid {ex['guid']})", ""]
        lines.append(f"> **text_a:** {_quote(ex['text_a'])}")
        if ex.get("text_b"):
            lines += [">", f"> **text_b:** {_quote(ex['text_b'])}"]
        label = f"predicted **{ex['prediction']}**"
        if ex.get("gold") is not None:
            label += f", gold **{ex['gold']}**"
        lines += ["", label, ""]
        if ex.get("nearest_input_tokens"):
            near = ", ".join(f"{_cell(t['token'])} {t['cosine']:.3f} ({t['position']})" for t in ex["nearest_input_tokens"])
            lines += [f"Input tokens nearest to the prompts (best cosine over positions): {near}", ""]
        lines += ["| position | norm | " + " | ".join(str(i) for i in range(1, k + 1)) + " |",
                  "|---|---:|" + "---|" * k]
        for pr in ex["prompts"]:
            cells = [f"{_cell(t['token'])} {t['cosine']:.3f}" for t in pr["tokens"]]
            lines.append(f"| {pr['position']} | {pr['norm']:.3f} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def distinct_token_lists(report: Dict, position_prefix: str = "") -> List[Tuple]:
    """The distinct nearest-token lists across examples (positions whose name starts with
    ``position_prefix``): one entry when every example got the same prompt."""
    seen = []
    for ex in report["examples"]:
        key = tuple(tuple(t["id"] for t in pr["tokens"]) for pr in ex["prompts"]
                    if pr["position"].startswith(position_prefix))
        if key not in seen:
            seen.append(key)
    return seen
