"""Why a Ray pod waits or a queued job does not start, on objects recorded as the API server
returns them (JSON, camelCase), one case at a time, and the order the reasons are shown in.

Field names are checked where a schema is at hand: pods, nodes and events go through the
official client's deserializer and back (:func:`raytpu.operations.why.plain`), which drops
any field the Kubernetes API does not have; the ClusterQueue against the Kueue v0.19.2 CRD,
the RayCluster against the KubeRay CRD (``../shared/ref``). Workload fields follow
kueue apis/kueue/v1beta2/workload_types.go (no Workload CRD in ``../shared/ref``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from infra_support import REPO
from raytpu.facts.catalog import slice_shape
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.facts.slice_group import SliceGroup
from raytpu.operations.why import Why, first, plain, workload_whys
from raytpu.operations.why_pods import cluster_whys, image_why, kuberay_whys, scheduler_why

kubernetes = pytest.importorskip("kubernetes")

POD16 = SliceGroup("pod16", slice_shape("v5litepod-16"), 2, 2, 2)
ELASTIC = SliceGroup("pod16", slice_shape("v5litepod-16"), 0, 2, 0, elastic=True)
SINGLE = SliceGroup("single", slice_shape("v5litepod-4"), 1, 1, 1)
T = "2026-12-07T22:00:00Z"
HINT = "the webhook hint"


def node(name: str, pool: str, group: SliceGroup = POD16) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {NODEPOOL_LABEL: pool,
                                                  **group.node_selector}},
            "spec": {"taints": [{"key": "google.com/tpu", "value": "present",
                                 "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                                       "reason": "KubeletReady", "lastHeartbeatTime": T,
                                       "lastTransitionTime": T}]}}


def pool_nodes(pool: str, n: int = 4, group: SliceGroup = POD16) -> list[dict[str, Any]]:
    return [node(f"gke-{pool}-{i}", pool, group) for i in range(n)]


def pod(name: str, *, replica: str = "0", phase: str = "Pending", node_name: str | None = None,
        selector: dict[str, str] | None = None, scheduled: dict[str, str] | None = None,
        waiting: dict[str, str] | None = None, mutated: bool = True,
        group: SliceGroup = POD16, ns: str = "ray") -> dict[str, Any]:
    labels = {"ray.io/cluster": "raytpu", "ray.io/group": group.name,
              "ray.io/node-type": "worker", "ray.io/worker-group-replica-index": replica,
              "app.kubernetes.io/name": "kuberay"}
    env = [{"name": "TPU_WORKER_ID", "value": "0"}] if mutated else []
    spec: dict[str, Any] = {
        "containers": [{"name": "ray-worker", "image": "us-docker.pkg.dev/p/r/ray:1",
                        "env": env, "resources": {"limits": {"google.com/tpu": "4"},
                                                  "requests": {"google.com/tpu": "4"}}}],
        "nodeSelector": selector if selector is not None else dict(group.node_selector)}
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {"phase": phase}
    if scheduled:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "lastTransitionTime": T,
                                 **scheduled}]
    if waiting:
        status["containerStatuses"] = [{"name": "ray-worker", "image": "us-docker.pkg.dev/p/r/"
                                        "ray:1", "imageID": "", "ready": False,
                                        "restartCount": 0, "started": False,
                                        "state": {"waiting": waiting}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec,
            "status": status}


def event(kind: str, name: str, reason: str, message: str, *, ns: str = "ray",
          type_: str = "Warning", component: str = "kuberay-operator") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.18a", "namespace": ns},
            "involvedObject": {"kind": kind, "name": name, "namespace": ns},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": component}, "count": 3, "firstTimestamp": T,
            "lastTimestamp": T}


def raycluster(groups: list[tuple[str, int, int]], ns: str = "ray",
               name: str = "raytpu") -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "containers": [{"name": "ray-head", "image": "ray:1"}]}}},
                "workerGroupSpecs": [{"groupName": g, "replicas": r, "numOfHosts": h,
                                      "minReplicas": 0, "maxReplicas": r,
                                      "rayStartParams": {}, "template": {"spec": {
                                          "containers": [{"name": "ray-worker",
                                                          "image": "ray:1"}]}}}
                                     for g, r, h in groups]}}


def cluster_queue(*, nominal: int = 16, borrowing: int | None = 0,
                  active: dict[str, str] | None = None, used: int = 16) -> dict[str, Any]:
    tpu: dict[str, Any] = {"name": "google.com/tpu", "nominalQuota": nominal}
    if borrowing is not None:
        tpu["borrowingLimit"] = borrowing
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "team-a"},
            "spec": {"cohortName": "fleet", "namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "team-a"}},
                "resourceGroups": [{"coveredResources": ["google.com/tpu"], "flavors": [
                    {"name": POD16.flavor_name, "resources": [tpu]}]}]},
            "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                       "message": "Can admit new workloads",
                                       "lastTransitionTime": T, **(active or {})}],
                       "admittedWorkloads": 1, "pendingWorkloads": 1,
                       "flavorsUsage": [{"name": POD16.flavor_name, "resources": [
                           {"name": "google.com/tpu", "total": str(used), "borrowed": "0"}]}]}}


def workload(*conditions: dict[str, str], checks: list[dict[str, str]] | None = None,
             flavor: str | None = None, active: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"lastTransitionTime": T, "reason": "Pending",
                                              "message": "", **c} for c in conditions]}
    if checks:
        status["admissionChecks"] = [{"lastTransitionTime": T, **c} for c in checks]
    if flavor:
        status["admission"] = {"clusterQueue": "team-a", "podSetAssignments": [
            {"name": "pod16", "flavors": {"google.com/tpu": flavor}, "count": 4}]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "rayjob-train-1-3f2a1", "namespace": "team-a",
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                                              "name": "train-1", "uid": "u1",
                                              "controller": True}]},
            "spec": {"queueName": "default", "active": active, "podSets": [
                {"name": "pod16", "count": 4, "template": {"spec": {"containers": []}}}]},
            "status": status}


def _roundtrip(obj: dict[str, Any], model: str) -> Any:
    """The object through the client's deserializer and :func:`plain` back: unchanged, so
    every field name is one the Kubernetes API has."""
    parsed = kubernetes.client.ApiClient().deserialize(json.dumps(obj), model,
                                                       "application/json")
    return plain(parsed)


@pytest.mark.parametrize(("obj", "model"), [
    (node("n", "pod16-0"), "V1Node"),
    (pod("p", scheduled={"message": "m"}, waiting={"reason": "ErrImagePull", "message": "x"},
         node_name="n"), "V1Pod"),
    (event("RayCluster", "raytpu", "FailedToCreateWorkerPod", "m"), "CoreV1Event"),
])
def test_recorded_core_objects_have_the_apis_field_names(obj: dict[str, Any], model: str
                                                         ) -> None:
    assert _roundtrip(obj, model) == obj


def _crd_schema(folder: str, file: str, version: str) -> dict[str, Any]:
    path = Path(os.environ.get("RAYTPU_REF") or REPO / ".." / "shared" / "ref") / folder / file
    if not path.is_file():
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(f"CRD {path} missing (set RAYTPU_REF)")
        pytest.skip(f"CRD {path} missing (set RAYTPU_REF)")
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return dict(v["schema"]["openAPIV3Schema"])


def test_recorded_custom_objects_follow_their_crds() -> None:
    cq = jsonschema.Draft202012Validator(_crd_schema(
        "kueue", "kueue.x-k8s.io_clusterqueues.yaml", "v1beta2"))
    for q in (cluster_queue(), cluster_queue(borrowing=None), cluster_queue(active={
            "status": "False", "reason": "FlavorNotFound", "message": "x"})):
        assert list(cq.iter_errors(q)) == []
    rc = jsonschema.Draft202012Validator(_crd_schema("kuberay", "ray.io_rayclusters.yaml",
                                                     "v1"))
    assert list(rc.iter_errors(raycluster([("pod16", 2, 4)]))) == []


# -- Kueue ---------------------------------------------------------------------------------


def test_over_quota_says_so_with_the_teams_usage() -> None:
    wl = workload({"type": "QuotaReserved", "status": "False", "reason": "Pending",
                   "message": "couldn't assign flavors to pod set pod16: insufficient unused "
                   "quota for google.com/tpu in flavor tpu-v5-lite-podslice-4x4, 16 more "
                   "needed"})
    (why,) = workload_whys(wl, cluster_queue(), [POD16], [])
    assert why.source == "kueue" and why.object == "Workload team-a/rayjob-train-1-3f2a1"
    assert why.reason.startswith("over quota: couldn't assign flavors")
    assert "(ClusterQueue team-a: 16 in use, nominal 16 chips, borrowing limit 0)" in why.fix


def test_a_request_past_the_borrowing_limit_can_never_be_admitted() -> None:
    wl = workload({"type": "QuotaReserved", "status": "False", "reason": "Pending",
                   "message": "couldn't assign flavors to pod set pod16: insufficient quota "
                   "for google.com/tpu in flavor f, previously considered podsets requests "
                   "(0) + current podset request (32) > maximum capacity (24)"})
    (why,) = workload_whys(wl, cluster_queue(borrowing=8), [POD16], [])
    assert why.reason.startswith("asks over the borrowing limit, so it can never be admitted")
    assert "nominal 16 chips, borrowing limit 8" in why.fix


def test_an_admission_check_that_never_turns_ready() -> None:
    wl = workload({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                  {"type": "Admitted", "status": "False", "reason": "NoChecks"},
                  checks=[{"name": "dws-prov", "state": "Pending",
                           "message": "Waiting for capacity"}])
    (why,) = workload_whys(wl, cluster_queue(), [POD16], [])
    assert why.reason == "quota reserved; admission check dws-prov is Pending: Waiting for " \
                         "capacity"
    assert "controller of dws-prov" in why.fix


def test_a_rejected_admission_check() -> None:
    wl = workload({"type": "QuotaReserved", "status": "False"},
                  checks=[{"name": "dws-prov", "state": "Rejected", "message": "no capacity"}])
    (why,) = workload_whys(wl, cluster_queue(), [POD16], [])
    assert why.reason == "admission check dws-prov rejected it: no capacity"


def test_an_inactive_cluster_queue_names_its_missing_flavor() -> None:
    cq = cluster_queue(active={"status": "False", "reason": "FlavorNotFound", "message":
                               "Can't admit new workloads: references missing "
                               "ResourceFlavor(s): tpu-v5-lite-podslice-4x4."})
    wl = workload({"type": "QuotaReserved", "status": "False", "reason": "Inadmissible",
                   "message": "ClusterQueue team-a is inactive"})
    (why,) = workload_whys(wl, cq, [POD16], [])
    assert why.object == "ClusterQueue team-a"
    assert "is inactive (FlavorNotFound)" in why.reason and "missing ResourceFlavor" in why.reason
    assert "create the ResourceFlavor" in why.fix


def test_admitted_to_a_flavor_whose_nodes_do_not_exist() -> None:
    wl = workload({"type": "QuotaReserved", "status": "True"},
                  {"type": "Admitted", "status": "True"}, flavor=POD16.flavor_name)
    (why,) = workload_whys(wl, cluster_queue(), [POD16], pool_nodes("single", 1, SINGLE))
    assert why.reason.startswith(f"admitted to flavor {POD16.flavor_name}, but no node")
    assert workload_whys(wl, cluster_queue(), [POD16], pool_nodes("pod16-0")) == []
    # An elastic group's nodes come on demand: not a reason.
    assert workload_whys(wl, cluster_queue(), [ELASTIC], []) == []


def test_a_finished_or_unevaluated_workload() -> None:
    assert workload_whys(workload({"type": "Finished", "status": "True"}), None, [], []) == []
    (why,) = workload_whys(workload(), cluster_queue(), [POD16], [])
    assert why.reason == "Kueue has not evaluated the workload yet"
    (gone,) = workload_whys(workload({"type": "QuotaReserved", "status": "False", "message":
                                      "LocalQueue default doesn't exist"}), None, [], [])
    assert gone.reason == "LocalQueue default doesn't exist" and "pulumi up" in gone.fix


# -- the scheduler, autoscaling ------------------------------------------------------------

UNSCHEDULABLE = ("0/8 nodes are available: 4 Insufficient google.com/tpu, 4 node(s) didn't "
                 "match Pod's node affinity/selector. preemption: 0/8 nodes are available: 4 "
                 "No preemption victims found for incoming pod, 4 Preemption is not helpful "
                 "for scheduling.")


def test_a_selector_that_matches_no_pool() -> None:
    p = pod("w", selector={"cloud.google.com/gke-nodepool": "pod32-0"},
            scheduled={"message": "0/8 nodes are available: 8 node(s) didn't match Pod's "
                       "node affinity/selector."})
    why = scheduler_why(p, POD16, pool_nodes("pod16-0") + pool_nodes("pod16-1"))
    assert why is not None and why.source == "scheduler" and why.object == "Pod ray/w"
    assert why.reason.startswith("no node matches its node selector "
                                 "(cloud.google.com/gke-nodepool=pod32-0)")


def test_too_few_tpus_in_a_fixed_group() -> None:
    p = pod("w", scheduled={"message": UNSCHEDULABLE})
    why = scheduler_why(p, POD16, pool_nodes("pod16-0"))
    assert why is not None and why.reason.startswith(
        "too few google.com/tpu: group pod16's 2 slice(s) are taken")
    assert "preemption" not in why.reason  # the scheduler's first sentence only


def test_an_elastic_group_at_its_max_or_still_scaling() -> None:
    p = pod("w", scheduled={"message": UNSCHEDULABLE})
    full = scheduler_why(p, ELASTIC, pool_nodes("pod16-0") + pool_nodes("pod16-1"))
    assert full is not None and full.source == "scheduler"
    assert "at its autoscaling.max (2 slices), all taken" in full.reason
    assert "autoscaling.max" in full.fix
    scaling = scheduler_why(p, ELASTIC, pool_nodes("pod16-0"))
    assert scaling is not None and scaling.source == "autoscaling"
    assert scaling.reason.startswith("group pod16 is scaling up: 1 of at most 2 slices")
    # From zero: no node has the shape yet, the group is elastic: scaling, not "no node".
    zero = scheduler_why(pod("w"), ELASTIC, [])
    assert zero is not None and zero.source == "autoscaling"
    refused = scheduler_why(p, ELASTIC, [], [event(
        "Pod", "w", "NotTriggerScaleUp", "pod didn't trigger scale-up: 2 max node group size "
        "reached", type_="Normal", component="cluster-autoscaler")])
    assert refused is not None and "max node group size reached" in refused.reason


def test_a_taint_not_tolerated() -> None:
    p = pod("w", scheduled={"message": "0/4 nodes are available: 4 node(s) had untolerated "
                            "taint {google.com/tpu: present}. preemption: 0/4 nodes"})
    why = scheduler_why(p, POD16, pool_nodes("pod16-0"))
    assert why is not None and why.reason.startswith(
        "a taint not tolerated {google.com/tpu: present}")
    assert why.fix == "add a toleration for {google.com/tpu: present} to the pod template"


def test_a_running_or_unscheduled_but_placeable_pod_has_no_scheduler_reason() -> None:
    assert scheduler_why(pod("w", phase="Running", node_name="gke-pod16-0-0"), POD16,
                         pool_nodes("pod16-0")) is None


# -- KubeRay, the webhook, the image -------------------------------------------------------

PSA = ('Failed to create worker Pod for the cluster ray/raytpu, pods "raytpu-pod16-worker-x" '
       'is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork='
       'true)')


def test_a_pod_security_refusal_names_the_pods_kuberay_could_not_create() -> None:
    rc = raycluster([("pod16", 2, 4)])
    pods = [pod(f"w{i}", replica="0", phase="Running") for i in range(4)]
    events = [event("RayCluster", "raytpu", "FailedToCreateWorkerPod", PSA)]
    (why,) = kuberay_whys(rc, pods, events)
    assert why.source == "kuberay" and why.object == "RayCluster ray/raytpu"
    assert why.reason.startswith("KubeRay cannot create pods (1 of group headgroup, 4 of "
                                 "group pod16): FailedToCreateWorkerPod: pods ")
    assert 'violates PodSecurity "baseline:latest"' in why.reason
    assert "pod-security.kubernetes.io/enforce" in why.fix
    # Every pod there (the event is history): no reason.
    head = {**pod("h", phase="Running"), "metadata": {"name": "h", "namespace": "ray",
                                                      "labels": {"ray.io/group": "headgroup"}}}
    full = [head, *pods, *(pod(f"v{i}", replica="1", phase="Running") for i in range(4))]
    assert kuberay_whys(rc, full, events) == []


def test_a_missing_webhook_and_a_slice_split_across_pools() -> None:
    rc = raycluster([("pod16", 1, 4)])
    nodes = pool_nodes("pod16-0") + pool_nodes("pod16-1")
    pods = [pod(f"w{i}", phase="Running", mutated=False,
                node_name=f"gke-pod16-{i % 2}-{i}") for i in range(4)]
    pending, own, slices = cluster_whys(rc, [POD16], pods, nodes, [], HINT)
    assert pending == {} and own == []
    split, webhook = slices[("pod16", "0")]  # the broken slice first, then its cause
    assert webhook.source == split.source == "tpu-webhook"
    assert webhook.reason.startswith("the TPU webhook did not mutate 4 pod(s) of slice #0")
    assert webhook.fix == HINT
    assert split.object == "RayCluster ray/raytpu group pod16 slice #0"
    assert split.reason == ("broken slice: its 4 hosts sit on different node pools: "
                            "pod16-0 (2), pod16-1 (2)")
    # Mutated and on one pool: nothing to say.
    ok = [pod(f"w{i}", phase="Running", node_name=f"gke-pod16-0-{i}") for i in range(4)]
    assert cluster_whys(rc, [POD16], ok, nodes, [], HINT)[2] == {}


def test_image_pull_errors_from_the_kubelet() -> None:
    p = pod("w", node_name="gke-pod16-0-0", waiting={
        "reason": "ImagePullBackOff",
        "message": 'Back-off pulling image "us-docker.pkg.dev/p/r/ray:1"'})
    why = image_why(p, [])
    assert why is not None and why.source == "image"
    assert why.reason == ('ImagePullBackOff for us-docker.pkg.dev/p/r/ray:1: Back-off '
                          'pulling image "us-docker.pkg.dev/p/r/ray:1"')
    failed = event("Pod", "w", "Failed", 'Failed to pull image "x": not found',
                   component="kubelet")
    from_event = image_why(pod("w"), [failed])
    assert from_event is not None and from_event.reason.startswith("Failed to pull image")


# -- the order -------------------------------------------------------------------------------


def test_the_first_reason_follows_the_issues_order() -> None:
    found = [Why(s, "o", s, "f") for s in ("autoscaling", "image", "tpu-webhook", "kuberay",
                                           "scheduler", "kueue")]
    assert first(found) == found[-1]
    assert first(found[:-1]) == found[-2]
    assert first([Why("image", "a", "1", "f"), Why("image", "b", "2", "f")]).object == "a"  # type: ignore[union-attr]
    assert first([]) is None


def test_a_pending_pod_gets_its_scheduler_reason_before_its_webhook_one() -> None:
    rc = raycluster([("pod16", 1, 4)])
    pods = [pod(f"w{i}", mutated=False, scheduled={"message": UNSCHEDULABLE})
            for i in range(4)]
    pending, _, _ = cluster_whys(rc, [POD16], pods, pool_nodes("pod16-0"), [], HINT)
    whys = pending["ray/w0"]
    assert [w.source for w in whys] == ["scheduler", "tpu-webhook"]
    assert first(reversed(whys)) == whys[0]
