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
