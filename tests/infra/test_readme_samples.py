"""Samples the README shows are the product's real output: each block marked
``<!-- sample: KIND ARGS -->`` is compared with what the code prints today."""

from __future__ import annotations

import re

import pytest
from infra_support import REPO
from raytpu.plan.engine import PlanResult
from raytpu.plan.render import summary_line

README = (REPO / "README.md").read_text()


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


@pytest.mark.parametrize("stack, text", samples("plan-summary"))
def test_plan_summary_sample_is_the_real_one(stack: str, text: str,
                                             stack_previews: dict[str, PlanResult]) -> None:
    real = summary_line(stack_previews[stack])
    assert matches_with_ellipsis(text.strip(), real), f"README says\n{text}\nthe plan says\n{real}"
