"""experiments/run_tables.py: the smoke overrides every table YAML gets load, and name nothing roberta-large only."""
from __future__ import annotations

import glob
import importlib.util
import os

import pytest

from openprompt_ipt.runner.config import load_config

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
spec = importlib.util.spec_from_file_location("run_tables", os.path.join(ROOT, "experiments", "run_tables.py"))
run_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_tables)
YAMLS = sorted(p for t in run_tables.TABLES for p in glob.glob(os.path.join(ROOT, "yamls", t, "*.yaml")))


def test_every_table_yaml_is_found():
    assert len(YAMLS) == 179  # 143 + IDPG Table 1's four GLUE pair tasks x 9 rows (#30)


@pytest.mark.parametrize("path", YAMLS, ids=[os.path.relpath(p, ROOT) for p in YAMLS])
def test_smoke_overrides_load(path):
    cfg = load_config(path, run_tables.overrides(path))
    assert cfg["plm"]["model_path"] == "minilm" and cfg["train"]["epochs"] == 1
    assert cfg["dataset"]["max_train"] == 16
    assert all(len(v) == 1 for v in cfg["sweep"].values())
    assert all(isinstance(v[0], (int, float)) for v in cfg["sweep"].values())  # 1e-05 is a float
    text = repr(cfg)
    assert "roberta-large" not in text and "glove.6B.300d" not in text
    if cfg["protocol"]["name"] == "few_shot":
        assert cfg["protocol"]["k"] == 8 and cfg["protocol"]["cv_folds"] == 2


def test_first_error_line(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("loading\nerror: train.adam_eps must be a positive number\n")
    assert run_tables.first_error(str(log), 2, 60) == "train.adam_eps must be a positive number"
    log.write_text('Traceback (most recent call last):\n  File "x", line 1\n    boom()\nTypeError: bad\n')
    assert run_tables.first_error(str(log), 1, 60) == "TypeError: bad"
    assert run_tables.first_error(str(log), 124, 60) == "timeout after 60s"
