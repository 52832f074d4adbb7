"""Fixtures for tests/infra (helpers live in infra_support.py)."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import STACKS, STACKS_DIR
from raytpu.plan.engine import PlanResult, run_plan
from raytpu.plan.mocks import _FAKE_CA, RecordingMocks

GET_CLUSTER = "gcp:container/getCluster:getCluster"


@pytest.fixture(scope="session")
def stack_plans() -> dict[str, PlanResult]:
    """The whole program's plan for every committed stack file (read-only, shared)."""
    return {name: run_plan(name, STACKS_DIR) for name in STACKS}


@pytest.fixture(scope="session")
def stack_previews() -> dict[str, PlanResult]:
    """What `raytpu plan` shows for every committed stack: computed values unknown."""
    return {name: run_plan(name, STACKS_DIR, preview=True) for name in STACKS}


def existing_cluster(args: dict[str, Any]) -> dict[str, Any]:
    """``gcp.container.getCluster`` of a cluster that exists outside the program."""
    name, location, project = args.get("name"), args.get("location"), args.get("project")
    return {
        "id": f"projects/{project}/locations/{location}/clusters/{name}",
        "name": name, "location": location, "project": project,
        "endpoint": "10.0.0.3",
        "masterAuths": [{"clusterCaCertificate": _FAKE_CA}],
        "controlPlaneEndpointsConfigs": [{"dnsEndpointConfigs": [{
            "endpoint": f"gke-fedcba9876543210-{project}.{location}.gke.goog",
            "allowExternalTraffic": True,
        }]}],
    }


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The invokes a program makes; getCluster answered as for an existing cluster."""
    made: list[tuple[str, dict[str, Any]]] = []
    original = RecordingMocks.call

    def call(self: RecordingMocks, args: Any) -> Any:
        made.append((args.token, dict(args.args)))
        if args.token == GET_CLUSTER:
            return existing_cluster(dict(args.args)), []
        return original(self, args)

    monkeypatch.setattr(RecordingMocks, "call", call)
    return made
