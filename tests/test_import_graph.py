"""Imports among raytpu's modules go one way: no cycles, lazy (function-level) and
type-level (``if TYPE_CHECKING:``) imports included, since a cycle hidden in a function or a
type annotation is still a tangle a reader must hold in their head (and a lazy one once hid a
missing table behind ``except ImportError``). Between the role packages the graph is a
strict order: facts at the bottom, the CLI at the top (README, "Architecture")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"raytpu": ROOT / "infra", "raytpu.components": ROOT / "components",
            "raytpu.workloads": ROOT / "workloads"}

# Each role package and the packages it may import (besides itself). Nothing imports up:
# facts -> spec -> config -> components/program -> plan/operations -> cli, the trainer
# (workloads) on facts and spec alone; only the CLI runs the trainer (train/run --local).
_BELOW_PROGRAM = {"raytpu.facts", "raytpu.spec", "raytpu.config", "raytpu.components"}
ALLOWED: dict[str, set[str]] = {
    "raytpu.facts": set(),
    "raytpu.spec": {"raytpu.facts"},
    "raytpu.config": {"raytpu.facts", "raytpu.spec"},
    "raytpu.components": {"raytpu.facts", "raytpu.spec"},
    "raytpu.workloads": {"raytpu.facts", "raytpu.spec"},
    "raytpu.policy": {"raytpu.facts", "raytpu.spec"},
    "raytpu.program": _BELOW_PROGRAM,
    "raytpu.plan": _BELOW_PROGRAM | {"raytpu.program", "raytpu.policy"},
    "raytpu.operations": _BELOW_PROGRAM | {"raytpu.program", "raytpu.policy", "raytpu.plan"},
    "raytpu.rehearse": _BELOW_PROGRAM | {"raytpu.program", "raytpu.policy", "raytpu.plan",
                                         "raytpu.operations"},
    "raytpu.cli": _BELOW_PROGRAM | {"raytpu.program", "raytpu.policy", "raytpu.plan",
                                    "raytpu.operations", "raytpu.rehearse", "raytpu.workloads"},
    "raytpu": {"raytpu.cli"},  # raytpu/__init__ (nothing) and __main__ (the CLI)
}

# What the lower layers must never load at import time: a stack's configuration is parsed,
# and a job's options read, without the provider SDKs or the trainer's frameworks.
HEAVY = ("pulumi", "pulumi_gcp", "pulumi_kubernetes", "pulumi_docker_build", "pulumi_policy",
         "torch", "torch_xla", "ray", "jax", "kubernetes")
LIGHT_ROLES = ("raytpu.facts", "raytpu.spec", "raytpu.config")


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def role(module: str) -> str:
    """The role package a module belongs to (``raytpu.plan.diff`` -> ``raytpu.plan``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[1] != "__main__" else "raytpu"


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The raytpu modules ``name`` imports: the most specific known module of each import, and
    the packages whose ``__init__`` that import runs or reads.

    ``import a.b.c`` (or ``from a.b.c import x``) runs ``a/__init__`` and ``a/b/__init__``
    first, so it is an edge to those packages too, except to the importer's own packages:
    Python imported them before the importer's first line, so this import never runs them.
    ``from a.b import x`` reads package ``a.b``'s namespace (half built while ``a/b/__init__``
    is still importing the importer), so it is an edge to ``a.b`` even from inside it, and
    to the module ``a.b.x`` where ``x`` is one."""
    tree = ast.parse(path.read_text())
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    parts = name.split(".")
    own_packages = {".".join(parts[:i]) for i in range(1, len(parts))}
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            targets.add(base)
            targets.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)
    edges = set()
    for target in targets:
        dotted = target.split(".")
        edges.update(p for p in (".".join(dotted[:i]) for i in range(1, len(dotted)))
                     if p in known and p not in own_packages)
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            edges.add(target)
    edges.discard(name)
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


def test_role_packages_import_only_downwards() -> None:
    edges = graph()
    assert set(map(role, edges)) == set(ALLOWED)  # every module is in a known role
    upward = sorted(f"{m} -> {t}" for m, targets in edges.items() for t in targets
                    if role(t) != role(m) and role(t) not in ALLOWED[role(m)])
    assert upward == []


def test_the_package_order_has_no_circle() -> None:
    assert cycles({p: set(allowed) for p, allowed in ALLOWED.items()}) == []


def test_type_level_imports_count() -> None:
    """A circle through ``if TYPE_CHECKING:`` is found too."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from raytpu.b import X\n"
    tree_path = ROOT / "build" / "graph-probe" / "a.py"
    tree_path.parent.mkdir(parents=True, exist_ok=True)
    tree_path.write_text(source)
    assert imports_of("raytpu.a", tree_path, {"raytpu.a", "raytpu.b"}) == {"raytpu.b"}


def test_the_graph_sees_relative_lazy_and_package_imports() -> None:
    edges = graph()
    assert "raytpu.config.stack" in edges["raytpu.program.stack"]
    assert "raytpu.components" in edges["raytpu.program.stack"]  # from raytpu.components import ...
    assert "raytpu.components.gcp_resources" in edges["raytpu.components.gke_cluster"]
    # `python -m raytpu` imports raytpu.cli.app, which runs raytpu/cli/__init__ first.
    assert {"raytpu.cli", "raytpu.cli.app"} <= edges["raytpu.__main__"]


def probe(name: str, source: str) -> Path:
    path = ROOT / "build" / "graph-probe" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def test_imports_count_the_packages_whose_init_they_run() -> None:
    known = {"raytpu", "raytpu.p", "raytpu.p.m", "raytpu.p.n", "raytpu.q"}
    # From outside: importing raytpu.p.m runs raytpu/p/__init__ first.
    assert imports_of("raytpu.q", probe("q", "import raytpu.p.m\n"), known) == {
        "raytpu.p", "raytpu.p.m"}
    assert imports_of("raytpu.q", probe("q", "from raytpu.p.m import x\n"), known) == {
        "raytpu.p", "raytpu.p.m"}
    # From inside: raytpu.p is imported before raytpu.p.n runs, so a sibling is no edge to it...
    assert imports_of("raytpu.p.n", probe("n", "from raytpu.p.m import x\n"), known) == {
        "raytpu.p.m"}
    # ...but reading the package's namespace is, submodule or not, absolute or relative.
    for source in ("from raytpu.p import m\n", "from . import m\n"):
        assert imports_of("raytpu.p.n", probe("n", source), known) == {"raytpu.p", "raytpu.p.m"}
    assert imports_of("raytpu.p.n", probe("n", "from raytpu.p import f\n"), known) == {
        "raytpu.p"}


def test_a_circle_through_a_package_init_is_found() -> None:
    """The shape the CLI once had: the package's ``__init__`` imports a module that imports
    the package back (``from raytpu.cli import local_runs`` inside ``raytpu.cli.workloads``)."""
    known = {"raytpu.p", "raytpu.p.app", "raytpu.p.work", "raytpu.p.runs"}
    edges = {
        "raytpu.p": imports_of("raytpu.p", probe("__init__", "from raytpu.p.app import main\n"),
                               known),
        "raytpu.p.app": imports_of("raytpu.p.app", probe("app", "from raytpu.p.work import r\n"),
                                   known),
        "raytpu.p.work": imports_of("raytpu.p.work", probe("work", "from raytpu.p import runs\n"),
                                    known),
        "raytpu.p.runs": set(),
    }
    assert cycles(edges) == [["raytpu.p", "raytpu.p.app", "raytpu.p.work"]]


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: at module level and in
    class bodies, not in functions and not under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append(node)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk([*node.body, *node.orelse, *node.finalbody])
                for handler in node.handlers:
                    walk(handler.body)
            elif isinstance(node, ast.With | ast.ClassDef):
                walk(node.body)

    walk(tree.body)
    return found


def heavy_imports_at_load(start: str) -> dict[str, list[str]]:
    """What loading ``start`` imports from :data:`HEAVY`, following raytpu's own module-level
    imports (and the package ``__init__``s they run): ``{raytpu module: [heavy package]}``."""
    found = modules()
    known = set(found)
    seen: set[str] = set()
    heavy: dict[str, list[str]] = {}
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = found[name]
        tree = ast.parse(path.read_text())
        package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
        for node in _runtime_imports(tree):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module or ""] if not node.level else [])
            if isinstance(node, ast.ImportFrom) and node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                targets = [f"{parent}.{node.module}" if node.module else parent]
            if isinstance(node, ast.ImportFrom):
                base = targets[0]
                targets += [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            for target in targets:
                top = target.split(".")[0]
                if top in HEAVY:
                    heavy.setdefault(name, []).append(target)
                dotted = target.split(".")
                todo += [p for p in (".".join(dotted[:i]) for i in range(1, len(dotted) + 1))
                         if p in known]
    return heavy


def test_facts_spec_and_config_load_no_provider_sdk_or_framework() -> None:
    """Parsing a stack's configuration or a job's options loads no Pulumi, torch or Ray."""
    light = sorted(m for m in modules() if role(m) in LIGHT_ROLES)
    assert "raytpu.config.validate" in light and "raytpu.spec.training" in light
    assert {m: heavy_imports_at_load(m) for m in light if heavy_imports_at_load(m)} == {}


def test_the_heavy_import_check_sees_through_raytpu_modules() -> None:
    """It does flag a layer above (the components load pulumi), and only runtime imports."""
    assert "raytpu.components.network" in heavy_imports_at_load("raytpu.components.network")
    assert heavy_imports_at_load("raytpu.components") == {}  # the barrel is lazy
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pulumi\n"
                     "def f():\n    import torch\nclass C:\n    import ray\n")
    assert [a.name for n in _runtime_imports(tree) for a in n.names] == ["TYPE_CHECKING", "ray"]


def test_no_module_reads_the_components_barrel() -> None:
    """Inside the package, names come from their defining module: ``from raytpu.components
    import X`` would tie the importer to every component's module."""
    found = modules()
    readers = []
    for name, path in found.items():
        if name == "raytpu.components":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "raytpu.components":
                names = [a.name for a in node.names
                         if f"raytpu.components.{a.name}" not in found]
                if names:
                    readers.append(f"{name}: {', '.join(names)}")
            elif isinstance(node, ast.ImportFrom) and node.module == "raytpu" and any(
                    a.name == "components" for a in node.names):
                readers.append(f"{name}: from raytpu import components")
    assert readers == []


def test_every_import_of_ours_names_a_module_that_exists() -> None:
    """A lazy import of a module that moved (``from .data import X`` left in a module that
    moved to another package) fails only when that line runs; here it fails at once."""
    found = modules()
    known = set(found)
    broken = []
    for name, path in found.items():
        package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                targets = [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            broken += [f"{name}: {t}" for t in targets
                       if t.split(".")[0] == "raytpu" and t not in known]
    assert broken == []
