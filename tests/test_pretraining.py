"""Category pretraining: corpus builder, classifiers, exports that Pretrained / Encoder IPT load, bad input."""
import importlib.util
import json
import os
import random

import pytest
import torch
import yaml

from helpers import TEXT
from test_predict_and_runs import tiny_model_dir  # noqa: F401  (fixture)
from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.generators import save_table, tokenizer_fingerprint
from openprompt_ipt.pretraining import (CATEGORIES, CategoryClassifier, ClassifierConfig, Corpus, Example,
                                        PretrainConfig, build_corpus, canonical_category, parse_mapping,
                                        train_classifier)
from openprompt_ipt.pretraining.config import DEFAULTS, load_pretrain_config
from openprompt_ipt.pretraining.pipeline import run_pretraining

TOPICS = {"sports": "sports ran fast slow he she", "music": "music art movie film great", "pets": "cat dog sat on mat"}
FILLER = "the a an is was it".split()


def sentence(rng, topic):
    words = TOPICS[topic].split()
    return " ".join(rng.choice(words) if i % 2 == 0 else rng.choice(FILLER) for i in range(rng.randint(4, 9)))


def write_sources(d, n=30, seed=0):
    """Three small local files in three formats; some duplicates and too-short texts on purpose."""
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "mixed.jsonl"), "w") as f:
        for i in range(n):
            topic = ("sports", "music")[i % 2]
            f.write(json.dumps({"body": sentence(rng, topic), "tag": topic[0]}) + "\n")
        f.write(json.dumps({"body": "great", "tag": "m"}) + "\n")  # 1 token: dropped
        f.write(json.dumps({"body": "ignored text here", "tag": "x"}) + "\n")  # label mapped to null
    with open(os.path.join(d, "pets.csv"), "w") as f:  # headerless csv
        for _ in range(n):
            f.write(f"7,{sentence(rng, 'pets')}\n")
        f.write("7,the cat sat on the mat\n7,the cat sat on the mat\n")  # a duplicate
    with open(os.path.join(d, "more.tsv"), "w") as f:
        f.write("sentence\tlabel\n")
        for _ in range(n // 2):
            f.write(f"{sentence(rng, 'music')}\t1\n")


def mapping_dict(**source_overrides):
    m = {"categories": ["Human activities", "Culture and the arts", "Natural and physical sciences"], "sources": [
        {"name": "mixed", "path": "mixed.jsonl", "text": "body", "label": "tag",
         "label_map": {"s": "human activities", "m": "Culture and the arts", "x": None}},
        {"name": "pets", "path": "pets.csv", "column_names": ["y", "text"], "text": "text",
         "category": "Natural and physical sciences"},
        {"name": "more", "path": "more.tsv", "text": "sentence", "category": "Culture and the arts", "max_examples": 10},
    ]}
    for k, v in source_overrides.items():
        m["sources"][0][k] = v
    return m


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("corpus"))
    write_sources(d)
    return d


@pytest.fixture(scope="module")
def hf_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hf_cache"))


def test_category_names_and_nearest_name_error():
    assert len(CATEGORIES) == 13 and CATEGORIES[0] == "General reference"
    assert canonical_category("culture_AND the arts") == "Culture and the arts"
    with pytest.raises(ValueError, match="unknown category 'Culture and arts' \\(did you mean 'Culture and the arts'"):
        canonical_category("Culture and arts")


def test_corpus_maps_dedups_balances_and_splits(bert, data_dir, hf_cache):
    _, tok = bert
    mapping = parse_mapping(mapping_dict())
    logs = []
    kw = dict(root=data_dir, max_length=16, min_tokens=2, max_per_category=12, cache_dir=hf_cache, log=logs.append)
    c = build_corpus(mapping, tok, seed=1, **kw)
    rows = c.summary["categories"]
    assert [r["available"] for r in rows.values()] == [25, 15, 31]  # 15 music + 10 of more.tsv; 15 sports; 30 + 1 pets
    assert all(r["kept"] == 12 for r in rows.values())  # capped: balanced
    assert all((r["train"], r["dev"], r["test"]) == (10, 1, 1) for r in rows.values())
    assert c.summary["dropped"]["too_short"] == 1 and c.summary["dropped"]["duplicate"] >= 1
    for split in c.splits().values():
        assert {e.label for e in split} == {0, 1, 2}
    assert c.categories == ["Culture and the arts", "Human activities", "Natural and physical sciences"]
    ids = {tuple(e.ids) for s in c.splits().values() for e in s}
    assert len(ids) == 36  # no duplicate anywhere, no leak between splits
    same = build_corpus(mapping, tok, seed=1, **kw)
    other = build_corpus(mapping, tok, seed=2, **kw)
    assert [e.ids for e in same.test] == [e.ids for e in c.test]
    assert [e.ids for e in other.test] != [e.ids for e in c.test]
    assert any("source pets" in line for line in logs)
    from openprompt_ipt.pretraining import format_histogram
    assert "Natural and physical sciences" in format_histogram(c.summary)
    bal = build_corpus(mapping, tok, seed=1, **{**kw, "max_per_category": None}, balance="min")
    assert {r["kept"] for r in bal.summary["categories"].values()} == {15}


@pytest.mark.parametrize("change,match", [
    (dict(text="text"), "source 'mixed': no field 'text'"),
    (dict(label_map={"s": "Sportz", "m": "Culture and the arts"}), "unknown category 'Sportz'"),
    (dict(label_map={"s": "Human activities"}), r"labels \['m', 'x'\] of field 'tag' have no entry in label_map"),
    (dict(path="nowhere/missing.jsonl"), "unknown dataset 'nowhere/missing.jsonl'"),
    (dict(path="no_such_user_xyz/no_such_dataset"), "unknown dataset 'no_such_user_xyz/no_such_dataset'"),
    (dict(categry="Human activities"), "unknown key 'categry' \\(did you mean 'category'"),
    (dict(category="Human activities"), "exactly one of 'category'"),
])
def test_bad_mapping_is_one_clear_error(bert, data_dir, hf_cache, monkeypatch, change, match):
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # fail fast, never reach the network
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    _, tok = bert
    with pytest.raises(ValueError, match=match):
        build_corpus(parse_mapping(mapping_dict(**change)), tok, data_dir, cache_dir=hf_cache, log=lambda *_: None)


@pytest.mark.parametrize("content,match", [
    ("", "file '.*mixed.jsonl' is empty: fill it, or remove the source"),  # was StopIteration deep in datasets
    # was DatasetGenerationError, then datasets' own 'Failed to load JSON ...' log line before an Arrow row number
    ('{"body": "a b c", "tag": "s"}\n{"body": broken\n',
     r"cannot read '.*mixed.jsonl' as json: line 2 is not JSON \(Expecting value\): fix that line"),
    ('{"body": "a b c", "tag": "s"}\n["a", "s"]\n',
     r"cannot read '.*mixed.jsonl' as json: line 2 is a list, not a JSON object: fix that line"),
])
def test_an_empty_or_broken_source_file_is_one_line(bert, hf_cache, tmp_path, capfd, caplog, content, match):
    _, tok = bert
    (tmp_path / "mixed.jsonl").write_text(content)
    capfd.readouterr()
    with pytest.raises(ValueError, match="source 'mixed': " + match) as err:
        build_corpus(parse_mapping(mapping_dict(path=str(tmp_path / "mixed.jsonl"))), tok, str(tmp_path),
                     cache_dir=hf_cache, log=lambda *_: None)
    assert "\n" not in str(err.value)
    assert capfd.readouterr().err == ""  # our line is the only output
    assert not [r for r in caplog.records if r.name.startswith("datasets")]


def test_category_without_examples(bert, data_dir, hf_cache):
    _, tok = bert
    m = mapping_dict()
    m["categories"].append("Religion and belief systems")
    with pytest.raises(ValueError, match="category 'Religion and belief systems' has no examples"):
        build_corpus(parse_mapping(m), tok, data_dir, cache_dir=hf_cache, log=lambda *_: None)


def test_a_mapping_of_one_category_is_refused(bert, data_dir, hf_cache):
    """One class trains nothing (its cross-entropy is 0 for any input) yet reported accuracy 1.0 and exported."""
    m = mapping_dict()
    m["categories"], m["sources"] = ["Natural and physical sciences"], [m["sources"][1]]
    with pytest.raises(ValueError, match=r"lists 1 category \(\['Natural and physical sciences'\]\): the classifier "
                                         "needs at least 2"):
        parse_mapping(m)


def test_a_model_path_without_a_tokenizer_is_one_line(tmp_path, capsys, monkeypatch):
    """A folder that is no checkpoint, or a hub name offline: transformers' paragraph or traceback (exit 1) before."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "not-a-model" / "notes.txt").write_text("hello")
    cfg = tmp_path / "c.yaml"
    for model_path, match in ((str(tmp_path / "not-a-model"), "no tokenizer could be loaded from"),
                              ("no-such-org-xyz/no-such-model", "not in the 🤗 cache, and the hub is unreachable")):
        cfg.write_text(yaml.safe_dump({"name": "x", "plm": {"model_path": model_path}}))
        assert load_cli().main(["--config", str(cfg), "--output-dir", str(tmp_path / "o"), "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and match in err and "plm.model_path" in err and "\n" not in err, err
        assert not os.path.exists(tmp_path / "o") and not os.path.exists(str(tmp_path / "o") + ".partial")


@pytest.mark.parametrize("cap", [1, 2])
def test_a_cap_that_leaves_no_train_split_is_refused(bert, data_dir, hf_cache, cap):
    """cap 2: dev and test took one each, train none, and an untrained table was exported as finished; cap 1: a
    train count of -1 and sklearn's 'Found empty input array'."""
    _, tok = bert
    with pytest.raises(ValueError, match=f"keeps {cap} examples \\(corpus.max_per_category={cap}\\), too few to train "
                                         "on .*raise corpus.max_per_category to at least 3"):
        build_corpus(parse_mapping(mapping_dict()), tok, data_dir, max_per_category=cap, min_tokens=2,
                     cache_dir=hf_cache, log=lambda *_: None)
    corpus = build_corpus(parse_mapping(mapping_dict()), tok, data_dir, max_per_category=3, min_tokens=2,
                          cache_dir=hf_cache, log=lambda *_: None)
    assert {r["train"] for r in corpus.summary["categories"].values()} == {1}


def toy_corpus(seed=0, n=40):
    """Three classes with disjoint token ids: trivially separable."""
    rng = random.Random(seed)
    def split(k):
        out = []
        for i in range(k * 3):
            c = i % 3
            ids = [rng.choice(range(10 + 10 * c, 20 + 10 * c)) for _ in range(rng.randint(2, 8))]
            out.append(Example(ids, c, "", "toy"))
        return out
    return Corpus(["a", "b", "c"], split(n), split(8), split(8), {})


@pytest.mark.parametrize("encoder", ["textcnn", "lstm", "mlp"])
def test_each_classifier_learns_a_separable_corpus(encoder):
    torch.manual_seed(0)
    cfg = ClassifierConfig(encoder=encoder, vocab_size=50, dim=16, hidden=16, dropout=0.0, num_classes=3)
    model = CategoryClassifier(cfg)
    result = train_classifier(model, toy_corpus(), PretrainConfig(epochs=8, batch_size=8, lr=0.03, lr_embedding=0.03,
                                                                  patience=8, show_progress=False), log=lambda *_: None)
    assert result["test"]["accuracy"] >= 0.9, result["history"]
    assert len(result["test"]["confusion_matrix"]) == 3


def pipeline_cfg(tmp_path, data_dir, tok_dir, **train):
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(mapping_dict()))
    cfg = json.loads(json.dumps(DEFAULTS))
    cfg["plm"]["model_path"] = tok_dir
    cfg["corpus"].update(mapping=str(mapping), max_length=16, min_tokens=2, max_per_category=20)
    cfg["classifier"].update(encoder="textcnn", dim=32, hidden=8, embedding_init="random", dropout=0.0)
    cfg["train"].update({"epochs": 2, "batch_size": 8, "lr": 0.01, "lr_embedding": 0.01, **train})
    return cfg


def test_exports_feed_pretrained_and_encoder_ipt(bert, tiny_dir, data_dir, hf_cache, tmp_path):
    model, tok = bert
    out = str(tmp_path / "exports" / "textcnn-tiny")
    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"))
    metrics = run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=lambda *_: None)
    files = set(os.listdir(out))
    assert {"embedding.safetensors", "classifier.safetensors", "classifier.json", "metrics.json", "corpus.json",
            "config.yaml", "DONE", "heldout_test.jsonl"} <= files
    if importlib.util.find_spec("matplotlib"):
        assert "confusion_matrix.png" in files
    assert not os.path.exists(out + ".partial") and "train_state.pt" not in files
    assert metrics["test"]["n"] == 6 and len(metrics["test"]["confusion_matrix"]) == 3

    from safetensors import safe_open
    from safetensors.torch import load_file
    with safe_open(os.path.join(out, "embedding.safetensors"), framework="pt") as f:
        table, meta = f.get_tensor("embedding"), f.metadata()
    assert table.shape == (len(tok), 32) and int(meta["vocab_size"]) == len(tok)
    assert meta["tokenizer_fingerprint"] == tokenizer_fingerprint(tok) and json.loads(meta["categories"])[0] == \
        "Culture and the arts"
    assert "accuracy" in json.loads(meta["metrics"])["test"]
    clf = load_file(os.path.join(out, "classifier.safetensors"))
    assert torch.equal(clf["embedding.weight"], table)

    pretrained = InstanceWiseTemplate(model, tok, text=TEXT, strategy="pretrained", prompt_length=4,
                                      pretrained_path=os.path.join(out, "embedding.safetensors"))
    assert torch.equal(pretrained.generator.table.embedding.weight[: len(tok)], table)
    encoder = InstanceWiseTemplate(model, tok, text=TEXT, strategy="encoder", prompt_length=4, encoder_hidden=8,
                                   pretrained_path=os.path.join(out, "embedding.safetensors"), encoder_path=out)
    for name, value in encoder.generator.encoder.body.state_dict().items():
        assert torch.equal(value, clf["body." + name])
    with pytest.raises(ValueError, match="hidden=8 encoder"):
        InstanceWiseTemplate(model, tok, text=TEXT, strategy="encoder", prompt_length=4, encoder_hidden=16,
                             encoder_path=out)

    with pytest.raises(ValueError, match=r"already holds a finished run \(export, DONE marker\): --overwrite replaces "
                                         "it, or choose another --output-dir"):
        run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=lambda *_: None)
    run_pretraining(cfg, data_dir, out, overwrite=True, show_progress=False, cache_dir=hf_cache, log=lambda *_: None)
    assert os.path.isfile(os.path.join(out, "DONE")) and not os.path.exists(out + ".old")


def test_a_wrong_data_root_leaves_nothing_to_refuse_the_corrected_command(bert, tiny_dir, data_dir, hf_cache, tmp_path):
    """A run that fails while reading its data (nothing trained, nothing cached) is no interrupted run: the folder
    it began goes, and the same command with the right data root is not refused."""
    out = str(tmp_path / "exports" / "exp")
    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"), epochs=1)
    with pytest.raises(ValueError, match="no such file or folder under the data root"):
        run_pretraining(cfg, str(tmp_path / "wrong-root"), out, show_progress=False, cache_dir=hf_cache,
                        log=lambda *_: None)
    assert not os.path.exists(out + ".partial") and not os.path.exists(os.path.dirname(out))
    run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=lambda *_: None)
    assert os.path.isfile(os.path.join(out, "DONE"))


def test_interrupted_run_resumes_or_refuses(bert, tiny_dir, data_dir, hf_cache, tmp_path):
    out = str(tmp_path / "exp")
    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"), epochs=3, patience=3)

    def interrupt_after_epoch_1(line):
        if str(line).startswith("epoch 1:"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=interrupt_after_epoch_1)
    assert not os.path.exists(out) and os.path.isfile(os.path.join(out + ".partial", "train_state.pt"))
    partial = out + ".partial"
    before = {f: open(os.path.join(partial, f), "rb").read() for f in os.listdir(partial)}
    with pytest.raises(ValueError, match=f"directory '{partial}' already holds an unfinished run .*: --resume "
                                         "continues it, --overwrite replaces it, or choose another --output-dir"):
        run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=lambda *_: None)
    assert {f: open(os.path.join(partial, f), "rb").read() for f in os.listdir(partial)} == before
    changed = json.loads(json.dumps(cfg))
    changed["seed"] = 7
    with pytest.raises(ValueError, match="interrupted run with a different configuration"):
        run_pretraining(changed, data_dir, out, show_progress=False, cache_dir=hf_cache, log=lambda *_: None,
                        resume=True)
    logs = []
    metrics = run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=logs.append,
                              resume=True)
    assert any("resumed after epoch 1" in str(line) for line in logs)
    assert [r["epoch"] for r in metrics["history"]] == [1, 2, 3]
    assert os.path.isfile(os.path.join(out, "DONE")) and not os.path.exists(out + ".partial")


def test_a_resumed_run_ends_where_the_uninterrupted_run_ends(bert, tiny_dir, data_dir, hf_cache, tmp_path):
    """Dropout draws from torch's RNG: a resumed run must continue that stream, not restart it, or the export of
    an interrupted-and-resumed command differs from the same command run through."""
    from safetensors.torch import load_file

    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"), epochs=3, patience=3)
    cfg["classifier"]["dropout"] = 0.3

    def interrupt_after_epoch_1(line):
        if str(line).startswith("epoch 1:"):
            raise KeyboardInterrupt

    whole, resumed = str(tmp_path / "whole"), str(tmp_path / "resumed")
    run_pretraining(cfg, data_dir, whole, show_progress=False, cache_dir=hf_cache, log=lambda *_: None)
    with pytest.raises(KeyboardInterrupt):
        run_pretraining(cfg, data_dir, resumed, show_progress=False, cache_dir=hf_cache, log=interrupt_after_epoch_1)
    torch.manual_seed(123)  # whatever the process drew meanwhile
    run_pretraining(cfg, data_dir, resumed, show_progress=False, cache_dir=hf_cache, log=lambda *_: None, resume=True)
    a, b = (load_file(os.path.join(d, "classifier.safetensors")) for d in (whole, resumed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ma, mb = (json.load(open(os.path.join(d, "metrics.json"))) for d in (whole, resumed))
    assert [r["train_loss"] for r in ma["history"]] == [r["train_loss"] for r in mb["history"]]


def test_an_interrupted_overwrite_run_resumes_and_replaces_only_when_done(bert, tiny_dir, data_dir, hf_cache, tmp_path):
    """`--overwrite` interrupted, then `--resume`: it was refused (a finished export is there) and the refusal's
    advice, --overwrite, discarded the interrupted run's epochs."""
    out, quiet = str(tmp_path / "exp"), (lambda *_: None)
    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"), epochs=3, patience=3)
    run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=quiet)
    old = open(os.path.join(out, "embedding.safetensors"), "rb").read()
    cfg["seed"] = 5

    def interrupt_after_epoch_1(line):
        if str(line).startswith("epoch 1:"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_pretraining(cfg, data_dir, out, overwrite=True, show_progress=False, cache_dir=hf_cache,
                        log=interrupt_after_epoch_1)
    assert open(os.path.join(out, "embedding.safetensors"), "rb").read() == old  # kept while unfinished
    with pytest.raises(ValueError, match=r"already holds an unfinished run \(an interrupted --overwrite pretraining "
                                         "run\): --resume continues it"):  # neither flag: refused, naming --resume
        run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=quiet)
    logs = []
    metrics = run_pretraining(cfg, data_dir, out, resume=True, show_progress=False, cache_dir=hf_cache,
                              log=logs.append)
    assert any("resumed after epoch 1" in str(line) for line in logs)
    assert [r["epoch"] for r in metrics["history"]] == [1, 2, 3]
    assert set(os.listdir(out)) >= {"DONE", "embedding.safetensors"} and "REPLACES_EXPORT" not in os.listdir(out)
    assert open(os.path.join(out, "embedding.safetensors"), "rb").read() != old
    assert not os.path.exists(out + ".partial") and not os.path.exists(out + ".old")


def test_a_bad_value_found_after_the_corpus_leaves_nothing_to_refuse(bert, tiny_dir, data_dir, hf_cache, tmp_path):
    """train.device / classifier.pool fail only once the corpus is built: the work folder (config + corpus.pt) was
    kept, and the corrected command was refused as 'an interrupted pretraining run' (--resume: another config)."""
    out, quiet = str(tmp_path / "exp"), (lambda *_: None)
    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"), epochs=1, device="gpu")
    with pytest.raises(ValueError, match="train.device = 'gpu' is not a device"):
        run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=quiet)
    assert not os.path.exists(out + ".partial")
    cfg["train"]["device"] = "cpu"
    run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=quiet)
    assert os.path.isfile(os.path.join(out, "DONE"))


def test_table_for_another_tokenizer_is_refused(bert, plm, tmp_path):
    model, tok = bert
    path = str(tmp_path / "t.safetensors")
    save_table(path, torch.randn(len(tok), 32), {"tokenizer": "some-other-bert", "tokenizer_fingerprint": "0" * 16})
    with pytest.raises(ValueError, match="exported for tokenizer 'some-other-bert' .* different vocabulary"):
        InstanceWiseTemplate(model, tok, text=TEXT, strategy="pretrained", prompt_length=4, pretrained_path=path)
    save_table(path, torch.randn(len(tok), 32), {"tokenizer": "tiny", "tokenizer_fingerprint": tokenizer_fingerprint(tok)})
    InstanceWiseTemplate(model, tok, text=TEXT, strategy="pretrained", prompt_length=4, pretrained_path=path)
    other_model, other_tok = plm
    if len(other_tok) != len(tok):  # the RoBERTa tokenizer: a vocab-size mismatch
        with pytest.raises(ValueError, match="rows but this PLM/tokenizer has"):
            InstanceWiseTemplate(other_model, other_tok, text=TEXT, strategy="pretrained", prompt_length=4,
                                 pretrained_path=path)


def load_cli():
    path = os.path.join(os.path.dirname(__file__), "..", "experiments", "pretrain_categories.py")
    spec = importlib.util.spec_from_file_location("pretrain_categories", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("overrides,match", [
    (["classifier.encoderr=lstm"], "unknown config key 'classifier.encoderr' (did you mean 'encoder'?)"),
    (["classifier.encoder=transformer"], "unknown encoder 'transformer'"),
    (["corpus.mapping=nope.yaml"], "corpus mapping 'nope.yaml' not found"),
    (["train.epochs=1.5"], "train.epochs = 1.5 is not allowed: give an integer >= 1"),  # was a TypeError traceback
    (["train.lr=-0.001"], "train.lr = -0.001 is not allowed: give a number > 0"),
    (["classifier.dropout=1.5"], "classifier.dropout = 1.5 is not allowed: give a number in [0, 1)"),
    (["classifier.pool=avg"], "classifier.pool must be one of ['max', 'mean'], got 'avg'"),
    (["train.device=gpu"], "train.device = 'gpu' is not a device"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, overrides, match):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"name": "x", "plm": {"model_path": str(tmp_path / "no-such-dir" / "tok")}}))
    args = ["--config", str(cfg), "--output-dir", str(tmp_path / "o")] + sum((["--set", o] for o in overrides), [])
    if "transformer" in overrides[0]:  # needs a real tokenizer to get that far: fails on the tokenizer path first
        match = "backbone directory"
    assert load_cli().main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and match in err and "\n" not in err


def test_pretrain_yamls_load():
    root = os.path.join(os.path.dirname(__file__), "..")
    for enc in ("textcnn", "lstm", "mlp"):
        cfg = load_pretrain_config(os.path.join(root, "yamls", f"pretrain_{enc}.yaml"))
        assert cfg["classifier"]["encoder"] == enc and cfg["name"] == enc
    with open(os.path.join(root, "yamls", "corpus_13cat.yaml")) as f:
        mapping = parse_mapping(yaml.safe_load(f))
    assert len(mapping.categories) == 13 and {s.name for s in mapping.sources} >= {"knowledge_cat", "wiki_vital"}


def test_visualize_representations_and_silhouettes(bert):
    from openprompt_ipt.pretraining.visualize import represent, silhouettes

    model, tok = bert
    rng = random.Random(0)
    texts = [sentence(rng, t) for t in TOPICS for _ in range(8)]
    labels = [t for t in TOPICS for _ in range(8)]
    table = torch.randn(len(tok), 32) * 0.01
    for topic, words in TOPICS.items():  # a table that separates the topics by construction
        direction = torch.randn(32)
        for w in words.split():
            table[tok.convert_tokens_to_ids(w)] += direction
    reps = represent(texts, tok, model.bert, table, prompt_length=4)
    assert {k: v.shape for k, v in reps.items()} == {k: (24, 32) for k in ("plm_output", "plm_input", "prompt")}
    scores, proj = silhouettes(reps, labels, perplexity=5)
    assert proj["prompt"]["t-SNE"].shape == (24, 2)
    assert scores["prompt"]["full_cosine"] > scores["plm_input"]["full_cosine"]


def test_visualize_cli_refusals_are_one_line(bert, tiny_dir, tmp_path, capsys):
    """A missing export lost its path's opening quote; --n too small for a silhouette was sklearn's PCA error; a
    tokenizer whose vocabulary changed since the export said neither which nor what to do."""
    from safetensors.torch import save_file

    path = os.path.join(os.path.dirname(__file__), "..", "experiments", "visualize_prompts.py")
    spec = importlib.util.spec_from_file_location("visualize_prompts", path)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    _, tok = bert
    export = tmp_path / "exp"
    export.mkdir()
    (export / "DONE").write_text("complete\n")
    rng = random.Random(0)
    (export / "heldout_test.jsonl").write_text("".join(json.dumps({"text": sentence(rng, t), "category": t}) + "\n"
                                                       for t in TOPICS for _ in range(4)))
    save_file({"embedding": torch.randn(len(tok), 32)}, str(export / "embedding.safetensors"),
              metadata={"tokenizer": os.path.join(tiny_dir, "bert"), "tokenizer_fingerprint": "0" * 16,
                        "categories": json.dumps(list(TOPICS))})
    for args, match in ((["--export", str(tmp_path / "nope")], f"error: '{tmp_path / 'nope'}' is not a finished export"),
                        (["--export", str(export), "--n", "1"], "error: --n 1: the sample holds 1 sentences of 1 "
                                                                 "categories; the silhouette needs at least 2"),
                        (["--export", str(export)], "has another vocabulary than the one export")):
        assert cli.main(args + ["--out", str(tmp_path / "p.png")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and match in err and "\n" not in err, err
    assert not os.path.exists(tmp_path / "p.png")


def test_visualize_outputs_are_checked_before_the_work_and_written_whole(bert, tiny_dir, tmp_path, capsys):
    """--out in a folder not made yet was `error: [Errno 2] No such file or directory` after PCA and t-SNE;
    --json under a file (or in a missing folder) a traceback after them, with the scores printed as if written."""
    from safetensors.torch import save_file

    path = os.path.join(os.path.dirname(__file__), "..", "experiments", "visualize_prompts.py")
    spec = importlib.util.spec_from_file_location("visualize_prompts", path)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    model, tok = bert
    model.save_pretrained(os.path.join(tiny_dir, "bert"))  # the export's backbone
    capsys.readouterr()  # save_pretrained's progress bar
    export = tmp_path / "exp"
    export.mkdir()
    (export / "DONE").write_text("complete\n")
    rng = random.Random(0)
    (export / "heldout_test.jsonl").write_text("".join(json.dumps({"text": sentence(rng, t), "category": t}) + "\n"
                                                       for t in TOPICS for _ in range(6)))
    save_file({"embedding": torch.randn(len(tok), 32)}, str(export / "embedding.safetensors"),
              metadata={"tokenizer": os.path.join(tiny_dir, "bert"), "tokenizer_fingerprint": tokenizer_fingerprint(tok),
                        "categories": json.dumps(list(TOPICS))})
    (tmp_path / "notes.txt").write_text("mine\n")
    for args, flag in ((["--out", str(tmp_path / "notes.txt" / "p.png")], "--out"),
                       (["--json", str(tmp_path / "notes.txt" / "s.json")], "--json"),
                       (["--out", str(tmp_path)], "--out")):
        assert cli.main(["--export", str(export), "--prompt-length", "4"] + args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: {flag} ") and "\n" not in err, err
    assert not (export / "prompt_space.png").exists()
    out, scores = tmp_path / "new" / "figs" / "p.png", tmp_path / "more" / "s.json"
    assert cli.main(["--export", str(export), "--prompt-length", "4", "--out", str(out), "--json", str(scores)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG" and json.loads(scores.read_text())["n"] == 18
    # the same --out / --json again (another export's, another --n's): both were replaced without a word; now
    # one line naming the file and --overwrite, before the export is read, and nothing changes
    before = out.read_bytes(), scores.read_text()
    for args, flag, path in ((["--out", str(out)], "--out", out), (["--json", str(scores)], "--json", scores)):
        assert cli.main(["--export", str(tmp_path / "no-export")] + args) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: {flag}: '{path}' already exists: --overwrite replaces it, or give another {flag}"
    assert (out.read_bytes(), scores.read_text()) == before
    assert cli.main(["--export", str(export), "--prompt-length", "4", "--n", "12", "--out", str(out), "--json",
                     str(scores), "--overwrite"]) == 0
    assert json.loads(scores.read_text())["n"] == 12 and out.read_bytes()[:4] == b"\x89PNG"


def test_the_same_table_is_the_same_file(tmp_path):
    """safetensors writes metadata in hash-map order: the same command twice gave exports of other bytes (sha256),
    and the files came out 0600 where a run's other files are 0644."""
    import hashlib

    from safetensors import safe_open

    weight = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    meta = {k: f"value {i} ünï" for i, k in enumerate("tokenizer tokenizer_path fingerprint categories corpus metrics "
                                                        "encoder format a b c d".split())}
    digests = set()
    for i in range(6):
        path = str(tmp_path / f"t{i}.safetensors")
        save_table(path, weight, meta)
        digests.add(hashlib.sha256(open(path, "rb").read()).hexdigest())
        with safe_open(path, framework="pt") as f:
            assert torch.equal(f.get_tensor("embedding"), weight) and f.metadata() == {**meta, "vocab_size": "4", "dim": "3"}
    assert len(digests) == 1
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("epochs_before", [0, 1])
def test_a_nan_loss_stops_pretraining_and_exports_nothing(bert, tiny_dir, data_dir, hf_cache, tmp_path, monkeypatch,
                                                          epochs_before):
    """Pretraining trained on through a NaN loss: the NaN model's dev accuracy (the argmax of NaN logits) was a
    real-looking number, it was selected, and its NaN table was exported as finished (DONE) for Pretrained IPT."""
    from openprompt_ipt.pretraining import train as train_mod
    from openprompt_ipt.training import NonFiniteLoss

    out = str(tmp_path / "exp")
    cfg = pipeline_cfg(tmp_path, data_dir, os.path.join(tiny_dir, "bert"), epochs=2, patience=2)
    real, finished = train_mod.F.cross_entropy, []

    def nan_in_epoch(logits, y):  # NaN from the first batch of epoch `epochs_before + 1` on
        loss = real(logits, y)
        return loss * float("nan") if len(finished) >= epochs_before else loss

    def count(line):
        if str(line).startswith("epoch "):
            finished.append(line)

    monkeypatch.setattr(train_mod.F, "cross_entropy", nan_in_epoch)
    with pytest.raises(NonFiniteLoss, match=rf"^pretraining loss became nan at epoch {epochs_before + 1}, batch 1: "
                                            "stopped, nothing exported: lower train.lr / train.lr_embedding and run again"
                                            + (r" with --overwrite \(it replaces the unfinished run\)$" if epochs_before else "$")):
        run_pretraining(cfg, data_dir, out, show_progress=False, cache_dir=hf_cache, log=count)
    assert not os.path.exists(out)  # no export, no DONE
    assert os.path.isdir(out + ".partial") == bool(epochs_before)


def test_a_nan_loss_is_one_line_and_exit_2_from_the_command_line(tmp_path, capsys):
    """The pretraining command line caught ValueError & co. only: a NaN loss was a FloatingPointError traceback."""
    from openprompt_ipt.pretraining.cli import run_pretraining_cli
    from openprompt_ipt.training import NonFiniteLoss

    def diverges(args):
        raise NonFiniteLoss("pretraining loss became nan at epoch 2, batch 1: stopped, nothing exported: ...")

    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: x\n")
    assert run_pretraining_cli(["--config", str(cfg)], "doc", "c", "k=v", "o", diverges) == 2
    assert capsys.readouterr().err.strip() == ("error: pretraining loss became nan at epoch 2, batch 1: stopped, "
                                               "nothing exported: ...")


def test_plm_embedding_init_leaves_transformers_progress_bars_as_they_were(tiny_model_dir):
    """Reading the PLM's embeddings turned transformers' progress bars back on for the rest of the process, even
    where the caller (a notebook, a sweep) had turned them off."""
    from transformers.utils import logging as hf_logging

    from openprompt_ipt.pretraining.pipeline import initial_embedding

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        weight, dim = initial_embedding("plm", tiny_model_dir, None, 10)
        assert weight.shape[1] == dim == 32
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()
