"""Keys the chosen setup never reads are said, not dropped (runner/unused.py): one ``note:`` line each at the start
of a run, kept in metrics.json / summary.json as ``unused_keys``; defaults are never reported. And a test split cut
by ``dataset.max_eval`` says so next to its label (``test_cap``), while ``test_split`` (what tables group by) stays."""
import glob
import json
import os

import pytest

from helpers import config_file
from test_predict_and_runs import load_script, tiny_model_dir, write_tiny_yaml  # noqa: F401  (fixture)
from test_training import write_cb

ROOT = os.path.join(os.path.dirname(__file__), "..")
BASE = """
dataset: {name: cb}
template: instance_wise
instance_wise: {text: '{"placeholder":"text_a"} {"placeholder":"text_b"} ? {"mask"} .', strategy: random}
soft_verbalizer: {label_words: [[yes], [no], [maybe]]}
"""


def unused_of(tmp_path, text="", overrides=(), base=BASE):
    from openprompt_ipt.runner.config import load_config

    unused = []
    load_config(config_file(tmp_path, base + text), list(overrides), [], unused)
    return unused


def test_defaults_and_keys_that_are_read_give_no_note(tmp_path):
    assert unused_of(tmp_path) == []  # lr_plm, init_head, protocol.k... are all in the defaults
    assert unused_of(tmp_path, "plm: {freeze: false}\ntrain: {lr_plm: 0.00002}\n") == []
    assert unused_of(tmp_path, "init_from: some/run\ninit_head: false\n") == []
    assert unused_of(tmp_path, "protocol: {name: few_shot, k: 8, dev_k: 8, k_per: total}\n"
                               "sweep: {train.lr_prompt: [0.1, 0.01]}\n", ["protocol.cv_folds=3"]) == []


def test_lr_plm_with_a_frozen_plm_is_a_note_not_an_error(tmp_path):
    assert unused_of(tmp_path, "train: {lr_plm: 0.00001}\n") == [
        "train.lr_plm = 1e-05 is not used: plm.freeze is true (the PLM does not train)"]
    assert unused_of(tmp_path, "", ["train.lr_plm=3e-5"])[0].startswith("train.lr_plm = 3e-05 is not used")
    # a grid over it trains the same model at every point
    swept = unused_of(tmp_path, "sweep: {train.lr_plm: [0.00001, 0.00002]}\n")
    assert swept and swept[0].startswith("sweep train.lr_plm = [1e-05, 2e-05] is not used: plm.freeze is true")


def test_a_head_rate_for_the_manual_verbalizer_is_a_note(tmp_path):
    """manual_verbalizer has no parameters (the MLM head is the PLM's): train.lr_head reaches no optimizer group."""
    manual = BASE.replace("soft_verbalizer:", "verbalizer: manual_verbalizer\nmanual_verbalizer:")
    assert unused_of(tmp_path, "train: {lr_head: 0.01}\n", base=manual) == [
        "train.lr_head = 0.01 is not used: verbalizer manual_verbalizer has no parameters of its own (it reads the "
        "PLM's MLM head, which trains at train.lr_plm when plm.freeze is false)"]
    assert unused_of(tmp_path, "train: {lr_head: null}\n", base=manual) == []  # null: the prompt's rate, as unset
    assert unused_of(tmp_path, "train: {lr_head: 0.01}\n") == []  # soft_verbalizer trains at it


def test_an_instance_rate_for_one_of_openprompts_own_templates_is_a_note(tmp_path):
    """mixed_template / soft_template make one prompt per task: train.lr_instance reached no optimizer group."""
    mixed = BASE.replace("template: instance_wise\ninstance_wise:", "template: mixed_template\nmixed_template:")
    mixed = mixed.replace(", strategy: random}", "}")
    assert unused_of(tmp_path, "train: {lr_instance: 0.01}\n", base=mixed) == [
        "train.lr_instance = 0.01 is not used: template mixed_template has no instance-wise generator (lr_instance "
        "is its rate)"]
    assert unused_of(tmp_path, "train: {lr_instance: 0.01}\n") == []  # Random IPT's table trains at it
    assert unused_of(tmp_path, "train: {vocab_rows: seen}\n", base=mixed) == [
        "train.vocab_rows = seen is not used: template mixed_template has no vocabulary table (vocab_rows: seen "
        "restricts Random / Pretrained IPT's table)"]


def test_init_head_without_init_from(tmp_path):
    assert unused_of(tmp_path, "init_head: true\n") == [
        "init_head = true is not used: init_from is not set (init_head says whether the head comes from that run)"]


def test_protocol_keys_the_protocol_does_not_read(tmp_path):
    notes = unused_of(tmp_path, "protocol: {k: 16, dev_size: 200}\n")
    assert [n.split(" is not used")[0] for n in notes] == ["protocol.k = 16", "protocol.dev_size = 200"]
    assert "protocol.name is full" in notes[0]
    few = unused_of(tmp_path, "protocol: {name: few_shot, k: 8, dev_size: 200, cv_folds: 3}\n"
                              "dataset: {name: cb, max_train: 100, dev_from_train: 0.3}\n")
    assert sorted(n.split(" = ")[0] for n in few) == ["dataset.dev_from_train", "dataset.max_train",
                                                      "protocol.cv_folds", "protocol.dev_size"]
    low = unused_of(tmp_path, "protocol: {name: low_resource, k: 8, k_per: total, dev_size: 100}\n")
    assert [n.split(" = ")[0] for n in low] == ["protocol.k_per"]


def test_generator_keys_the_strategy_does_not_read(tmp_path):
    notes = unused_of(tmp_path, "", ["instance_wise.encoder=lstm", "instance_wise.table_dim=32"])
    assert notes == ["instance_wise.encoder = lstm is not used: instance_wise.strategy random reads token_source, "
                     "table_dim, vocab_rows, init_std, sparse, table_init of these keys only"]
    enc = unused_of(tmp_path, "", ["instance_wise.strategy=encoder", "instance_wise.sparse=true",
                                   "instance_wise.encoder_hidden=64"])
    assert [n.split(" = ")[0] for n in enc] == ["instance_wise.sparse"]
    none = unused_of(tmp_path, "", ["instance_wise.strategy=none", "instance_wise.task_prompt_length=4",
                                    "instance_wise.prompt_length=8", "instance_wise.instance_dropout=0.1",
                                    "train.lr_instance=0.01"])
    assert sorted(n.split(" = ")[0] for n in none) == ["instance_wise.instance_dropout", "instance_wise.prompt_length",
                                                       "train.lr_instance"]
    assert unused_of(tmp_path, "", ["instance_wise.strategy=none", "instance_wise.task_prompt_length=4",
                                    "instance_wise.prompt_length=0"]) == []  # Prompt Tuning as written


def test_generated_prefix_keys_its_generator_and_injection_do_not_read(tmp_path):
    text = ('dataset: {name: cb}\nsoft_verbalizer: {label_words: [[yes], [no], [maybe]]}\n'
            'template: generated_prefix\ngenerated_prefix: {text: \'{"placeholder":"text_a"} {"placeholder":"text_b"} '
            '{"mask"}\', generator: idpg, hidden_mode: add, prefix_positions: keep, '
            'idpg: {depth: single, layer: dnn, phm_n: 8, encoder: static_mean, cache: false, sharing: L}}\n')
    notes = unused_of(tmp_path, text, base="")
    assert sorted(n.split(" = ")[0] for n in notes) == [
        "generated_prefix.hidden_mode", "generated_prefix.idpg.cache", "generated_prefix.idpg.phm_n",
        "generated_prefix.idpg.sharing", "generated_prefix.prefix_positions"]
    assert any("injection is input" in n for n in notes)
    text_cache = text.replace("encoder: static_mean, cache: false", "encoder: plm_cls, cache: false, cache_size: 64")
    assert any(n.startswith("generated_prefix.idpg.cache_size = 64 is not used: generated_prefix.idpg.cache is false")
               for n in unused_of(tmp_path, text_cache, base=""))


def test_every_shipped_yaml_still_loads_with_only_the_known_notes(tmp_path):
    from openprompt_ipt.runner.config import config_kind, load_config, read_config_file

    seen = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "yamls", "**", "*.yaml"), recursive=True)):
        if config_kind(read_config_file(path)) != "experiment":
            continue
        unused = []
        load_config(path, [], [], unused)
        for note in unused:
            seen.setdefault(note.split(" = ")[0], []).append(os.path.relpath(path, ROOT))
    # the papers' rows keep one set of rates (lr_plm with a frozen PLM, lr_head with manual_verbalizer) and
    # generated few-shot rows keep dev_from_train
    assert set(seen) == {"train.lr_plm", "train.lr_head", "dataset.dev_from_train"}
    assert len(seen["train.lr_plm"]) >= 80


def test_the_run_prints_the_notes_first_and_keeps_them_and_the_test_cap(tiny_model_dir, tmp_path, capsys):  # noqa: F811
    run = load_script("run")
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))  # 6 val rows
    out = str(tmp_path / "runs")
    capsys.readouterr()
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--set", "train.epochs=1",
                     "--set", "train.lr_plm=1e-5", "--set", "dataset.max_eval=4"]) == 0
    printed = capsys.readouterr().out.splitlines()
    note = "note: train.lr_plm = 1e-05 is not used: plm.freeze is true (the PLM does not train)"
    assert printed[0].startswith("run: tiny: checking the config")  # said at once, before the heavy imports
    assert printed[1] == note  # then the config check's notes, before the data line and any score
    assert "test: 4 of the reported split's 6 rows, a seeded sample (dataset.max_eval = 4)" in printed
    assert any(line.startswith("| test (official val, 4 of 6 sampled by dataset.max_eval)") for line in printed)
    metrics = json.load(open(os.path.join(out, "tiny", "seed3", "metrics.json")))
    summary = json.load(open(os.path.join(out, "tiny", "summary.json")))
    for record in (metrics, summary):
        assert record["unused_keys"] == [note[len("note: "):]]
        assert record["test_cap"] == {"max_eval": 4, "kept": 4, "of": 6}
        assert record["test_split"] == "official val"  # what the aggregate tables group by: unchanged


def test_an_uncapped_test_split_has_no_test_cap(tmp_path):
    from openprompt_ipt.data.prepare import prepare_splits
    from test_predict_and_runs import tiny_cfg

    cfg = tiny_cfg("unused", write_cb(tmp_path / "CB"))
    assert prepare_splits(cfg, str(tmp_path)).test_cap is None
    cfg["dataset"]["max_eval"] = 6  # as many as there are: nothing cut
    assert prepare_splits(cfg, str(tmp_path)).test_cap is None
    cfg["dataset"]["max_eval"] = 2
    assert prepare_splits(cfg, str(tmp_path)).test_cap == {"max_eval": 2, "kept": 2, "of": 6}


def test_lpt_keys_its_kind_does_not_read(tmp_path):
    """The plain late prompt has no generator (bottleneck, dropout unread); init_std starts it, and nothing else."""
    def notes(lpt):
        text = ('dataset: {name: cb}\nsoft_verbalizer: {label_words: [[yes], [no], [maybe]]}\n'
                'template: generated_prefix\ngenerated_prefix: {text: \'{"placeholder":"text_a"} {"mask"}\', '
                f'generator: lpt, late_layer: 1, lpt: {lpt}}}\n')
        return sorted(n.split(" = ")[0] for n in unused_of(tmp_path, text, base=""))

    assert notes("{kind: plain, bottleneck: 64, dropout: 0.2, init_std: 0.5}") == [
        "generated_prefix.lpt.bottleneck", "generated_prefix.lpt.dropout"]
    assert notes("{kind: mppg, bottleneck: 64, dropout: 0.2, init_std: 0.5}") == ["generated_prefix.lpt.init_std"]
    assert notes("{init_std: 0.5}") == ["generated_prefix.lpt.init_std"]  # npg, the default kind
    assert notes("{kind: npg, bottleneck: 64}") == []
