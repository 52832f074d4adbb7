"""The ``cluster`` tier, teams: Kueue v0.19.2 running with the Configuration the stack writes
into its chart, its webhooks called by the API server, the teams' queues as it reports them.
Needs ``raytpu rehearse --build``; skips without it (conftest)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raytpu.plan.engine import run_plan
from raytpu.rehearse.build import Cache
from raytpu.rehearse.report import render, to_dict
from raytpu.rehearse.run import Rehearsal, rehearse

Edit = Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]


@pytest.fixture(scope="module")
def run(built_cache: Cache, ref_dir: Path) -> Callable[..., Rehearsal]:
    def _run(stack: str, edit: Edit | None = None, **kwargs: Any) -> Rehearsal:
        return rehearse(run_plan(stack, preview=True), built_cache, crds=ref_dir, edit=edit,
                        **kwargs)
    return _run


def test_prod_shows_both_teams_queues_active_in_the_running_kueue(
        run: Callable[..., Rehearsal]) -> None:
    r = run("prod")
    assert r.ok, render(r)
    doc = to_dict(r)
    assert doc["versions"]["kueue"] == "0.19.2"
    assert [(q["team"], q["clusterQueue"], q["active"]) for q in doc["queues"]] == [
        ("speech", "speech", True), ("vision", "vision", True)]
    assert all(q["admitted"] == q["pending"] == q["chipsInUse"] == 0 for q in doc["queues"])
    assert {"team", "clusterQueue", "admitted", "pending", "chipsInUse"} <= set(doc["queues"][0])
    assert not any("Kueue is not running" in c for c in doc["caveats"])
    assert "team queues (Kueue):" in render(r)


def test_a_stack_without_teams_runs_no_kueue(run: Callable[..., Rehearsal]) -> None:
    r = run("dev")
    assert r.queues == [] and "kueue" not in r.versions


def test_a_cluster_queue_whose_flavor_is_missing_is_reported_inactive_with_kueues_reason(
        run: Callable[..., Rehearsal]) -> None:
    def no_tpu_flavor(objs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        tpu = [o for o in objs if o["kind"] == "ResourceFlavor" and o["spec"].get("nodeLabels")]
        assert tpu
        objs[:] = [o for o in objs if o not in tpu]

    r = run("prod", no_tpu_flavor, settle_timeout=20)
    assert not r.ok
    assert r.queues and all(not q.active for q in r.queues), render(r)
    # Kueue's own words (the ClusterQueue's Active condition), not the rehearsal's.
    assert all("flavor" in q.reason.lower() for q in r.queues), [q.reason for q in r.queues]
    assert "INACTIVE" in render(r)


def _access(r: Rehearsal) -> dict[tuple[str, str, str | None], tuple[str, str]]:
    return {(a.member, a.action, a.namespace): (a.result, a.reason) for a in r.access}


def test_each_team_member_meets_the_real_rbac_own_namespace_only(
        run: Callable[..., Rehearsal]) -> None:
    r = run("prod")
    got = _access(r)
    members = {a.member for a in r.access}
    assert members == {"Group:ml-vision@example.com", "Group:ml-speech@example.com",
                       "User:speech-lead@example.com"}
    assert got[("Group:ml-vision@example.com", "create RayJob", "vision")] == ("allowed", "")
    assert got[("User:speech-lead@example.com", "create RayJob", "speech")] == ("allowed", "")
    result, reason = got[("Group:ml-vision@example.com", "create RayJob", "speech")]
    assert result == "forbidden"
    assert 'cannot create resource "rayjobs"' in reason and 'namespace "speech"' in reason
    result, reason = got[("User:speech-lead@example.com", "list Secrets", "vision")]
    assert result == "forbidden" and 'cannot list resource "secrets"' in reason
    result, reason = got[("Group:ml-speech@example.com", "change ClusterQueue speech", None)]
    assert result == "forbidden" and "clusterqueues" in reason
    assert all(a.as_expected for a in r.access) and r.ok
    assert "team access (RBAC, as each member):" in render(r)
    assert to_dict(r)["access"][0].keys() == {"team", "member", "action", "namespace",
                                              "expected", "result", "reason"}


def test_a_role_that_grants_too_much_is_caught_by_the_access_checks(
        run: Callable[..., Rehearsal]) -> None:
    def cluster_wide(objs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        # vision's members bound cluster-wide to the built-in `edit` role: the server then
        # lets them into speech's namespace and its Secrets, which the checks must see.
        (rb,) = [o for o in objs if o["kind"] == "RoleBinding"
                 and o["metadata"]["namespace"] == "vision"]
        objs.append({"apiVersion": "rbac.authorization.k8s.io/v1",
                     "kind": "ClusterRoleBinding", "metadata": {"name": "vision-edit"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                 "kind": "ClusterRole", "name": "edit"},
                     "subjects": rb["subjects"]})

    r = run("prod", cluster_wide, settle_timeout=20)
    wrong = {(a.member, a.action, a.namespace) for a in r.access if not a.as_expected}
    assert ("Group:ml-vision@example.com", "list Secrets", "speech") in wrong
    assert not r.ok
    assert "WRONG Group:ml-vision@example.com (vision): list Secrets in speech: allowed" \
        in render(r)
