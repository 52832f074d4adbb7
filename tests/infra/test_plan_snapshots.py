"""The plan of every committed stack equals its snapshot.

Refresh after an intended change, then review the diff in the pull request:

    UPDATE_SNAPSHOTS=1 python -m pytest tests/infra/test_plan_snapshots.py

A snapshot is ``raytpu plan --stack <stack> --json`` in canonical form (computed values
unknown, secrets masked): resources sorted by URN and keys sorted, because Pulumi registers
resources concurrently and their order in the raw output varies from run to run.
"""

from __future__ import annotations

import difflib
import json
import os
from typing import Any

import pytest
from infra_support import SNAPSHOTS_DIR, STACKS
from raytpu.plan.engine import PlanResult

MAX_DIFF_LINES = 80


def canonical(plan: dict[str, Any]) -> str:
    doc = dict(plan)
    doc["resources"] = sorted(plan["resources"], key=lambda r: r["urn"])
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("stack", STACKS)
def test_plan_matches_snapshot(stack: str, stack_previews: dict[str, PlanResult]) -> None:
    current = canonical(stack_previews[stack].to_dict())
    path = SNAPSHOTS_DIR / f"plan_{stack}.json"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(current)
        return
    if not path.exists():
        pytest.fail(f"{path} is missing; create it with UPDATE_SNAPSHOTS=1")
    committed = path.read_text()
    if current != committed:
        diff = list(difflib.unified_diff(
            committed.splitlines(), current.splitlines(),
            f"{path.name} (committed)", f"{path.name} (current program)", lineterm="", n=2,
        ))
        shown = "\n".join(diff[:MAX_DIFF_LINES])
        extra = len(diff) - MAX_DIFF_LINES
        more = f"\n... {extra} more lines" if extra > 0 else ""
        pytest.fail(
            f"plan of stack {stack!r} differs from its snapshot; if intended, refresh with "
            f"UPDATE_SNAPSHOTS=1 python -m pytest {__file__}\n{shown}{more}",
            pytrace=False,
        )
