"""A saved prompt whose weights hold everything it was built from loads without the pretraining export: Pretrained
IPT's table and Encoder IPT's encoder body train, so they are in the saved weights; the export was read at load only
for its shape (a run folder copied to another machine could not ``predict``). Both doors and a run folder. Encoder
IPT's frozen table (``pretrained_path``) is not saved: it still needs its export, and a replaced one is refused."""
from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from helpers import batch_for, build, build_prefix, clone, examples

from openprompt_ipt import GeneratedPrefixTemplate, InstanceWiseTemplate
from openprompt_ipt.generators import save_table, tokenizer_fingerprint


def _export(folder, tok, dim=16, seed=0):
    """A category-pretraining export's table (``tok``'s vocabulary, ``dim`` wide); returns its path."""
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(seed)
    save_table(os.path.join(folder, "embedding.safetensors"), torch.randn(len(tok), dim),
               {"tokenizer": "tiny", "tokenizer_fingerprint": tokenizer_fingerprint(tok)})
    return os.path.join(folder, "embedding.safetensors")


def _nudged(pm):
    with torch.no_grad():
        for p in pm.template.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    return pm.eval()


def _round_trip(pm, tok, cls, folder, export):
    """Save ``pm``'s template, delete the export, load it back: the same logits."""
    batch = batch_for(pm, tok, examples(3))
    expected = pm(clone(batch))
    pm.template.save_pretrained(folder)
    shutil.rmtree(export)
    pm.prompt_model.template = cls.from_pretrained(folder, pm.plm, tok)
    assert torch.allclose(pm.eval()(clone(batch)), expected, atol=1e-6)


def test_pretrained_ipt_template_loads_without_its_export(bert, tmp_path):
    model, tok = bert
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok, dim=16)  # narrower than the hidden size: a projection follows
    pm = _nudged(build(model, tok, strategy="pretrained", prompt_length=3, pretrained_path=table))
    _round_trip(pm, tok, InstanceWiseTemplate, str(tmp_path / "tpl"), export)
    config = json.loads((tmp_path / "tpl" / "template_config.json").read_text())
    assert config["saved_with"]["exports_in_weights"] == {"generator": {"pretrained_path": table, "table_dim": 16}}


def test_prefix_ipt_pretrained_and_encoder_body_load_without_their_export(bert, tmp_path):
    model, tok = bert
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok, dim=model.config.hidden_size)
    pm = _nudged(build_prefix(model, tok, prompt_length=2, generator="ipt_pretrained",
                              ipt={"pretrained_path": table, "projection_hidden": 8}))
    _round_trip(pm, tok, GeneratedPrefixTemplate, str(tmp_path / "prefix"), export)


def test_encoder_ipt_body_from_an_export_loads_without_it(bert, tmp_path):
    """Encoder IPT on the PLM's own embeddings, its body from an export (encoder_path): the body trains, so it is
    saved; the export was read again at load only to be overwritten."""
    from helpers import write_encoder_export

    model, tok = bert
    fresh = InstanceWiseTemplate(model, tok, text='{"placeholder":"text_a"} {"mask"}', strategy="encoder",
                                 prompt_length=2, encoder_hidden=8)
    export = tmp_path / "exports" / "textcnn-tiny"
    write_encoder_export(fresh, export, {"encoder": fresh.generator.encoder.config.to_dict(),
                                         "tokenizer_fingerprint": tokenizer_fingerprint(tok)})
    pm = _nudged(build(model, tok, strategy="encoder", prompt_length=2, encoder_hidden=8, encoder_path=str(export)))
    _round_trip(pm, tok, InstanceWiseTemplate, str(tmp_path / "tpl"), str(export))


def test_encoder_ipt_frozen_table_still_needs_its_export(bert, tmp_path):
    """The frozen table is not in the weights: without its export the folder cannot be rebuilt (one line), and a
    folder saved before the record loads as before while its export is there."""
    model, tok = bert
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok)
    pm = _nudged(build(model, tok, strategy="encoder", prompt_length=2, pretrained_path=table, encoder_hidden=8))
    folder = tmp_path / "tpl"
    pm.template.save_pretrained(str(folder))
    assert json.loads((folder / "template_config.json").read_text())["saved_with"]["exports_in_weights"] == {}
    shutil.rmtree(export)
    with pytest.raises(FileNotFoundError, match=r"'.*tpl' cannot be rebuilt: pretrained table '.*embedding.safetensors' "
                                                r"not found; .*put the export back at that path") as e:
        InstanceWiseTemplate.from_pretrained(str(folder), model, tok)
    assert "\n" not in str(e.value)


def test_a_pretrained_ipt_folder_saved_before_the_record_loads_with_its_export(bert, tmp_path):
    model, tok = bert
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok)
    pm = _nudged(build(model, tok, strategy="pretrained", prompt_length=3, pretrained_path=table))
    batch = batch_for(pm, tok, examples(3))
    expected = pm(clone(batch))
    folder = tmp_path / "tpl"
    pm.template.save_pretrained(str(folder))
    config = json.loads((folder / "template_config.json").read_text())
    del config["saved_with"]["exports_in_weights"]  # as the previous version wrote it
    (folder / "template_config.json").write_text(json.dumps(config))
    pm.prompt_model.template = InstanceWiseTemplate.from_pretrained(str(folder), model, tok)
    assert torch.allclose(pm.eval()(clone(batch)), expected, atol=1e-6)
    shutil.rmtree(export)  # and without it: the line that says where to put it back
    with pytest.raises(FileNotFoundError, match=r"cannot be rebuilt: pretrained table .* put the export back"):
        InstanceWiseTemplate.from_pretrained(str(folder), model, tok)


def test_hf_pretrained_ipt_loads_without_its_export(bert, tmp_path):
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

    mlm, tok = bert
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok)
    config = InstancePromptConfig("ipt", strategy="pretrained", prompt_length=3, options={"pretrained_path": table})
    model = get_instance_prompt_model(classifier_from(mlm), config, tokenizer=tok).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.1)
    inputs = tok(["the movie was great", "bad"], padding=True, return_tensors="pt")
    expected = model(**inputs).logits
    model.save_pretrained(str(tmp_path / "p"))
    shutil.rmtree(export)
    loaded = InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), tok)
    assert torch.allclose(loaded(**inputs).logits, expected, atol=1e-6)


def test_hf_encoder_ipt_without_its_frozen_table_is_one_line(bert, tmp_path):
    """It was the export's own 'not found: run the pretraining first' (the prompt was trained: it needs that table)."""
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model

    mlm, tok = bert
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok)
    config = InstancePromptConfig("ipt", strategy="encoder", prompt_length=3,
                                  options={"pretrained_path": table, "encoder_hidden": 8})
    get_instance_prompt_model(classifier_from(mlm), config, tokenizer=tok).save_pretrained(str(tmp_path / "p"))
    shutil.rmtree(export)
    with pytest.raises(FileNotFoundError, match=r"'.*p' cannot be rebuilt: pretrained table '.*embedding.safetensors' "
                                                r"not found; .*put the export back at that path") as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path / "p"), tok)
    assert "run the pretraining first" not in str(e.value)


def test_a_pretrained_ipt_run_predicts_without_its_export(tmp_path):
    """A run folder copied to another machine without exports/: predict said the export was missing."""
    from conftest import _bert
    from test_predict_and_runs import tiny_cfg
    from test_training import write_cb

    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    torch.manual_seed(0)
    model, tok = _bert(str(tmp_path))
    tiny_model_dir = str(tmp_path / "bert")
    model.save_pretrained(tiny_model_dir)
    export = str(tmp_path / "exports" / "textcnn-tiny")
    table = _export(export, tok)
    data = write_cb(tmp_path / "CB")
    cfg = tiny_cfg(tiny_model_dir, data, epochs=1)
    cfg["instance_wise"].update(strategy="pretrained", pretrained_path=table)
    out = str(tmp_path / "run")
    run_experiment(cfg, output_dir=out, show_progress=False)
    rows = [json.loads(line) for line in open(os.path.join(data, "val.jsonl"))]
    expected = load_run(out).predict(rows)
    shutil.rmtree(export)
    assert load_run(out).predict(rows) == expected
