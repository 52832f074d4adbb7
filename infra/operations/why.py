"""Why a Ray pod waits and why a queued job does not start: the first reason a user must act
on, the object it was read from, and the fix in words.

Pure: a function of the objects ``raytpu status`` already reads, as the API server returns
them (JSON dicts, camelCase fields; :func:`plain` turns the client's models into those), and
of the stack's slice groups. No Kubernetes call is made here.

Reasons come from six sources, and the first one, in this order, is the one shown
(:data:`SOURCES`): Kueue (the Workload, its ClusterQueue), the scheduler (the pod's
``PodScheduled`` condition, its node selector against the nodes), KubeRay (its Warning events
on the RayCluster: the pods it could not create), the TPU webhook (a multi-host pod it never
mutated, a slice whose hosts sit on different pools), the image (the kubelet's pull errors)
and, for an elastic group, the autoscaler (at ``autoscaling.max`` or still scaling). This
module holds the model, the ordering and Kueue; :mod:`raytpu.operations.why_pods` the rest.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raytpu.facts.catalog import TPU_RESOURCE

if TYPE_CHECKING:
    from raytpu.facts.slice_group import SliceGroup

SOURCES = ("kueue", "scheduler", "kuberay", "tpu-webhook", "image", "autoscaling")
"""The order in which reasons are shown: the first found is the one a user acts on."""


@dataclass(frozen=True)
class Why:
    """One reason: where it came from, the object it was read from, the words, the fix."""

    source: str
    """One of :data:`SOURCES`."""
    object: str
    """``Kind namespace/name`` (``Kind name`` when cluster-scoped)."""
    reason: str
    fix: str

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "object": self.object, "reason": self.reason,
                "fix": self.fix}

    def line(self) -> str:
        """The reason as one line of ``raytpu status``'s text."""
        return f"{self.reason} [{self.object}] -> {self.fix}"


def first(whys: Iterable[Why]) -> Why | None:
    """The reason to act on first: the earliest source of :data:`SOURCES`, then the order
    the reasons were found in."""
    ranked = sorted(enumerate(whys), key=lambda iw: (SOURCES.index(iw[1].source), iw[0]))
    return ranked[0][1] if ranked else None


def plain(obj: Any) -> Any:
    """An object of the ``kubernetes`` client (a model) as the API server's JSON: the model's
    ``attribute_map`` gives the wire names; unset fields are left out."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, dt.datetime) and obj.utcoffset() == dt.timedelta(0):
        return obj.strftime("%Y-%m-%dT%H:%M:%SZ")  # the API server's RFC 3339 form
    if isinstance(obj, (dt.datetime, dt.date)):
        return obj.isoformat()
    attribute_map = getattr(type(obj), "attribute_map", None)
    if isinstance(attribute_map, dict):
        return {wire: plain(getattr(obj, attr)) for attr, wire in attribute_map.items()
                if getattr(obj, attr, None) is not None}
    return obj


def ref(obj: dict[str, Any], kind: str | None = None) -> str:
    """``Kind namespace/name`` of an API object."""
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{kind or obj.get('kind') or '?'} {where}{meta.get('name', '?')}"


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The ``status.conditions`` entry of type ``kind``, if any."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def matches(labels: dict[str, str] | None, selector: dict[str, str]) -> bool:
    return all((labels or {}).get(k) == v for k, v in selector.items())


def nodes_matching(nodes: Sequence[dict[str, Any]], selector: dict[str, str]) -> int:
    return sum(matches((n.get("metadata") or {}).get("labels"), selector) for n in nodes)


def owner_job(workload: dict[str, Any]) -> str:
    """The job a Workload queues: its RayJob (or RayCluster) owner, else its own name."""
    for o in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if o.get("kind") in ("RayJob", "RayCluster"):
            return str(o.get("name"))
    return str((workload.get("metadata") or {}).get("name", "?"))


# -- Kueue ---------------------------------------------------------------------------------


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def chips_in_use(cluster_queue: dict[str, Any]) -> int:
    """TPU chips a Kueue ClusterQueue reports in use (``status.flavorsUsage``), every flavor
    summed; shared by ``raytpu status`` and the rehearsal's ``queues[]``."""
    return sum(_quantity(r.get("total")) for f in (cluster_queue.get("status") or {})
               .get("flavorsUsage") or [] for r in f.get("resources") or []
               if r.get("name") == TPU_RESOURCE)


def _tpu_quota(cq: dict[str, Any]) -> tuple[int, int | None]:
    """The ClusterQueue's TPU nominal quota and borrowing limit (None: unlimited), summed
    over its flavors."""
    nominal, limit, unlimited = 0, 0, False
    for g in (cq.get("spec") or {}).get("resourceGroups") or []:
        for f in g.get("flavors") or []:
            for r in f.get("resources") or []:
                if r.get("name") != TPU_RESOURCE:
                    continue
                nominal += _quantity(r.get("nominalQuota"))
                if r.get("borrowingLimit") is None:
                    unlimited = True
                else:
                    limit += _quantity(r.get("borrowingLimit"))
    return nominal, None if unlimited else limit


def _inactive_fix(reason: str) -> str:
    if reason == "FlavorNotFound":
        return ("create the ResourceFlavor(s) it names (`pulumi up` declares the stack's "
                "flavors), or take them out of the ClusterQueue")
    if reason in ("AdmissionCheckNotFound", "AdmissionCheckInactive"):
        return "create the AdmissionCheck it names (and its controller), or take it out"
    if reason == "Stopped":
        return "its spec.stopPolicy holds it: set stopPolicy to None"
    return "make the ClusterQueue Active again (see its condition's message)"


def workload_whys(workload: dict[str, Any], cluster_queue: dict[str, Any] | None,
                  groups: Sequence[SliceGroup], nodes: Sequence[dict[str, Any]]) -> list[Why]:
    """Kueue's reasons for one Workload that is not finished: why it is not admitted, or,
    admitted, why its pods cannot be placed (a flavor whose nodes do not exist)."""
    if is_true(workload, "Finished"):
        return []
    me = ref(workload, "Workload")
    out: list[Why] = []
    if (workload.get("spec") or {}).get("active") is False:
        said = condition(workload, "Evicted") or condition(workload, "QuotaReserved") or {}
        out.append(Why("kueue", me, "Kueue deactivated the workload"
                       + (f": {said['message']}" if said.get("message") else ""),
                       "fix what the message says, then resubmit the job (a deactivated "
                       "workload is never admitted again)"))
    cq_name = (cluster_queue or {}).get("metadata", {}).get("name")
    active = condition(cluster_queue, "Active") if cluster_queue else None
    if cluster_queue is None and not is_true(workload, "Admitted"):
        said = condition(workload, "QuotaReserved") or {}
        out.append(Why("kueue", me, said.get("message") or "no ClusterQueue serves the "
                       "workload's namespace", "create the team's queues: `pulumi up` "
                       "declares a ClusterQueue and LocalQueue per raytpu:teams entry"))
    elif active is not None and active.get("status") == "False":
        out.append(Why("kueue", f"ClusterQueue {cq_name}",
                       f"ClusterQueue {cq_name} is inactive ({active.get('reason')}): "
                       f"{active.get('message', '')}".rstrip(": "),
                       _inactive_fix(str(active.get("reason")))))
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        state, name = check.get("state"), check.get("name")
        text = f": {check['message']}" if check.get("message") else ""
        if state == "Rejected":
            out.append(Why("kueue", me, f"admission check {name} rejected it{text}",
                           f"fix what {name} reports, then resubmit (Kueue deactivates a "
                           "rejected workload)"))
        elif state in ("Pending", "Retry") and is_true(workload, "QuotaReserved"):
            out.append(Why("kueue", me, f"quota reserved; admission check {name} is "
                           f"{state}{text}", f"the controller of {name} has not marked it "
                           "Ready: see that controller (for a ProvisioningRequest, the GKE "
                           "capacity request and its events)"))
    reserved = condition(workload, "QuotaReserved")
    if not is_true(workload, "QuotaReserved") and not out:
        out.append(_quota_why(me, reserved, cluster_queue))
    if is_true(workload, "Admitted"):
        out.extend(_flavor_whys(workload, me, groups, nodes))
    return out


def _quota_why(me: str, reserved: dict[str, Any] | None,
               cq: dict[str, Any] | None) -> Why:
    message = (reserved or {}).get("message") or ""
    if not message:
        return Why("kueue", me, "Kueue has not evaluated the workload yet",
                   "if it stays so, check that Kueue runs and the namespace's LocalQueue "
                   "points at an existing ClusterQueue")
    if cq is None:
        return Why("kueue", me, message, "see Kueue's message")
    nominal, limit = _tpu_quota(cq)
    name = (cq.get("metadata") or {}).get("name")
    quota = f"nominal {nominal} chips" + ("" if limit is None else f", borrowing limit {limit}")
    if "maximum capacity" in message:
        what = ("over the borrowing limit" if limit else "more than the cohort holds"
                if limit is None else "more than the team's quota")
        return Why("kueue", me, f"asks {what}, so it can never be admitted: {message}",
                   f"ask for fewer slices, or raise the team's quota in raytpu:teams "
                   f"(ClusterQueue {name}: {quota})")
    if "insufficient unused quota" in message:
        return Why("kueue", me, f"over quota: {message}",
                   "wait for the team's running jobs or the cohort's borrowers to free chips "
                   f"(ClusterQueue {name}: {chips_in_use(cq)} in use, {quota}), or raise the "
                   "team's quota in raytpu:teams")
    return Why("kueue", me, message, f"see ClusterQueue {name} and Kueue's message")


def _flavor_whys(workload: dict[str, Any], me: str, groups: Sequence[SliceGroup],
                 nodes: Sequence[dict[str, Any]]) -> list[Why]:
    """An admitted workload whose TPU flavor has no node at all (Kueue admits by quota, not
    by nodes), unless a group of that flavor is elastic (its nodes come on demand)."""
    out = []
    admission = (workload.get("status") or {}).get("admission") or {}
    for ps in admission.get("podSetAssignments") or []:
        flavor = (ps.get("flavors") or {}).get(TPU_RESOURCE)
        mine = [g for g in groups if g.flavor_name == flavor]
        if not flavor or not mine or any(g.elastic for g in mine):
            continue
        selector = mine[0].node_selector
        if nodes_matching(nodes, selector) == 0:
            labels = ", ".join(f"{k}={v}" for k, v in selector.items())
            out.append(Why("kueue", me, f"admitted to flavor {flavor}, but no node carries "
                           f"its labels ({labels})", "Kueue admits by quota, not by nodes: "
                           f"create the node pools of group {mine[0].name} (`pulumi up`), or "
                           "lower the team's quota to the slices that exist"))
    return out

