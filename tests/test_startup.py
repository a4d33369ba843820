"""The first minute (issue #32): argument and config errors answer without importing OpenPrompt, datasets
or transformers, while ``import openprompt_ipt`` still makes OpenPrompt find our templates by name.
Each check runs in a fresh interpreter and reads its ``sys.modules`` (a timing lives in
benchmarks/startup.py, never in a test)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAVY = ("openprompt", "datasets", "transformers")

# runs a script as `python <script> <args>` would, then prints which heavy packages it imported
SCRIPT = """
import json, runpy, sys
sys.argv = {argv!r}
code = None
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    code = e.code
print(json.dumps({{"code": code, "loaded": sorted(m for m in {heavy!r} if m in sys.modules)}}))
"""


def run_python(code, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def script_result(argv, cwd):
    out = run_python(SCRIPT.format(argv=argv, heavy=HEAVY), cwd)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.mark.parametrize("script,args", [
    ("run", ["--help"]),
    ("run", ["--config", "missing.yaml"]),
    ("predict", ["--help"]),
    ("predict", ["--run", "runs/none", "--input", "rows.jsonl"]),
    ("run", ["--config", os.path.join(ROOT, "yamls", "cb_random_ipt.yaml"), "--set", "train.epoch=3"]),
    ("run", ["--config", os.path.join(ROOT, "yamls", "cb_random_ipt.yaml"), "--set", "train.adam_eps=-1"]),
    ("run", ["--config", os.path.join(ROOT, "yamls", "cb_random_ipt.yaml"), "--set", "protocol.name=x"]),
])
def test_help_a_wrong_path_and_a_bad_value_import_nothing_heavy(tmp_path, script, args):
    result, err = script_result([os.path.join(ROOT, "experiments", f"{script}.py"), *args], str(tmp_path))
    assert result["loaded"] == []
    if args[0] == "--help":
        assert result["code"] == 0
    else:
        assert result["code"] == 2 and err.strip().startswith("error: ") and len(err.strip().splitlines()) == 1


def test_importing_the_package_is_light_and_registration_follows_openprompt(tmp_path):
    code = f"""
import json, sys
import openprompt_ipt
light = sorted(m for m in {HEAVY!r} if m in sys.modules)
from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS
from openprompt.config import get_default_config
from openprompt.data_utils import InputFeatures
print(json.dumps({{"light": light, "templates": sorted(k for k in ("instance_wise", "generated_prefix") if k in TEMPLATE_CLASS),
                  "cls_head": "cls_head" in VERBALIZER_CLASS, "section": "instance_wise" in get_default_config(),
                  "keys": "instance_token_ids" in InputFeatures.all_keys,
                  "lazy": openprompt_ipt.InstanceWiseTemplate is TEMPLATE_CLASS["instance_wise"],
                  "dir": "ClsHeadVerbalizer" in dir(openprompt_ipt)}}))
"""
    got = json.loads(run_python(code, str(tmp_path)).stdout.strip().splitlines()[-1])
    assert got == {"light": [], "templates": ["generated_prefix", "instance_wise"], "cls_head": True, "section": True,
                   "keys": True, "lazy": True, "dir": True}


@pytest.mark.parametrize("first", ["openprompt_ipt.openprompt.templates", "openprompt_ipt.openprompt.verbalizers"])
def test_registration_when_our_package_imports_openprompt_first(tmp_path, first):
    """The package being imported is what imports OpenPrompt: it is registered once it has finished."""
    code = f"""
import importlib, json
importlib.import_module({first!r})
from openprompt.prompts import TEMPLATE_CLASS, VERBALIZER_CLASS, load_template
print(json.dumps(["instance_wise" in TEMPLATE_CLASS, "generated_prefix" in TEMPLATE_CLASS, "cls_head" in VERBALIZER_CLASS]))
"""
    assert json.loads(run_python(code, str(tmp_path)).stdout.strip().splitlines()[-1]) == [True, True, True]


def test_an_unknown_name_is_an_attribute_error():
    import openprompt_ipt

    with pytest.raises(AttributeError, match="has no attribute 'NoSuchTemplate'"):
        openprompt_ipt.NoSuchTemplate  # noqa: B018
    assert openprompt_ipt.GeneratedPrefixTemplate.__name__ == "GeneratedPrefixTemplate"


# stops the command at its first line on stdout, printing that line and the heavy packages imported by then
FIRST_LINE = """
import json, os, runpy, sys


class FirstLine:
    def write(self, text):
        if text.strip():
            loaded = sorted(m for m in {heavy!r} if m in sys.modules)
            sys.__stdout__.write(json.dumps({{"line": text.strip(), "loaded": loaded}}) + "\\n")
            sys.__stdout__.flush()
            os._exit(0)
        return len(text)

    def flush(self):
        pass


sys.argv = {argv!r}
sys.stdout = FirstLine()
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_valid_config_says_what_it_runs_before_the_heavy_imports(tmp_path):
    """A valid config was 5-7 s of silence before its data line: checking it imports OpenPrompt and torch (its
    template's arguments, the optimizer settings), and the run more."""
    config = os.path.join(ROOT, "yamls", "cb_random_ipt.yaml")
    argv = [os.path.join(ROOT, "experiments", "run.py"), "--config", config, "--seeds", "1,2",
            "--output-dir", str(tmp_path / "runs")]
    out = run_python(FIRST_LINE.format(heavy=HEAVY, argv=argv), str(tmp_path))
    first = json.loads(out.stdout.strip().splitlines()[-1])
    assert first["loaded"] == []
    assert first["line"] == "run: cb_random_ipt (seeds 1, 2): checking the config, then loading torch, transformers and OpenPrompt"
    assert not (tmp_path / "runs").exists()
