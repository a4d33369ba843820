"""The package tree: runner modules live in ``openprompt_ipt.runner``; the old paths still import."""
import ast
import importlib
import pathlib
import sys
import warnings

import pytest

import openprompt_ipt
from openprompt_ipt._moved import MOVED

PACKAGE = pathlib.Path(openprompt_ipt.__file__).parent


@pytest.mark.parametrize("name", MOVED)
def test_old_runner_import_path_is_the_new_module_and_warns(name):
    new = importlib.import_module(f"openprompt_ipt.runner.{name}")
    sys.modules.pop(f"openprompt_ipt.{name}", None)  # import through the alias finder, not the cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module(f"openprompt_ipt.{name}")
    assert old is new
    assert any(f"openprompt_ipt.runner.{name}" in str(w.message) for w in caught)
    assert not (PACKAGE / f"{name}.py").exists() and not (PACKAGE / name).is_dir()


def test_research_code_does_not_import_the_runner():
    """templates / generators / injection say what a prompt is; they must not reach into the runner."""
    for folder in ("templates", "generators", "injection"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    module = "." * node.level + (node.module or "")
                    assert "runner" not in module and module.lstrip(".").split(".")[0] not in MOVED, (path, module)
