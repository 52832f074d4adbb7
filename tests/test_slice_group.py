"""One model of a slice group, one home per derivation: change a rule in that one place
(monkeypatch) and every consumer -- the node pools, ``raytpu status``, the dashboard and
alert, the Kueue flavors, the cost rows, the ``slices`` output -- follows. And the launcher
gets the stack's shape whole, for every shape the catalog can make."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from raytpu.config.stack import SliceGroupConfig
from raytpu.config.validate import parse_stack_config
from raytpu.facts import names
from raytpu.facts.catalog import GENERATIONS, slice_shape, topology_chips, valid_topologies
from raytpu.facts.slice_group import SliceGroup
from raytpu.plan.cost import cost_of
from raytpu.plan.engine import PlanResult, run_program
from raytpu.spec.training import LaunchOptions, TrainConfig, from_argv, to_argv

ROOT = Path(__file__).resolve().parents[1]
NODE_POOL = "gcp:container/nodePool:NodePool"
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
RAW: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "raytpu:zone": "us-west4-a",
    "raytpu:cluster": {"name": "raytpu-test", "deletionProtection": False},
    "raytpu:slices": [
        # 2 pools of 4 hosts, elastic: one is team-a's quota (a fixed group is all the
        # shared RayCluster's)
        {"name": "pod16", "tpu": "v5litepod-16", "autoscaling": {"min": 0, "max": 2}},
        {"name": "pod1", "tpu": "v5litepod-16", "count": 1, "spot": True},  # a prefix of it
        # one single-host pool of up to 2 nodes
        {"name": "single", "tpu": "v5litepod-4", "autoscaling": {"min": 0, "max": 2}},
    ],
    "raytpu:teams": [{"name": "team-a", "members": ["user:a@example.com"],
                      "quota": {"pod16": 1, "single": 1}}],
}


class _NoCluster:
    """A cluster with nothing running: the status view lists what it expects."""

    def nodes(self) -> list[Any]:
        return []

    def ray_pods(self, namespace: str, cluster: str) -> list[Any]:
        return []

    def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def cluster_queues(self) -> list[dict[str, Any]]:
        return []

    def kuberay_pods(self, namespace: str) -> list[Any]:
        return []

    def ray_clusters(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def events(self, namespace: str) -> list[Any]:
        return []


def _plan() -> PlanResult:
    return run_program("t", RAW)


def _tpu_pools(plan: PlanResult) -> dict[str, list[str]]:
    """GKE names of the planned TPU pools, by slice group (the component's resource names
    start with the group's)."""
    out: dict[str, list[str]] = {}
    for r in plan.by_type(NODE_POOL):
        if r.inputs["name"] == names.SYSTEM_POOL:
            continue
        group = next(g["name"] for g in RAW["raytpu:slices"]
                     if r.name == g["name"] or r.name.startswith(f"{g['name']}-"))
        out.setdefault(group, []).append(r.inputs["name"])
    return {group: sorted(pools) for group, pools in out.items()}  # registration order varies


def _status_pools() -> dict[str, list[str]]:
    from raytpu.operations.status import fleet_status

    view = fleet_status(parse_stack_config("t", RAW), _NoCluster())
    return {g["name"]: [p["name"] for p in g["node_pools"]] for g in view["groups"]}


def _filters(plan: PlanResult) -> dict[str, str]:
    """The dashboard's pool regex per multi-host group, and the alert's."""
    (dash,) = plan.by_type(DASHBOARD)
    found: dict[str, str] = {}
    for widget in json.loads(dash.inputs["dashboardJson"])["gridLayout"]["widgets"]:
        for ds in widget["xyChart"]["dataSets"]:
            f = ds["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
            m = re.search(r'node_pool_name"=monitoring\.regex\.full_match\("([^"]+)"\)', f)
            if m:
                found[widget["title"].split(":")[0]] = m.group(1)
    (alert,) = plan.by_type(ALERT)
    for c in alert.inputs["conditions"]:
        m = re.search(r'node_pool_name=~"([^"]+)"', c["conditionPrometheusQueryLanguage"]["query"])
        assert m
        assert found[c["displayName"].split(":")[0]] == m.group(1)
    return found


def _check_every_consumer_agrees(plan: PlanResult) -> dict[str, list[str]]:
    pools = _tpu_pools(plan)
    assert _status_pools() == pools
    assert plan.outputs["node_pools"] == pools
    filters = _filters(plan)
    assert set(filters) == {"pod16", "pod1"}  # the multi-host groups
    for group, pattern in filters.items():
        for other, gke_names in pools.items():
            matched = [n for n in gke_names if re.fullmatch(pattern, n)]
            assert matched == (gke_names if other == group else []), (group, other, pattern)
    return pools


def test_pool_names_have_one_rule() -> None:
    pools = _check_every_consumer_agrees(_plan())
    assert pools == {"pod16": ["pod16-0", "pod16-1"], "pod1": ["pod1-0"], "single": ["single"]}


def test_changing_the_pool_naming_rule_in_facts_changes_every_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(names, "TPU_POOL_NAME", "{group}-s{index}")
    pools = _check_every_consumer_agrees(_plan())
    assert pools == {"pod16": ["pod16-s0", "pod16-s1"], "pod1": ["pod1-s0"],
                     "single": ["single"]}


def test_changing_the_flavor_rule_changes_kueue_and_its_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import raytpu.facts.slice_group as slice_group
    from raytpu.plan.kueue_tables import team_tables
    from raytpu.plan.objects import objects

    monkeypatch.setattr(slice_group, "kueue_flavor_name",
                        lambda shape: f"x-{shape.machine_type}-{shape.topology}")
    plan = _plan()
    planned = objects(plan)
    flavors = {o["metadata"]["name"]: o["spec"]["nodeLabels"] for o in planned
               if o["kind"] == "ResourceFlavor" and o["spec"].get("nodeLabels")}
    shape = slice_shape("v5litepod-16")
    single = slice_shape("v5litepod-4")
    assert flavors == {f"x-{shape.machine_type}-4x4": shape.node_selector,
                       f"x-{single.machine_type}-2x2": single.node_selector}
    (queue,) = [o for o in planned if o["kind"] == "ClusterQueue"]
    used = {f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]}
    assert used - {"raytpu-cpu"} == set(flavors)
    quotas = team_tables(plan)[1]
    assert {row[1] for row in quotas.rows} - {"raytpu-cpu"} == set(flavors)


def test_changing_how_capacity_is_read_changes_the_cost_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = parse_stack_config("t", RAW)
    before = {g["name"]: (g["capacity"], g["price_per_chip_hour"]) for g in cost_of(cfg)["groups"]}
    assert before["pod1"][0] == "spot" and before["pod16"][0] == "on-demand"
    monkeypatch.setattr(SliceGroup, "capacity", property(lambda self: "spot"))
    after = {g["name"]: (g["capacity"], g["price_per_chip_hour"]) for g in cost_of(cfg)["groups"]}
    assert after == {name: before["pod1"] for name in before}


def _selector(topology: str) -> dict[str, str]:
    return {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
            "cloud.google.com/gke-tpu-topology": topology,
            "node.kubernetes.io/instance-type": "ct5lp-hightpu-4t"}


def test_the_slices_output_is_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan()
    v5e_16 = {"tpu": "v5litepod-16", "topology": "4x4", "machineType": "ct5lp-hightpu-4t",
              "hostsPerSlice": 4, "nodeSelector": _selector("4x4")}
    assert plan.outputs["slices"] == {
        "pod16": {**v5e_16, "minSlices": 0, "maxSlices": 2, "spot": False,
                  "capacity": "on-demand"},
        "pod1": {**v5e_16, "minSlices": 1, "maxSlices": 1, "spot": True, "capacity": "spot"},
        "single": {"tpu": "v5litepod-4", "topology": "2x2", "machineType": "ct5lp-hightpu-4t",
                   "hostsPerSlice": 1, "minSlices": 0, "maxSlices": 2, "spot": False,
                   "capacity": "on-demand", "nodeSelector": _selector("2x2")},
    }
    # ... and it is the model's: the output follows a change of SliceGroup.output alone.
    monkeypatch.setattr(SliceGroup, "output", lambda self: {"only": self.name})
    assert _plan().outputs["slices"] == {"pod16": {"only": "pod16"}, "pod1": {"only": "pod1"},
                                         "single": {"only": "single"}}


def _every_shape() -> list[tuple[str, str, str]]:
    out = []
    for gen in GENERATIONS.values():
        for topology in valid_topologies(gen.name):
            tpu = gen.accelerator_type(topology_chips(topology))
            for machine in gen.machine_types.values():
                try:
                    slice_shape(tpu, topology, machine)
                except ValueError:
                    continue
                out.append((tpu, topology, machine))
    return out


SHAPES = _every_shape()


def test_every_catalog_shape_is_covered() -> None:
    # v5e/v6e 2x4 is one 8-chip VM or two 4-chip VMs: both reach the launcher.
    assert ("v5litepod-8", "2x4", "ct5lp-hightpu-4t") in SHAPES
    assert ("v5litepod-8", "2x4", "ct5lp-hightpu-8t") in SHAPES
    assert len(SHAPES) > 30


@pytest.mark.parametrize(("tpu", "topology", "machine"), SHAPES)
def test_the_launcher_receives_the_stacks_shape(tpu: str, topology: str, machine: str) -> None:
    """What the stack declares is what the launcher's hosts run with: submit and the RayJobs
    write the shape (accelerator type, topology, machine type) into the launcher's command
    line, and the launcher reads the same shape back."""
    stack_shape = SliceGroupConfig.model_validate(
        {"name": "g", "tpu": tpu, "topology": topology, "machineType": machine}).shape
    sent = TrainConfig(tpu=stack_shape.accelerator_type, topology=stack_shape.topology,
                       machine_type=stack_shape.machine_type)
    received, _ = from_argv(to_argv(sent, LaunchOptions(storage_path="gs://b/runs")))
    assert received.shape() == stack_shape


LITERALS = {
    # The node-pool label and the system pool's name: one definition, in raytpu.facts.names.
    '"cloud.google.com/gke-nodepool"': {"infra/facts/names.py"},
    '"name": "system"': set(),
    '= "system"': {"infra/facts/names.py"},
}


def test_pool_facts_are_written_once() -> None:
    sources = [p for folder in ("infra", "components", "workloads")
               for p in (ROOT / folder).rglob("*.py")]
    for literal, homes in LITERALS.items():
        found = {str(p.relative_to(ROOT)) for p in sources if literal in p.read_text()}
        assert found == homes, literal


def test_changing_the_node_selector_changes_workers_flavors_and_outputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``SliceShape.node_selector`` is the one selector: the Ray worker groups, the Kueue
    flavors and the ``slices`` output all carry whatever it says."""
    from raytpu.facts.catalog import SliceShape
    from raytpu.plan.objects import objects

    original = SliceShape.node_selector
    monkeypatch.setattr(SliceShape, "node_selector", property(
        lambda self: {**original.fget(self), "example.com/rack": self.topology}))  # type: ignore[attr-defined]
    plan = _plan()
    planned = objects(plan)
    (rc,) = [o for o in planned if o["kind"] == "RayCluster"]
    workers = {w["groupName"]: w["template"]["spec"]["nodeSelector"]
               for w in rc["spec"]["workerGroupSpecs"]}
    flavors = [o["spec"]["nodeLabels"] for o in planned
               if o["kind"] == "ResourceFlavor" and o["spec"].get("nodeLabels")]
    for g in RAW["raytpu:slices"]:
        topology = slice_shape(g["tpu"]).topology
        assert workers[g["name"]]["example.com/rack"] == topology
        assert plan.outputs["slices"][g["name"]]["nodeSelector"]["example.com/rack"] == topology
    assert {f["example.com/rack"] for f in flavors} == {"4x4", "2x2"}
