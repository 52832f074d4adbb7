"""The ``cluster`` tier, teams: Kueue v0.19.2 running with the Configuration the stack writes
into its chart, its webhooks called by the API server, the teams' queues as it reports them.
Needs ``raytpu rehearse --build``; skips without it (conftest)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raytpu.plan.engine import run_plan
from raytpu.rehearse.build import Cache
from raytpu.rehearse.report import render, to_dict
from raytpu.rehearse.run import Live, Rehearsal, rehearse

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


# A digest no registry serves: images are never pulled here.
IMAGE = "registry.rehearsal.invalid/raytpu-trainer@sha256:" + "0" * 64


def _submit(kubeconfig: str, team: str, slices: int, run_name: str) -> str:
    from raytpu.cli.app import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, [
        "submit", "--stack", "prod", "--team", team, "--slices", str(slices),
        "--run-name", run_name, "--image", IMAGE, "--kubeconfig", kubeconfig])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def _workload(live: Live, namespace: str, job: str,
              until: Callable[[dict[str, Any]], bool], timeout: float = 60) -> dict[str, Any]:
    """The Workload Kueue made for RayJob ``job``, once ``until`` holds for it."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        for w in live.api.list_items("kueue.x-k8s.io/v1beta2", "Workload", namespace):
            owners = w["metadata"].get("ownerReferences") or []
            if any(o["kind"] == "RayJob" and o["name"] == job for o in owners):
                last = w
                if until(w):
                    return w
        time.sleep(0.3)
    raise AssertionError(f"Workload of {namespace}/{job}: {last.get('status')}")


def _condition(w: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (w.get("status") or {}).get("conditions") or []
                 if c["type"] == kind), {})


def _true(kind: str) -> Callable[[dict[str, Any]], bool]:
    return lambda w: _condition(w, kind).get("status") == "True"


def _cluster_of(live: Live, namespace: str, job: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        name = ((live.api.get("ray.io/v1", "RayJob", job, namespace).get("status") or {})
                .get("rayClusterName"))
        if name:
            return str(name)
        time.sleep(0.3)
    raise AssertionError(f"RayJob {namespace}/{job} made no RayCluster")


def test_submit_team_admitted_within_quota_the_next_one_queued_and_status_reads_it(
        run: Callable[..., Rehearsal]) -> None:
    seen: dict[str, Any] = {}

    def team_jobs(live: Live) -> None:
        lead = live.member_kubeconfigs["User:speech-lead@example.com"]
        assert _submit(lead, "speech", 2, "speech-a") == "speech/speech-a"
        admitted = _workload(live, "speech", "speech-a", _true("Admitted"))
        seen["cluster"] = _cluster_of(live, "speech", "speech-a")
        # speech: 2 slices nominal + 1 borrowable; 2 more do not fit.
        _submit(lead, "speech", 2, "speech-b")
        pending = _workload(live, "speech", "speech-b",
                            lambda w: bool(_condition(w, "QuotaReserved").get("message")))
        seen["admitted"], seen["pending"] = admitted, pending
        from raytpu.cli.app import app
        from typer.testing import CliRunner

        # Give KubeRay and the scheduler the new cluster before reading the fleet.
        time.sleep(3)
        status = CliRunner().invoke(app, ["status", "--stack", "prod", "--json",
                                          "--kubeconfig", str(live.control_plane.kubeconfig())])
        assert status.exit_code in (0, 1), status.output
        seen["status"] = json.loads(status.stdout)

    r = run("prod", at_max=True, then=team_jobs)
    pending = seen["pending"]
    assert _condition(pending, "Admitted").get("status") != "True"
    reason = _condition(pending, "QuotaReserved")["message"]
    assert "insufficient" in reason.lower() and "google.com/tpu" in reason, reason
    # The admitted job's cluster: 2 slices of 4 hosts, each on one v5e-16 pool of its own.
    mine = [s for s in r.slices if s.cluster == seen["cluster"]]
    assert len(mine) == 2 and all(s.bound and s.hosts == 4 for s in mine), render(r)
    assert all(s.pool and s.pool.startswith("v5e-16-") for s in mine)
    shared = {s.pool for s in r.slices if s.cluster == "raytpu"}
    assert not shared & {s.pool for s in mine}
    (speech,) = [q for q in r.queues if q.team == "speech"]
    assert (speech.admitted, speech.pending, speech.chips_in_use) == (1, 1, 32), r.queues
    (team,) = [t for t in seen["status"]["teams"] if t["name"] == "speech"]
    assert team["workloads"] == {"admitted": 1, "pending": 1}
    assert team["cluster_queue"]["tpu_chips"] == {"used": 32, "nominal": 32}


def test_a_job_whose_hosts_cannot_all_bind_is_evicted_by_wait_for_pods_ready(
        run: Callable[..., Rehearsal]) -> None:
    seen: dict[str, Any] = {}

    def stuck_job(live: Live) -> None:
        # At the initial size only v5e-16-0 has nodes, and the shared RayCluster holds it.
        lead = live.member_kubeconfigs["User:speech-lead@example.com"]
        _submit(lead, "speech", 1, "speech-stuck")
        seen["admitted"] = _workload(live, "speech", "speech-stuck", _true("Admitted"))
        seen["evicted"] = _workload(live, "speech", "speech-stuck", _true("Evicted"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the quota comes back once it is suspended
            cq = live.api.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "speech")
            if (cq.get("status") or {}).get("admittedWorkloads") == 0:
                break
            time.sleep(0.3)
        seen["cq"] = cq
        seen["rayjob"] = live.api.get("ray.io/v1", "RayJob", "speech-stuck", "speech")

    r = run("prod", then=stuck_job, pods_ready_timeout="5s")
    evicted = _condition(seen["evicted"], "Evicted")
    assert evicted["reason"] == "PodsReadyTimeout", evicted
    assert (seen["cq"].get("status") or {}).get("admittedWorkloads") == 0, seen["cq"]
    assert seen["rayjob"]["spec"]["suspend"] is True  # Kueue stopped it; it waits to requeue
    (speech,) = [q for q in r.queues if q.team == "speech"]
    assert speech.admitted == 0 and speech.chips_in_use == 0, r.queues


def test_no_double_booking_every_team_slice_kueue_admits_finds_a_pool_at_max(
        run: Callable[..., Rehearsal]) -> None:
    """Both teams take their whole nominal quota while the shared RayCluster runs: Kueue
    admits every job by quota alone, and each admitted slice must still find a free pool
    (before the fix, prod's 4 pools held the shared cluster's slice and 2 + 2 team slices:
    one team replica stayed Pending, admitted and holding its quota)."""
    clusters: list[str] = []

    def both_teams(live: Live) -> None:
        for team, member in (("vision", "Group:ml-vision@example.com"),
                             ("speech", "User:speech-lead@example.com")):
            _submit(live.member_kubeconfigs[member], team, 2, f"{team}-full")
            _workload(live, team, f"{team}-full", _true("Admitted"))
            clusters.append(_cluster_of(live, team, f"{team}-full"))

    r = run("prod", at_max=True, then=both_teams)
    team_slices = [s for s in r.slices if s.cluster in clusters]
    assert len(team_slices) == 4
    stuck = [p for p in r.pods if p.node is None]
    assert stuck == [] and all(s.bound for s in team_slices), render(r)
    assert r.ok
