"""The smaller bad inputs of issue #43 item 8, each one line naming the file / key and the fix."""
import json
import logging
import os
import stat

import pytest
import torch

from test_predict_and_runs import load_script, tiny_model_dir, write_tiny_yaml  # noqa: F401  (fixture)
from test_training import write_cb


def test_resume_checks_a_finished_runs_weights_and_every_run_file_has_the_usual_mode(
        tiny_model_dir, tmp_path, capsys):  # noqa: F811
    run = load_script("run")
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out, seed_dir = str(tmp_path / "runs"), str(tmp_path / "runs" / "tiny" / "seed3")
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--set", "train.checkpoint_every=2"]) == 0
    modes = {}
    for folder, _, files in os.walk(seed_dir):
        for name in files:
            modes[os.path.relpath(os.path.join(folder, name), seed_dir)] = stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode)
    assert any(name.endswith("trainable.safetensors") for name in modes)
    assert set(modes.values()) == {modes["metrics.json"]}, modes  # best.safetensors was 0600
    best = os.path.join(seed_dir, "best.safetensors")
    open(best, "wb").close()  # emptied
    capsys.readouterr()
    assert run.main(["--config", config, "--output-dir", out, "--quiet", "--resume"]) == 2
    captured = capsys.readouterr()
    assert "kept" not in captured.out
    assert captured.err.strip() == (f"error: file '{best}' is damaged or truncated (SafetensorError: Error while deserializing "
                                    f"header: header too small): the finished run in '{seed_dir}' cannot be kept: rerun "
                                    "with --overwrite")


def test_the_hf_door_names_a_truncated_weights_file_and_a_config_that_is_not_an_object(bert, tmp_path):
    from test_hf_trainer import classifier_from

    from openprompt_ipt.hf import InstancePromptConfig, InstancePromptModel, get_instance_prompt_model
    from openprompt_ipt.serialization import DamagedFile

    mlm, tok = bert
    model = get_instance_prompt_model(classifier_from(mlm), InstancePromptConfig("ipt", prompt_length=2), tokenizer=tok)
    model.save_pretrained(str(tmp_path))
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:60])
    with pytest.raises(DamagedFile) as e:
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path), tokenizer=tok)
    assert str(e.value).startswith(f"file '{weights}' is damaged or truncated (SafetensorError: ") and "\n" not in str(e.value)
    weights.unlink()  # a folder of the first format: the config only in its JSON file
    (tmp_path / "instance_prompt_config.json").write_text(json.dumps([{"method": "ipt"}]))
    with pytest.raises(ValueError, match=r"instance_prompt_config.json' holds a list, not the JSON object save_pretrained "
                                         r"writes .*: save the model again"):
        InstancePromptModel.from_pretrained(classifier_from(mlm), str(tmp_path), tokenizer=tok)
    with pytest.raises(ValueError, match="InstancePromptConfig is built from a mapping of its keys .* got a list"):
        InstancePromptConfig.from_dict([{"method": "ipt"}])


def test_openprompt_cli_reads_a_null_keys_value_and_its_help_names_data_root(tmp_path, capsys):
    import openprompt_ipt.openprompt.cli as cli

    yaml_path = os.path.join(os.path.dirname(__file__), "..", "yamls", "openprompt", "cb_instance_wise.yaml")
    assert cli.main(["--help"]) == 0
    assert "--data-root DIR" in capsys.readouterr().out
    # a key null in the YAML (OpenPrompt gave it no type and raised a bare TypeError): read; the run then
    # stops at the empty data root, in one line
    code = cli.main(["--config_yaml", yaml_path, "--train.num_training_steps", "3", "--data-root", str(tmp_path),
                     "--logging.path_base", str(tmp_path / "logs")])
    captured = capsys.readouterr()
    assert "Update key train.num_training_steps, value None -> 3" in captured.out
    assert code == 2 and "TypeError" not in captured.err and captured.err.startswith("error: ")
    # a YAML that is not there: one line naming it, no traceback, nothing written
    assert cli.main(["--config_yaml", str(tmp_path / "nope.yaml"), "--logging.path_base", str(tmp_path / "logs2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --config_yaml ") and "nope.yaml: no such file" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "logs2").exists()


def test_the_missing_config_message_and_a_long_inner_error(tmp_path):
    from openprompt_ipt.runner.config import find_config

    with pytest.raises(FileNotFoundError) as e:
        find_config("missing.yaml", ["yamls"])
    assert "missing.yaml.yaml" not in str(e.value) and "yamls/missing.yaml" in str(e.value)
    # a long inner error (a zip reader's, a pickle's) is cut between words and says so
    from openprompt_ipt.serialization import _damaged

    inner = "PytorchStreamReader failed reading zip archive: failed finding central directory " * 3
    message = str(_damaged("ckpt/training_state.pt", RuntimeError(inner), "delete it"))
    reason = message.split("(RuntimeError: ", 1)[1].rsplit("): delete it", 1)[0]
    assert reason.endswith(" ...") and inner.startswith(reason[:-4] + " ") and len(reason) <= 124


def test_predict_does_not_warn_about_an_mlm_head_its_run_never_reads(tmp_path, caplog):
    from conftest import _bert
    from test_predict_and_runs import tiny_cfg

    from openprompt_ipt.runner import backbones
    from openprompt_ipt.runner.experiment import run_experiment
    from openprompt_ipt.runner.predict import load_run

    torch.manual_seed(0)
    mlm, _ = _bert(str(tmp_path))
    mlm.bert.save_pretrained(str(tmp_path / "bert"))  # an encoder checkpoint without its MLM head (like minilm)
    backbones._told_untrained_head.discard(str(tmp_path / "bert"))
    run = str(tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="openprompt_ipt"):
        run_experiment(tiny_cfg(str(tmp_path / "bert"), write_cb(tmp_path / "CB"), epochs=1), output_dir=run,
                       show_progress=False)
        load_run(run).predict([{"premise": "a cat sat", "hypothesis": "it sat"}])
    assert "MLM head is not in the checkpoint" not in caplog.text  # soft_verbalizer: a trained head
    with caplog.at_level(logging.WARNING, logger="openprompt_ipt"):
        backbones.load_backbone(str(tmp_path / "bert"))  # a caller that may read the vocabulary logits is told
    assert "MLM head is not in the checkpoint" in caplog.text


@pytest.mark.parametrize("device, line", [
    ("gpu", "train.device = 'gpu' is not a device: give auto, cpu, cuda or cuda:N"),
    ("cuda", "train.device = 'cuda' but this machine has no CUDA GPU (torch.cuda.is_available() is False): "
             "use cpu, or auto (a GPU when there is one)"),
])
def test_a_device_torch_does_not_know_or_this_machine_lacks_is_one_line(tiny_model_dir, tmp_path, capsys,
                                                                          monkeypatch, device, line):  # noqa: F811
    """train.device: gpu was a RuntimeError traceback, cuda on a CPU-only machine an AssertionError one."""
    from test_predict_run_dirs import touch_run

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    out = tmp_path / "runs"
    capsys.readouterr()
    assert load_script("run").main(["--config", config, "--output-dir", str(out), "--quiet",
                                    "--set", f"train.device={device}"]) == 2
    assert capsys.readouterr().err == f"error: {line}\n"
    assert not (out / "tiny" / "seed3").exists()
    touch_run(str(tmp_path / "done"))  # predict --device: the same line, before the run loads
    (tmp_path / "rows.jsonl").write_text(json.dumps({"premise": "a cat", "hypothesis": "a dog"}) + "\n")
    assert load_script("predict").main(["--run", str(tmp_path / "done"), "--input", str(tmp_path / "rows.jsonl"),
                                        "--device", device]) == 2
    assert capsys.readouterr().err == f"error: {line.replace('train.device', '--device')}\n"


def test_a_template_without_text_names_the_key_and_writes_no_run(tiny_model_dir, tmp_path, capsys):  # noqa: F811
    """OpenPrompt's own line ('template text has not been initialized') named neither the key nor the section."""
    import yaml

    run = load_script("run")
    config = write_tiny_yaml(tmp_path, tiny_model_dir, write_cb(tmp_path / "CB"))
    raw = yaml.safe_load(open(config))
    del raw[raw["template"]]["text"]
    with open(config, "w") as f:
        yaml.safe_dump(raw, f)
    out = tmp_path / "runs"
    assert run.main(["--config", config, "--output-dir", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {raw['template']}.text is not set: give the template's text in the "
                          f"{raw['template']}: section") and len(err.splitlines()) == 1
    assert not os.path.exists(out / "tiny" / "seed3" / "metrics.json")
