"""The folder tree is the architecture (issue 26): layers, no cycles, no flat modules.

An AST walk over skillvc/ builds the module import graph: every ``import`` and ``from ...
import`` anywhere in a module counts, at the top, inside a function (a deferred import is still
a dependency) and under ``if TYPE_CHECKING`` (an annotation that names a higher layer still
couples the two, and hiding an import there must not be a way around this test). Importing
``skillvc.a.b`` (or ``from skillvc.a import b``, b a module) counts as an edge to
``skillvc.a.b`` only, not to the package ``skillvc.a`` that Python runs first: the package's
``__init__`` is a module of the graph in its own right, with its own imports as its edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "skillvc"

# Bottom to top. A module may import its own layer and any layer below it, never one above.
# Packages on one line share a layer (they may import each other; the cycle check still holds).
LAYERS: list[tuple[str, ...]] = [
    ("secrets",),  # credential detection and scrubbing: imports nothing of skillvc
    ("core", "inputs", "terminal"),  # errors, hashing, paths, settings, prices, event log
    ("repo",),  # the skills repository under git
    ("skill", "packages"),  # SKILL.md documents, format rules, edits; skill packages
    ("models",),  # backends, the logged model client, batches, executors, agents, prompts
    ("tasks",),  # task sets and scorers
    ("workspace",),  # an opened repository (settings + log + repo + task sets); patches
    ("training",),  # the loop, its stages, the demo
    ("routing",),  # which skill loads for a prompt: trigger sets, the gate on descriptions
    ("review", "matrix", "judge", "views", "fsck"),  # reading runs back; matrix; judge; fsck
    ("sleep", "coldstart"),  # harvesting transcripts, nightly runs; drafting and reviewing tasks
    ("integrations",),  # git hooks, CI workflow files, Datasette
    ("cli",),  # the click group, error mapping and every command
    ("docs",),  # the CLI reference generated for mkdocs
]
TOP_LEVEL = {"__init__", "__main__"}  # the only modules directly in skillvc/


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                # ``from skillvc.a import b`` depends on the module skillvc.a.b when b is one
                # (as ``import skillvc.a.b`` does), else on skillvc.a, which defines b.
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base
                    for alias in node.names
                ]
            for name in names:
                if name == "skillvc" or not name.startswith("skillvc."):
                    continue
                target = resolve(name)
                if target and target not in (module, "skillvc"):
                    graph[module].add(target)
    return graph


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for index, packages in enumerate(LAYERS):
        if parts[1] in packages:
            return index
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def package_graph(graph: dict[str, set[str]], mods: dict[str, Path]) -> dict[str, set[str]]:
    """``graph`` with every module of a subpackage of a layer's package collapsed into that
    subpackage (``skillvc.models.backends.sim`` -> ``skillvc.models.backends``); modules that
    sit directly in the layer's package stay themselves. Two subpackages that import each other
    through different modules are then a cycle, though no module imports itself back."""
    packages = {m for m, path in mods.items() if path.name == "__init__.py"}

    def node(module: str) -> str:
        head = ".".join(module.split(".")[:3])
        return head if head in packages else module

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        mine = node(module)
        out.setdefault(mine, set()).update(node(t) for t in targets if node(t) != mine)
    for targets in list(out.values()):
        for target in targets:
            out.setdefault(target, set())
    return out


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(
                    f"{module} (layer {LAYERS[mine][0]}) imports {target} "
                    f"(higher layer {LAYERS[theirs][0]})"
                )
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(modules())


def test_every_subpackage_sits_in_a_layer_and_has_a_docstring() -> None:
    for path in sorted(ROOT.iterdir()):
        if path.is_file() and path.suffix == ".py":
            assert path.stem in TOP_LEVEL, (
                f"{path.name}: a top-level module; put it in a subpackage"
            )
        if path.is_dir() and (path / "__init__.py").exists():
            assert layer_of(f"skillvc.{path.name}") is not None, f"{path.name}/ is in no layer"
            doc = ast.get_docstring(ast.parse((path / "__init__.py").read_text("utf-8")))
            assert doc, f"{path.name}/__init__.py has no docstring"


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_no_import_cycles_between_subpackages(graph: dict[str, set[str]]) -> None:
    """One layer's subpackages stand in one direction (issue 43: models.backends picked a
    backend from models.agents, which imports models.backends)."""
    assert cycles(package_graph(graph, modules())) == []


def test_no_import_from_a_higher_layer(graph: dict[str, set[str]]) -> None:
    assert upward_edges(graph) == []


def test_the_check_sees_a_planted_upward_import_and_cycle(tmp_path: Path) -> None:
    """The checks can fail: a deferred upward import and a TYPE_CHECKING cycle are named."""
    (tmp_path / "core.py").write_text(
        "def f():\n    from skillvc.cli.commands import eval\n", encoding="utf-8"
    )
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import skillvc.skill.b\n",
        encoding="utf-8",
    )
    (tmp_path / "b.py").write_text("from skillvc.skill import a\n", encoding="utf-8")
    mods = {
        "skillvc.core.planted": tmp_path / "core.py",
        "skillvc.cli.commands.eval": tmp_path / "b.py",
        "skillvc.skill.a": tmp_path / "a.py",
        "skillvc.skill.b": tmp_path / "b.py",
    }
    graph = import_graph(mods)
    assert upward_edges(graph) == [
        "skillvc.core.planted (layer core) imports skillvc.cli.commands.eval (higher layer cli)"
    ]
    assert cycles(graph) == [["skillvc.skill.a", "skillvc.skill.b"]]


def test_the_check_sees_a_cycle_between_subpackages_with_no_module_cycle(tmp_path: Path) -> None:
    """backends.registry imports agents.runner, agents.runner imports backends.base: no module
    imports itself back, but the two subpackages depend on each other, and that is named."""
    files = {
        "skillvc.models.backends": "",
        "skillvc.models.backends.registry": "from skillvc.models.agents import runner\n",
        "skillvc.models.backends.base": "",
        "skillvc.models.agents": "",
        "skillvc.models.agents.runner": "from skillvc.models.backends.base import X\n",
        "skillvc.models.usage": "from skillvc.models.backends import base\n",
    }
    mods = {}
    for name, text in files.items():
        is_package = name.count(".") == 2 and name != "skillvc.models.usage"
        path = tmp_path / name.replace(".", "/") / "__init__.py" if is_package else None
        path = path or tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        mods[name] = path
    graph = import_graph(mods)
    assert cycles(graph) == []
    assert cycles(package_graph(graph, mods)) == [
        ["skillvc.models.agents", "skillvc.models.backends"]
    ]
