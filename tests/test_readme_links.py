"""The README points at files that exist (its relative links and the repository paths it
quotes, ``infra/...``, ``components/...``: a module that moves takes its mentions with it),
and its package diagram is the import order the import-graph test enforces."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "examples/README.md",
        *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")))
TOP = ("(?:infra|components|workloads|tests|benchmarks|deploy|stacks|examples|policies"
       r"|\.ci|\.github)")


def _targets(doc: Path) -> list[str]:
    text = doc.read_text()
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", text)
             if not re.match(r"^(?:[a-z]+:|#)", t)]
    quoted = re.findall(rf"`({TOP}/[^`\s]*)`", text)
    # Placeholders and patterns name no one file.
    # A pytest node id (`tests/x.py::test_y`) names its file.
    return [t.split("#")[0].split("::")[0] for t in [*links, *quoted]
            if not re.search(r"[<>*{}]", t)]


@pytest.mark.parametrize("name", DOCS)
def test_every_path_the_doc_names_exists(name: str) -> None:
    doc = ROOT / name
    targets = _targets(doc)
    assert targets, f"{name} names no file: the pattern is broken"
    missing = sorted({t for t in targets
                      if not (doc.parent / t).exists() and not (ROOT / t).exists()})
    assert missing == []


def test_the_package_diagram_is_the_import_order_the_graph_test_enforces() -> None:
    """docs/architecture.md: the first diagram's arrows, followed through, are exactly the
    imports tests/test_import_graph.py allows between the role packages."""
    from test_import_graph import ALLOWED

    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("```mermaid", 1)[1].split("```", 1)[0]
    names = dict(re.findall(r'(\w+)\["(raytpu(?:\.\w+)?)<br/>', block))
    edges = re.findall(r"^\s*(\w+)(?:\[[^\]]*\])?\s*-->\s*(\w+)", block, re.MULTILINE)
    below: dict[str, set[str]] = {names[n]: set() for n in names}
    for a, b in edges:
        below[names[a]].add(names[b])
    changed = True
    while changed:  # transitive closure: a package may import all that is below it
        changed = False
        for under in below.values():
            more = set().union(*(below[u] for u in under)) - under
            if more:
                under |= more
                changed = True
    assert below == {pkg: set(allowed) for pkg, allowed in ALLOWED.items() if pkg != "raytpu"}
