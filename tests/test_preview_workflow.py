"""The pull-request workflows: the offline checks run what CI runs, less what a runner lacks,
deselected by name; the offline plan diff runs without credentials (so forks get it) and is
posted by a separate workflow that never runs the PR's code."""

from __future__ import annotations

import re
import shlex
import tomllib
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


ROOT = WORKFLOWS.parents[1]


def _runs(job: str) -> list[str]:
    return [str(s["run"]) for s in _load("preview.yml")["jobs"][job]["steps"] if "run" in s]


def _readme_tests_command() -> str:
    from test_readme_commands import commands

    return commands()[1]


def test_the_offline_job_installs_what_the_readmes_test_command_installs() -> None:
    """The same tested set (constraints.txt, the dev and workloads extras) as the command CI
    runs from the README: with `.[dev]` alone, collection stopped on numpy and fsspec."""
    (install,) = [r for r in _runs("offline") if "pip install" in r]
    readme = _readme_tests_command()
    assert install == readme.split(" && .venv/bin/python -m pytest")[0]
    assert "-c constraints.txt -e '.[dev,workloads]'" in install


def test_every_install_of_the_prs_code_uses_the_tested_constraints() -> None:
    for job in ("offline", "plan-diff", "preview"):
        for run in _runs(job):
            for step in (s for line in run.splitlines() for s in line.split("&&")
                         if "pip install" in s):
                words = shlex.split(step)
                if "/tmp/base" in words:
                    continue  # the merge base installs its own tree, as it was
                assert words[words.index("-c") + 1] == "constraints.txt", (job, step)


def test_the_offline_job_lints_as_ci_does() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    make = (ROOT / "Makefile").read_text().splitlines()
    assert ".venv/bin/ruff check . && .venv/bin/mypy -p raytpu" in _runs("offline")
    # CI lints in `make check`, its first step.
    assert "make check" in ci
    assert "\t.venv/bin/ruff check ." in make and "\t.venv/bin/mypy -p raytpu" in make


def test_the_offline_job_deselects_by_name_and_nothing_else() -> None:
    """The subset is explicit in the command (markers declared in pyproject.toml), and runs
    under CI=true, where any other skip fails it (tests/skip_policy.py)."""
    (tests,) = [r for r in _runs("offline") if "-m pytest" in r]
    words = shlex.split(tests)
    assert words[:3] == [".venv/bin/python", "-m", "pytest"]
    assert words[3:] == ["-m", "not slow and not ref and not cluster"]  # the README's paths
    with open(ROOT / "pyproject.toml", "rb") as f:
        markers = tomllib.load(f)["tool"]["pytest"]["ini_options"]["markers"]
    declared = {m.split(":")[0] for m in markers}
    assert {"slow", "ref", "cluster"} <= declared


def test_the_offline_job_plans_every_stack() -> None:
    (loop,) = [r for r in _runs("offline") if "raytpu plan" in r]
    stacks = sorted(p.name.split(".")[1] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    listed = re.search(r"for s in ([\w ]+);", loop)
    assert listed and sorted(listed.group(1).split()) == stacks
