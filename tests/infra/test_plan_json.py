"""`raytpu plan --json` is honest: resources by URN, secrets masked, provider-computed values
unknown (``null`` and listed) instead of the mocks' fakes, as ``pulumi preview`` shows them."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from infra_support import CLUSTER, NODE_POOL, REPO, STACKS
from raytpu.plan.engine import PlanResult
from raytpu.plan.render import render_plan
from rich.console import Console

# What the fake-output mocks invent (raytpu.plan.mocks._fake_outputs): none may reach the plan.
FAKES = ("/mock/", "34.0.0.2", "10.0.0.2", "1.34.1-gke", "gke-0123456789abcdef", "mock-token",
         "-id\"", "BEGIN CERTIFICATE", "4dabf18193072939515e22adb298388d")


def test_parents_and_dependencies_are_urns(stack_previews: dict[str, PlanResult]) -> None:
    for stack in STACKS:
        doc = stack_previews[stack].to_dict()
        urns = {r["urn"] for r in doc["resources"]}
        assert len(urns) == len(doc["resources"])
        for r in doc["resources"]:
            assert r["urn"].startswith(f"urn:pulumi:{stack}::raytpu::")
            assert r["urn"].endswith(f"::{r['name']}") and r["type"] in r["urn"]
            assert r["parent"] is None or r["parent"] in urns, r
            assert set(r["options"].get("dependsOn", [])) <= urns, r
            if "provider" in r["options"]:
                assert r["options"]["provider"] in urns


def test_same_named_resources_are_told_apart(stack_previews: dict[str, PlanResult]) -> None:
    # The VPC component, the network, the GKE component and the cluster are all "raytpu-dev".
    doc = stack_previews["dev"].to_dict()
    by_urn = {r["urn"]: r for r in doc["resources"]}
    (cluster,) = [r for r in doc["resources"] if r["type"] == CLUSTER]
    assert by_urn[cluster["parent"]]["type"] == "raytpu:gke:GkeCluster"
    assert cluster["urn"] == ("urn:pulumi:dev::raytpu::raytpu:gke:GkeCluster$"
                              "gcp:container/cluster:Cluster::raytpu-dev")
    (pool,) = [r for r in doc["resources"]
               if r["type"] == NODE_POOL and r["inputs"]["name"] == "system"]
    assert cluster["urn"] in pool["options"]["dependsOn"]
    network = [u for u in pool["options"]["dependsOn"] if "compute/network:Network" in u]
    assert network == []  # the pool waits for the cluster, not the same-named VPC


def test_secrets_are_masked_unless_asked(stack_plans: dict[str, PlanResult],
                                         stack_previews: dict[str, PlanResult]) -> None:
    for plans in (stack_plans, stack_previews):
        doc = plans["dev"].to_dict()
        (provider,) = [r for r in doc["resources"] if r["type"] == "pulumi:providers:kubernetes"]
        assert provider["inputs"]["kubeconfig"] == "[secret]"
        assert doc["outputs"]["kubeconfig"] == "[secret]"
        assert "apiVersion: v1" not in json.dumps(doc)
    # With the computed values faked, --show-secrets has a kubeconfig to show.
    shown = stack_plans["dev"].to_dict(show_secrets=True)
    assert shown["outputs"]["kubeconfig"].startswith("apiVersion: v1")
    # In a preview the kubeconfig is built from the unknown endpoint: unknown, not faked.
    revealed = stack_previews["dev"].to_dict(show_secrets=True)
    assert revealed["outputs"]["kubeconfig"] is None
    assert "outputs.kubeconfig" in revealed["unknown"]


def test_computed_values_are_unknown_not_faked(stack_previews: dict[str, PlanResult]) -> None:
    for stack in STACKS:
        doc = stack_previews[stack].to_dict()
        text = json.dumps(doc)
        assert not [f for f in FAKES if f in text], stack
        for key in ("cluster_endpoint", "gke_version", "network", "node_service_account"):
            assert doc["outputs"][key] is None and f"outputs.{key}" in doc["unknown"]
        for pool in [r for r in doc["resources"] if r["type"] == NODE_POOL]:
            # The node service account's email and the cluster's name are the provider's.
            assert pool["inputs"]["nodeConfig"]["serviceAccount"] is None
            assert "inputs.nodeConfig.serviceAccount" in pool["unknown"]
        # What the stack file decides stays known.
        assert doc["outputs"]["cluster_name"] and doc["outputs"]["bucket_name"]
        assert "outputs.cluster_name" not in doc["unknown"]


def test_unknown_paths_name_label_keys_whole(stack_previews: dict[str, PlanResult]) -> None:
    doc = stack_previews["dev"].to_dict()
    (ksa,) = [r for r in doc["resources"] if r["type"] == "kubernetes:core/v1:ServiceAccount"
              and r["name"] == "ray-ksa"]
    assert ksa["unknown"] == ['inputs.metadata.annotations["iam.gke.io/gcp-service-account"]']
    assert ksa["inputs"]["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] is None


def test_human_plan_says_known_after_up_and_secret(
        stack_previews: dict[str, PlanResult]) -> None:
    out = io.StringIO()
    render_plan(stack_previews["dev"], [], Console(file=out, width=100, color_system=None))
    lines = out.getvalue().splitlines()
    assert any(line.split() == ["cluster_endpoint", "(known", "after", "up)"] for line in lines)
    assert any(line.split() == ["kubeconfig", "[secret]"] for line in lines)
    assert not [f for f in FAKES if f in out.getvalue()]


def test_cli_plan_json_is_the_preview_and_shows_secrets_on_request() -> None:
    def plan_json(*extra: str) -> dict[str, object]:
        proc = subprocess.run([sys.executable, "-m", "raytpu", "plan", "--stack", "dev",
                               "--json", *extra], cwd=REPO, capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        doc: dict[str, object] = json.loads(proc.stdout)
        return doc

    doc = plan_json()
    assert "outputs.cluster_endpoint" in doc["unknown"]  # type: ignore[operator]
    assert doc["outputs"]["kubeconfig"] == "[secret]"  # type: ignore[index]
    # --show-secrets unwraps it: before the first up the kubeconfig is unknown, not [secret].
    assert plan_json("--show-secrets")["outputs"]["kubeconfig"] is None  # type: ignore[index]


def test_stack_policies_see_dependencies_by_urn(stack_previews: dict[str, PlanResult]) -> None:
    from raytpu.plan.policies import stack_resources

    plan = stack_previews["dev"]
    made = {r.urn: r for r in stack_resources(plan)}
    (rc,) = [r for r in made.values() if r.resource_type == "kubernetes:ray.io/v1:RayCluster"]
    tpu_pool = plan.get(NODE_POOL, "v5e-4")
    assert tpu_pool.urn in {d.urn for d in rc.dependencies}
    (cluster,) = plan.by_type(CLUSTER)
    assert made[cluster.urn].parent is not None
    assert made[cluster.urn].parent.resource_type == "raytpu:gke:GkeCluster"  # not the VPC
