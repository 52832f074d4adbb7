"""The plan of every committed stack equals its snapshot.

Refresh after an intended change, then review the diff in the pull request:

    UPDATE_SNAPSHOTS=1 python -m pytest tests/infra/test_plan_snapshots.py

A snapshot is exactly what ``raytpu plan --stack <stack> --json --no-policies`` prints
(computed values unknown, secrets masked), resources in the plan's own order (README "Reading
the plan"): that order is deterministic, so a reviewer sees a resource that moves as well as
one that changes, and a BASE.json saved for ``--diff`` does not churn.
"""

from __future__ import annotations

import difflib
import json
import os

import pytest
from infra_support import SNAPSHOTS_DIR, STACKS
from raytpu.plan.engine import PlanResult
from raytpu.plan.policies import plan_document

MAX_DIFF_LINES = 80


def printed(result: PlanResult) -> str:
    """``raytpu plan --json --no-policies``'s output (raytpu.cli.app.plan)."""
    return json.dumps(plan_document(result, None), indent=2) + "\n"


@pytest.mark.parametrize("stack", STACKS)
def test_plan_matches_snapshot(stack: str, stack_previews: dict[str, PlanResult]) -> None:
    current = printed(stack_previews[stack])
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
