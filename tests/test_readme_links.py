"""Every file the README points at exists: its relative links and the repository paths it
quotes (``infra/...``, ``components/...``). A module that moves takes its README mentions
with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "examples/README.md")
TOP = ("(?:infra|components|workloads|tests|benchmarks|deploy|stacks|examples|policies"
       r"|\.ci|\.github)")


def _targets(doc: Path) -> list[str]:
    text = doc.read_text()
    links = [t for t in re.findall(r"\]\(([^)\s]+)\)", text)
             if not re.match(r"^(?:[a-z]+:|#)", t)]
    quoted = re.findall(rf"`({TOP}/[^`\s]*)`", text)
    # Placeholders and patterns name no one file.
    return [t.split("#")[0] for t in [*links, *quoted] if not re.search(r"[<>*{}]", t)]


@pytest.mark.parametrize("name", DOCS)
def test_every_path_the_doc_names_exists(name: str) -> None:
    doc = ROOT / name
    targets = _targets(doc)
    assert targets, f"{name} names no file: the pattern is broken"
    missing = sorted({t for t in targets
                      if not (doc.parent / t).exists() and not (ROOT / t).exists()})
    assert missing == []
