"""Nearest-token analysis (IPT §5.4): cosine top-k, special tokens skipped, per-instance prompts read
out of tiny trained runs, and the CLI's errors."""
import json
import os

import pytest
import torch

from test_predict_and_runs import load_script, tiny_cfg, tiny_model_dir  # noqa: F401  (fixture)
from test_training import write_cb

from openprompt_ipt.analysis.nearest_tokens import (INPUT_SPACE_ERROR, cosine_top_k, distinct_token_lists,
                                                    excluded_token_mask, format_markdown, nearest_input_tokens,
                                                    nearest_tokens_for_run)

TEXT = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} ? {"mask"} .'
ROWS = [{"premise": "the cat sat on the mat", "hypothesis": "it sat"},
        {"premise": "music is art", "hypothesis": "they think so"}]


# ---- pure helpers ------------------------------------------------------------------------------
def test_cosine_top_k_returns_the_equal_row_first_with_score_one():
    torch.manual_seed(0)
    emb = torch.randn(20, 8)
    scores, ids = cosine_top_k(emb[[7, 3]] * 2.5, emb, k=4)  # scale does not change cosine
    assert ids[:, 0].tolist() == [7, 3]
    assert scores[:, 0].tolist() == pytest.approx([1.0, 1.0], abs=1e-5)
    # the rest is sorted and equals a brute-force cosine ranking
    ref = torch.nn.functional.cosine_similarity(emb[7].unsqueeze(0), emb, dim=-1)
    assert ids[0].tolist() == ref.topk(4).indices.tolist()
    assert scores[0].tolist() == pytest.approx(ref.topk(4).values.tolist(), abs=1e-5)
    # hand-made: e0 = x axis, e1 = y axis, e2 = diagonal
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    scores, ids = cosine_top_k(torch.tensor([[3.0, 0.1]]), emb, k=3)
    assert ids[0].tolist() == [0, 2, 1]
    with pytest.raises(ValueError, match="top-k 4 is more than the 3"):
        cosine_top_k(torch.ones(1, 2), emb, k=4)


def test_nearest_input_tokens_ranks_the_examples_own_tokens():
    emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    prompts = torch.tensor([[0.0, 2.0], [5.0, 0.1]])  # position 0 ~ token 1, position 1 ~ token 0
    near = nearest_input_tokens(prompts, emb, [3, 0, 1, 0, 2], k=3)  # token 3 is ranked last, 0 counted once
    assert [(i, j) for i, _, j in near] == [(1, 0), (0, 1), (2, 1)]
    assert near[0][1] == pytest.approx(1.0) and near[1][1] < 1.0
    assert nearest_input_tokens(prompts, emb, [], k=3) == []


def test_excluded_rows_are_never_returned(bert):
    _, tok = bert
    emb = torch.randn(len(tok) + 3, 4)  # three embedding rows beyond the tokenizer's vocabulary
    exclude = excluded_token_mask(tok, emb.size(0))
    special = tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    assert exclude[special].all() and exclude[len(tok):].all()
    assert int(exclude.sum()) == len(special) + 3
    query = emb[special + [len(tok)]]  # each query equals an excluded row
    scores, ids = cosine_top_k(query, emb, k=3, exclude=exclude)
    assert not set(ids.flatten().tolist()) & (set(special) | {len(tok), len(tok) + 1, len(tok) + 2})
    assert (scores < 0.9999).all()
    scores, ids = cosine_top_k(query, emb, k=3)  # without the mask they come first
    assert ids[:, 0].tolist() == special + [len(tok)]


def test_unused_placeholder_tokens_are_excluded():
    class Tok:
        all_special_ids = [0]
        vocab = ["[PAD]", "[unused0]", "[unused12]", "<unused3>", "madeupword0001", "cat", "unused"]

        def __len__(self):
            return len(self.vocab)

        def convert_ids_to_tokens(self, ids):
            return [self.vocab[i] for i in ids]

    assert excluded_token_mask(Tok(), 7).tolist() == [True, True, True, True, True, False, False]


def test_byte_level_tokens_are_shown_decoded(bert, tmp_path):
    """A RoBERTa run's tables showed byte-level spellings: `ĠcafÃ©` for ` café`, `æĹ¥` for 日."""
    from conftest import _roberta

    from openprompt_ipt.analysis.nearest_tokens import readable_tokens

    _, roberta = _roberta(str(tmp_path))
    assert readable_tokens(roberta, ["\u0120caf\u00c3\u00a9", "\u00e6\u0139\u00a5", "\u0120cat", "\u010a", "\u00c3", "<s>"]) == \
        ["\u0120caf\u00e9", "\u65e5", "\u0120cat", "\u010a", "\u00c3", "<s>"]  # part of a character / whitespace: as is
    _, wordpiece = bert
    assert readable_tokens(wordpiece, ["##\u00e9", "caf\u00e9", "[CLS]"]) == ["##\u00e9", "caf\u00e9", "[CLS]"]


# ---- tiny trained runs -------------------------------------------------------------------------
def train(model_dir, tmp_path_factory, name, template, section, epochs=1):
    from openprompt_ipt.runner.config import DEFAULTS, merge_config
    from openprompt_ipt.runner.experiment import run_experiment

    base = tmp_path_factory.mktemp(name)
    data = write_cb(base / "CB")
    cfg = tiny_cfg(model_dir, data, epochs=epochs)
    if template != "instance_wise":
        raw = {k: v for k, v in cfg.items() if k != "instance_wise"}
        raw.update(template=template, **{template: section})
        cfg = merge_config(DEFAULTS, raw, "", {template: section, "soft_verbalizer": cfg["soft_verbalizer"]})
    else:
        cfg["instance_wise"] = {"text": TEXT, **section}
    out = str(base / "run")
    run_experiment(cfg, output_dir=out, show_progress=False)
    return out


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):  # noqa: F811
    return {
        "random": train(tiny_model_dir, tmp_path_factory, "random", "instance_wise",
                        {"strategy": "random", "prompt_length": 3, "task_prompt_length": 2}),
        "none": train(tiny_model_dir, tmp_path_factory, "none", "instance_wise",
                      {"strategy": "none", "task_prompt_length": 3}),
        "kv": train(tiny_model_dir, tmp_path_factory, "kv", "generated_prefix",
                    {"text": TEXT, "generator": "prefix", "injection": "kv", "prompt_length": 2}),
        "input": train(tiny_model_dir, tmp_path_factory, "input", "generated_prefix",
                       {"text": TEXT, "generator": "ipt_random", "injection": "input", "prompt_length": 3}),
        "soft": train(tiny_model_dir, tmp_path_factory, "soft", "instance_wise",
                      {"text": SOFT_TEXT, "strategy": "random", "prompt_length": 2, "task_prompt_length": 1}),
        "soft_only": train(tiny_model_dir, tmp_path_factory, "soft_only", "instance_wise",
                           {"text": SOFT_TEXT, "strategy": "none", "task_prompt_length": 0}),
    }


# OpenPrompt mixed-template soft tokens: two new rows, one started from a word, the first reused by its soft_id
SOFT_TEXT = ('{"soft": None, "soft_id": 1} {"placeholder":"text_a"} {"soft": "cat"} {"placeholder":"text_b"} '
             '{"soft_id": 1} {"mask"} .')


def test_random_ipt_gives_each_input_its_own_tokens_and_prompt_tuning_does_not(runs):
    from openprompt_ipt.runner.predict import load_run

    predictor = load_run(runs["random"])
    report = nearest_tokens_for_run(predictor, ROWS, top_k=4)
    assert [p["position"] for p in report["examples"][0]["prompts"]] == \
        ["task 1", "task 2", "instance 1", "instance 2", "instance 3"]
    assert len(distinct_token_lists(report, "instance")) == 2  # G(x) differs between the two inputs
    assert len(distinct_token_lists(report, "task")) == 1      # the task prompt is shared
    for ex, row in zip(report["examples"], ROWS):  # Table 4 style: only the example's own words
        words = set((row["premise"] + " " + row["hypothesis"]).split())
        near = ex["nearest_input_tokens"]
        assert near and {t["token"] for t in near} <= words
        assert [t["cosine"] for t in near] == sorted((t["cosine"] for t in near), reverse=True)
    tok = predictor.tokenizer
    specials = set(tok.all_special_ids)
    for ex in report["examples"]:
        for pr in ex["prompts"]:
            assert len(pr["tokens"]) == 4 and not specials & {t["id"] for t in pr["tokens"]}
            cos = [t["cosine"] for t in pr["tokens"]]
            assert cos == sorted(cos, reverse=True) and all(-1 <= c <= 1 for c in cos)
            assert [t["token"] for t in pr["tokens"]] == tok.convert_ids_to_tokens([t["id"] for t in pr["tokens"]])
    # the listed vectors are exactly what the model prepends to the input
    from openprompt_ipt.analysis.nearest_tokens import prompt_vectors_for_rows

    exs, vectors, names = prompt_vectors_for_rows(predictor, ROWS)
    task = predictor.model.template.task_prompt.detach()
    assert torch.allclose(vectors[0, :2], task) and torch.allclose(vectors[1, :2], task)
    emb = predictor.model.plm.get_input_embeddings().weight.detach()
    first = report["examples"][0]["prompts"][2]["tokens"][0]
    expected = torch.nn.functional.cosine_similarity(vectors[0, 2], emb[first["id"]], dim=0)
    assert first["cosine"] == pytest.approx(float(expected), abs=1e-3)

    same = nearest_tokens_for_run(load_run(runs["none"]), ROWS, top_k=4)
    assert [p["position"] for p in same["examples"][0]["prompts"]] == ["task 1", "task 2", "task 3"]
    assert len(distinct_token_lists(same)) == 1
    md = format_markdown(same)
    assert "strategy none" in md and "the cat sat on the mat" in md and "| task 3 |" in md


def test_instance_prompt_vectors_equal_what_process_batch_prepends(runs):
    from openprompt_ipt.data import encode_examples, make_loader
    from openprompt_ipt.runner.predict import load_run

    predictor = load_run(runs["random"])
    template = predictor.model.template
    feats = encode_examples(predictor.examples(ROWS), template, predictor.wrapper)
    batch = next(iter(make_loader(feats, 2, predictor.tokenizer.pad_token_id)))
    with torch.no_grad():
        vectors = template.prompt_vectors(dict(batch))
        embeds = template.process_batch(dict(batch))["inputs_embeds"]
    assert vectors.shape == (2, 5, embeds.size(-1))
    assert torch.equal(embeds[:, :5], vectors)
    assert not torch.allclose(vectors[0, 2:], vectors[1, 2:])


def test_generated_prefix_input_injection_is_analysed(runs):
    from openprompt_ipt.runner.predict import load_run

    report = nearest_tokens_for_run(load_run(runs["input"]), ROWS, top_k=2)
    assert "injection input" in report["prompts"]
    assert [p["position"] for p in report["examples"][0]["prompts"]] == [f"prompt {i}" for i in range(1, 7)]  # 3 task + 3 instance
    assert len(distinct_token_lists(report)) == 2


def test_cli_markdown_json_and_errors(runs, tmp_path, capsys):
    cli = load_script("nearest_tokens")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS + [dict(ROWS[0], label="neutral")]))

    assert cli.main(["--run", runs["random"], "--input", str(rows), "--top-k", "3", "--max-examples", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("## Example") == 2 and "| instance 3 |" in out and "music is art" in out

    # --idx picks rows by their idx, in the order given (the case study reads official rows from the data root)
    indexed = tmp_path / "indexed.jsonl"
    indexed.write_text("".join(json.dumps(dict(r, idx=10 + i)) + "\n" for i, r in enumerate(ROWS + [dict(ROWS[0], label="neutral")])))
    out_json = tmp_path / "idx.json"
    assert cli.main(["--run", runs["random"], "--input", str(indexed), "--idx", "12,10", "--output", str(out_json)]) == 0
    assert [e["gold"] for e in json.loads(out_json.read_text())["examples"]] == ["neutral", None]
    assert cli.main(["--run", runs["random"], "--input", str(indexed), "--idx", "3"]) == 2
    assert "--idx [3] not found" in capsys.readouterr().err

    out_json = tmp_path / "out.json"
    assert cli.main(["--run", runs["random"], "--input", str(rows), "--output", str(out_json)]) == 0
    report = json.loads(out_json.read_text())
    assert len(report["examples"]) == 3 and report["top_k"] == 5
    assert report["examples"][2]["gold"] == "neutral" and report["examples"][0]["gold"] is None
    assert not os.path.exists(str(out_json) + ".tmp")
    out_md = tmp_path / "out.md"
    assert cli.main(["--run", runs["none"], "--input", str(rows), "--output", str(out_md)]) == 0
    assert out_md.read_text().startswith("# Nearest vocabulary tokens")
    capsys.readouterr()

    def fails(args, message, output=None):
        target = tmp_path / (output or "never.md")
        assert cli.main(list(args) + ["--output", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err
        assert not target.exists() and not os.path.exists(str(target) + ".tmp")

    fails(["--run", runs["kv"], "--input", str(rows)], INPUT_SPACE_ERROR)
    fails(["--run", runs["kv"], "--input", str(rows)], "injection: kv")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    fails(["--run", runs["random"], "--input", str(empty)], "has no rows")
    fails(["--run", str(tmp_path / "nope"), "--input", str(rows)], "run directory")
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({"premise": "a cat", "hypothesis": "a dog", "colour": "red"}) + "\n")
    assert cli.main(["--run", runs["random"], "--input", str(unknown), "--output", str(out_md),
                     "--overwrite"]) == 0  # extra fields: unread (#43)
    typo = tmp_path / "typo.jsonl"
    typo.write_text(json.dumps({"premise": "a cat", "hypothesys": "a dog"}) + "\n")
    capsys.readouterr()
    assert cli.main(["--run", runs["random"], "--input", str(typo), "--output", str(tmp_path / "never.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == (f"error: {typo} line 1 has no column 'hypothesis' (text_b) (its field 'hypothesys': did you mean "
                      "'hypothesis'?): not scored") and len(err) == 2
    fails(["--run", runs["random"], "--input", str(rows)], "must end in .md or .json", output="out.txt")


def test_an_existing_output_and_the_input_file_are_never_replaced(runs, tmp_path, capsys):
    """`--input rows.json --output rows.json` replaced the rows by the report, and any existing --output
    (a finished report) was replaced without a word; predict's rule now holds: --overwrite, never the input."""
    cli = load_script("nearest_tokens")
    rows = tmp_path / "rows.json"  # JSONL rows in a .json file: a valid --input and a valid --output name
    text = "".join(json.dumps(r) + "\n" for r in ROWS)
    rows.write_text(text)
    for extra in ([], ["--overwrite"]):
        assert cli.main(["--run", runs["random"], "--input", str(rows), "--output", str(rows)] + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: --output '{rows}' is the --input file: the report would replace its rows; "
                       "give another --output file"], err
        assert rows.read_text() == text
    report = tmp_path / "report.md"
    report.write_text("my finished report\n")
    assert cli.main(["--run", runs["random"], "--input", str(rows), "--output", str(report)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists: --overwrite replaces it" in err[0]
    assert report.read_text() == "my finished report\n"
    assert cli.main(["--run", runs["random"], "--input", str(rows), "--output", str(report), "--overwrite"]) == 0
    assert report.read_text().startswith("# Nearest vocabulary tokens")


def test_idx_selection_edge_cases_are_one_line_or_every_matching_row(runs, tmp_path, capsys):
    """--idx on rows where some lack idx was a TypeError traceback, `--idx x` an `invalid literal` line with a
    quote cut off, rows without idx said `idx values None..None`, and two rows with one idx kept only the last."""
    cli = load_script("nearest_tokens")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in [ROWS[0], dict(ROWS[1], idx=2), dict(ROWS[0], idx="7"),
                                                            dict(ROWS[1], premise="another one", idx=2)]))

    def one_line(args, message):
        assert cli.main(["--run", runs["random"], "--input", str(rows)] + args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err

    one_line(["--idx", "5"], "--idx [5] not found in")
    one_line(["--idx", "5"], "idx values 2..7")
    one_line(["--idx", "x"], "--idx 'x' must be comma-separated integers")
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps(ROWS[0]) + "\n")
    assert cli.main(["--run", runs["random"], "--input", str(plain), "--idx", "1"]) == 2
    assert "have no 'idx' field" in capsys.readouterr().err
    out = tmp_path / "o.json"
    assert cli.main(["--run", runs["random"], "--input", str(rows), "--idx", "7,2", "--output", str(out)]) == 0
    assert [e["text_a"] for e in json.loads(out.read_text())["examples"]] == \
        [ROWS[0]["premise"], ROWS[1]["premise"], "another one"]  # "7" matches 7; both rows of idx 2, in file order


def test_a_regression_run_reports_scores_and_gold_labels_under_the_tasks_own_keys(tiny_model_dir, tmp_path):  # noqa: F811
    """An STS-B run with instance prompts (a supported config) crashed: `error: label` (predict returns a score,
    no label); and a gold label under the task's own key (STS-B's score, MRPC's Quality) was never shown."""
    from test_glue_regression import PAIR, write_config, write_tsv

    from openprompt_ipt.analysis.nearest_tokens import _has_label
    from openprompt_ipt.data import TASKS
    from openprompt_ipt.runner.config import load_config
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    words = ["the cat sat on the mat", "a dog ran fast", "she said the movie was great", "he was slow"]
    header = ["index", "genre", "sentence1", "sentence2", "score"]
    rows = [[i, "g", words[i % 4], words[(i * 3 + 1) % 4], f"{(i * 7) % 11 / 2.2:.2f}"] for i in range(12)]
    folder = write_tsv(tmp_path / "STS-B" / "train.tsv", header, rows[:8])
    write_tsv(tmp_path / "STS-B" / "dev.tsv", header, rows[8:])
    cfg = load_config(write_config(tmp_path, {"name": "stsb", "path": folder, "dev_from_train": 0.25},
                                   template_section={"text": PAIR, "strategy": "random", "prompt_length": 2},
                                   model=tiny_model_dir, train={"epochs": 1, "batch_size": 4, "device": "cpu",
                                                                "metric": "pearson_spearman"}))
    run_experiment(cfg, output_dir=str(tmp_path / "run"), show_progress=False)
    predictor = load_run(str(tmp_path / "run"))
    query = [{"sentence1": "the cat sat", "sentence2": "a dog ran", "score": 3.2}, {"sentence1": "he was slow", "sentence2": "a dog"}]
    report = nearest_tokens_for_run(predictor, query, top_k=2)
    scores = [p["score"] for p in predictor.predict(query)]
    assert [e["prediction"] for e in report["examples"]] == pytest.approx(scores, abs=1e-4)
    assert [e["gold"] for e in report["examples"]] == [pytest.approx(3.2), None]
    assert "gold **3.2**" in format_markdown(report)
    mrpc = [{"#1 String": "a", "#2 String": "b", "Quality": 1}, {"#1 String": "a", "#2 String": "b"}]
    assert [_has_label(TASKS["mrpc"], mrpc, e, mrpc) for e in (0, 1)] == [True, False]


def test_kv_injection_is_refused_by_the_library(runs):
    from openprompt_ipt.runner.predict import load_run

    predictor = load_run(runs["kv"])
    with pytest.raises(ValueError, match="needs prompts in the input embedding space"):
        nearest_tokens_for_run(predictor, ROWS)
    with pytest.raises(ValueError, match="injection 'kv'"):
        predictor.model.template.prompt_vectors({})


def test_soft_tokens_of_the_template_text_are_listed_with_the_prompts(runs):
    """`{"soft"}` tokens are trained vectors in the input embedding space, as the prompts are: they were left out
    without a word, and a template whose only trained tokens they are (strategy none, no task prompt) was
    refused as having 'no prompt positions'. Now they are listed after the prompts, one row per soft id."""
    from openprompt_ipt.analysis.nearest_tokens import prompt_vectors_for_rows
    from openprompt_ipt.runner.predict import load_run

    predictor = load_run(runs["soft"])
    template = predictor.model.template
    report = nearest_tokens_for_run(predictor, ROWS, top_k=3)
    assert [p["position"] for p in report["examples"][0]["prompts"]] == \
        ["task 1", "instance 1", "instance 2", "soft 1", "soft 2 (cat)"]
    assert "2 {\"soft\"} tokens" in report["prompts"]
    _, vectors, _ = prompt_vectors_for_rows(predictor, ROWS)
    trained = template.soft_embedding.weight[1:3].detach()
    assert torch.equal(vectors[0, 3:], trained) and torch.equal(vectors[1, 3:], trained)  # the same for every input
    emb = predictor.model.plm.get_input_embeddings().weight.detach()
    top = report["examples"][0]["prompts"][4]["tokens"][0]
    assert top["cosine"] == pytest.approx(float(torch.nn.functional.cosine_similarity(trained[1], emb[top["id"]], dim=0)),
                                          abs=1e-3)

    only = nearest_tokens_for_run(load_run(runs["soft_only"]), ROWS, top_k=2)
    assert [p["position"] for p in only["examples"][0]["prompts"]] == ["soft 1", "soft 2 (cat)"]
    assert "| soft 2 (cat) |" in format_markdown(only)

