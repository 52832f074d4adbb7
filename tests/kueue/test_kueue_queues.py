"""The Kueue layer of a stack with teams: objects valid against Kueue v0.19.2's CRDs, quotas
derived from ``raytpu:teams``, flavors that select exactly the worker groups' nodes, and a
Kueue install on the system pool that never waits for TPU pools."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kueue_support import cel_problems, kueue_problems
from raytpu.components.kueue import chart_values, manager_config
from raytpu.components.ray_pod_templates import TPU_TOLERATION
from raytpu.config.node_fit import parse_quantity
from raytpu.facts import versions
from raytpu.facts.slice_group import kueue_flavor_name as flavor_name
from raytpu.plan.engine import PlanResult, run_program
from raytpu.plan.objects import objects
from raytpu.program.kueue_program import SUBMITTER_CPU, SUBMITTER_MEMORY
from raytpu.spec.kueue_queues import HostQuota, KueueQueuesArgs, TeamQueue, TpuFlavor, TpuQuota
from stack_configs import TEAMS_CLUSTER, stack_config

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
CHART = "kubernetes:helm.sh/v4:Chart"
NODE_POOL = "gcp:container/nodePool:NodePool"

SLICES = [
    # Elastic where teams hold quota: a fixed group's pools are all the shared RayCluster's.
    {"name": "pod16", "tpu": "v5litepod-16", "autoscaling": {"min": 0, "max": 2}},
    {"name": "single", "tpu": "v5litepod-4", "autoscaling": {"min": 0, "max": 4}},
    {"name": "pod16-spot", "tpu": "v5litepod-16", "spot": True,  # pod16's shape
     "autoscaling": {"min": 0, "max": 2}},
    {"name": "big", "tpu": "v5litepod-32"},  # no team uses it
]
TEAMS = [
    {"name": "vision", "members": ["group:vision@example.com"],
     "quota": {"pod16": 1, "single": 1}, "borrowing": {"pod16": 1}},
    {"name": "speech", "members": ["user:ana@example.com"],
     "quota": {"pod16-spot": 1, "single": 2}, "priority": "high"},
]


def _raw(**extra: Any) -> dict[str, Any]:
    return stack_config(slices=SLICES, **{
        "raytpu:cluster": {"name": "raytpu-test", "deletionProtection": False, **TEAMS_CLUSTER},
        "raytpu:teams": TEAMS, **extra})


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return run_program("test", _raw())


def _kueue(plan: PlanResult, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects(plan)
            if o["kind"] == kind and o["apiVersion"] == versions.KUEUE_API_VERSION}


def test_every_kueue_object_is_valid_against_the_v0_19_2_crds(plan: PlanResult) -> None:
    kueue_objects = [o for o in objects(plan) if o["apiVersion"] == versions.KUEUE_API_VERSION]
    kinds = sorted({o["kind"] for o in kueue_objects})
    assert kinds == ["ClusterQueue", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass"]
    for obj in kueue_objects:
        assert kueue_problems(obj) == [], (obj["kind"], obj["metadata"]["name"])


def test_the_validator_refuses_what_kueue_would() -> None:
    bad_key = {"apiVersion": versions.KUEUE_API_VERSION, "kind": "ClusterQueue",
               "metadata": {"name": "x"}, "spec": {"cohort": "v1beta1-name"}}
    assert any("cohort" in p for p in kueue_problems(bad_key))
    no_value = {"apiVersion": versions.KUEUE_API_VERSION, "kind": "WorkloadPriorityClass",
                "metadata": {"name": "x"}}
    assert any("'value' is a required property" in p for p in kueue_problems(no_value))


def test_the_cel_rules_refuse_what_kueue_would() -> None:
    # borrowingLimit without a cohort; resources not matching coveredResources.
    no_cohort = {"apiVersion": versions.KUEUE_API_VERSION, "kind": "ClusterQueue",
                 "metadata": {"name": "x"}, "spec": {"resourceGroups": [{
                     "coveredResources": ["cpu", "memory"], "flavors": [{"name": "f", "resources": [
                         {"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}]}]}]}}
    problems = cel_problems(no_cohort)
    assert len(problems) == 2, problems


def test_one_flavor_per_slice_shape_selecting_exactly_the_worker_nodes(plan: PlanResult) -> None:
    flavors = _kueue(plan, "ResourceFlavor")
    (cluster,) = [o for o in objects(plan) if o["kind"] == "RayCluster"]
    workers = {w["groupName"]: w["template"]["spec"]
               for w in cluster["spec"]["workerGroupSpecs"]}
    cfg = plan.config
    for s in cfg.slices:
        name = flavor_name(s.shape)
        if s.name == "big":  # no team has quota on it: no flavor
            assert name not in flavors
            continue
        # A mismatch would be a queue that never admits (Kueue matches nodeSelector to labels).
        assert flavors[name]["spec"]["nodeLabels"] == workers[s.name]["nodeSelector"], s.name
        assert flavors[name]["spec"]["tolerations"] == workers[s.name]["tolerations"]
    assert flavors[flavor_name(cfg.slices[0].shape)] is flavors[flavor_name(cfg.slices[2].shape)]
    assert set(flavors) == {"v5litepod-16-4x4-ct5lp-hightpu-4t", "v5litepod-4-2x2-ct5lp-hightpu-4t",
                            "raytpu-cpu"}
    assert flavors["raytpu-cpu"]["spec"] == {}  # adds no nodeSelector to heads or workers
    assert [dict(TPU_TOLERATION)] == flavors["v5litepod-4-2x2-ct5lp-hightpu-4t"]["spec"][
        "tolerations"]


def test_cluster_queues_carry_the_teams_quotas_in_chips(plan: PlanResult) -> None:
    queues = _kueue(plan, "ClusterQueue")
    assert set(queues) == {"vision", "speech"}
    pod16, single = "v5litepod-16-4x4-ct5lp-hightpu-4t", "v5litepod-4-2x2-ct5lp-hightpu-4t"

    def tpu(team: str) -> dict[str, dict[str, Any]]:
        (group,) = [g for g in queues[team]["spec"]["resourceGroups"]
                    if g["coveredResources"] == ["google.com/tpu"]]
        return {f["name"]: f["resources"][0] for f in group["flavors"]}

    assert tpu("vision") == {
        pod16: {"name": "google.com/tpu", "nominalQuota": 16, "borrowingLimit": 16},
        single: {"name": "google.com/tpu", "nominalQuota": 4, "borrowingLimit": 0},
    }
    # No borrowing declared = borrowingLimit 0 (unset would mean unlimited).
    assert tpu("speech") == {
        pod16: {"name": "google.com/tpu", "nominalQuota": 16, "borrowingLimit": 0},
        single: {"name": "google.com/tpu", "nominalQuota": 8, "borrowingLimit": 0},
    }
    for name, q in queues.items():
        spec = q["spec"]
        assert spec["cohortName"] == "raytpu"
        assert spec["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": name}}
        assert spec["preemption"] == {"reclaimWithinCohort": "Any",
                                      "withinClusterQueue": "LowerPriority"}


def test_cpu_and_memory_quota_fits_the_jobs_the_tpu_quota_admits(plan: PlanResult) -> None:
    """vision: 1 pod16 slice (4 hosts) + 1 single (1 host), so up to 2 jobs at once."""
    from raytpu.spec.pod_resources import worker_resources

    cfg = plan.config
    (cpu_group,) = [g for g in _kueue(plan, "ClusterQueue")["vision"]["spec"]["resourceGroups"]
                    if g["coveredResources"] == ["cpu", "memory"]]
    cpu, memory = cpu_group["flavors"][0]["resources"]
    req = {s.name: worker_resources(s.shape)["requests"] for s in cfg.slices}
    need_cpu = (4 * parse_quantity(req["pod16"]["cpu"]) + parse_quantity(req["single"]["cpu"])
                + 2 * (parse_quantity(cfg.ray.head_cpu) + SUBMITTER_CPU))
    need_mem = (4 * parse_quantity(req["pod16"]["memory"])
                + parse_quantity(req["single"]["memory"])
                + 2 * (parse_quantity(cfg.ray.head_memory) + SUBMITTER_MEMORY))
    assert parse_quantity(cpu["nominalQuota"]) == need_cpu
    assert need_mem <= parse_quantity(memory["nominalQuota"]) < need_mem + 2**30
    # Borrowing one more pod16 slice brings its hosts and head along.
    assert parse_quantity(cpu["borrowingLimit"]) == (
        4 * parse_quantity(req["pod16"]["cpu"]) + parse_quantity(cfg.ray.head_cpu) + SUBMITTER_CPU)


def test_a_default_local_queue_in_each_team_namespace(plan: PlanResult) -> None:
    queues = [o for o in objects(plan) if o["kind"] == "LocalQueue"]
    assert sorted((q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"])
                  for q in queues) == [("speech", "default", "speech"),
                                       ("vision", "default", "vision")]


def test_priority_classes_order_the_team_priorities(plan: PlanResult) -> None:
    classes = {n: o["value"] for n, o in _kueue(plan, "WorkloadPriorityClass").items()}
    assert classes["low"] < classes["default"] < classes["high"]
    assert set(classes) == {"low", "default", "high"}


def test_kueue_runs_on_the_system_pool_and_never_waits_for_tpu_pools(plan: PlanResult) -> None:
    chart = plan.get(CHART, "kueue")
    assert chart.inputs["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert chart.inputs["version"] == versions.KUEUE_VERSION == "0.19.2"
    assert chart.inputs["namespace"] == "kueue-system"
    values = chart.inputs["values"]
    manager = values["controllerManager"]
    assert manager["nodeSelector"] == {"cloud.google.com/gke-nodepool": "system"}
    assert manager["manager"]["image"]["tag"] == "v0.19.2"
    tpu_pools = {p.urn for p in plan.by_type(NODE_POOL)
                 if p.inputs["nodeConfig"]["machineType"].startswith("ct")}
    assert len(tpu_pools) == 6  # pod16 x2, single, pod16-spot x2, big
    waits = set(chart.options.get("dependsOn", []))
    kueue = [r for r in plan.resources if r.parent in ("kueue", "kueue-ns")]
    for r in [chart, *kueue]:
        assert not tpu_pools & set(r.options.get("dependsOn", [])), r.name
    (namespace,) = [r for r in plan.resources if r.name == "kueue-ns"]
    assert namespace.urn in waits


def test_manager_configuration_ray_integrations_and_wait_for_pods_ready(
        plan: PlanResult) -> None:
    config = yaml.safe_load(
        plan.get(CHART, "kueue").inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["integrations"]["frameworks"] == ["ray.io/rayjob", "ray.io/raycluster"]
    wait = config["waitForPodsReady"]
    assert wait["timeout"] == "30m" and wait["blockAdmission"] is False  # v1beta2: required
    assert "enable" not in wait  # removed in v1beta2: the Configuration would not load
    assert config == manager_config_of_default()


def manager_config_of_default() -> dict[str, Any]:
    from raytpu.spec.kueue import KueueArgs
    return manager_config(KueueArgs(node_selector={"cloud.google.com/gke-nodepool": "system"}))


def test_chart_values_pin_the_release_image() -> None:
    from raytpu.spec.kueue import KueueArgs
    values = chart_values(KueueArgs())
    assert values["controllerManager"]["manager"]["image"] == {
        "repository": "registry.k8s.io/kueue/kueue", "tag": "v0.19.2", "pullPolicy": "IfNotPresent"}
    assert "nodeSelector" not in values["controllerManager"]


def test_queues_wait_for_kueue(plan: PlanResult) -> None:
    kueue_objects = [r for r in plan.resources if r.type.startswith(KUEUE)]
    assert len(kueue_objects) == 10  # 2 TPU flavors + cpu, 3 priorities, 2 CQs, 2 LQs
    for r in kueue_objects:
        assert plan.get(CHART, "kueue").urn in r.options["dependsOn"], r.name  # CRDs, webhooks


def test_no_teams_no_kueue() -> None:
    raw = _raw()
    del raw["raytpu:teams"]
    plan = run_program("test", raw)
    assert not [r for r in plan.resources if r.type.startswith(KUEUE) or r.name == "kueue"]
    assert "kueue" not in plan.outputs


@pytest.mark.parametrize(("change", "expected"), [
    ({"flavors": [TpuFlavor("f", {})]}, "node_labels: a TPU flavor without node labels"),
    ({"teams": [TeamQueue("a", "a", "a", [TpuQuota("nope", 4)], HostQuota("1", "1Gi"))]},
     "unknown flavor 'nope'"),
    ({"flavors": [TpuFlavor("raytpu-cpu", {"a": "b"})]}, "names must be unique"),
])
def test_queues_args_refuse_inconsistent_input(change: dict[str, Any], expected: str) -> None:
    base: dict[str, Any] = {"flavors": [TpuFlavor("f", {"a": "b"})], "teams": []}
    with pytest.raises(ValueError, match=expected):
        KueueQueuesArgs(**{**base, **change})


def test_local_queues_wait_for_their_team_namespace(plan: PlanResult) -> None:
    # A first `pulumi up` would otherwise create a LocalQueue in a namespace not yet there.
    namespaces = {r.inputs["metadata"]["name"]: r.urn
                  for r in plan.by_type("kubernetes:core/v1:Namespace")}
    queues = [r for r in plan.resources if r.type == f"{KUEUE}:LocalQueue"]
    assert len(queues) == 2
    for q in queues:
        assert namespaces[q.inputs["metadata"]["namespace"]] in q.options["dependsOn"], q.name


# Reads the reference data beside the checkout (../shared/ref): deselected by name where it is
# absent (-m "not ref", .github/workflows/preview.yml; docs/tests-in-ci.md).
pytestmark = pytest.mark.ref
