"""Every task's processor on small files written here in the real formats (../shared/assets/README.md)."""
import copy
import gzip
import json
import os

import pytest

from openprompt_ipt.runner.config import DEFAULTS
from openprompt_ipt.data import TASKS, get_task
from openprompt_ipt.data.tasks import _agnews_text
from openprompt_ipt.runner.experiment import check_label_words
from openprompt_ipt.data.prepare import load_task
from openprompt_ipt.data.splits import cap_examples, held_out_split
from openprompt_ipt.training import answer_metrics


def jsonl(path, rows, gz=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def pair_rows(n, labels, a="premise", b="hypothesis", labelled=True):
    return [{a: f"text {i}", b: f"other {i}", "idx": i, **({"label": labels[i % len(labels)]} if labelled else {})}
            for i in range(n)]


def multirc_row(p_idx, answers_per_question):
    """One paragraph; answers_per_question = [[label, ...], ...] per question."""
    questions, a_idx = [], 0
    for q_idx, labels in enumerate(answers_per_question):
        answers = []
        for y in labels:
            answers.append({"text": f"answer {a_idx}", "idx": a_idx, "label": y})
            a_idx += 1
        questions.append({"question": f"question {q_idx}?", "answers": answers, "idx": q_idx})
    return {"idx": p_idx, "version": 1.1, "passage": {"text": f"paragraph {p_idx}", "questions": questions}}


GLUE_TSV = {
    "mrpc": (["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"], lambda i: [i % 2, i, i + 1, f"one {i}", f"two {i}"]),
    "qnli": (["question", "sentence", "label"], lambda i: [f"why {i}?", f"because {i}", ["entailment", "not_entailment"][i % 2]]),
    "qqp": (["id", "qid1", "qid2", "question1", "question2", "is_duplicate"], lambda i: [i, 2 * i, 2 * i + 1, f"q {i}", f"r {i}", i % 2]),
    "stsb": (["index", "genre", "sentence1", "sentence2", "score"], lambda i: [i, "news", f"a {i}", f"b {i}", f"{i % 6:.3f}"]),
}


def write_task(root, name):
    """A tiny copy of the task's folder under ``root``; returns its path."""
    folder = root / TASKS[name].default_path
    if name in ("cb", "rte", "mnli"):
        labels = list(TASKS[name].labels)
        jsonl(folder / "train.jsonl", pair_rows(12, labels))
        jsonl(folder / "val.jsonl", pair_rows(6, labels))
        jsonl(folder / "test.jsonl", pair_rows(4, labels, labelled=False))
    elif name == "boolq":  # like the offline copy: no train.jsonl; bool labels
        jsonl(folder / "val.jsonl", pair_rows(20, [False, True], a="passage", b="question"))
        jsonl(folder / "test.jsonl", pair_rows(4, [0], a="passage", b="question", labelled=False))
    elif name == "multirc":
        jsonl(folder / "train.jsonl", [multirc_row(p, [[1, 0, 0], [0, 1]]) for p in range(6)])
        jsonl(folder / "val.jsonl", [multirc_row(p, [[1, 0], [1, 1, 0]]) for p in range(2)])
    elif name == "sst2":  # label first; the header names differ per file in the real copy
        folder.mkdir(parents=True)
        for file, head, n in (("train.tsv", "sentence", 10), ("dev.tsv", "content", 4), ("test.tsv", "content", 4)):
            lines = [f"label\t{head}"] + [f"{i % 2}\ta \"quoted\" film , number {i}" for i in range(n)]
            (folder / file).write_text("\n".join(lines) + "\n")
    elif name == "imdb":
        for split, n in (("train", 10), ("val", 4), ("test", 6)):
            jsonl(folder / f"{split}.jsonl.gz", [{"text": f"review {split} {i}", "label": i % 2, "rating": 7,
                                                   "file": f"{i}.txt"} for i in range(n)], gz=True)
    elif name == "agnews":
        folder.mkdir(parents=True)
        (folder / "train_4k.csv").write_text("".join(f'{i % 4},"news text {i} , here"\n' for i in range(12)))
        (folder / "test.csv").write_text("Class Index,Title,Description\n" + "".join(
            f'{i % 4 + 1},Title {i},"Description, with a comma {i}"\n' for i in range(8)))
    elif name in GLUE_TSV:  # GLUE tsv files with their real headers (MRPC's starts with a BOM)
        header, row = GLUE_TSV[name]
        folder.mkdir(parents=True)
        for file in [f.name for f in TASKS[name].files.values()]:
            n = 30 if name == "qqp" else 12  # QQP offline: only train, its test carved from it
            lines = ["\t".join(header)] + ["\t".join(str(v) for v in row(i)) for i in range(n)]
            (folder / file).write_bytes((b"\xef\xbb\xbf" if name == "mrpc" else b"") + ("\n".join(lines) + "\n").encode())
    elif name == "wiki_topics":  # corpora/wiki_vital: one jsonl, topic names as labels, some "Uncategorized"
        topics = list(TASKS[name].labels) + ["Uncategorized"]
        jsonl(folder / "articles.jsonl", [{"title": f"Article {i}", "text": f"summary number {i} of an article",
                                           "topic": topics[i % len(topics)]} for i in range(48)])
    else:  # mr, cr, mpqa, subj: {"sentence", "label"} with string labels and csv quoting kept
        for split, n in (("train", 10), ("test", 4)):
            jsonl(folder / f"{split}.jsonl", [{"sentence": f'"a "" quoted "" line {i}"', "label": str(i % 2)}
                                              for i in range(n)])
    return str(folder)


def cfg_for(name, **dataset):
    cfg = copy.deepcopy(DEFAULTS)
    cfg["dataset"].update(name=name, **dataset)
    return cfg


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_loads_train_dev_test(tmp_path, name):
    write_task(tmp_path, name)
    extra = ({"train_from": "validation", "test_from_train": 0.3} if name == "boolq" else
             {"test_from_train": 0.3} if name == "wiki_topics" else {})
    train, dev, test, labels = load_task(cfg_for(name, dev_from_train=0.25, **extra), str(tmp_path))
    assert labels == list(TASKS[name].labels)
    for exs in (train, dev, test):
        if TASKS[name].regression:  # STS-B: scores 0-5 scaled to [0, 1]
            assert exs and all(isinstance(e.label, float) and 0 <= e.label <= 1 and e.text_a for e in exs)
        else:
            assert exs and all(e.label in range(len(labels)) and e.text_a for e in exs)
    assert not {e.guid for e in train} & {e.guid for e in dev}
    pair = TASKS[name].text_b != ()
    assert all((e.text_b is not None) == pair for e in train)


def test_field_values(tmp_path):
    sst = TASKS["sst2"].load(write_task(tmp_path, "sst2"), "validation")
    assert [e.label for e in sst] == [0, 1, 0, 1] and sst[1].text_a == 'a "quoted" film , number 1'
    mr = TASKS["mr"].load(write_task(tmp_path, "mr"), "train")
    assert mr[0].text_a == 'a " quoted " line 0' and [e.label for e in mr[:2]] == [0, 1]
    cb = TASKS["cb"].load(write_task(tmp_path, "cb"), "val")
    assert (cb[2].text_a, cb[2].text_b, cb[2].label) == ("text 2", "other 2", 2)
    imdb = TASKS["imdb"].load(write_task(tmp_path, "imdb"), "test")
    assert len(imdb) == 6 and imdb[3].text_a == "review test 3"


def test_agnews_one_based_test_and_zero_based_train(tmp_path):
    path = write_task(tmp_path, "agnews")
    test = TASKS["agnews"].load(path, "test")
    assert [e.label for e in test[:5]] == [0, 1, 2, 3, 0]
    assert test[0].text_a == "Title 0 Description, with a comma 0"
    train = TASKS["agnews"].load(path, "train")
    assert [e.label for e in train[:5]] == [0, 1, 2, 3, 0] and train[1].text_a == "news text 1 , here"


def test_agnews_backslash_line_breaks_become_spaces(tmp_path):
    """AG News' csv (local test.csv and the hub copy) writes the articles' line breaks as a backslash
    ('a second\\team'); OpenPrompt's AgnewsProcessor reads them as spaces, and train_4k has none."""
    path = write_task(tmp_path, "agnews")
    (tmp_path / "agnews" / "test.csv").write_text(
        'Class Index,Title,Description\n4,Launch (SPACE.com),"SPACE.com - A second\\team of\\rocketeers"\n')
    assert TASKS["agnews"].load(path, "test")[0].text_a == "Launch (SPACE.com) SPACE.com - A second team of rocketeers"
    hub_row = {"text": "Wall St.\\Bears Claw Back", "label": 2}  # the hub's ag_news rows: one text field
    assert _agnews_text(hub_row, 0)[1] == "Wall St. Bears Claw Back"


@pytest.mark.parametrize("name, file", [("cb", "val.jsonl"), ("agnews", "test.csv")])
def test_a_file_replaced_with_the_same_mtime_reads_its_new_rows(tmp_path, name, file):
    """datasets caches a local file by path and mtime; `cp -p` of new rows must not read as the old ones."""
    path = write_task(tmp_path, name)
    target = os.path.join(path, file)
    split = "val" if name == "cb" else "test"
    before = [e.text_a for e in TASKS[name].load(path, split)]
    stamp = os.stat(target)
    with open(target, encoding="utf-8") as f:
        text = f.read()
    with open(target, "w", encoding="utf-8") as f:
        f.write(text.replace("text 0", "text zero").replace("Title 0", "Title zero"))  # one row's text changed
    os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    after = [e.text_a for e in TASKS[name].load(path, split)]
    assert after != before and any("zero" in t for t in after)


def test_multirc_answer_level_and_paragraph_split(tmp_path):
    path = write_task(tmp_path, "multirc")
    val = TASKS["multirc"].load(path, "validation")
    assert len(val) == 2 * 5 and [e.label for e in val[:5]] == [1, 0, 1, 1, 0]
    e = val[3]
    assert (e.text_a, e.text_b, e.meta["answer"], e.meta["group"]) == ("paragraph 0", "question 1?", "answer 3", "0-1")
    train, dev, _, _ = load_task(cfg_for("multirc", dev_from_train=0.34), str(tmp_path))
    assert len(dev) == 2 * 5 and not {e.meta["paragraph"] for e in train} & {e.meta["paragraph"] for e in dev}
    capped = cap_examples(train, 6, seed=0)  # whole questions only
    groups = {e.meta["group"] for e in capped}
    assert len(capped) <= 6 and all(sum(x.meta["group"] == g for x in train) == sum(x.meta["group"] == g for x in capped)
                                    for g in groups)


def test_f1a_and_em_by_hand():
    # question a: 3 options all right; question b: one of 2 wrong; question c: 1 option right
    labels = [1, 0, 0, 1, 1, 0]
    preds = [1, 0, 0, 1, 0, 0]
    groups = ["a", "a", "a", "b", "b", "c"]
    m = answer_metrics(labels, preds, groups)
    # positives: 3 gold, 2 predicted, 2 correct -> P = 1, R = 2/3, F1 = 0.8
    assert m["f1a"] == pytest.approx(0.8) and m["em"] == pytest.approx(2 / 3)


def test_boolq_train_from_validation_is_disjoint(tmp_path):
    write_task(tmp_path, "boolq")
    cfg = cfg_for("boolq", train_from="validation", test_from_train=0.3, dev_from_train=0.25)
    train, dev, test, _ = load_task(cfg, str(tmp_path))
    ids = [{e.guid for e in s} for s in (train, dev, test)]
    assert len(test) == 6 and sum(map(len, ids)) == 20 and len(set.union(*ids)) == 20
    assert {e.label for e in test} == {0, 1}
    assert [e.guid for e in load_task(cfg, str(tmp_path))[2]] == [e.guid for e in test]  # seeded
    with pytest.raises(FileNotFoundError, match="train_from: validation"):
        load_task(cfg_for("boolq"), str(tmp_path))
    with pytest.raises(ValueError, match="test_from_train"):
        load_task(cfg_for("boolq", train_from="val"), str(tmp_path))


def test_max_train_and_max_eval_are_seeded_samples(tmp_path):
    write_task(tmp_path, "imdb")
    cfg = cfg_for("imdb", max_train=4, max_eval=3)
    train, dev, test, _ = load_task(cfg, str(tmp_path))
    assert (len(train), len(dev), len(test)) == (4, 3, 3)
    assert [e.guid for e in load_task(cfg, str(tmp_path))[0]] == [e.guid for e in train]


@pytest.mark.parametrize("case,error,match", [
    ("missing_dir", FileNotFoundError, "does not exist: set dataset.path"),
    ("missing_split", FileNotFoundError, "not found at .*val.jsonl"),
    ("empty_file", ValueError, "is empty"),
    ("unlabelled", ValueError, "has no label"),
    ("unknown_label", ValueError, r"unknown cb label 'maybe'; valid labels are \['entailment'"),
    ("agnews_zero_in_test", ValueError, "as indices 1-4"),
])
def test_bad_input(tmp_path, case, error, match):
    cb = tmp_path / "CB"
    jsonl(cb / "train.jsonl", pair_rows(4, ["entailment"]))
    if case == "missing_dir":
        call = lambda: TASKS["cb"].load(str(tmp_path / "nope" / "CB"), "train")  # noqa: E731
    elif case == "missing_split":
        call = lambda: TASKS["cb"].load(str(cb), "validation")  # noqa: E731
    elif case == "empty_file":
        (cb / "val.jsonl").write_text("")
        call = lambda: TASKS["cb"].load(str(cb), "validation")  # noqa: E731
    elif case == "unlabelled":
        jsonl(cb / "test.jsonl", pair_rows(2, [], labelled=False))
        call = lambda: TASKS["cb"].load(str(cb), "test")  # noqa: E731
    elif case == "unknown_label":
        jsonl(cb / "val.jsonl", pair_rows(2, ["maybe"]))
        call = lambda: TASKS["cb"].load(str(cb), "validation")  # noqa: E731
    else:
        folder = tmp_path / "agnews"
        folder.mkdir()
        (folder / "test.csv").write_text("Class Index,Title,Description\n0,t,d\n")
        call = lambda: TASKS["agnews"].load(str(folder), "test")  # noqa: E731
    with pytest.raises(error, match=match):
        call()


def test_missing_data_root_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data root '.*nowhere' does not exist .*--data-root / IPT_ASSETS"):
        load_task(cfg_for("sst2"), str(tmp_path / "nowhere"))


def test_unknown_task_names_the_nearest_and_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset 'sst-2' \(did you mean 'sst2'\?\): valid names are"):
        get_task("sst-2")
    with pytest.raises(ValueError, match="did you mean 'multirc'"):
        load_task(cfg_for("multi_rc"), str(tmp_path))


def test_label_words_must_match_the_task(tmp_path):
    cfg = cfg_for("rte")
    cfg["soft_verbalizer"] = {"label_words": [["yes"], ["no"], ["maybe"]]}
    with pytest.raises(ValueError, match=r"label_words has 3 entries but task 'rte' has 2 labels"):
        check_label_words(cfg, TASKS["rte"].labels)


def test_unlabelled_hub_style_rows_and_held_out_split():
    task = TASKS["boolq"]
    assert task.label_id(-1, 0, "x") is None and task.label_id(True, 0, "x") == 1 and task.label_id("False", 0, "x") == 0
    from openprompt.data_utils import InputExample

    answers = [InputExample(guid=str(i), text_a="p", label=0, meta={"paragraph": str(i // 2)}) for i in range(4)]
    with pytest.raises(ValueError, match="held-out fraction"):
        held_out_split(answers, 1.5, 0)


def test_multirc_template_reads_the_answer_from_meta(bert, tmp_path):
    """The MultiRC YAML's template: the candidate answer enters through {"meta": "answer"}."""
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from helpers import build
    from openprompt_ipt.data import encode_examples

    model, tok = bert
    text = '{"placeholder":"text_a"} question: {"placeholder":"text_b"} answer: {"meta":"answer"} . {"mask"} .'
    pm = build(model, tok, strategy="random", prompt_length=2, text=text)
    ex = TASKS["multirc"].load(write_task(tmp_path, "multirc"), "validation")[0]
    ex.text_a, ex.text_b, ex.meta["answer"] = "the cat sat", "what sat", "the dog"
    feat = encode_examples([ex], pm.template, MLMTokenizerWrapper(max_seq_length=64, tokenizer=tok))[0]
    assert feat["group"] == "0-0"
    assert "answer [UNK] the dog" in tok.decode(feat["input_ids"])  # ':' is not in the tiny vocab


def test_every_yaml_fits_its_task():
    """label_words: one entry per task label; train.metric: one the task reports."""
    import glob

    from openprompt_ipt.runner.config import load_config

    for path in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "yamls", "*.yaml"))):
        if os.path.basename(path).startswith(("corpus_", "pretrain_")):  # category-pretraining configs
            continue
        cfg = load_config(path)
        task = get_task(cfg["dataset"]["name"])
        check_label_words(cfg, task.labels)
        assert cfg["train"]["metric"] in task.metrics, path


def test_runner_rejects_a_metric_the_task_does_not_report(tmp_path):
    from openprompt_ipt.runner.experiment import run_experiment

    cfg = cfg_for("cb")
    cfg["train"]["metric"] = "f1a"
    with pytest.raises(ValueError, match="train.metric 'f1a' is not reported for cb"):
        run_experiment(cfg, str(tmp_path), show_progress=False)


def test_evaluate_reports_f1a_and_em_for_answer_groups(bert, tmp_path):
    from openprompt.plms.mlm import MLMTokenizerWrapper

    from helpers import build
    from openprompt_ipt.data import encode_examples, make_loader
    from openprompt_ipt.training import evaluate

    model, tok = bert
    pm = build(model, tok, strategy="random", prompt_length=2)
    exs = TASKS["multirc"].load(write_task(tmp_path, "multirc"), "validation")
    feats = encode_examples(exs, pm.template, MLMTokenizerWrapper(max_seq_length=64, tokenizer=tok))
    m = evaluate(pm, make_loader(feats, 3, tok.pad_token_id, sort_by_length=True), show_progress=False)
    assert {"accuracy", "macro_f1", "f1a", "em"} <= set(m) and 0.0 <= m["em"] <= 1.0


def test_hub_names_reach_the_hub_loaders_unchanged(monkeypatch):
    """Offline here, so the hub calls are recorded instead of made: the real loading code names the hub copy."""
    import datasets

    calls = []

    def fake_load_dataset(name, config=None, split=None, **kw):
        calls.append((name, config, split))
        return [{"premise": "p", "hypothesis": "h", "label": 1, "idx": 0}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    cb = get_task("cb")
    for path in ("hub", "super_glue"):
        examples = cb.load(path, "validation")
        assert examples[0].label == 1 and examples[0].text_a == "p"
    assert calls == [("super_glue", "cb", "validation"), ("super_glue", "cb", "validation")]


def test_backbone_hub_name_goes_to_from_pretrained(monkeypatch):
    import types

    import transformers

    from openprompt_ipt.runner.plm import load_backbone

    from openprompt_ipt.runner import backbones

    seen = []
    monkeypatch.setattr(backbones, "_hub_reachable", lambda: True)  # as online; the fakes below never connect

    class Fake:
        @staticmethod
        def from_pretrained(name, *a, **kw):
            seen.append((name, kw.get("local_files_only")))
            model = types.SimpleNamespace(config=types.SimpleNamespace(model_type="roberta"))
            return (model, {"missing_keys": []}) if kw.get("output_loading_info") else model

    monkeypatch.setattr(transformers, "AutoTokenizer", Fake)
    monkeypatch.setattr(transformers, "AutoModelForMaskedLM", Fake)
    load_backbone("roberta-large")
    assert seen == [("roberta-large", False), ("roberta-large", False)]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_backbone(os.path.join("no", "such", "checkpoint"))
