"""The package's imports point one way (docs/layout.md): what a prompt is (generators, injection,
prompting) <- where it enters a host (one folder per door: openprompt/, hf/) <- how it is
run (data, training, runner, pretraining, analysis, commands), with no circle between any two modules.

Read from the source with ``ast``, function-level imports included: a lazy import still ties two
modules together, it only hides the circle until the call.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "openprompt_ipt"
ROOT = PACKAGE.name

# first component under openprompt_ipt (or a dotted path, which wins) -> layer; each door is one folder
PROMPT = {"generators", "injection", "prompting"}
HOST = {"openprompt", "hf"}
RUN = {"data", "training", "runner", "pretraining", "analysis", "commands", "__main__",
       "openprompt.cli"}  # OpenPrompt's own command line lives with its door but runs experiments
LEAVES = {"serialization", "shapes", "config_files", "progress"}
MAY_IMPORT = {"prompt": ("prompt", "leaf"), "host": ("prompt", "host", "leaf"), "run": ("prompt", "host", "run", "leaf"),
              "leaf": ("leaf",)}


def allowed_layers(own: str):
    return MAY_IMPORT[own]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known) -> set:
    """The package's modules that ``name`` imports anywhere in its body (``from . import x`` -> the
    submodule ``x`` when there is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in known else stem for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def graph() -> dict:
    modules = all_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer(name: str):
    parts = name.split(".")
    if len(parts) == 1:
        return None  # the package's __init__ gathers every layer for the user
    return layer_of_part(parts[1:])


def layer_of_part(parts) -> str:
    """The layer of a module path below openprompt_ipt (its parts), the longest listed prefix first."""
    for depth in range(len(parts), 0, -1):
        key = ".".join(parts[:depth])
        for label, members in (("prompt", PROMPT), ("host", HOST), ("run", RUN), ("leaf", LEAVES)):
            if key in members:
                return label
    raise AssertionError(f"openprompt_ipt.{'.'.join(parts)}: place '{parts[0]}' in one of the layers of tests/test_import_layers.py")


def cycles(edges: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_reader_sees_lazy_and_relative_imports():
    edges = graph()
    # function-level: the peer builder starts from the runner's build_model
    assert "openprompt_ipt.runner.build" in edges["openprompt_ipt.runner.peers"]
    # `from . import compat, registry` names the submodules, not the package
    assert {"openprompt_ipt.openprompt.compat", "openprompt_ipt.openprompt.registry"} <= edges["openprompt_ipt.openprompt.hook"]


def test_no_module_imports_itself_back():
    found = cycles(graph())
    assert found == [], f"import circles: {found}"


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_point_down_the_layers():
    wrong = []
    for name, targets in graph().items():
        own = layer(name)
        if own is not None:
            wrong += [f"{name} ({own}) imports {t}" for t in sorted(targets)
                      if len(t.split(".")) > 1 and layer_of_part(t.split(".")[1:]) not in allowed_layers(own)]
    assert wrong == [], "imports against the layers:\n" + "\n".join(wrong)


def test_the_layer_check_catches_a_generator_importing_the_runner(monkeypatch):
    edges = graph()
    edges["openprompt_ipt.generators.idpg"] = edges["openprompt_ipt.generators.idpg"] | {"openprompt_ipt.runner.config"}
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: edges)
    with pytest.raises(AssertionError, match="generators.idpg \\(prompt\\) imports openprompt_ipt.runner.config"):
        test_imports_point_down_the_layers()
