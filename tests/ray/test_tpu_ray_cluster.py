"""The stack's RayCluster: worker groups per slice, TPU pod rules, WI, names, dashboard access."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ray_support import GSA, RAYCLUSTER, SAMPLES, plan_ray, run_program, semantic_problems
from raytpu.components.ray_access import auth_secret_name
from raytpu.components.ray_cluster_validation import args_problems, image_ray_version
from raytpu.components.ray_pod_templates import WRITABLE_ENV
from raytpu.components.tpu_ray_cluster import TpuRayCluster, TpuRayClusterArgs, TpuWorkerGroup
from raytpu.facts.catalog import GENERATIONS, slice_shape
from raytpu.facts.machines import MACHINE_RESOURCES
from raytpu.plan.engine import PlanError, PlanResult
from raytpu.spec.pod_resources import worker_resources

SERVICE = "kubernetes:core/v1:Service"
KSA = "kubernetes:core/v1:ServiceAccount"


def _rc(plan: PlanResult) -> dict[str, Any]:
    (rc,) = plan.by_type(RAYCLUSTER)
    return rc.inputs


def _groups(plan: PlanResult) -> dict[str, dict[str, Any]]:
    return {w["groupName"]: w for w in _rc(plan)["spec"]["workerGroupSpecs"]}


def _args(**overrides: Any) -> TpuRayClusterArgs:
    base: dict[str, Any] = dict(
        cluster_name="raytpu", namespace="ray", service_account="ray-workload", gsa_email=GSA,
        image="rayproject/ray:2.60.0-py311",
        worker_groups=[TpuWorkerGroup("train", slice_shape("v4-16"), 1, 1, 1)],
    )
    base.update(overrides)
    return TpuRayClusterArgs(**base)


def test_one_worker_group_per_slice_with_slice_counts(sample_plans: dict[str, PlanResult]) -> None:
    groups = _groups(sample_plans["v6e-ilb"])
    assert list(groups) == ["v6-16", "v6-8"]
    fixed, elastic = groups["v6-16"], groups["v6-8"]
    assert (fixed["numOfHosts"], fixed["minReplicas"], fixed["replicas"],
            fixed["maxReplicas"]) == (4, 2, 2, 2)
    assert (elastic["numOfHosts"], elastic["minReplicas"], elastic["replicas"],
            elastic["maxReplicas"]) == (2, 1, 1, 4)
    assert "idleTimeoutSeconds" not in fixed and elastic["idleTimeoutSeconds"] == 600


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_tpu_rules_hold_for_every_sample(sample: str, sample_plans: dict[str, PlanResult]) -> None:
    plan = sample_plans[sample]
    assert semantic_problems(_rc(plan), plan.config) == []


def test_worker_pod_shape(sample_plans: dict[str, PlanResult]) -> None:
    w = _groups(sample_plans["v4-fixed"])["train"]
    spec = w["template"]["spec"]
    (c,) = spec["containers"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-tpu-accelerator": "tpu-v4-podslice",
                                    "cloud.google.com/gke-tpu-topology": "2x2x2",
                                    "node.kubernetes.io/instance-type": "ct4p-hightpu-4t"}
    assert spec["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists",
                                    "effect": "NoSchedule"}]
    # ct4p-hightpu-4t: 240 vCPU / 407 GB -> 80 %.
    assert c["resources"] == {"requests": {"cpu": "192", "memory": "325G", "google.com/tpu": "4"},
                              "limits": {"memory": "325G", "google.com/tpu": "4"}}
    assert "rayStartParams" not in w  # KubeRay refuses num-cpus next to resources
    assert w["resources"] == {"CPU": "192"}
    assert w["labels"] == {"raytpu.io/slice-group": w["groupName"]}
    assert {(p["name"], p["containerPort"]) for p in c["ports"]} == {
        ("metrics", 8080), ("megascale", 8081), ("tpu-metrics", 8431)}
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env == {"RAYTPU_CHECKPOINT_URI": "gs://acme-ml-dev-raytpu/runs",
                   "TPU_ACCELERATOR_TYPE": "v4-16", "TPU_TOPOLOGY": "2x2x2",
                   **dict(WRITABLE_ENV)}  # HOME's writers pointed into the emptyDirs
    assert spec["serviceAccountName"] == "ray-workload"
    assert "app.kubernetes.io/name" not in w["template"]["metadata"]["labels"]


def test_head_pod_stays_off_tpus_and_inside_the_cluster(
    sample_plans: dict[str, PlanResult],
) -> None:
    head = _rc(sample_plans["v4-fixed"])["spec"]["headGroupSpec"]
    spec = head["template"]["spec"]
    (c,) = spec["containers"]
    assert head["serviceType"] == "ClusterIP"
    assert "tolerations" not in spec and "google.com/tpu" not in str(c["resources"])
    assert {(p["name"], p["containerPort"]) for p in c["ports"]} == {
        ("gcs-server", 6379), ("dashboard", 8265), ("client", 10001), ("metrics", 8080)}
    assert c["resources"]["requests"] == c["resources"]["limits"] == {"cpu": "4",
                                                                      "memory": "16Gi"}
    assert head["resources"] == {"CPU": "0"} and "rayStartParams" not in head


def test_head_pinned_to_the_system_pool_when_named() -> None:
    from ray_support import plan_ray

    plan = plan_ray(SAMPLES["v4-fixed"], system_pool="system")
    spec = _rc(plan)["spec"]["headGroupSpec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}


def test_workload_identity_service_account(sample_plans: dict[str, PlanResult]) -> None:
    plan = sample_plans["v4-fixed"]
    (ksa,) = plan.by_type(KSA)
    meta = ksa.inputs["metadata"]
    assert (meta["name"], meta["namespace"]) == ("ray-workload", "ray")
    assert meta["annotations"] == {"iam.gke.io/gcp-service-account": GSA}
    assert plan.outputs["ray_workload_identity_member"] == (
        "serviceAccount:acme-ml.svc.id.goog[ray/ray-workload]")


def test_autoscaling_on_for_elastic_slices_only(sample_plans: dict[str, PlanResult]) -> None:
    elastic = sample_plans["v5e-elastic"]
    spec = _rc(elastic)["spec"]
    assert spec["enableInTreeAutoscaling"] is True
    options = {k: v for k, v in spec["autoscalerOptions"].items()
               if k not in ("securityContext", "volumeMounts")}  # tests/ray/test_pod_security
    assert options == {"version": "v2", "idleTimeoutSeconds": 300, "upscalingMode": "Default"}
    (rc,) = elastic.by_type(RAYCLUSTER)
    assert rc.options["ignoreChanges"] == ["spec.workerGroupSpecs[*].replicas"]
    fixed = sample_plans["v4-fixed"]
    assert "enableInTreeAutoscaling" not in _rc(fixed)["spec"]
    assert "autoscalerOptions" not in _rc(fixed)["spec"]
    assert "ignoreChanges" not in fixed.by_type(RAYCLUSTER)[0].options


def test_dashboard_internal_load_balancer(sample_plans: dict[str, PlanResult]) -> None:
    assert sample_plans["v4-fixed"].by_type(SERVICE) == []
    (svc,) = sample_plans["v6e-ilb"].by_type(SERVICE)
    meta, spec = svc.inputs["metadata"], svc.inputs["spec"]
    assert meta["annotations"] == {"networking.gke.io/load-balancer-type": "Internal"}
    assert meta["name"] == "trillium-dashboard-ilb"
    assert spec["type"] == "LoadBalancer"
    assert spec["loadBalancerSourceRanges"] == ["10.128.0.0/16", "192.168.10.0/24"]
    assert spec["selector"] == {"ray.io/cluster": "trillium", "ray.io/node-type": "head"}
    assert sorted(p["port"] for p in spec["ports"]) == [8265, 10001]


def test_token_auth_by_default(sample_plans: dict[str, PlanResult]) -> None:
    plan = sample_plans["v6e-ilb"]
    assert _rc(plan)["spec"]["authOptions"] == {"mode": "token"}
    assert plan.outputs["ray_auth_mode"] == "token"
    assert plan.outputs["ray_auth_token_command"] == (
        "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(kubectl -n ray get secret trillium "
        "-o jsonpath='{.data.auth_token}' | base64 -d)")


def test_auth_disabled_leaves_auth_options_out() -> None:
    raw = {**SAMPLES["v4-fixed"], "raytpu:ray": {"auth": "disabled"}}
    plan = plan_ray(raw)
    assert "authOptions" not in _rc(plan)["spec"]
    assert plan.outputs["ray_auth_mode"] == "disabled"
    assert plan.outputs["ray_auth_token_command"] is None


def test_component_args_refuse_unknown_auth_and_old_ray() -> None:
    # Platform teams build TpuRayClusterArgs themselves, without the stack config's checks.
    assert list(map(str, args_problems(_args(auth="tls")))) == [
        "auth: 'tls' is not an auth mode; valid: disabled, token"]
    old = _args(ray_version="2.50.0", image="rayproject/ray:2.50.0-py311")
    assert list(map(str, args_problems(old))) == [
        "auth: 'token' needs Ray >= 2.52.0, rayVersion is 2.50.0; upgrade Ray or set 'disabled'"]


@pytest.mark.parametrize(("cluster", "secret"), [
    ("raytpu", "raytpu"),
    ("a" * 50, "a" * 50),
    ("x" * 3 + "1" + "b" * 49, "r" + "b" * 49),  # KubeRay keeps the last 50, no leading digit
    ("x" * 3 + "-" + "b" * 49, "r" + "b" * 49),
])
def test_auth_secret_name_follows_kuberay(cluster: str, secret: str) -> None:
    assert auth_secret_name(cluster) == secret


def test_gke_addon_with_token_auth_warns_how_to_check() -> None:
    from raytpu.config.validate import parse_stack_config, stack_warnings

    addon = {**SAMPLES["v4-fixed"], "raytpu:kuberay": {"mode": "gke-addon"}}
    cfg = parse_stack_config("dev", addon)
    (w,) = [w for w in stack_warnings(cfg) if w.startswith("raytpu:ray.auth")]
    assert "kubectl -n ray get raycluster raytpu -o jsonpath='{.spec.authOptions}'" in w
    helm = parse_stack_config("dev", dict(SAMPLES["v4-fixed"]))
    assert not [w for w in stack_warnings(helm) if w.startswith("raytpu:ray.auth")]


def test_outputs_give_the_port_forward_command(sample_plans: dict[str, PlanResult]) -> None:
    out = sample_plans["v6e-ilb"].outputs
    assert out["ray_dashboard_command"] == (
        "kubectl -n ray port-forward svc/trillium-head-svc 8265:8265")
    assert out["ray_cluster_name"] == "trillium" and out["ray_namespace"] == "ray"
    assert [g["group"] for g in out["ray_worker_groups"]] == ["v6-16", "v6-8"]
    assert out["ray_worker_groups"][0]["hostsPerSlice"] == 4


def test_machine_table_covers_every_catalog_machine_type() -> None:
    types = {m for g in GENERATIONS.values() for m in g.machine_types.values()}
    assert types <= set(MACHINE_RESOURCES)
    for machine, (vcpu, gb) in MACHINE_RESOURCES.items():
        shape = next(slice_shape(a, machine_type=machine)
                     for a in ("v4-8", "v5litepod-1", "v5litepod-4", "v5litepod-8", "v5p-8",
                               "v6e-1", "v6e-4", "v6e-8", "tpu7x-8")
                     if _fits(a, machine))
        req = worker_resources(shape)["requests"]
        assert 0.75 * vcpu <= int(req["cpu"]) <= 0.85 * vcpu
        assert 0.75 * gb <= int(req["memory"].removesuffix("G")) <= 0.85 * gb


def _fits(accelerator: str, machine: str) -> bool:
    try:
        slice_shape(accelerator, machine_type=machine)
    except ValueError:
        return False
    return True


# -- Args validation: refused before anything is registered ---------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cluster_name": "c" * 54},
         "cluster_name: 'c{54}' \\(54 characters\\) is longer than KubeRay's RayCluster name "
         "limit of 53"),
        ({"cluster_name": "c" * 40,
          "worker_groups": [TpuWorkerGroup("g" * 10, slice_shape("v4-16"), 1, 1, 1)]},
         "worker_groups\\[0\\].name: 'g{10}' with cluster_name 'c{40}' makes a worker pod "
         "name prefix 'c{40}-g{10}' of 51 characters, which KubeRay cuts to 50"),
        ({"cluster_name": "Ray_1"}, "cluster_name: 'Ray_1' must be a DNS label"),
        ({"namespace": "ray.ns"}, "namespace: 'ray.ns' must be a DNS label"),
        ({"labels": {"app.kubernetes.io/name": "mine"}}, "labels: must not set"),
        ({"dashboard_internal_lb": True}, "access_cidrs: required"),
        ({"image": "rayproject/ray:2.59.0-py311"}, "image: .* carries Ray 2.59.0"),
        ({"tpu_pools": {"v5e": slice_shape("v5litepod-16").node_selector}},
         "worker_groups\\[0\\]: no TPU node pool has the labels"),
        ({"worker_groups": [TpuWorkerGroup("a", slice_shape("v4-8"), 1, 1, 1),
                            TpuWorkerGroup("a", slice_shape("v4-8"), 1, 1, 1)]},
         "worker_groups\\[1\\].name: 'a' is already used"),
        ({"worker_groups": [TpuWorkerGroup("a", slice_shape("v4-8"), min_slices=2,
                                                   max_slices=3, initial_slices=1)]},
         "worker_groups\\[0\\]: slices min 2 <= initial 1 <= max 3"),
    ],
)
def test_bad_args_are_refused_with_the_field_named(overrides: dict[str, Any], message: str) -> None:
    problems = list(map(str, args_problems(_args(**overrides))))
    assert any(re.search(message, p) for p in problems), problems


def test_component_raises_before_registering_anything() -> None:
    refused: list[str] = []

    def program() -> None:
        try:
            TpuRayCluster("ray", _args(cluster_name="x" * 60))
        except ValueError as e:
            refused.append(str(e))

    # run_program refuses an empty plan: proof that not even the component was registered.
    with pytest.raises(PlanError, match="declared no resources"):
        run_program("dev", dict(SAMPLES["v4-fixed"]), program)
    assert refused and refused[0].startswith("cluster_name: 'xxx")


def test_matching_pools_and_good_args_have_no_problems() -> None:
    pools = {"train-0": slice_shape("v4-16").node_selector, "other": {"x": "y"}}
    assert args_problems(_args(tpu_pools=pools)) == []


@pytest.mark.parametrize(("image", "version"), [
    ("rayproject/ray:2.60.0-py311", "2.60.0"),
    ("docker.io/rayproject/ray-ml:2.52.0-gpu", "2.52.0"),
    ("us-docker.pkg.dev/p/r/raytpu:0.1.0", None),  # our image: package version, not Ray's
    ("localhost:5000/raytpu:latest", None),
    ("raytpu@sha256:" + "0" * 64, None),
    ("raytpu", None),
])
def test_image_ray_version(image: str, version: str | None) -> None:
    assert image_ray_version(image) == version
