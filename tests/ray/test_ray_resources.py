"""Typed RayCluster/RayJob: camelCase on the wire, CRD-valid, cross-field rules enforced."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
from ray_support import RAYCLUSTER, RAYJOB, SAMPLES, as_object, pod_templates, validate_pod
from raytpu.components.ray_resources import (
    AutoscalerOptionsArgs,
    GcsFaultToleranceOptionsArgs,
    HeadGroupSpecArgs,
    RayCluster,
    RayClusterSpecArgs,
    RayJob,
    RayJobSpecArgs,
    WorkerGroupSpecArgs,
)
from raytpu.facts.catalog import slice_shape
from raytpu.plan.engine import run_program

Validate = Callable[[Mapping[str, Any]], list[str]]
RAW = SAMPLES["v4-fixed"]


def _head() -> HeadGroupSpecArgs:
    return HeadGroupSpecArgs(
        ray_start_params={"num-cpus": "0"},
        service_type="ClusterIP",
        template=k8s.core.v1.PodTemplateSpecArgs(spec=k8s.core.v1.PodSpecArgs(containers=[
            k8s.core.v1.ContainerArgs(name="ray-head", image="rayproject/ray:2.60.0-py311",
                                      image_pull_policy="IfNotPresent"),
        ])),
    )


def _tpu_group(hosts: int = 2) -> WorkerGroupSpecArgs:
    shape = slice_shape("v4-16")
    return WorkerGroupSpecArgs(
        group_name="tpu", replicas=1, min_replicas=0, max_replicas=2, num_of_hosts=hosts,
        ray_start_params={}, idle_timeout_seconds=120,
        template=k8s.core.v1.PodTemplateSpecArgs(spec=k8s.core.v1.PodSpecArgs(
            node_selector=shape.node_selector,
            tolerations=[k8s.core.v1.TolerationArgs(key="google.com/tpu", operator="Exists",
                                                    effect="NoSchedule")],
            containers=[k8s.core.v1.ContainerArgs(
                name="ray-worker", image="rayproject/ray:2.60.0-py311",
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"google.com/tpu": "4"}, limits={"google.com/tpu": "4"}),
            )],
        )),
    )


def _cluster_spec() -> RayClusterSpecArgs:
    return RayClusterSpecArgs(
        ray_version="2.60.0", head_group_spec=_head(), worker_group_specs=[_tpu_group()],
        enable_in_tree_autoscaling=True,
        autoscaler_options=AutoscalerOptionsArgs(version="v2", idle_timeout_seconds=60,
                                                 upscaling_mode="Default"),
        gcs_fault_tolerance_options=GcsFaultToleranceOptionsArgs(
            redis_address="redis:6379", redis_password={"value": "x"}),
    )


def _declare(build: Callable[[], object]) -> dict[str, dict[str, Any]]:
    """Run ``build`` under the recording mocks; the recorded inputs by type."""

    def program() -> None:
        build()

    result = run_program("dev", dict(RAW), program)
    return {r.type: r.inputs for r in result.resources}


def test_typed_args_reach_the_wire_in_camel_case(validate_crd: Validate) -> None:
    recorded = _declare(lambda: RayCluster(
        "rc", metadata={"name": "rc", "namespace": "ray"}, spec=_cluster_spec()))
    obj = as_object(recorded[RAYCLUSTER])
    assert (obj["apiVersion"], obj["kind"]) == ("ray.io/v1", "RayCluster")
    (w,) = obj["spec"]["workerGroupSpecs"]
    assert (w["groupName"], w["numOfHosts"], w["minReplicas"], w["idleTimeoutSeconds"]) == (
        "tpu", 2, 0, 120)
    assert w["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "2x2x2"
    assert obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0][
        "imagePullPolicy"] == "IfNotPresent"
    assert obj["spec"]["autoscalerOptions"] == {
        "version": "v2", "idleTimeoutSeconds": 60, "upscalingMode": "Default"}
    assert obj["spec"]["gcsFaultToleranceOptions"]["redisAddress"] == "redis:6379"
    assert validate_crd(obj) == []
    assert [p for where, t in pod_templates(obj) for p in validate_pod(where, t)] == []


def test_rayjob_from_typed_args_validates_against_the_rayjob_crd(validate_crd: Validate) -> None:
    def build() -> None:
        RayJob("job", metadata=k8s.meta.v1.ObjectMetaArgs(name="train", namespace="ray"),
               spec=RayJobSpecArgs(
                   entrypoint="python -m raytpu.workloads.train --steps 10",
                   ray_cluster_spec=_cluster_spec(),
                   runtime_env_yaml="env_vars:\n  PJRT_DEVICE: TPU\n",
                   shutdown_after_job_finishes=True, ttl_seconds_after_finished=600,
                   submission_mode="K8sJobMode", backoff_limit=1, active_deadline_seconds=7200,
               ))

    obj = as_object(_declare(build)[RAYJOB])
    assert (obj["apiVersion"], obj["kind"]) == ("ray.io/v1", "RayJob")
    spec = obj["spec"]
    assert spec["runtimeEnvYAML"].startswith("env_vars:")
    assert spec["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] == 2
    assert (spec["shutdownAfterJobFinishes"], spec["ttlSecondsAfterFinished"]) == (True, 600)
    assert validate_crd(obj) == []
    assert [p for where, t in pod_templates(obj) for p in validate_pod(where, t)] == []


def test_rayjob_on_an_existing_cluster_validates(validate_crd: Validate) -> None:
    obj = as_object(_declare(lambda: RayJob(
        "job", metadata={"name": "adhoc", "namespace": "ray"},
        spec=RayJobSpecArgs(entrypoint="python -c 'import ray'",
                            cluster_selector={"ray.io/cluster": "raytpu"}),
    ))[RAYJOB])
    assert obj["spec"]["clusterSelector"] == {"ray.io/cluster": "raytpu"}
    assert validate_crd(obj) == []


def test_the_strict_crd_check_catches_a_pruned_key(validate_crd: Validate) -> None:
    """A plain-dict spec with a snake_case key: the API server would prune it silently."""
    obj = as_object(_declare(lambda: RayCluster(
        "rc", metadata={"name": "rc"}, spec=_cluster_spec()))[RAYCLUSTER])
    obj["spec"]["workerGroupSpecs"][0]["num_of_hosts"] = 2
    problems = validate_crd(obj)
    assert problems and "num_of_hosts" in problems[0]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: RayJobSpecArgs(entrypoint="x"), "rayClusterSpec/clusterSelector"),
        (lambda: RayJobSpecArgs(entrypoint="x", cluster_selector={"ray.io/cluster": "b"},
                                ray_cluster_spec=_cluster_spec()),
         "rayClusterSpec/clusterSelector"),
        (lambda: RayJobSpecArgs(cluster_selector={"ray.io/cluster": "b"}), "entrypoint"),
        (lambda: RayJobSpecArgs(entrypoint="x", cluster_selector={"ray.io/cluster": "b"},
                                submission_mode="Batch"),  # type: ignore[arg-type]
         "submissionMode: 'Batch'"),
        (lambda: RayJobSpecArgs(entrypoint="x", ray_cluster_spec=_cluster_spec(),
                                ttl_seconds_after_finished=60), "ttlSecondsAfterFinished"),
        (lambda: _tpu_group(hosts=0), "numOfHosts: 0"),
        (lambda: WorkerGroupSpecArgs(group_name="g", template={}, min_replicas=2,
                                     max_replicas=1), "minReplicas/maxReplicas"),
        (lambda: WorkerGroupSpecArgs(group_name="g", template={}, min_replicas=0,
                                     max_replicas=1, replicas=3), "replicas: 3"),
        (lambda: RayClusterSpecArgs(head_group_spec=_head(),
                                    worker_group_specs=[_tpu_group(), _tpu_group()]),
         "groupName"),
        (lambda: RayClusterSpecArgs(head_group_spec=_head(),
                                    autoscaler_options=AutoscalerOptionsArgs()),
         "autoscalerOptions"),
    ],
)
def test_cross_field_rules_name_the_field(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_resource_type_tokens() -> None:
    def build() -> None:
        RayCluster("rc", metadata={"name": "rc"}, spec=_cluster_spec())
        RayJob("job", metadata={"name": "j"},
               spec=RayJobSpecArgs(entrypoint="x", cluster_selector={"ray.io/cluster": "b"}))
        pulumi.export("ok", True)

    assert {RAYCLUSTER, RAYJOB} <= set(_declare(build))
