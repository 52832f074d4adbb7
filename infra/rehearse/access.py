"""Team access through the real RBAC: one bearer token per member subject the stack's team
RoleBindings name, and each member's requests made as that member, so the API server's
authorizer (RBAC, with the stack's Roles) answers, with its own reason.

A ``User`` subject gets a token for that user; a ``Group`` subject a token for a user who is
in that group only (GKE resolves Google Groups the same way: the group is what is bound).
What each member tries, and what the stack's design says must happen:

* create a RayJob in its team's namespace: allowed (``dryRun=All``: authorized, admitted by
  the CRD schema and Kueue's webhooks, never stored);
* create a RayJob in another team's namespace: forbidden;
* list another team's Secrets: forbidden;
* change its team's ClusterQueue (a dry-run merge patch): forbidden.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from raytpu.components.team_access import ROLE_NAME
from raytpu.facts import versions
from raytpu.rehearse.api import Api, ApiError
from raytpu.rehearse.control_plane import Identity
from raytpu.rehearse.objects import PLACEHOLDER_IMAGE

TEAM_LABEL = "raytpu.io/team"
CHECK_JOB = "rehearsal-access-check"


@dataclass(frozen=True)
class Member:
    team: str
    namespace: str
    subject: str
    """``User:speech-lead@example.com`` or ``Group:ml-vision@example.com``."""
    identity: Identity


@dataclass(frozen=True)
class AccessOutcome:
    team: str
    member: str
    action: str
    namespace: str | None
    expected: str
    """What the stack's design says: ``allowed`` or ``forbidden``."""
    result: str
    """``allowed``, ``forbidden`` (HTTP 403: the authorizer said no) or ``refused`` (any
    other error: the request was authorized, something else turned it down)."""
    reason: str
    """The API server's message (empty when allowed)."""

    @property
    def as_expected(self) -> bool:
        return self.result == self.expected


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def team_members(objs: list[dict[str, Any]]) -> list[Member]:
    """A member per subject of each team RoleBinding the stack declares."""
    out = []
    for o in objs:
        meta = o["metadata"]
        if o["kind"] != "RoleBinding" or meta["name"] != ROLE_NAME:
            continue
        team = (meta.get("labels") or {}).get(TEAM_LABEL, meta["namespace"])
        for s in o.get("subjects") or []:
            if s["kind"] == "User":
                identity = Identity(s["name"], ())
            elif s["kind"] == "Group":
                identity = Identity(f"rehearsal-member-of-{_slug(s['name'])}", (s["name"],))
            else:
                continue
            out.append(Member(team, meta["namespace"], f"{s['kind']}:{s['name']}", identity))
    return out


def _job(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": CHECK_JOB, "namespace": namespace},
            "spec": {"entrypoint": "python -c pass", "shutdownAfterJobFinishes": True,
                     "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {
                         "spec": {"containers": [{"name": "ray-head",
                                                  "image": PLACEHOLDER_IMAGE}]}}}}}}


def _try(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        call()
    except ApiError as e:
        return ("forbidden" if e.status == 403 else "refused"), e.message
    return "allowed", ""


def check_access(server: str, ca_cert: str, members: list[Member],
                 cluster_queues: dict[str, str]) -> list[AccessOutcome]:
    """Each member's requests (module docstring), made with its own token.
    ``cluster_queues``: a team's namespace -> its ClusterQueue."""
    namespaces = sorted({m.namespace for m in members})
    out = []
    for m in members:
        api = Api.connect(server, ca_cert, m.identity.token)
        tries: list[tuple[str, str | None, str, Callable[[], Any]]] = [
            ("create RayJob", m.namespace, "allowed",
             partial(api.create, _job(m.namespace), dry_run=True))]
        for other in (ns for ns in namespaces if ns != m.namespace):
            tries += [("create RayJob", other, "forbidden",
                       partial(api.create, _job(other), dry_run=True)),
                      ("list Secrets", other, "forbidden",
                       partial(api.list_items, "v1", "Secret", other))]
        queue = cluster_queues.get(m.namespace)
        if queue:
            tries.append((f"change ClusterQueue {queue}", None, "forbidden", partial(
                api.merge_patch, versions.KUEUE_API_VERSION, "ClusterQueue", queue,
                {"spec": {"stopPolicy": "Hold"}}, dry_run=True)))
        for action, namespace, expected, call in tries:
            result, reason = _try(call)
            out.append(AccessOutcome(m.team, m.subject, action, namespace, expected, result,
                                     reason))
        api.session.close()
    return out


def to_json(outcomes: list[AccessOutcome]) -> list[dict[str, Any]]:
    return [{"team": o.team, "member": o.member, "action": o.action, "namespace": o.namespace,
             "expected": o.expected, "result": o.result, "reason": o.reason}
            for o in outcomes]

