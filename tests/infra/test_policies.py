"""The policy pack's rules: each passes on the shipped stacks and catches a program written to
break it (components composed without the package's config layer, or raw resources).

Rules are called as the policy SDK's analyzer calls them: ``ResourceValidationArgs`` /
``StackValidationArgs`` over the type token and the wire-format inputs behind
``unknown_checking_proxy`` (through :func:`raytpu.plan.policies.evaluate`, or built here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from infra_support import NODE_POOL, PROJECT, REPO, ZONE, raw_config
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy
from raytpu.components import (
    CheckpointStorage,
    CheckpointStorageArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
)
from raytpu.components.gcp_resources import ComputeFirewall, ContainerCluster, ContainerNodePool
from raytpu.components.k8s_objects import Service
from raytpu.components.tpu_ray_cluster import TpuRayCluster, TpuRayClusterArgs, TpuWorkerGroup
from raytpu.facts import catalog
from raytpu.facts.urns import resource_urn
from raytpu.plan.engine import PlanResult, run_program
from raytpu.plan.policies import Violation, evaluate, mandatory
from raytpu.policy import cost as policy_cost
from raytpu.policy import rules as policy_rules
from raytpu.policy.rules import POLICIES

STACKS = ("dev", "staging", "prod")
# Rules today's shipped stacks break, each fixed by another helper's work in flight.
PENDING: dict[str, str] = {}
DIGEST = "@sha256:" + "0" * 64
# The shipped pools carry the default cost labels; requiring one they lack makes a probe.
MISSING_LABEL: dict[str, Any] = {"tpu-pool-cost-labels": {"requiredLabels": ["owner"]}}
GSA = "ray-ckpt@acme-ml.iam.gserviceaccount.com"
NODES_SA = "nodes@acme-ml.iam.gserviceaccount.com"


def hits(plan: PlanResult, name: str, config: dict[str, Any] | None = None) -> list[Violation]:
    return evaluate(plan, config, [policy_rules.policy(name)])


def run(program: Callable[[], Any], stack: str = "test") -> PlanResult:
    return run_program(stack, raw_config(), program)


# -- the pack ---------------------------------------------------------------------------


def test_every_rule_has_name_description_level_and_unique_name() -> None:
    names = [p.name for p in POLICIES]
    assert len(names) == len(set(names)) == 14
    for p in POLICIES:
        assert isinstance(p, ResourceValidationPolicy | StackValidationPolicy)
        assert p.description and p.enforcement_level in (EnforcementLevel.MANDATORY,
                                                          EnforcementLevel.ADVISORY)
    security = ["no-world-open-firewall", "gke-cluster-hardened", "no-public-ray-load-balancer",
                "ray-token-auth", "no-default-node-service-account",
                "dataplane-v2-for-network-policies"]
    assert all(policy_rules.policy(n).enforcement_level == EnforcementLevel.MANDATORY
               for n in security)
    for n in ("max-tpu-chips", "spot-tpu-in-dev", "tpu-pool-cost-labels",
              "production-deletion-protection"):
        schema = policy_rules.policy(n).config_schema
        assert schema is not None and all("default" in v for v in schema.properties.values())


def test_pack_starts_as_the_engine_runs_it() -> None:
    """`python policies/__main__.py` is what the analyzer plugin runs: it must build the
    PolicyPack (validating every policy) and print the gRPC port it serves on."""
    proc = subprocess.Popen([sys.executable, str(REPO / "policies" / "__main__.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        assert port.isdigit(), proc.stderr.read() if proc.poll() is not None else port
    finally:
        proc.kill()
        proc.wait()


# -- the shipped stacks -----------------------------------------------------------------


@pytest.mark.parametrize("name", [p.name for p in POLICIES])
def test_rule_passes_on_shipped_stacks(name: str, stack_plans: dict[str, PlanResult],
                                       request: pytest.FixtureRequest) -> None:
    if name in PENDING:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"pending {PENDING[name]}"))
    found = [v for s in STACKS for v in hits(stack_plans[s], name)]
    assert found == []


def test_shipped_stacks_have_no_mandatory_violation(stack_plans: dict[str, PlanResult]) -> None:
    for s in STACKS:
        assert mandatory(evaluate(stack_plans[s])) == []


def test_urns_are_the_engines(stack_plans: dict[str, PlanResult]) -> None:
    plan = stack_plans["staging"]
    pool = plan.get(NODE_POOL, "v4-16-0")
    assert pool.urn == ("urn:pulumi:staging::raytpu::raytpu:tpu:TpuSlicePool$"
                        "gcp:container/nodePool:NodePool::v4-16-0")
    component = plan.get("raytpu:tpu:TpuSlicePool", "v4-16")
    assert component.urn == "urn:pulumi:staging::raytpu::raytpu:tpu:TpuSlicePool::v4-16"
    assert pool.parent_urn == component.urn
    (v,) = hits(plan, "tpu-pool-cost-labels", MISSING_LABEL)
    assert v.urn == pool.urn
    nested = resource_urn("s", "p", "c:d:E", "e", pool.urn)
    assert nested == ("urn:pulumi:s::p::raytpu:tpu:TpuSlicePool$gcp:container/nodePool:"
                      "NodePool$c:d:E::e")


# -- programs written to break each rule -------------------------------------------------


def _firewall(name: str, ranges: list[str] | None, **extra: Any) -> None:
    ComputeFirewall(name, {"name": name, "network": "default", "direction": "INGRESS",
                           "allows": [{"protocol": "tcp", "ports": ["22"]}],
                           "sourceRanges": ranges, "targetTags": ["n"], **extra})


def test_world_open_firewall_caught() -> None:
    plan = run(lambda: (_firewall("open", ["0.0.0.0/0"]), _firewall("iap", ["35.235.240.0/20"]),
                        _firewall("nosource", None), _firewall("v6", ["::/0"]),
                        _firewall("tagged", None, sourceTags=["a"])))
    found = {v.urn.rsplit("::", 1)[-1]: v for v in hits(plan, "no-world-open-firewall")}
    assert set(found) == {"open", "nosource", "v6"}
    assert all(v.level == "mandatory" for v in found.values())
    assert "0.0.0.0/0" in found["open"].message


def _cluster(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": "c", "location": ZONE,
        "privateClusterConfig": {"enablePrivateNodes": True},
        "workloadIdentityConfig": {"workloadPool": f"{PROJECT}.svc.id.goog"},
        "enableShieldedNodes": True, "removeDefaultNodePool": True,
        "nodeConfig": {"serviceAccount": NODES_SA}, "deletionProtection": False,
    }
    props.update(overrides)
    return props


def test_gke_cluster_without_private_nodes_or_workload_identity_caught() -> None:
    plan = run(lambda: (
        ContainerCluster("good", _cluster()),
        ContainerCluster("raw", _cluster(privateClusterConfig=None, workloadIdentityConfig=None,
                                         enableShieldedNodes=False)),
    ))
    found = hits(plan, "gke-cluster-hardened")
    assert {v.urn.rsplit("::", 1)[-1] for v in found} == {"raw"}
    text = " ".join(v.message for v in found)
    assert "private nodes" in text and "Workload Identity" in text and "shielded" in text
    # A pool can undo both for its own nodes.
    def metadata(mode: str) -> dict[str, Any]:
        return {"workloadMetadataConfig": {"mode": mode}}

    pools = run(lambda: (
        _pool("public", nodeCount=1, networkConfig={"enablePrivateNodes": False}),
        _pool("gce", nodeCount=1, node_config=metadata("GCE_METADATA")),
        _pool("fine", nodeCount=1, node_config=metadata("GKE_METADATA")),
    ))
    assert {v.urn.rsplit("::", 1)[-1] for v in hits(pools, "gke-cluster-hardened")} == {
        "public", "gce"}


def test_external_load_balancer_in_front_of_ray_caught() -> None:
    def program() -> None:
        spec = {"type": "LoadBalancer", "selector": {"ray.io/cluster": "raytpu"},
                "ports": [{"port": 8265}]}
        Service("public", metadata={"name": "public"}, spec=spec)
        Service("internal", metadata={"name": "internal", "annotations": {
            "networking.gke.io/load-balancer-type": "Internal"}}, spec=spec)
        Service("web", metadata={"name": "web"}, spec={**spec, "selector": {"app": "web"}})

    found = hits(run(program), "no-public-ray-load-balancer")
    assert [v.urn.rsplit("::", 1)[-1] for v in found] == ["public"]
    # The component's own dashboard load balancer is internal.
    ilb = run(lambda: _ray("ilb", dashboard_internal_lb=True, access_cidrs=("10.0.0.0/24",)))
    assert ilb.by_type("kubernetes:core/v1:Service")
    assert hits(ilb, "no-public-ray-load-balancer") == []


def _ray(name: str, **overrides: Any) -> TpuRayCluster:
    fields: dict[str, Any] = {"image": f"rayproject/ray:2.60.0-py311{DIGEST}", **overrides}
    args = TpuRayClusterArgs(
        cluster_name=name, namespace="ray", service_account="ray", gsa_email=GSA,
        worker_groups=[TpuWorkerGroup("v4", catalog.slice_shape("v4-16"), 1, 1, 1)], **fields)
    return TpuRayCluster(name, args)


def test_raycluster_without_token_auth_caught() -> None:
    plan = run(lambda: (_ray("open", auth="disabled"), _ray("closed")))
    found = hits(plan, "ray-token-auth")
    assert [v.urn.rsplit("::", 1)[-1] for v in found] == ["open-raycluster"]
    assert "authOptions.mode" in found[0].message


def test_ray_image_tag_caught_digest_passes() -> None:
    plan = run(lambda: (_ray("tagged", image="rayproject/ray:2.60.0-py311"), _ray("pinned")))
    found = hits(plan, "ray-images-by-digest")
    assert {v.urn.rsplit("::", 1)[-1] for v in found} == {"tagged-raycluster"}
    assert len(found) == 2  # head and the worker group


def _pool(name: str, *, machine: str = "ct4p-hightpu-4t", sa: str | None = NODES_SA,
          **props: Any) -> None:
    ContainerNodePool(name, {"name": name, "cluster": "c", "nodeLocations": [ZONE],
                             "nodeConfig": {"machineType": machine, "serviceAccount": sa,
                                            **props.pop("node_config", {})},
                             **props})


def test_default_node_service_account_caught() -> None:
    plan = run(lambda: (
        _pool("none", sa=None, nodeCount=1), _pool("default", sa="default", nodeCount=1),
        _pool("compute", sa="123456789012-compute@developer.gserviceaccount.com",
              nodeCount=1),
        _pool("own", nodeCount=1),
        ContainerCluster("legacy", _cluster(nodeConfig=None, removeDefaultNodePool=False)),
    ))
    found = {v.urn.rsplit("::", 1)[-1] for v in hits(plan, "no-default-node-service-account")}
    assert found == {"none", "default", "compute", "legacy"}


def test_service_account_unknown_in_preview_is_an_account_of_this_update() -> None:
    """In a preview the email of a service account created in the same update is unknown;
    the SDK's proxy raises on reading it, the rule then knows it is not the default."""
    props = unknown_checking_proxy({"name": "p", "nodeConfig": {
        "machineType": "n2-standard-8", "serviceAccount": UNKNOWN_STRING_VALUE}})
    args = ResourceValidationArgs(
        NODE_POOL, props, "urn:pulumi:dev::raytpu::gcp:container/nodePool:NodePool::p", "p",
        PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), []), None)
    seen: list[str] = []
    policy_rules.policy("no-default-node-service-account").validate(
        args, lambda m, urn=None: seen.append(m))
    assert seen == []


def test_network_policies_without_dataplane_v2_caught() -> None:
    def program(datapath: str | None) -> Callable[[], None]:
        def declare() -> None:
            ContainerCluster("c", _cluster(datapathProvider=datapath))
            pulumi.CustomResource("kubernetes:networking.k8s.io/v1:NetworkPolicy", "deny",
                                  {"apiVersion": "networking.k8s.io/v1",
                                   "kind": "NetworkPolicy", "metadata": {"name": "deny"},
                                   "spec": {"podSelector": {}}})
        return declare

    (v,) = hits(run(program(None)), "dataplane-v2-for-network-policies")
    assert v.level == "mandatory" and v.urn.endswith("gcp:container/cluster:Cluster::c")
    assert hits(run(program("ADVANCED_DATAPATH")), "dataplane-v2-for-network-policies") == []
    # No NetworkPolicy: nothing to enforce, no violation.
    assert hits(run(lambda: ContainerCluster("c", _cluster())),
                "dataplane-v2-for-network-policies") == []


def test_production_cluster_without_deletion_protection_caught() -> None:
    def program() -> None:
        ContainerCluster("c", _cluster(deletionProtection=False))

    (v,) = hits(run(program, stack="prod"), "production-deletion-protection")
    assert v.level == "advisory"
    assert hits(run(program, stack="dev"), "production-deletion-protection") == []
    config = {"production-deletion-protection": {"productionStacks": ["dev"]}}
    assert len(hits(run(program, stack="dev"), "production-deletion-protection", config)) == 1


def test_bucket_without_versioning_caught() -> None:
    def storage(name: str, versioning: bool) -> None:
        CheckpointStorage(name, CheckpointStorageArgs(
            project=PROJECT, bucket_name=f"acme-{name}", location="us-west4", namespace="ray",
            ksa_name="ray", gsa_account_id=f"{name}-ckpt", versioning=versioning))

    plan = run(lambda: (storage("flat", False), storage("kept", True)))
    found = hits(plan, "checkpoint-bucket-versioning")
    assert [v.urn.rsplit("::", 1)[-1] for v in found] == ["flat-bucket"]


def test_multi_host_pool_shape_caught() -> None:
    plan = run(lambda: (
        # v4-16 = 2x2x2 = 2 hosts of 4 chips.
        _pool("ok", placementPolicy={"type": "COMPACT", "tpuTopology": "2x2x2"}, nodeCount=2),
        _pool("loose", placementPolicy={"tpuTopology": "2x2x2"}, nodeCount=2),
        _pool("short", placementPolicy={"type": "COMPACT", "tpuTopology": "2x2x2"}, nodeCount=1),
        _pool("elastic", placementPolicy={"type": "COMPACT", "tpuTopology": "2x2x2"},
              autoscaling={"minNodeCount": 0, "maxNodeCount": 4}, initialNodeCount=0),
        _pool("halfmin", placementPolicy={"type": "COMPACT", "tpuTopology": "2x2x2"},
              autoscaling={"minNodeCount": 1, "maxNodeCount": 2}, initialNodeCount=2),
        _pool("elastic-ok", placementPolicy={"type": "COMPACT", "tpuTopology": "2x2x2"},
              autoscaling={"minNodeCount": 0, "maxNodeCount": 2}, initialNodeCount=0),
        _pool("single", machine="ct5lp-hightpu-4t",
              placementPolicy={"type": "COMPACT", "tpuTopology": "2x2"}, nodeCount=1),
        _pool("bad", placementPolicy={"type": "COMPACT", "tpuTopology": "3x3x3"}, nodeCount=2),
    ))
    found = {v.urn.rsplit("::", 1)[-1]: v.message for v in hits(plan, "tpu-slice-pool-shape")}
    assert set(found) == {"loose", "short", "elastic", "halfmin", "single", "bad"}
    assert "autoscaling.minNodeCount is 1" in found["halfmin"]
    assert "COMPACT" in found["loose"] and "2 ct4p-hightpu-4t hosts" in found["short"]
    assert "single-host" in found["single"]


def test_shipped_pool_shapes_pass_through_the_component() -> None:
    def program() -> None:
        for tpu in ("v5litepod-16", "v6e-64", "v5p-32", "v4-16"):
            gen = catalog.slice_shape(tpu).generation
            TpuSlicePool(gen.name, TpuSlicePoolArgs(
                shape=catalog.slice_shape(tpu), cluster="c", zone=gen.zones[0],
                node_service_account=NODES_SA, project=PROJECT))

    assert hits(run(program), "tpu-slice-pool-shape") == []


def _slices(spot: bool = False) -> Callable[[], None]:
    def program() -> None:
        TpuSlicePool("v5e", TpuSlicePoolArgs(
            shape=catalog.slice_shape("v5litepod-16"), cluster="c", zone=ZONE,
            node_service_account=NODES_SA, project=PROJECT, slices=2, spot=spot))
    return program


def test_tpu_chip_cap_caught(stack_plans: dict[str, PlanResult]) -> None:
    # Staging: one v4-16 slice = 8 chips; prod: 6 x v5e-16 at max + one v5e-8 = 104.
    assert policy_cost.tpu_chips_at_max(stack_plans["staging"].get(NODE_POOL, "v4-16-0")
                                         .inputs) == 8
    config = {"max-tpu-chips": {"maxChips": 64}}
    (v,) = hits(stack_plans["prod"], "max-tpu-chips", config)
    assert v.level == "mandatory" and "104 chips" in v.message and "limit is 64" in v.message
    assert hits(stack_plans["prod"], "max-tpu-chips", {"max-tpu-chips": {"maxChips": 104}}) == []
    assert len(hits(run(_slices()), "max-tpu-chips", {"max-tpu-chips": {"maxChips": 16}})) == 1


def test_on_demand_tpu_in_dev_caught() -> None:
    assert len(hits(run(_slices(spot=False), stack="dev"), "spot-tpu-in-dev")) == 2
    assert hits(run(_slices(spot=True), stack="dev"), "spot-tpu-in-dev") == []
    assert hits(run(_slices(spot=False), stack="prod"), "spot-tpu-in-dev") == []


def test_tpu_pool_without_cost_labels_caught() -> None:
    plan = run(lambda: (
        _pool("bare", nodeCount=1),
        _pool("labelled", nodeCount=1,
              node_config={"resourceLabels": {"stack": "dev", "slice-group": "v4"}}),
        _pool("cpu", machine="n2-standard-8", nodeCount=1),
    ))
    found = hits(plan, "tpu-pool-cost-labels")
    assert [v.urn.rsplit("::", 1)[-1] for v in found] == ["bare"]
    config = {"tpu-pool-cost-labels": {"requiredLabels": ["team"]}}
    assert len(hits(plan, "tpu-pool-cost-labels", config)) == 2


def test_enforcement_level_from_config(stack_plans: dict[str, PlanResult]) -> None:
    props = MISSING_LABEL["tpu-pool-cost-labels"]
    config = {"tpu-pool-cost-labels": {**props, "enforcementLevel": "mandatory"}}
    assert mandatory(evaluate(stack_plans["dev"], config))
    config = {"tpu-pool-cost-labels": {**props, "enforcementLevel": "disabled"}}
    assert not hits(stack_plans["dev"], "tpu-pool-cost-labels", config)


# -- raytpu plan ------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "raytpu", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def test_plan_json_lists_policy_results(tmp_path: Path) -> None:
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(MISSING_LABEL))
    proc = _cli("plan", "--stack", "staging", "--json", "--policy-config", str(probe))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["policies"]
    assert rows and all(set(r) == {"policy", "level", "urn", "message"} for r in rows)
    assert all(r["level"] == "advisory" for r in rows)
    assert {r["urn"] for r in rows if r["policy"] == "tpu-pool-cost-labels"} == {
        "urn:pulumi:staging::raytpu::raytpu:tpu:TpuSlicePool$gcp:container/nodePool:"
        "NodePool::v4-16-0"}
    off = _cli("plan", "--stack", "staging", "--json", "--no-policies")
    assert off.returncode == 0 and "policies" not in json.loads(off.stdout)


def test_mandatory_violation_exits_3_after_printing(tmp_path: Path) -> None:
    # A "dev" stack on on-demand TPU VMs breaks spot-tpu-in-dev (mandatory).
    config = raw_config(raytpu_slices=[{"name": "v5e-4", "tpu": "v5litepod-4"}])
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": config}))
    proc = _cli("plan", "--stack", "dev", "--json", "--stacks-dir", str(tmp_path))
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)  # the whole plan was printed first
    assert doc["resources"]
    assert [r["policy"] for r in doc["policies"] if r["level"] == "mandatory"] == [
        "spot-tpu-in-dev"]
    assert "error: policy spot-tpu-in-dev" in proc.stderr and "Traceback" not in proc.stderr
    text = _cli("plan", "--stack", "dev", "--stacks-dir", str(tmp_path))
    assert text.returncode == 3 and "mandatory spot-tpu-in-dev" in text.stdout
    assert _cli("plan", "--stack", "dev", "--no-policies", "--stacks-dir",
                str(tmp_path)).returncode == 0


def test_pack_over_grpc_reports_what_plan_reports(stack_plans: dict[str, PlanResult]) -> None:
    """The pack as the engine drives it (the analyzer gRPC protocol: GetAnalyzerInfo,
    Configure, Analyze per resource, AnalyzeStack) reports the same violations as
    ``raytpu plan`` on the same resources and config."""
    import grpc
    from google.protobuf import empty_pb2, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2 as pb
    from pulumi.runtime.proto import analyzer_pb2_grpc

    def struct(value: dict[str, Any]) -> struct_pb2.Struct:
        s = struct_pb2.Struct()
        s.update(value)
        return s

    plan = stack_plans["staging"]
    config: dict[str, Any] = {"max-tpu-chips": {"maxChips": 4},
                              "spot-tpu-in-dev": {"spotStacks": ["staging"]}}
    proc = subprocess.Popen([sys.executable, str(REPO / "policies" / "__main__.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        stub = analyzer_pb2_grpc.AnalyzerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        assert info.name == policy_rules.PACK_NAME
        levels = {p.name: p.enforcementLevel for p in info.policies}
        assert levels["ray-token-auth"] == pb.MANDATORY
        assert levels["tpu-pool-cost-labels"] == pb.ADVISORY
        schema = {p.name: p.configSchema for p in info.policies}
        assert "maxChips" in schema["max-tpu-chips"].properties
        stub.Configure(pb.ConfigureAnalyzerRequest(policyConfig={
            name: pb.PolicyConfig(enforcementLevel=pb.MANDATORY, properties=struct(props))
            for name, props in config.items()}), timeout=30)
        seen: set[tuple[str, str, int]] = set()
        resources = [r for r in plan.resources if r.custom]
        for r in resources:
            response = stub.Analyze(pb.AnalyzeRequest(
                type=r.type, properties=struct(r.inputs), urn=r.urn, name=r.name,
                options=pb.AnalyzerResourceOptions(parent=r.parent_urn or "")), timeout=30)
            seen |= {(d.policyName, d.urn or r.urn, d.enforcementLevel)
                     for d in response.diagnostics}
        response = stub.AnalyzeStack(pb.AnalyzeStackRequest(resources=[
            pb.AnalyzerResource(type=r.type, properties=struct(r.inputs), urn=r.urn,
                                name=r.name, parent=r.parent_urn or "") for r in resources]),
            timeout=30)
        seen |= {(d.policyName, d.urn, d.enforcementLevel) for d in response.diagnostics}
    finally:
        proc.kill()
        proc.wait()
    level = {"mandatory": pb.MANDATORY, "advisory": pb.ADVISORY}
    expected = {(v.policy, v.urn, level[v.level]) for v in evaluate(plan, config)}
    assert seen == expected
    assert ("spot-tpu-in-dev", plan.get(NODE_POOL, "v4-16-0").urn, pb.MANDATORY) in seen
    assert ("max-tpu-chips", "", pb.MANDATORY) in seen


def test_policy_config_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"max-tpu-chips": {"maxChips": 4},
                                "tpu-pool-cost-labels": "disabled"}))
    proc = _cli("plan", "--stack", "staging", "--json", "--policy-config", str(good))
    assert proc.returncode == 3, proc.stderr
    rows = json.loads(proc.stdout)["policies"]
    assert [r["policy"] for r in rows if r["level"] == "mandatory"] == ["max-tpu-chips"]
    assert not [r for r in rows if r["policy"] == "tpu-pool-cost-labels"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"max-tpu-chips": {"maxChips": "many"}, "nope": {}}))
    proc = _cli("plan", "--stack", "staging", "--policy-config", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--policy-config max-tpu-chips.maxChips: 'many' is not valid" in proc.stderr
    assert "--policy-config nope: unknown policy" in proc.stderr


@pytest.mark.parametrize("stack", STACKS)
def test_shared_proxies_find_what_a_fresh_proxy_per_policy_finds(
    stack: str, stack_previews: dict[str, PlanResult],
) -> None:
    """evaluate() builds one proxy per resource for all the rules; the analyzer builds one per
    rule and resource (of a fresh copy). Same violations on every shipped stack, with probes
    that fire (a missing cost label, a 1-chip ceiling)."""
    import copy

    from pulumi_policy import StackValidationArgs
    from raytpu.plan.policies import _level, _options, _run, stack_resources

    plan = stack_previews[stack]
    config = {**MISSING_LABEL, "max-tpu-chips": {"maxChips": 1}}
    fresh: list[Violation] = []
    for policy in POLICIES:
        level, own = _level(policy, config), dict(config.get(policy.name) or {})
        if isinstance(policy, ResourceValidationPolicy):
            for r in (r for r in plan.resources if r.custom):
                args = ResourceValidationArgs(
                    r.type, unknown_checking_proxy(copy.deepcopy(r.inputs)), r.urn, r.name,
                    _options(r), None, own)
                _run(policy, args, fresh, level, r.urn)
        else:
            _run(policy, StackValidationArgs(stack_resources(plan), own), fresh, level, "")
    shared = evaluate(plan, config)
    assert {"tpu-pool-cost-labels", "max-tpu-chips"} <= {v.policy for v in shared}
    assert sorted(shared, key=repr) == sorted(fresh, key=repr)
