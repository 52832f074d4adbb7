"""The teams' queues as the running Kueue reports them: per LocalQueue the stack declares,
its ClusterQueue's Active condition, admitted and pending workloads and TPU chips in use."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from raytpu.facts import versions
from raytpu.operations.status import chips_in_use
from raytpu.rehearse.api import Api, ApiError


@dataclass(frozen=True)
class QueueOutcome:
    team: str
    """The namespace of the team's LocalQueue (a team's namespace is named after it)."""
    cluster_queue: str
    active: bool
    """Kueue's ``Active`` condition: False when, e.g., a flavor it names does not exist."""
    reason: str
    admitted: int
    pending: int
    chips_in_use: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON entry (docs/rehearsal.md: ``queues[]``)."""
        return {"team": self.team, "clusterQueue": self.cluster_queue, "active": self.active,
                "reason": self.reason, "admitted": self.admitted, "pending": self.pending,
                "chipsInUse": self.chips_in_use}


def declared_queues(objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(namespace, ClusterQueue) of each LocalQueue the stack declares."""
    return sorted((o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in objs
                  if o["kind"] == "LocalQueue" and o.get("spec", {}).get("clusterQueue"))


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def read_queues(api: Api, declared: list[tuple[str, str]],
                timeout: float = 15.0) -> list[QueueOutcome]:
    """Each declared queue once Kueue has given its ClusterQueue an ``Active`` condition
    (bounded: a ClusterQueue it never reconciled reads as inactive, saying so)."""
    deadline = time.monotonic() + timeout
    out = []
    for namespace, name in declared:
        while True:
            try:
                cq = api.get(versions.KUEUE_API_VERSION, "ClusterQueue", name)
            except ApiError as e:
                cq, missing = {}, e.message
            else:
                missing = ""
            active = _condition(cq, "Active")
            if active is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        status = cq.get("status") or {}
        reason = (missing or (active or {}).get("message")
                  or "Kueue set no Active condition (is it running?)")
        out.append(QueueOutcome(
            namespace, name, bool(active and active.get("status") == "True"),
            "" if active and active.get("status") == "True" else reason,
            int(status.get("admittedWorkloads", 0)), int(status.get("pendingWorkloads", 0)),
            chips_in_use(cq)))
    return out
