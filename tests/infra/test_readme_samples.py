"""Samples the README shows are the product's real output: each block marked
``<!-- sample: KIND ARGS -->`` is compared with what the code prints today."""

from __future__ import annotations

import re

import pytest
from infra_support import REPO
from raytpu.plan.engine import PlanResult
from raytpu.plan.render import summary_line

# The README and the pages under docs/ (each sample is in one of them).
README = "\n".join(p.read_text() for p in [REPO / "README.md",
                                          *sorted((REPO / "docs").glob("*.md"))])


def samples(kind: str) -> list[tuple[str, str]]:
    """``(args, block text)`` of every README sample of ``kind``."""
    found = re.findall(r"<!-- sample: (\S+) ?(.*?) -->\n```\w*\n(.*?)```", README, re.S)
    return [(args, text) for k, args, text in found if k == kind]


def matches_with_ellipsis(sample: str, real: str) -> bool:
    """The sample equals ``real``, where a trailing ``...`` stands for the rest of it."""
    if sample.endswith("..."):
        return real.startswith(sample.removesuffix("..."))
    return sample == real


def test_readme_has_the_plan_summary_sample() -> None:
    assert samples("plan-summary"), "README: the plan summary sample is not marked"


@pytest.mark.parametrize("stack, text", samples("plan-summary"), ids=lambda v: v[:40])
def test_plan_summary_sample_is_the_real_one(stack: str, text: str,
                                             stack_previews: dict[str, PlanResult]) -> None:
    real = summary_line(stack_previews[stack])
    assert matches_with_ellipsis(text.strip(), real), f"README says\n{text}\nthe plan says\n{real}"


def _chunks(text: str) -> list[str]:
    """The sample's parts between ``...`` lines, whitespace-normalized (the README wraps
    long lines), a trailing ``...`` cut."""
    parts, current = [], []
    for line in text.splitlines():
        current.append(line.strip().removesuffix("..."))
        if line.rstrip().endswith("..."):  # `...` alone or ending a line: the rest is cut
            parts.append(" ".join(current))
            current = []
    parts.append(" ".join(current))
    return [" ".join(p.split()) for p in parts if p.strip()]


def test_readme_has_the_plan_diff_sample() -> None:
    assert samples("plan-diff"), "README: the plan --diff sample is not marked"


@pytest.mark.parametrize("args, text", samples("plan-diff"), ids=lambda v: v[:40])
def test_plan_diff_sample_is_the_real_one(args: str, text: str) -> None:
    import copy
    import io

    from infra_support import STACKS_DIR
    from raytpu.plan.diff import diff_plans, render_diff
    from raytpu.plan.engine import load_stack_file, run_program
    from rich.console import Console

    stack, edit = args.split(" ", 1)
    key, value = edit.split("=", 1)
    m = re.fullmatch(r"(raytpu:\w+)\[(\d+)\]\.(\w+)", key)
    assert m, f"sample edit {edit!r}: write KEY[i].FIELD=VALUE"
    raw = load_stack_file(stack, STACKS_DIR)
    base = json_roundtrip(run_program(stack, raw, preview=True).to_dict())
    changed = copy.deepcopy(raw)
    changed[m[1]][int(m[2])][m[3]] = value
    out = io.StringIO()
    render_diff(diff_plans(base, run_program(stack, changed, preview=True)), [],
                Console(file=out, width=10_000, color_system=None))
    real = " ".join(out.getvalue().split())
    position = 0
    for chunk in _chunks(text):
        found = real.find(chunk, position)
        assert found >= 0, f"README sample part not in the real diff (in order):\n{chunk}"
        position = found + len(chunk)


def json_roundtrip(doc: dict[str, object]) -> dict[str, object]:
    import json

    loaded: dict[str, object] = json.loads(json.dumps(doc))  # as read back from BASE.json
    return loaded
