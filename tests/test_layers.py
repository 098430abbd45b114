"""The package's layers, enforced on the import graph (function-level imports included).

Each unit (a package or a top-level module of ``tpcore``) sits in one layer and imports only
from layers before it; inside a layer, units import each other without a cycle; modules of one
package import each other without a cycle; and imports inside functions are kept for the optional
or heavy packages that must load when first used. One edge is sanctioned (:data:`LAZY_API`):
``tpcore/__init__.py`` imports the interface module ``tpcore.api`` inside its module
``__getattr__``, so that ``tpcore.learn`` works while ``import tpcore`` stays light.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.host_only("reads the package's source files")

ROOT = Path(__file__).resolve().parents[1]

LAYERS = {
    "tpcore": 0, "tpcore.backend": 0, "tpcore.cpu": 0, "tpcore.dispatch": 0, "tpcore.errors": 0,
    "tpcore.io": 0, "tpcore.limits": 0, "tpcore.seeds": 0, "tpcore.kernels": 0,
    "tpcore.counter_rng": 0,
    "tpcore.nn": 1,
    "tpcore.models": 2, "tpcore.programs": 2, "tpcore.subleq": 2, "tpcore.fleq": 2,
    "tpcore.looped": 2, "tpcore.bp": 2, "tpcore.tasks": 2, "tpcore.analysis": 2,
    "tpcore.counts": 2, "tpcore.metrics": 2, "tpcore.baselines": 2, "tpcore.bp_attention": 2,
    "tpcore.trees": 2,
    "tpcore.train": 3, "tpcore.graphs": 3, "tpcore.train_state": 3, "tpcore.rundir": 3,
    "tpcore.rasp": 3,
    "tpcore.pipelines": 4,
    "tpcore.experiments": 5,
    "tpcore.commands": 6, "tpcore.cli": 6, "tpcore.__main__": 6, "tpcore.api": 6,
}
"""Layer of each unit: 0 base, 1 nn, 2 domain, 3 train, 4 pipelines, 5 experiments,
6 interface (``../shared/ARCHITECTURE.md``)."""

LAZY = ("numba", "cupy", "scipy", "matplotlib", "tqdm", "torch", "transformer_lens", "dask",
        "distributed", "tpcore.kernels")
"""Packages imported inside functions, so that ``import tpcore`` stays light."""

LAZY_API = ("tpcore", "tpcore.api")
"""The one import of a higher layer: inside ``tpcore.__getattr__`` (tpcore/__init__.py)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "kernels":
        parts[0:1] = ["tpcore", "kernels"]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str | None:
    units = [u for u in LAYERS if module == u or module.startswith(u + ".")]
    return max(units, key=len) if units else None


@lru_cache(maxsize=1)
def sources() -> dict[str, ast.Module]:
    files = [*(ROOT / "tpcore").rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]
    return {module_name(p): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in files}


def imports(tree: ast.Module, modules: set[str]) -> list[tuple[str, bool, int]]:
    """``(imported tpcore module, inside a function, line)`` for every import in ``tree``;
    ``from a import b`` counts as ``a.b`` when that is a module."""
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef,
                                                                   ast.AsyncFunctionDef))
                   for n in ast.walk(f)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                     else node.module for a in node.names]
        else:
            continue
        out += [(n, id(node) in in_function, node.lineno) for n in names]
    return out


def lazy_api_imports(trees: dict[str, ast.Module]) -> list[tuple[str, bool, str | None]]:
    """``(module, inside a function, name of that function)`` of every import of ``tpcore.api``
    written ``from tpcore import api``."""
    found = []
    for name, tree in trees.items():
        functions = {id(n): f.name for f in ast.walk(tree)
                     if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for n in ast.walk(f)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.ImportFrom) and node.module == "tpcore"
                    and any(a.name == "api" for a in node.names)):
                found.append((name, id(node) in functions, functions.get(id(node))))
    return found


@lru_cache(maxsize=1)
def graph() -> tuple[dict[str, set[str]], list[str]]:
    """Import edges between tpcore modules (the sanctioned :data:`LAZY_API` edge left out), and
    function-level imports that are not of a lazy package."""
    trees = sources()
    modules = set(trees)
    edges: dict[str, set[str]] = defaultdict(set)
    eager_in_functions = []
    lazy = lazy_api_imports(trees) == [("tpcore", True, "__getattr__")]
    for name, tree in trees.items():
        for target, in_function, line in imports(tree, modules):
            if lazy and (name, target) == LAZY_API:
                continue
            if in_function and not target.startswith(LAZY):
                eager_in_functions.append(f"{name}:{line} imports {target}")
            if target.startswith("tpcore") and target != name:
                edges[name].add(target)
    return edges, eager_in_functions


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The non-trivial strongly connected components of ``edges`` (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
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
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    assert [m for m in sources() if unit_of(m) is None] == []


def test_no_upward_imports():
    edges, _ = graph()
    upward = [f"{a} -> {b}" for a, targets in edges.items() for b in targets
              if unit_of(b) is not None and LAYERS[unit_of(b)] > LAYERS[unit_of(a)]]
    assert upward == []


def test_no_cycles_between_units_of_a_layer():
    edges, _ = graph()
    units: dict[str, set[str]] = defaultdict(set)
    for a, targets in edges.items():
        for b in targets:
            ua, ub = unit_of(a), unit_of(b)
            if ua != ub and ub is not None and LAYERS[ua] == LAYERS[ub] and ub != "tpcore":
                units[ua].add(ub)
    assert cycles(units) == []


def test_no_cycles_between_modules():
    edges, _ = graph()
    assert cycles(edges) == []


def test_imports_inside_functions_are_only_the_lazy_packages():
    _, eager = graph()
    assert eager == []


def test_the_one_lazy_api_import_is_tpcore_getattr():
    """``tpcore.api`` is imported in exactly one place: ``tpcore.__getattr__``."""
    assert lazy_api_imports(sources()) == [("tpcore", True, "__getattr__")]
