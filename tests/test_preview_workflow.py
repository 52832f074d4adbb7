"""The pull-request workflows: the offline plan diff runs without credentials (so forks get
it) and is posted by a separate workflow that never runs the PR's code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

WORKFLOWS = Path(__file__).resolve().parents[1] / ".github" / "workflows"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def test_offline_diff_job_runs_the_pr_code_without_credentials() -> None:
    doc = _load("preview.yml")
    assert set(doc["on"]) == {"pull_request"}  # never pull_request_target
    job = doc["jobs"]["plan-diff"]
    assert job["permissions"] == {"contents": "read"}
    text = yaml.safe_dump(job)
    assert "secrets." not in text and "id-token" not in text
    runs = "\n".join(str(step.get("run", "")) for step in job["steps"])
    assert 'merge-base "$BASE_SHA" "$HEAD_SHA"' in runs
    assert "raytpu plan --stack \"$s\" --json" in runs  # the base plan, at the merge base
    assert '--diff "/tmp/base-plans/$s.json"' in runs
    (upload,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith(
        "actions/upload-artifact@")]
    assert upload["with"]["name"] == "plan-diff"
    checkout = job["steps"][0]
    assert checkout["with"]["persist-credentials"] is False
    # The credentialed preview stays, as the second opinion.
    assert any(str(s.get("uses", "")).startswith("pulumi/actions@")
               for s in doc["jobs"]["preview"]["steps"])


def test_comment_workflow_posts_without_running_pr_code() -> None:
    doc = _load("preview-comment.yml")
    assert doc["on"] == {"workflow_run": {"workflows": ["preview"], "types": ["completed"]}}
    assert doc["permissions"] == {"actions": "read", "pull-requests": "write"}
    steps = doc["jobs"]["comment"]["steps"]
    uses = [str(s.get("uses", "")) for s in steps]
    assert not [u for u in uses if u.startswith("actions/checkout")]
    assert not [s for s in steps if "run" in s]
    script = steps[-1]["with"]["script"]
    assert "pr.head.sha !== process.env.HEAD_SHA" in script  # the PR number is checked
    assert "<!-- raytpu-plan-diff:${stack} -->" in script  # one comment per stack, updated
