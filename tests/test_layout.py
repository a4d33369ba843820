"""The package tree: runner modules live in ``openprompt_ipt.runner`` only (the never-released old paths are gone)."""
import ast
import importlib
import pathlib
import sys

import pytest

import openprompt_ipt

PACKAGE = pathlib.Path(openprompt_ipt.__file__).parent
# runner modules that once lived at the package root (openprompt_ipt.config, ...)
MOVED = ("config", "experiment", "runs", "sweep", "aggregate", "plotting", "plm", "predict")


@pytest.mark.parametrize("name", MOVED)
def test_runner_modules_live_only_in_the_runner(name):
    importlib.import_module(f"openprompt_ipt.runner.{name}")
    sys.modules.pop(f"openprompt_ipt.{name}", None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"openprompt_ipt.{name}")
    assert not (PACKAGE / f"{name}.py").exists() and not (PACKAGE / name).is_dir()


def test_research_code_does_not_import_the_runner():
    """templates / generators / injection say what a prompt is; they must not reach into the runner."""
    for folder in ("openprompt/templates", "generators", "injection"):
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    module = "." * node.level + (node.module or "")
                    assert "runner" not in module and module.lstrip(".").split(".")[0] not in MOVED, (path, module)


def _imports(path):
    """(module the file is in, resolved ``openprompt_ipt...`` modules it imports, at any depth of the file)."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            if node.module:
                out.add(".".join(base + [node.module]))
            else:  # `from .. import compat`: the names are modules
                out.update(".".join(base + [a.name]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("openprompt_ipt."):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("openprompt_ipt."))
    return ".".join(rel.parts), out


def _part(module, depth):
    parts = module.split(".")
    return ".".join(parts[: depth + 1]) if len(parts) > depth else None


@pytest.mark.parametrize("scope", ["package", "data"])
def test_no_import_circles(scope):
    """Imports point one way: no two parts of the package (first-level folders; the modules of data/) import each other."""
    prefix, depth = ("openprompt_ipt", 1) if scope == "package" else ("openprompt_ipt.data", 2)
    edges = {}
    for path in PACKAGE.rglob("*.py"):
        module, imported = _imports(path)
        a = _part(module, depth)
        if not module.startswith(prefix + ".") or a is None or a.endswith("__init__") or a == module.rsplit(".", 1)[0] + ".__init__":
            continue
        for target in imported:
            b = _part(target, depth)
            if b and b != a and b.startswith(prefix + ".") and not b.endswith("__init__") and b != prefix:
                edges.setdefault(a, set()).add(b)
    circles = sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges.get(b, set()))
    assert not circles, circles


def test_the_two_doors_share_the_prompt_code_and_not_each_other():
    """generators / injection / prompting are host-free; the templates and the 🤗 door both build on prompting and
    never import each other (nor OpenPrompt, for the 🤗 door)."""
    for folder, banned in (("generators", ("openprompt", "hf", "prompting", "runner")),
                           ("injection", ("openprompt", "hf", "prompting", "runner", "generators")),
                           ("prompting", ("openprompt", "hf", "runner")),
                           ("hf", ("openprompt",)),
                           ("openprompt", ("hf",))):
        for path in (PACKAGE / folder).rglob("*.py"):
            _, imported = _imports(path)
            for module in imported:
                assert module.split(".")[1] not in banned, (path, module)
            for node in ast.walk(ast.parse(path.read_text())):
                if folder in ("hf", "prompting", "generators", "injection") and (
                        isinstance(node, ast.Import) or isinstance(node, ast.ImportFrom) and not node.level):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    assert not any(n.split(".")[0] == "openprompt" for n in names), (path, names)


def test_each_door_is_one_folder():
    """The package root holds only the shared leaves; each host's code is one folder (openprompt/, hf/), and the
    small helpers live in the layer they serve (issue #44)."""
    root_modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert root_modules == {"__init__", "__main__", "serialization", "shapes", "config_files", "progress"}, root_modules
    door = PACKAGE / "openprompt"
    for part in ("templates", "verbalizers", "registry.py", "hook.py", "compat.py", "cli.py", "param_groups.py"):
        assert (door / part).exists(), part
    import openprompt_ipt.openprompt.templates as templates

    assert templates.InstanceWiseTemplate is openprompt_ipt.InstanceWiseTemplate


def test_data_is_prepared_in_one_call_in_data():
    """The splits, caps and protocols live in data/ (issue #44); the runner asks data/prepare.py once."""
    from openprompt_ipt.data import prepare

    assert not (PACKAGE / "runner" / "protocols").exists()
    for name in ("load_task", "stratified_split", "held_out_split", "cap_examples", "random_split"):
        assert not hasattr(importlib.import_module("openprompt_ipt.runner.experiment"), name), name
    source = (PACKAGE / "runner" / "experiment.py").read_text() + (PACKAGE / "runner" / "runs.py").read_text()
    assert source.count("prepare_splits(") == 2 and callable(prepare.prepare_splits)
