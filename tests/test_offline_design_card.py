"""The design card's command offline (#29): ``python experiments/run.py --config cb_prefix_ipt.yaml``
with ``--data-root`` holding ``superglue/CB`` finds that copy although the YAML names the hub dataset
``super_glue``, trains at the authors' rates, and says in one line what to set when the data or the
backbone cannot be had. No test here touches the network: HF_HUB_OFFLINE=1."""
import json
import os

import pytest

from openprompt_ipt.data import sources
from openprompt_ipt.data.tasks import TASKS
from test_predict_and_runs import load_script, tiny_model_dir  # noqa: F401  (fixture)
from test_tasks import write_task


@pytest.fixture
def no_network(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("IPT_ASSETS", raising=False)


def run_card(tmp_path, *extra):
    run = load_script("run")
    return run.main(["--config", "cb_prefix_ipt.yaml", "--output-dir", str(tmp_path / "runs"), "--quiet",
                     "--set", "plm.max_seq_length=64", *extra])


def test_design_card_command_trains_offline_from_the_data_root_at_the_authors_rates(tiny_model_dir, tmp_path,
                                                                                      no_network, capsys):
    write_task(tmp_path / "assets", "cb")
    assert run_card(tmp_path, "--data-root", str(tmp_path / "assets"), "--set", f"plm.model_path={tiny_model_dir}",
                    "--set", "train.epochs=1") == 0
    printed = capsys.readouterr().out
    assert f"data: cb from {tmp_path / 'assets' / 'superglue' / 'CB'}" in printed and "the hub is offline" in printed
    cfg = json.load(open(tmp_path / "runs" / "cb_prefix_ipt" / "seed42" / "config.json"))
    assert cfg["dataset"]["path"] == "super_glue"  # the YAML unchanged: the offline copy was found for it
    assert (cfg["train"]["lr_prompt"], cfg["train"]["warmup_steps"], cfg["train"]["warmup_ratio"]) == (0.03, 0, 0.06)


@pytest.mark.parametrize("missing", ["data", "backbone"])
def test_design_card_command_offline_without_data_or_backbone_fails_in_one_line(tiny_model_dir, tmp_path,
                                                                                no_network, capsys, missing):
    (tmp_path / "assets").mkdir()
    if missing == "backbone":
        write_task(tmp_path / "assets", "cb")
    # a hub name that no cache holds (roberta-large itself may be cached on some machine)
    model = "no-such-backbone-29" if missing == "backbone" else tiny_model_dir
    assert run_card(tmp_path, "--data-root", str(tmp_path / "assets"), "--set", f"plm.model_path={model}") == 2
    printed = capsys.readouterr().err.strip()
    errors = [line for line in printed.splitlines() if "error" in line.lower() or "Traceback" in line]
    assert len(errors) == 1 and errors[0].startswith("error: ")  # (the lines before are datasets' progress bars)
    err = errors[0]
    if missing == "data":
        assert "dataset.path 'super_glue' is a 🤗 hub name and the hub is unreachable" in err
        assert "--data-root" in err and "superglue/CB" in err
    else:
        assert "backbone 'no-such-backbone-29'" in err and "--set plm.model_path=minilm" in err
        assert "local checkpoint folder" in err


def test_a_hub_name_offline_uses_only_the_same_task_copy(tmp_path, no_network):
    write_task(tmp_path, "cb")
    cb = TASKS["cb"]
    src = sources.locate(cb, {"path": "hub"}, str(tmp_path))
    assert (src.kind, src.path) == ("data root", str(tmp_path / "superglue" / "CB"))
    with pytest.raises(FileNotFoundError, match="'glue' is a 🤗 hub name"):  # another hub dataset: not CB's copy
        sources.locate(cb, {"path": "glue"}, str(tmp_path))
