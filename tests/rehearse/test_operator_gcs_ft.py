"""The ``cluster`` tier: GCS fault tolerance as the real KubeRay operator (1.5.0) carries it
out on the rehearsal's control plane. prod declares ``gcsFaultToleranceOptions``, dev does
not; each stack is rehearsed once (module-scoped) and its head pod deleted while it is up.

What the operator does, from its 1.5.0 source (``controllers/ray/common/pod.go
configureGCSFaultTolerance``, ``raycluster_controller.go reconcilePods``/``shouldDeletePod``):
with the field set, the head gets ``RAY_REDIS_ADDRESS``, ``REDIS_PASSWORD`` (the field's
``valueFrom`` as it is), ``RAY_external_storage_namespace`` (the RayCluster's UID) and the
annotations ``ray.io/ft-enabled: "true"`` and ``ray.io/external-storage-namespace``; each
worker gets ``RAY_gcs_rpc_server_reconnect_timeout_s=600``; the RayCluster gets the
``ray.io/gcs-ft-redis-cleanup-finalizer``, and on deletion a Job built from the head pod
clears the storage namespace. A head pod that goes away is created again, with or without
the field; the operator deletes no worker for it. KWOK fakes only the pods' status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from raytpu.components.ray_gcs_ft import CA_DIR, CA_KEY
from raytpu.facts.gcs_ft_env import (
    CA_ENV,
    KUBERAY_RECONNECT_TIMEOUT_S,
    RECONNECT_ENV,
    REDIS_ADDRESS_ENV,
    REDIS_PASSWORD_ENV,
    STORAGE_NAMESPACE_ENV,
)
from raytpu.plan.engine import run_plan
from raytpu.rehearse.api import Api
from raytpu.rehearse.build import Cache
from raytpu.rehearse.run import Live, rehearse

CLUSTER = "raytpu"
NAMESPACE = "ray"
SECRET = f"{CLUSTER}-gcs-redis"
FT_ANNOTATION = "ray.io/ft-enabled"
STORAGE_ANNOTATION = "ray.io/external-storage-namespace"
FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"
# The operator requeues a RayCluster every 2 s (DefaultRequeueDuration): a wrong deletion
# of the workers would show within a few of those after the new head appears.
AFTER_HEAD_S = 5.0


@dataclass
class Seen:
    """What the live operator made of one stack, read while it was up."""

    cluster: dict[str, Any]
    head: dict[str, Any]
    workers: list[dict[str, Any]]
    new_heads: list[dict[str, Any]] = field(default_factory=list)
    workers_after: list[dict[str, Any]] = field(default_factory=list)
    cleanup_jobs: list[dict[str, Any]] = field(default_factory=list)


def _pods(api: Api, node_type: str) -> list[dict[str, Any]]:
    return [p for p in api.list_items("v1", "Pod", NAMESPACE, labelSelector=(
        f"ray.io/cluster={CLUSTER},ray.io/node-type={node_type}"))
        if not p["metadata"].get("deletionTimestamp")]


def _until(probe: Callable[[], list[dict[str, Any]]], timeout: float = 30.0
           ) -> list[dict[str, Any]]:
    """What ``probe`` finds, once it finds something or at ``timeout``: an empty answer is
    for the test that needs it to fail on, not the rehearsal."""
    deadline = time.monotonic() + timeout
    while not (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


def _clear_cleanup_job(api: Api, jobs: list[dict[str, Any]]) -> None:
    """Not asserted (KWOK fakes the Job's success): once the RayCluster is gone, the Job and
    its Succeeded pod, which carries ray.io/cluster and would hold the rehearsal's settle
    wait (every Ray pod Running) to its timeout."""
    deadline = time.monotonic() + 30
    while (time.monotonic() < deadline and [c for c in api.list_items(
            "ray.io/v1", "RayCluster", NAMESPACE) if c["metadata"]["name"] == CLUSTER]):
        time.sleep(0.5)
    for job in jobs:
        api.delete("batch/v1", "Job", job["metadata"]["name"], NAMESPACE)
    for pod in api.list_items("v1", "Pod", NAMESPACE, labelSelector=f"ray.io/cluster={CLUSTER}"):
        api.delete("v1", "Pod", pod["metadata"]["name"], NAMESPACE)


def _rehearse_head_loss(stack: str, cache: Cache, crds: Path) -> Seen:
    seen: list[Seen] = []

    def lose_the_head(live: Live) -> None:
        api = live.api
        (head,) = _pods(api, "head")
        s = Seen(api.get("ray.io/v1", "RayCluster", CLUSTER, NAMESPACE), head,
                 _pods(api, "worker"))
        seen.append(s)
        api.delete("v1", "Pod", head["metadata"]["name"], NAMESPACE)
        old = head["metadata"]["uid"]
        s.new_heads = _until(lambda: [
            p for p in _pods(api, "head") if p["metadata"]["uid"] != old])
        time.sleep(AFTER_HEAD_S)
        s.workers_after = _pods(api, "worker")
        if stack == "prod":
            # Deleting the RayCluster: the finalizer's cleanup Job, built from the head pod.
            api.delete("ray.io/v1", "RayCluster", CLUSTER, NAMESPACE)
            s.cleanup_jobs = _until(lambda: [
                j for j in api.list_items("batch/v1", "Job", NAMESPACE)
                if j["metadata"].get("labels", {}).get("ray.io/cluster") == CLUSTER])
            _clear_cleanup_job(api, s.cleanup_jobs)

    r = rehearse(run_plan(stack, preview=True), cache, crds=crds, then=lose_the_head)
    assert [o for o in r.objects if not o.admitted] == []
    (s,) = seen
    return s


@pytest.fixture(scope="module")
def prod(built_cache: Cache, ref_dir: Path) -> Seen:
    return _rehearse_head_loss("prod", built_cache, ref_dir)


@pytest.fixture(scope="module")
def dev(built_cache: Cache, ref_dir: Path) -> Seen:
    return _rehearse_head_loss("dev", built_cache, ref_dir)


def _env(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    # Container 0 is the Ray container (KubeRay's RayContainerIndex).
    return {e["name"]: e for e in pod["spec"]["containers"][0].get("env", [])}


def _uids(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["uid"] for p in pods}


def _assert_ft_head(pod: dict[str, Any], cluster: dict[str, Any]) -> None:
    env = _env(pod)
    assert {REDIS_ADDRESS_ENV, REDIS_PASSWORD_ENV, STORAGE_NAMESPACE_ENV} <= set(env)
    ft = cluster["spec"]["gcsFaultToleranceOptions"]
    assert env[REDIS_ADDRESS_ENV]["value"] == ft["redisAddress"]
    # The password reaches the head only by reference to the stack's Secret.
    assert "value" not in env[REDIS_PASSWORD_ENV]
    assert env[REDIS_PASSWORD_ENV]["valueFrom"] == {
        "secretKeyRef": {"name": SECRET, "key": "password"}}
    # The RayCluster's UID: the same Redis namespace for every head the cluster ever has.
    assert env[STORAGE_NAMESPACE_ENV]["value"] == cluster["metadata"]["uid"]
    assert pod["metadata"]["annotations"][FT_ANNOTATION] == "true"
    assert pod["metadata"]["annotations"][STORAGE_ANNOTATION] == cluster["metadata"]["uid"]
    assert env[CA_ENV]["value"] == f"{CA_DIR}/{CA_KEY}"  # ours, beside KubeRay's


def test_prod_head_and_workers_carry_the_gcs_ft_environment_kuberay_injects(
        prod: Seen) -> None:
    _assert_ft_head(prod.head, prod.cluster)
    assert prod.workers
    for worker in prod.workers:
        # prod sets no worker timeout of its own: KubeRay's 600 s, so a raylet outlasts a
        # head restart (Ray's own default, 60 s, does not).
        assert _env(worker)[RECONNECT_ENV]["value"] == str(KUBERAY_RECONNECT_TIMEOUT_S)
        assert not {REDIS_ADDRESS_ENV, REDIS_PASSWORD_ENV} & set(_env(worker))
    assert FINALIZER in prod.cluster["metadata"].get("finalizers", [])


def test_prod_head_deleted_a_new_head_on_the_same_redis_namespace_workers_kept(
        prod: Seen) -> None:
    (new_head,) = prod.new_heads  # a pod of another UID than the one deleted
    _assert_ft_head(new_head, prod.cluster)  # it reads the old head's GCS back
    assert _uids(prod.workers_after) == _uids(prod.workers)


def test_prod_cluster_deletion_runs_the_redis_cleanup_job_with_the_heads_ca_and_password(
        prod: Seen) -> None:
    # ray_gcs_ft.py's claim: the cleanup Job copies the head's container, so it reads the
    # CA it needs to speak TLS to Memorystore, and the password from the same Secret.
    (job,) = prod.cleanup_jobs
    spec = job["spec"]["template"]["spec"]
    env = _env(job["spec"]["template"])
    assert env[CA_ENV]["value"] == f"{CA_DIR}/{CA_KEY}"
    assert any(m["mountPath"] == CA_DIR for m in spec["containers"][0]["volumeMounts"])
    assert env[REDIS_PASSWORD_ENV]["valueFrom"]["secretKeyRef"]["name"] == SECRET
    assert env[STORAGE_NAMESPACE_ENV]["value"] == prod.cluster["metadata"]["uid"]
    assert "cleanup_redis_storage" in spec["containers"][0]["args"][0]


def test_dev_without_gcs_ft_the_operator_recreates_the_head_and_deletes_no_worker(
        dev: Seen) -> None:
    assert "gcsFaultToleranceOptions" not in dev.cluster["spec"]
    assert FINALIZER not in dev.cluster["metadata"].get("finalizers", [])
    assert dev.head["metadata"]["annotations"][FT_ANNOTATION] == "false"
    assert not {REDIS_ADDRESS_ENV, REDIS_PASSWORD_ENV, STORAGE_NAMESPACE_ENV} & set(_env(dev.head))
    assert dev.workers and all(RECONNECT_ENV not in _env(w) for w in dev.workers)
    assert len(dev.new_heads) == 1  # a pod of another UID than the one deleted
    # The operator leaves the workers be here too. What differs without GCS FT is not the
    # operator: the new GCS knows none of the old nodes, each worker's raylet exits (within
    # Ray's 60 s reconnect timeout) and the kubelet restarts its container (dev's
    # restartPolicy: the pod default, Always) as a new node with nothing of the old one;
    # under restartPolicy Never (autoscaler v2) the pod fails and KubeRay replaces it. No
    # kubelet here: KWOK would show neither, so neither is asserted.
    assert _uids(dev.workers_after) == _uids(dev.workers)
    assert all(w["spec"].get("restartPolicy", "Always") == "Always" for w in dev.workers)
