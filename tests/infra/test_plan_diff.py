"""`raytpu plan --diff BASE.json`: create / delete / update / replace as `pulumi preview --diff`
would report them, replacements of TPU pools and of the cluster called out first."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_support import CLUSTER, FIREWALL, NODE_POOL, REPO, STACKS_DIR
from raytpu.facts.replacements import forcing_paths
from raytpu.plan.diff import DiffError, PlanDiff, diff_plans, render_diff
from raytpu.plan.engine import PlanResult, load_stack_file, run_program
from raytpu.plan.values import SECRET_KEY, SECRET_SIG
from rich.console import Console

RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"


def preview(stack: str, edit: Any = None) -> PlanResult:
    raw = copy.deepcopy(load_stack_file(stack, STACKS_DIR))
    if edit:
        edit(raw)
    return run_program(stack, raw, preview=True)


def text_of(diff: PlanDiff) -> str:
    out = io.StringIO()
    render_diff(diff, [], Console(file=out, width=100, color_system=None))
    return out.getvalue()


def urn_of(plan: PlanResult, type_: str, name: str) -> str:
    return plan.get(type_, name).urn


@pytest.fixture(scope="module")
def dev_base() -> dict[str, Any]:
    return json.loads(json.dumps(preview("dev").to_dict()))  # as read back from BASE.json


@pytest.fixture(scope="module")
def prod_base() -> dict[str, Any]:
    return json.loads(json.dumps(preview("prod").to_dict()))


def test_no_change_is_an_empty_diff(dev_base: dict[str, Any]) -> None:
    diff = diff_plans(dev_base, preview("dev"))
    assert diff.empty and diff.to_dict() == {"create": [], "delete": [], "update": [],
                                             "replace": []}
    assert text_of(diff).rstrip().endswith("Diff: no changes")


def test_changed_slice_count_updates_the_pool_and_the_raycluster(
        dev_base: dict[str, Any]) -> None:
    # Single-host slices share one pool: a second slice is a second node, in place.
    def two(raw: dict[str, Any]) -> None:
        raw["raytpu:slices"][0]["count"] = 2
    current = preview("dev", two)
    diff = diff_plans(dev_base, current)
    # Two slices in the group: a job may span them, so the multislice rule comes with them.
    assert diff.create == [urn_of(current, FIREWALL, "raytpu-dev-allow-multislice")]
    assert diff.delete == [] and diff.replace == []
    (pool,) = [u for u in diff.update if u.type == NODE_POOL]
    assert pool.to_dict() == {"urn": urn_of(current, NODE_POOL, "v5e-4"),
                              "changes": [{"path": "nodeCount", "old": 1, "new": 2}]}
    (rc,) = [u for u in diff.update if u.type == RAYCLUSTER]
    changes = {c.path: (c.old, c.new) for c in rc.changes}
    assert changes["spec.workerGroupSpecs[0].replicas"] == (1, 2)
    assert changes["spec.workerGroupSpecs[0].maxReplicas"] == (1, 2)
    assert diff.chips == {"count": (4, 8), "max": (4, 8)}
    text = text_of(diff)
    assert "DANGER" not in text
    assert "spec.workerGroupSpecs[0].replicas: 1 => 2" in text
    assert "TPU chips at the configured count: 4 => 8 (max 4 => 8)" in text
    assert "Diff: + 1 to create, ~ 2 to update, +- 0 to replace, - 0 to delete" in text


def test_added_slice_group_creates_its_pools(dev_base: dict[str, Any]) -> None:
    def add(raw: dict[str, Any]) -> None:
        raw["raytpu:slices"].append({"name": "v5e-16", "tpu": "v5litepod-16", "spot": True})
    current = preview("dev", add)
    diff = diff_plans(dev_base, current)
    new_pools = [u for u in diff.create if NODE_POOL in u]
    assert new_pools == [urn_of(current, NODE_POOL, "v5e-16-0")]  # one pool per 4-host slice
    assert urn_of(current, "raytpu:tpu:TpuSlicePool", "v5e-16") in diff.create
    assert diff.delete == [] and diff.replace == []
    (rc,) = [u for u in diff.update if u.type == RAYCLUSTER]
    assert any(c.path.startswith("spec.workerGroupSpecs[1]") and c.old is None
               for c in rc.changes)
    assert diff.chips["count"] == (4, 20)


def test_changed_machine_type_deletes_the_renamed_pool_and_says_so(
        prod_base: dict[str, Any]) -> None:
    # v5e-8-eval from two 4-chip VMs (pool v5e-8-eval-0) to one 8-chip VM (pool v5e-8-eval).
    def eight(raw: dict[str, Any]) -> None:
        raw["raytpu:slices"][1]["machineType"] = "ct5lp-hightpu-8t"
    current = preview("prod", eight)
    diff = diff_plans(prod_base, current)
    gone = [u for u in diff.delete if u.endswith(f"{NODE_POOL}::v5e-8-eval-0")]
    assert gone and urn_of(current, NODE_POOL, "v5e-8-eval") in diff.create
    text = text_of(diff)
    first = text.splitlines()[0]
    assert first.startswith("DANGER: TPU node pools v5e-8-eval-0 will be DELETED")


def test_changed_topology_replaces_tpu_pools_first_thing_in_the_diff(
        prod_base: dict[str, Any]) -> None:
    def bigger(raw: dict[str, Any]) -> None:
        raw["raytpu:slices"][0]["tpu"] = "v5litepod-32"
    diff = diff_plans(prod_base, preview("prod", bigger))
    replaced = {r.name: r for r in diff.replace}
    assert {f"v5e-16-{i}" for i in range(4)} <= set(replaced)
    pool = replaced["v5e-16-0"]
    assert pool.tpu_pool and "placementPolicy.tpuTopology" in pool.forced_by
    assert {"path": "placementPolicy.tpuTopology", "old": "4x4", "new": "4x8"} in \
        pool.to_dict()["changes"]
    doc = diff.to_dict()
    assert pool.urn in [r["urn"] for r in doc["replace"]]
    assert pool.urn not in [u["urn"] for u in doc["update"]]
    lines = text_of(diff).splitlines()
    assert lines[0].startswith("DANGER: TPU node pool v5e-16-0 will be DELETED and CREATED "
                               "AGAIN (forced by ")


def test_cluster_replacement_is_called_out(dev_base: dict[str, Any]) -> None:
    def dataplane_v1(raw: dict[str, Any]) -> None:
        raw["raytpu:cluster"]["dataplaneV2"] = False
    diff = diff_plans(dev_base, preview("dev", dataplane_v1))
    (cluster,) = [r for r in diff.replace if r.type == CLUSTER]
    assert cluster.forced_by == ["datapathProvider"]
    assert text_of(diff).startswith("DANGER: the GKE cluster raytpu-dev will be DELETED and "
                                    "CREATED AGAIN (forced by datapathProvider)")


def test_replacement_facts_follow_the_provider_source() -> None:
    # terraform-provider-google: placement_policy, spot, initial_node_count are ForceNew;
    # node_config.machine_type is not (GKE updates the pool in place, recreating its nodes).
    assert forcing_paths(NODE_POOL, ["nodeConfig.machineType", "nodeCount",
                                     "nodeConfig.labels.team"]) == []
    assert forcing_paths(NODE_POOL, ["placementPolicy.tpuTopology", "nodeConfig.spot"]) == [
        "placementPolicy.tpuTopology", "nodeConfig.spot"]
    assert forcing_paths(CLUSTER, ["location", "releaseChannel.channel"]) == ["location"]
    assert forcing_paths("kubernetes:core/v1:Namespace", ["metadata.name",
                                                          "metadata.labels.a"]) == ["metadata.name"]
    assert forcing_paths("gcp:storage/bucket:Bucket", ["lifecycleRules[0].action.type"],
                         replace_on_changes=["*"]) == ["lifecycleRules[0].action.type"]


def test_secrets_stay_masked_in_the_diff(dev_base: dict[str, Any]) -> None:
    from raytpu.plan.diff import _inputs_changes
    secret = {SECRET_KEY: SECRET_SIG, "value": "hunter2"}
    assert _inputs_changes({"token": "[secret]"}, {"token": secret}) == []  # unknowable
    (change,) = _inputs_changes({"token": "hunter1"}, {"token": secret})
    assert (change.path, change.old, change.new) == ("token", "[secret]", "[secret]")
    assert "hunter" not in json.dumps(change.to_dict())


def test_base_of_another_format_or_stack_is_refused(dev_base: dict[str, Any]) -> None:
    current = preview("dev")
    with pytest.raises(DiffError, match="no URNs"):
        diff_plans({"stack": "dev", "resources": [{"type": "t", "name": "n"}]}, current)
    with pytest.raises(DiffError, match="stack 'prod'"):
        diff_plans({**dev_base, "stack": "prod"}, current)


def test_cli_diff_json(tmp_path: Path) -> None:
    def raytpu(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "raytpu", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=120, check=False)

    base = raytpu("plan", "--stack", "dev", "--json")
    assert base.returncode == 0, base.stderr
    (tmp_path / "base.json").write_text(base.stdout)
    raw = load_stack_file("dev", STACKS_DIR)
    raw["raytpu:slices"][0]["count"] = 2
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": raw}))
    proc = raytpu("plan", "--stack", "dev", "--stacks-dir", str(tmp_path), "--diff",
                  str(tmp_path / "base.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert list(doc) == ["create", "delete", "update", "replace"]
    assert doc["delete"] == doc["replace"] == []
    assert [u.rsplit("::", 1)[1] for u in doc["create"]] == ["raytpu-dev-allow-multislice"]
    (pool,) = [u for u in doc["update"] if u["urn"].endswith(f"{NODE_POOL}::v5e-4")]
    assert pool["changes"] == [{"path": "nodeCount", "old": 1, "new": 2}]
    (rc,) = [u for u in doc["update"] if "RayCluster" in u["urn"]]
    assert {"path": "spec.workerGroupSpecs[0].replicas", "old": 1, "new": 2} in rc["changes"]
    (tmp_path / "bad.json").write_text("[1, 2")
    bad = raytpu("plan", "--stack", "dev", "--diff", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and bad.stderr.startswith(f"error: --diff {tmp_path}/bad.json")
    assert "Traceback" not in bad.stderr


def test_removed_and_unknown_values_read_differently() -> None:
    from pulumi.runtime.rpc import UNKNOWN
    from raytpu.plan.diff import _change_line, _inputs_changes
    (removed,) = _inputs_changes({"a": 1}, {})
    (computed,) = _inputs_changes({"a": 1}, {"a": UNKNOWN})
    assert removed.to_dict() == computed.to_dict() == {"path": "a", "old": 1, "new": None}
    assert _change_line(removed).strip() == "a: 1 => (none)"
    assert _change_line(computed).strip() == "a: 1 => (known after up)"


def test_elastic_count_change_honours_ignore_changes(prod_base: dict[str, Any]) -> None:
    # Every elastic pool ignores initialNodeCount and the autoscaled worker group its
    # replicas: `pulumi preview --diff` shows no change, so neither may the offline diff
    # (it used to print "DANGER: TPU node pool v5e-16-1 ... forced by initialNodeCount").
    def two(raw: dict[str, Any]) -> None:
        raw["raytpu:slices"][0]["count"] = 2
    current = preview("prod", two)
    pool = current.get(NODE_POOL, "v5e-16-1")
    assert pool.options["ignoreChanges"] == ["initialNodeCount"]
    base_pool = next(r for r in prod_base["resources"] if r["urn"] == pool.urn)
    assert base_pool["inputs"]["initialNodeCount"] != pool.inputs["initialNodeCount"]
    diff = diff_plans(prod_base, current)
    assert diff.empty, diff.to_dict()
    text = text_of(diff)
    assert "DANGER" not in text and text.rstrip().endswith("Diff: no changes")
    assert diff.chips["count"] == (24, 40)  # the configured count did change


def test_ignore_changes_paths_follow_pulumi_property_paths() -> None:
    from raytpu.plan.diff import ignored

    assert ignored("spec.workerGroupSpecs[3].replicas", ["spec.workerGroupSpecs[*].replicas"])
    assert not ignored("spec.workerGroupSpecs[3].maxReplicas",
                       ["spec.workerGroupSpecs[*].replicas"])
    assert ignored("nodeConfig.labels.team", ["nodeConfig"])
    assert ignored('metadata.annotations["a.b/c"]', ['metadata.annotations["a.b/c"]'])
    assert not ignored("nodeConfigX", ["nodeConfig"])


def test_a_resource_matched_by_its_alias_is_no_delete_and_create(
        prod_base: dict[str, Any]) -> None:
    # A base saved when the account had its older type token: the alias matches it.
    base = copy.deepcopy(prod_base)
    old_type, new_type = ("gcp:serviceAccount/account:Account",
                          "gcp:serviceaccount/account:Account")
    for r in base["resources"]:
        if r["type"] == new_type:
            r["urn"] = r["urn"].replace(f"${new_type}::", f"${old_type}::").replace(
                f"::{new_type}::", f"::{old_type}::")
            r["type"] = old_type
    diff = diff_plans(base, preview("prod"))
    assert diff.empty, diff.to_dict()
