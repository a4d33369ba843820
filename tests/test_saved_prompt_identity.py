"""A saved prompt loads onto what it was trained with, or is refused in one line: another tokenizer of the same size
(IPT's table is indexed by token ids), another backbone shape, a frozen exported table replaced since (Encoder IPT's
``pretrained_path`` is read again at load, not saved), a hand-edited or weightless folder. Both doors. And the
exports a prompt starts from: another vocabulary, a folder for a file, an unfinished run, a cut-short table."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from helpers import batch_for, build, clone, examples

from openprompt_ipt import InstanceWiseTemplate
from openprompt_ipt.generators import save_table, tokenizer_fingerprint


def _nudged(pm):
    with torch.no_grad():
        for p in pm.template.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    return pm.eval()


def _reversed_vocab_tokenizer(tiny_dir, tmp_path):
    """The tiny BERT's tokenizer with its words in reverse order: the same size, other ids."""
    from transformers import AutoTokenizer

    words = (open(os.path.join(tiny_dir, "bert", "vocab.txt")).read().split("\n"))[:-1]
    folder = tmp_path / "other_bert"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(words[:5] + words[5:][::-1]) + "\n")
    shutil.copy(os.path.join(tiny_dir, "bert", "tokenizer_config.json"), folder)
    return AutoTokenizer.from_pretrained(str(folder))


def _table(path, tok, seed):
    torch.manual_seed(seed)
    save_table(path, torch.randn(len(tok), 16), {"tokenizer": "tiny", "tokenizer_fingerprint": tokenizer_fingerprint(tok)})
    return path


def test_template_for_another_tokenizer_of_the_same_size_is_refused(bert, tiny_dir, tmp_path):
    model, tok = bert
    other = _reversed_vocab_tokenizer(tiny_dir, tmp_path)
    assert len(other) == len(tok) and other.get_vocab() != tok.get_vocab()
    folder = str(tmp_path / "tpl")
    _nudged(build(model, tok, strategy="random", prompt_length=4)).template.save_pretrained(folder)
    with pytest.raises(ValueError, match=r"'.*tpl' was saved with tokenizer '.*bert' \(57 tokens\) and '.*other_bert' "
                                         r"\(57 tokens\) has another vocabulary: .* load it with the backbone and "
                                         "tokenizer it was trained with") as e:
        InstanceWiseTemplate.from_pretrained(folder, model, other)
    assert "\n" not in str(e.value)
    InstanceWiseTemplate.from_pretrained(folder, model, tok)  # its own tokenizer loads


def _cased_tokenizer(tiny_dir, tmp_path):
    """The tiny BERT's own vocab.txt loaded with ``do_lower_case=False`` (a cased / uncased mix-up): the same
    vocabulary, so the same ``tokenizer_fingerprint``, but "The Movie" is [UNK] [UNK] instead of "the movie"."""
    from transformers import AutoTokenizer

    folder = tmp_path / "cased_bert"
    folder.mkdir()
    shutil.copy(os.path.join(tiny_dir, "bert", "vocab.txt"), folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer",
                                                              "do_lower_case": False}))
    return AutoTokenizer.from_pretrained(str(folder))


def test_the_same_vocabulary_tokenized_otherwise_is_refused_in_both_doors(bert, tiny_dir, tmp_path):
    """Saved with the uncased tokenizer, loaded with the same vocab.txt read cased: every check of the vocabulary
    (size, ids, special ids) agreed, and the prompt loaded without a word to read [UNK] where it trained on words."""
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

    model, tok = bert
    cased = _cased_tokenizer(tiny_dir, tmp_path)
    assert tokenizer_fingerprint(cased) == tokenizer_fingerprint(tok)
    assert cased("The Movie")["input_ids"] != tok("The Movie")["input_ids"]
    folder = str(tmp_path / "tpl")
    _nudged(build(model, tok, strategy="random", prompt_length=4)).template.save_pretrained(folder)
    with pytest.raises(ValueError, match=r"'.*tpl' was saved with tokenizer '.*bert' and '.*cased_bert' has its "
                                         r"vocabulary but tokenizes the same text into other ids \(do_lower_case") as e:
        InstanceWiseTemplate.from_pretrained(folder, model, cased)
    assert "\n" not in str(e.value)
    InstanceWiseTemplate.from_pretrained(folder, model, tok)  # its own tokenizer loads
    hf = get_instance_prompt_model(classifier_from(model), InstancePromptConfig("ipt", prompt_length=3), tokenizer=tok)
    hf.save_pretrained(str(tmp_path / "hf"))
    with pytest.raises(ValueError, match=r"'.*hf' was saved with tokenizer '.*bert' and the given tokenizer "
                                         r"'.*cased_bert' has another tokenization of the same vocabulary") as e:
        InstancePromptModel.from_pretrained(classifier_from(model), str(tmp_path / "hf"), cased)
    assert "\n" not in str(e.value)
    InstancePromptModel.from_pretrained(classifier_from(model), str(tmp_path / "hf"), tok)


def test_template_for_another_number_of_layers_is_refused(bert, tmp_path):
    from transformers import BertForMaskedLM

    model, tok = bert
    folder = str(tmp_path / "tpl")
    _nudged(build(model, tok, strategy="random", prompt_length=4)).template.save_pretrained(folder)
    deeper = BertForMaskedLM(model.config.__class__(**{**model.config.to_dict(), "num_hidden_layers": 3})).eval()
    with pytest.raises(ValueError, match=r"was saved for backbone '.*' with num_hidden_layers 2, and this one has 3: "
                                         "load it onto the backbone it was trained on"):
        InstanceWiseTemplate.from_pretrained(folder, deeper, tok)


def test_template_reading_a_replaced_export_is_refused(bert, tmp_path):
    """Encoder IPT's frozen table (pretrained_path) is not in template.safetensors: it is read from the export again
    at load. An export rebuilt since gave other prompts without a word."""
    model, tok = bert
    table = _table(str(tmp_path / "embedding.safetensors"), tok, seed=0)
    pm = _nudged(build(model, tok, strategy="encoder", prompt_length=3, pretrained_path=table, encoder_hidden=8))
    batch = batch_for(pm, tok, examples(3))
    expected = pm(clone(batch))
    folder = str(tmp_path / "tpl")
    pm.template.save_pretrained(folder)
    loaded = InstanceWiseTemplate.from_pretrained(folder, model, tok)  # the same export: the same logits
    pm.prompt_model.template = loaded
    assert torch.allclose(pm.eval()(clone(batch)), expected, atol=1e-6)
    _table(table, tok, seed=1)  # the export rebuilt (another run, another seed)
    with pytest.raises(ValueError, match=r"'.*tpl' was trained reading the frozen table '.*embedding.safetensors' and "
                                         r"'.*embedding.safetensors' now holds another table: .*put back the export"):
        InstanceWiseTemplate.from_pretrained(folder, model, tok)
    os.remove(table)  # the export gone (a run folder copied to another machine): it said "run the pretraining first"
    with pytest.raises(FileNotFoundError, match=r"'.*tpl' cannot be rebuilt: pretrained table '.*embedding.safetensors' "
                                                r"not found; the template reads its exports again when it is loaded: put "
                                                r"the export back at that path, or pass its new place") as e:
        InstanceWiseTemplate.from_pretrained(folder, model, tok)
    assert "run the pretraining first" not in str(e.value)


def test_hand_edited_template_config_is_one_line_and_older_folders_still_load(bert, tmp_path):
    model, tok = bert
    folder = tmp_path / "tpl"
    pm = _nudged(build(model, tok, strategy="random", prompt_length=4))
    batch = batch_for(pm, tok, examples(3))
    expected = pm(clone(batch))
    pm.template.save_pretrained(str(folder))
    config = json.loads((folder / "template_config.json").read_text())
    config.pop("saved_with")  # a folder saved before the record existed: loads as before
    (folder / "template_config.json").write_text(json.dumps(config))
    pm.prompt_model.template = InstanceWiseTemplate.from_pretrained(str(folder), model, tok)
    assert torch.allclose(pm.eval()(clone(batch)), expected, atol=1e-6)
    (folder / "template_config.json").write_text(json.dumps({**config, "prompt_lenght": 4}))
    with pytest.raises(ValueError, match=r"template_config.json': .*'prompt_lenght'.*: remove the key, or save the "
                                         "template again") as e:
        InstanceWiseTemplate.from_pretrained(str(folder), model, tok)
    assert "\n" not in str(e.value)


def test_hf_model_reading_a_replaced_export_is_refused(bert, tmp_path):
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

    mlm, tok = bert
    table = _table(str(tmp_path / "embedding.safetensors"), tok, seed=0)
    config = InstancePromptConfig("ipt", strategy="encoder", prompt_length=3,
                                  options={"pretrained_path": table, "encoder_hidden": 8})
    base = classifier_from(mlm)
    get_instance_prompt_model(base, config, tokenizer=tok).save_pretrained(str(tmp_path / "p"))
    InstancePromptModel.from_pretrained(base, str(tmp_path / "p"), tok)
    _table(table, tok, seed=1)
    with pytest.raises(ValueError, match=r"'.*p' was trained reading the frozen table '.*embedding.safetensors' and "
                                         r"'.*embedding.safetensors' now holds another table"):
        InstancePromptModel.from_pretrained(base, str(tmp_path / "p"), tok)


def test_hf_folder_with_only_its_json_config_names_the_missing_weights(bert, tmp_path):
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

    mlm, tok = bert
    get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("ipt", prompt_length=2),
                              tokenizer=tok).save_pretrained(str(tmp_path / "p"))
    os.makedirs(tmp_path / "copy")
    shutil.copy(tmp_path / "p" / "instance_prompt_config.json", tmp_path / "copy")
    with pytest.raises(FileNotFoundError, match=r"'.*copy' has instance_prompt_config.json but no weights "
                                                r"\(model.safetensors\): copy the weights file too"):
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "copy"), tok)


def test_encoder_export_of_another_vocabulary_is_refused(bert, tiny_dir, tmp_path):
    """classifier.json records the tokenizer the encoder was pretrained on; a body learned on another vocabulary's
    embeddings loaded without a word (a pretrained start in name only)."""
    from helpers import write_encoder_export

    model, tok = bert
    fresh = InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', strategy="encoder",
                                 prompt_length=2, encoder_hidden=8)
    export = tmp_path / "exports" / "textcnn-other"
    other = _reversed_vocab_tokenizer(tiny_dir, tmp_path)
    meta = {"encoder": fresh.generator.encoder.config.to_dict(), "tokenizer": "other_bert",
            "tokenizer_fingerprint": tokenizer_fingerprint(other)}
    write_encoder_export(fresh, export, meta)
    with pytest.raises(ValueError, match=r"encoder_path '.*textcnn-other' was pretrained on the vocabulary of "
                                         r"'other_bert' but this template's tokenizer '.*bert' has another .*: "
                                         r"openprompt-ipt pretrain categories --config pretrain_textcnn.yaml "
                                         r"--set plm.model_path=<this backbone> \(in a clone also: python "
                                         r"experiments/pretrain_categories.py, same options\)") as e:
        InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', strategy="encoder",
                             prompt_length=2, encoder_hidden=8, encoder_path=str(export))
    assert "\n" not in str(e.value)
    (export / "classifier.json").write_text(json.dumps({**meta, "tokenizer_fingerprint": tokenizer_fingerprint(tok)}))
    InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', strategy="encoder",
                         prompt_length=2, encoder_hidden=8, encoder_path=str(export))
    (export / "classifier.json").write_text('{"encoder": {"name": "textc')  # cut short: one line, not a traceback
    with pytest.raises(ValueError, match=r"classifier.json' is damaged or truncated .*--overwrite"):
        InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', strategy="encoder",
                             prompt_length=2, encoder_hidden=8, encoder_path=str(export))


def test_a_table_path_that_is_a_folder_unfinished_or_cut_short_is_one_line(bert, tmp_path):
    """pretrained_path given the export folder (as encoder_path takes it) said 'not found: run the pretraining first';
    a cut-short table raised safetensors' own error without the file's name; an interrupted run's work folder
    (<out>.partial) loaded as if it were an export."""
    model, tok = bert

    def make(**kw):
        return InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', prompt_length=2, **kw)

    export = tmp_path / "exports" / "textcnn-tiny"
    export.mkdir(parents=True)
    table = _table(str(export / "embedding.safetensors"), tok, seed=0)
    with pytest.raises(ValueError, match=rf"pretrained_path '{export}' is a folder, not a table file: set "
                                         rf"pretrained_path to '{table}'"):
        make(strategy="pretrained", pretrained_path=str(export))
    partial = tmp_path / "exports" / "textcnn-tiny.partial"
    shutil.copytree(export, partial)
    for kw in (dict(strategy="pretrained", pretrained_path=str(partial / "embedding.safetensors")),
               dict(strategy="encoder", encoder_path=str(partial))):
        with pytest.raises(ValueError, match=r"is inside '.*textcnn-tiny.partial', the work folder of a pretraining run "
                                             r"that never finished: resume it .*then use the finished export "
                                             r"'.*textcnn-tiny'") as e:
            make(**kw)
        assert "\n" not in str(e.value)
    data = open(table, "rb").read()
    open(table, "wb").write(data[: len(data) // 2])
    with pytest.raises(ValueError, match=rf"file '{table}' is damaged or truncated .*: run the pretraining again: .*--overwrite"):
        make(strategy="pretrained", pretrained_path=table)


def test_predict_refuses_a_run_whose_backbone_folder_has_another_tokenizer_now(tmp_path):
    """A local backbone folder whose tokenizer files were replaced (same size, other ids) after training: predict
    read the prompt table with the new ids without a word. A template folder without its weights names the fix."""
    from conftest import _bert
    from test_predict_and_runs import tiny_cfg
    from test_training import write_cb

    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    torch.manual_seed(0)
    model, _ = _bert(str(tmp_path))
    backbone = str(tmp_path / "bert")
    model.save_pretrained(backbone)
    data = write_cb(tmp_path / "CB")
    out = str(tmp_path / "run")
    run_experiment(tiny_cfg(backbone, data), output_dir=out, show_progress=False)
    load_run(out)
    vocab = tmp_path / "bert" / "vocab.txt"
    words = vocab.read_text().split("\n")[:-1]
    vocab.write_text("\n".join(words[:5] + words[5:][::-1]) + "\n")
    with pytest.raises(ValueError, match=r"'.*run/template' was saved with tokenizer '.*bert' \(57 tokens\) and "
                                         r"'.*bert' \(its files changed since\) \(57 tokens\) has another vocabulary"):
        load_run(out)
    vocab.write_text("\n".join(words) + "\n")
    os.remove(os.path.join(out, "template", "template.safetensors"))
    with pytest.raises(FileNotFoundError, match=r"weights file '.*template.safetensors' not found: save the template "
                                                r"again with save_pretrained\(\) \(or train the run again\)"):
        load_run(out)


def test_a_cut_short_ppt_export_is_one_line_naming_it(tmp_path):
    """init_prompt_from on a finished PPT export whose prompt.safetensors was cut short (a copy interrupted): it was
    safetensors' own error, without the file's name."""
    from safetensors.torch import save_file

    from openprompt_ipt.runner.init_prompt import DONE, PROMPT_FILE, init_prompt_from
    from openprompt_ipt.serialization import DamagedFile

    export = tmp_path / "ppt"
    export.mkdir()
    (export / DONE).write_text("complete\n")
    path = export / PROMPT_FILE
    save_file({"task_prompt": torch.randn(4, 32)}, str(path), metadata={"format": "openprompt_ipt.ppt_prompt"})
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DamagedFile, match=rf"file '{path}' is damaged or truncated .*: run openprompt-ipt "
                                          r"pretrain ppt .* --overwrite") as e:
        init_prompt_from(None, {"init_prompt_from": str(export)}, None)
    assert "\n" not in str(e.value)


def test_template_weights_without_a_trained_tensor_are_refused(bert, tmp_path):
    """A template.safetensors that lacks a tensor the template trains (a file from another config or release, a hand
    edit): that tensor kept its fresh random start and the template predicted with it without a word."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    model, tok = bert
    folder = str(tmp_path / "tpl")
    _nudged(build(model, tok, strategy="random", prompt_length=3, task_prompt_length=2)).template.save_pretrained(folder)
    InstanceWiseTemplate.from_pretrained(folder, model, tok)  # the whole file: loads
    weights = os.path.join(folder, "template.safetensors")
    with safe_open(weights, "pt") as f:
        metadata = f.metadata()
    state = load_file(weights)
    dropped = sorted(state)[-1]
    del state[dropped]
    save_file(state, weights, metadata=metadata)
    with pytest.raises(ValueError, match=rf"lacks 1 trained tensor\(s\) of this model \({dropped}\): they would "
                                         r"predict from their untrained start .*save the template again") as e:
        InstanceWiseTemplate.from_pretrained(folder, model, tok)
    assert "\n" not in str(e.value)
