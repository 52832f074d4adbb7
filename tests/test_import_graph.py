"""Imports among raytpu's modules go one way: no cycles, lazy (function-level) imports
included, since a cycle hidden in a function is still a cycle (and once hid a missing table
behind ``except ImportError``). Imports under ``if TYPE_CHECKING:`` never run and are left
out."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"raytpu": ROOT / "infra", "raytpu.components": ROOT / "components",
            "raytpu.workloads": ROOT / "workloads"}


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.glob("*.py"):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The raytpu modules ``name`` imports (the most specific known module of each)."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_only(tree)
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            # `from pkg import module` imports the module; `from module import name` the module.
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names)
    edges = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            edges.add(target)
    return edges


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

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
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_among_raytpu_modules() -> None:
    edges = graph()
    assert len(edges) > 50 and sum(map(len, edges.values())) > 100
    assert cycles(edges) == []


def test_the_graph_sees_relative_lazy_and_package_imports() -> None:
    edges = graph()
    assert "raytpu.config" in edges["raytpu.program"]  # from .config import ...
    assert "raytpu.components" in edges["raytpu.program"]  # from raytpu.components import ...
    assert "raytpu.components.gcp_resources" in edges["raytpu.components.gke_cluster"]


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
