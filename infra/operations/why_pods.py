"""Why a Ray pod waits, or a slice is broken, past Kueue: the scheduler, KubeRay, the TPU
webhook, the image and the autoscaler (:mod:`raytpu.operations.why` has the model, the
order and Kueue). Pure: objects as the API server returns them (JSON dicts)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from raytpu.facts.catalog import TPU_RESOURCE
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.operations.why import Why, condition, nodes_matching, ref

if TYPE_CHECKING:
    from raytpu.facts.slice_group import SliceGroup

RAY_GROUP_LABEL = "ray.io/group"
REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"
REPLICA_NAME_LABEL = "ray.io/worker-group-replica-name"
WEBHOOK_REPLICA_LABEL = "replicaIndex"
"""What the TPU webhook (its fallback path; the rehearsal's emulation) labels a pod with."""
WEBHOOK_ENV = ("TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES")
"""What the TPU webhook injects into every multi-host TPU container."""
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                                "ErrImageNeverPull"})
KUBERAY_CREATE_FAILED = frozenset({"FailedToCreateWorkerPod", "FailedToCreateHeadPod"})
"""KubeRay's Warning event reasons when the API server refuses a pod it creates
(ray-operator/controllers/ray/utils/constant.go K8sEventType)."""

_TAINT = re.compile(r"untolerated taint\(?s?\)? (\{[^}]*\})")


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))


def requests_tpu(pod: dict[str, Any]) -> bool:
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        if TPU_RESOURCE in (res.get("limits") or {}) or TPU_RESOURCE in (res.get("requests")
                                                                           or {}):
            return True
    return False


def replica_key(pod: dict[str, Any]) -> str:
    labels = _labels(pod)
    return (labels.get(REPLICA_INDEX_LABEL) or labels.get(REPLICA_NAME_LABEL)
            or labels.get(WEBHOOK_REPLICA_LABEL) or "?")


def pool_capacity(group: SliceGroup, nodes: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """Slices of ``group`` that have all their nodes now, and the most it may have."""
    by_pool = Counter(_labels(n).get(NODEPOOL_LABEL) for n in nodes)
    if group.shape.multi_host:
        have = sum(by_pool[p] >= group.shape.hosts for p in group.pool_names)
    else:
        have = by_pool[group.name]
    return have, group.max_slices


# -- the scheduler --------------------------------------------------------------------------


def _scaling(me: str, group: SliceGroup, nodes: Sequence[dict[str, Any]],
             events: Sequence[dict[str, Any]], said: str) -> Why:
    have, most = pool_capacity(group, nodes)
    autoscaler = [str(e.get("message")) for e in events if e.get("reason") == "NotTriggerScaleUp"]
    if have >= most or autoscaler:
        why = (f"group {group.name} is at its autoscaling.max ({most} slices), all taken"
               if have >= most else f"the autoscaler does not scale group {group.name} up: "
               f"{autoscaler[-1]}")
        return Why("scheduler", me, f"too few {TPU_RESOURCE}: {why}; the scheduler says: "
                   f"{said}", f"raise raytpu:slices[{group.name}].autoscaling.max, or wait for "
                   "a slice to free (a job of another team may hold it)")
    return Why("autoscaling", me, f"group {group.name} is scaling up: {have} of at most "
               f"{most} slices have nodes" + (f"; the scheduler says: {said}" if said else ""),
               "nothing to do while GKE adds nodes (a TPU slice takes minutes); if it stays, "
               "read the cluster autoscaler's events on the pod")


def scheduler_why(pod: dict[str, Any], group: SliceGroup | None,
                  nodes: Sequence[dict[str, Any]],
                  events: Sequence[dict[str, Any]] = ()) -> Why | None:
    """The scheduler's reason (``PodScheduled=False``), or a node selector no node matches;
    for an elastic group, whether its pools are at ``autoscaling.max`` or still scaling."""
    me = ref(pod, "Pod")
    selector = dict((pod.get("spec") or {}).get("nodeSelector") or {})
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    if gates:
        return Why("kueue" if any(str(g).startswith("kueue.x-k8s.io/") for g in gates)
                   else "scheduler", me, f"held by scheduling gates {', '.join(map(str, gates))}",
                   "whoever set the gate removes it (Kueue: once the workload is admitted)")
    scheduled = condition(pod, "PodScheduled") or {}
    message = str(scheduled.get("message") or "").split(". preemption:")[0].rstrip(".")
    no_node = bool(selector) and nodes_matching(nodes, selector) == 0
    if scheduled.get("status") != "False" and not no_node:
        return None
    elastic = group is not None and group.elastic
    if no_node and elastic and group is not None and all(
            selector.get(k) == v for k, v in group.node_selector.items()):
        return _scaling(me, group, nodes, events, message)
    if no_node:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
        return Why("scheduler", me, f"no node matches its node selector ({labels})"
                   + (f"; the scheduler says: {message}" if message else ""),
                   "the selector names no node pool of the cluster: check the worker group's "
                   "nodeSelector against raytpu:slices, or create the pool (`pulumi up`)")
    if f"Insufficient {TPU_RESOURCE}" in message:
        if elastic and group is not None:
            return _scaling(me, group, nodes, events, message)
        where = f"group {group.name}'s {group.max_slices} slice(s)" if group else "the nodes"
        return Why("scheduler", me, f"too few {TPU_RESOURCE}: {where} are taken; the scheduler "
                   f"says: {message}", "wait for a slice to free, or raise the group's count "
                   "in raytpu:slices")
    taint = _TAINT.search(message)
    if taint:
        return Why("scheduler", me, f"a taint not tolerated {taint.group(1)}: {message}",
                   f"add a toleration for {taint.group(1)} to the pod template")
    if "didn't match Pod's node affinity/selector" in message:
        return Why("scheduler", me, f"no free node of its shape or pool: {message}",
                   "the nodes its selector and affinity pick are taken or absent: compare "
                   "them with the group's node pools")
    if "pod affinity" in message:
        return Why("scheduler", me, f"its slice's pool has no room: {message}",
                   "a slice's hosts must share one pool: the pool is short of Ready nodes, "
                   "or another slice's pods hold them")
    return Why("scheduler", me, message or str(scheduled.get("reason") or "not scheduled"),
               "see the scheduler's message")


# -- KubeRay --------------------------------------------------------------------------------


def _expected_pods(rc: dict[str, Any]) -> dict[str, int]:
    spec = rc.get("spec") or {}
    out = {"headgroup": 1}
    for w in spec.get("workerGroupSpecs") or []:
        if not w.get("suspend"):
            out[str(w.get("groupName"))] = int(w.get("replicas") or 0) * int(
                w.get("numOfHosts") or 1)
    return out


def kuberay_whys(rc: dict[str, Any], pods: Sequence[dict[str, Any]],
                 events: Sequence[dict[str, Any]]) -> list[Why]:
    """KubeRay's refusals (Pod Security, a webhook, a quota): its latest Warning event on the
    RayCluster, while some of the cluster's pods are missing."""
    have = Counter(_labels(p).get(RAY_GROUP_LABEL) for p in pods)
    missing = {g: n - have.get(g, 0) for g, n in _expected_pods(rc).items()
               if n > have.get(g, 0)}
    if not missing or (rc.get("spec") or {}).get("suspend"):
        return []
    name = _name(rc)
    refusals = [e for e in events if e.get("type") == "Warning"
                and e.get("reason") in KUBERAY_CREATE_FAILED
                and (e.get("involvedObject") or {}).get("kind") == "RayCluster"
                and (e.get("involvedObject") or {}).get("name") == name]
    if not refusals:
        return []
    latest = max(refusals, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")
                                             or ""))
    text = re.sub(r"^Failed to create (worker|head) Pod for the cluster \S+, ", "",
                  str(latest.get("message") or ""))
    short = ", ".join(f"{n} of group {g}" for g, n in sorted(missing.items()))
    if "violates PodSecurity" in text:
        fix = ("the namespace's Pod Security level refuses the pod: label the namespace "
               "pod-security.kubernetes.io/enforce with a level that allows it, or make the "
               "pod template comply")
    elif "webhook" in text:
        fix = "an admission webhook refused the pod: fix what it says, or the webhook itself"
    else:
        fix = "the API server refused the pod: fix what it says"
    return [Why("kuberay", ref(rc, "RayCluster"), f"KubeRay cannot create pods ({short}): "
                f"{latest.get('reason')}: {text}", fix)]


# -- the TPU webhook and split slices -------------------------------------------------------


def _mutated(pod: dict[str, Any]) -> bool:
    if WEBHOOK_REPLICA_LABEL in _labels(pod):
        return True
    return any(e.get("name") in WEBHOOK_ENV for c in (pod.get("spec") or {}).get("containers")
               or [] for e in c.get("env") or [])


def webhook_whys(group: SliceGroup, pods: Sequence[dict[str, Any]],
                 nodes: Sequence[dict[str, Any]], hint: str) -> dict[str, list[Why]]:
    """Per replica of a multi-host group: its pods the TPU webhook never mutated, and a slice
    whose hosts sit on more than one node pool (broken: one slice is one pool)."""
    if not group.shape.multi_host:
        return {}
    pool_of = {_name(n): _labels(n).get(NODEPOOL_LABEL) for n in nodes}
    by_replica: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pods:
        by_replica[replica_key(p)].append(p)
    out: dict[str, list[Why]] = {}
    for key, members in by_replica.items():
        whys = []
        pools = Counter(pool_of.get(str((p.get("spec") or {}).get("nodeName")))
                        for p in members if (p.get("spec") or {}).get("nodeName"))
        if len(pools) > 1:
            where = ", ".join(f"{pool} ({n})" for pool, n in sorted(pools.items(),
                                                                    key=lambda x: str(x[0])))
            meta = members[0].get("metadata") or {}
            cluster = f"{meta.get('namespace')}/{_labels(members[0]).get('ray.io/cluster')}"
            whys.append(Why("tpu-webhook", f"RayCluster {cluster} group {group.name} slice #{key}",
                            f"broken slice: its {len(members)} hosts sit on different node "
                            f"pools: {where}", "a multi-host slice is one pool: delete the "
                            "slice's pods so KubeRay recreates them once the TPU webhook "
                            "serves (" + hint + ")"))
        bare = [p for p in members if requests_tpu(p) and not _mutated(p)]
        if bare:
            whys.append(Why("tpu-webhook", ref(bare[0], "Pod"), f"the TPU webhook did not "
                            f"mutate {len(bare)} pod(s) of slice #{key} of group {group.name} "
                            f"(no {' or '.join(WEBHOOK_ENV)}, no {WEBHOOK_REPLICA_LABEL} "
                            "label)", hint))
        if whys:
            out[key] = whys
    return out


# -- the image ------------------------------------------------------------------------------


def image_why(pod: dict[str, Any], events: Sequence[dict[str, Any]]) -> Why | None:
    """A kubelet's pull error: the container's waiting state, else its Warning event."""
    status = pod.get("status") or {}
    for c in [*(status.get("initContainerStatuses") or []),
              *(status.get("containerStatuses") or [])]:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return Why("image", ref(pod, "Pod"), f"{waiting['reason']} for {c.get('image')}: "
                       f"{waiting.get('message', '')}".rstrip(": "), _IMAGE_FIX)
    for e in events:
        if e.get("type") == "Warning" and "Failed to pull image" in str(e.get("message")):
            return Why("image", ref(pod, "Pod"), str(e.get("message")), _IMAGE_FIX)
    return None


_IMAGE_FIX = ("check that the image exists at that tag or digest and that the nodes' service "
              "account may read its registry (roles/artifactregistry.reader); the stack's "
              "image is raytpu:ray.image, else what `pulumi up` pushed")


# -- every reason of one snapshot -----------------------------------------------------------


def _about(events: Sequence[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events if (e.get("involvedObject") or {}).get("kind") == kind
            and (e.get("involvedObject") or {}).get("name") == name]


def job_of(rc: dict[str, Any]) -> str | None:
    """The RayJob a RayCluster was made for (its owner; KubeRay's origin labels)."""
    for o in (rc.get("metadata") or {}).get("ownerReferences") or []:
        if o.get("kind") == "RayJob":
            return str(o.get("name"))
    labels = _labels(rc)
    if labels.get("ray.io/originated-from-crd") == "RayJob":
        return labels.get("ray.io/originated-from-cr-name")
    return None


def pod_whys(pod: dict[str, Any], group: SliceGroup | None, nodes: Sequence[dict[str, Any]],
             events: Sequence[dict[str, Any]]) -> list[Why]:
    """The reasons one Pending pod waits, past Kueue and KubeRay (scheduler, image,
    autoscaler), in the order found."""
    mine = _about(events, "Pod", _name(pod))
    found = [scheduler_why(pod, group, nodes, mine), image_why(pod, mine)]
    return [w for w in found if w is not None]


def cluster_whys(rc: dict[str, Any], groups: Sequence[SliceGroup],
                 pods: Sequence[dict[str, Any]], nodes: Sequence[dict[str, Any]],
                 events: Sequence[dict[str, Any]], webhook_hint: str
                 ) -> tuple[dict[str, list[Why]], list[Why], dict[tuple[str, str], list[Why]]]:
    """One RayCluster's reasons: per Pending pod (``ns/name``), the cluster's own (KubeRay's
    refusals) and per broken slice (group, replica)."""
    by_name = {g.name: g for g in groups}
    ns = (rc.get("metadata") or {}).get("namespace")
    pending: dict[str, list[Why]] = {}
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pods:
        group = by_name.get(_labels(p).get(RAY_GROUP_LABEL, ""))
        if _labels(p).get("ray.io/node-type") == "worker" and group is not None:
            by_group[group.name].append(p)
        if (p.get("status") or {}).get("phase") == "Pending":
            pending[f"{ns}/{_name(p)}"] = pod_whys(p, group, nodes, events)
    slices = {(g, key): whys for g, members in by_group.items()
              for key, whys in webhook_whys(by_name[g], members, nodes, webhook_hint).items()}
    # A pod the webhook never mutated waits or runs broken: its slice's reason is its own too.
    for (g, key), whys in slices.items():
        for p in by_group[g]:
            at = f"{ns}/{_name(p)}"
            if replica_key(p) == key and at in pending:
                pending[at] = [*pending[at], *whys]
    return pending, kuberay_whys(rc, pods, events), slices
