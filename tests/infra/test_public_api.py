"""``raytpu.components`` as a platform team's own Pulumi program uses it: every component
and its Args are exported, every Args field is typed and documented, and a composed program
with a bad value is refused with the message a stack file with that value gets (the stack
names its key path, the composed program the Args field)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
import pkgutil
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pytest
import raytpu.components as components
from infra_support import BASE_CONFIG, PROJECT, REPO, raw_config, run_alone
from raytpu.components import AuthorizedNetwork, ImageRegistryArgs, SystemPoolArgs, slice_shape
from raytpu.config.key_paths import Keys
from raytpu.config.stack import ConfigError
from raytpu.plan.engine import run_program
from test_gke_cluster import gke_args
from test_network import net_args
from test_storage_registry import storage_args
from test_tpu_slice_pool import pool_args


def component_classes() -> Iterator[type[pulumi.ComponentResource]]:
    """Every public ComponentResource defined in a module of raytpu.components."""
    for info in pkgutil.iter_modules(components.__path__):
        module = importlib.import_module(f"raytpu.components.{info.name}")
        for name, obj in vars(module).items():
            if (isinstance(obj, type) and issubclass(obj, pulumi.ComponentResource)
                    and obj.__module__ == module.__name__ and not name.startswith("_")):
                yield obj


# The public API (README: "compose raytpu.components (its __all__ is the public API)"): a
# name joins or leaves it only on purpose, since platform teams' programs import these.
PUBLIC = {
    "AuthorizedNetwork", "CheckpointStorage", "CheckpointStorageArgs", "ExistingGkeCluster",
    "ExistingGkeClusterArgs", "ExistingNetwork", "FleetMonitoring", "FleetMonitoringArgs",
    "GcsFaultTolerance", "GkeCluster", "GkeClusterArgs", "HostQuota", "ImageRegistry",
    "ImageRegistryArgs", "KubeRayOperator", "KubeRayOperatorArgs", "Kueue", "KueueArgs",
    "KueueQueues", "KueueQueuesArgs", "MaintenanceExclusion", "MaintenancePolicyArgs",
    "MaintenanceWindow", "MemorystoreRedis", "MemorystoreRedisArgs", "MonitoredSliceGroup",
    "Network", "NetworkArgs", "OperatorPeer", "PodMonitoring", "ProjectServices",
    "ProjectServicesArgs", "RayNetworkPolicies", "RayNetworkPoliciesArgs", "SliceAutoscaling",
    "SliceGroup", "SliceShape", "SystemPoolArgs", "TeamAccess", "TeamAccessArgs", "TeamQueue",
    "TpuFlavor", "TpuQuota", "TpuRayCluster", "TpuRayClusterArgs", "TpuSlicePool",
    "TpuSlicePoolArgs", "TpuWorkerGroup", "TrainerImage", "TrainerImageArgs", "slice_shape",
}


def test_every_component_and_its_args_are_exported() -> None:
    found = {c.__name__ for c in component_classes()}
    assert {"GkeCluster", "ExistingGkeCluster", "TpuSlicePool", "KubeRayOperator",
            "TpuRayCluster"} <= found
    for name in found:
        assert name in components.__all__, name
        assert f"{name}Args" in components.__all__, f"{name}Args"
    assert set(components.__all__) == PUBLIC
    # Each name is the class or function of that name, not an alias or a placeholder.
    assert {name for name in PUBLIC if getattr(components, name).__name__ != name} == set()


def _undocumented(cls: type) -> list[str]:
    """Dataclass fields without an attribute docstring right below them."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    documented = {
        stmt.target.id
        for stmt, nxt in itertools.pairwise(body)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
        and isinstance(nxt.value.value, str)
    }
    return [f.name for f in dataclasses.fields(cls) if f.name not in documented]


EXPORTED_DATACLASSES = [
    getattr(components, n) for n in components.__all__
    if dataclasses.is_dataclass(getattr(components, n))
]


@pytest.mark.parametrize("cls", EXPORTED_DATACLASSES, ids=lambda c: c.__name__)
def test_exported_args_are_frozen_typed_and_documented(cls: type) -> None:
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("), "no class docstring"
    assert all(f.type for f in dataclasses.fields(cls))
    assert _undocumented(cls) == []


def test_the_doc_check_sees_a_missing_docstring() -> None:
    @dataclasses.dataclass(frozen=True)
    class Half:
        """Two fields, one documented."""

        a: int
        """Documented."""
        b: int

    assert _undocumented(Half) == ["b"]


# -- the same refusal, composed or from a stack file -------------------------------------

CLUSTER = BASE_CONFIG["raytpu:cluster"]
V5E = slice_shape("v5litepod-4")

# (stack config with one bad value, where its Args fields come from in the stack, the same
# value given to the Args directly)
SAME_VALUE: dict[str, tuple[dict[str, Any], Keys, Callable[[], Any]]] = {
    "cluster name": (
        raw_config(raytpu_cluster={**CLUSTER, "name": "Bad_Name"}),
        Keys("raytpu:cluster", {("cluster_name",): "raytpu:cluster.name"}),
        lambda: gke_args(cluster_name="Bad_Name")),
    "authorized network is the internet": (
        raw_config(raytpu_cluster={**CLUSTER,
                                   "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/0"}]}),
        Keys("raytpu:cluster", {("master_authorized_networks", int):
                                "raytpu:cluster.masterAuthorizedNetworks[{0}].cidrBlock"}),
        lambda: gke_args(master_authorized_networks=(AuthorizedNetwork("0.0.0.0/0"),))),
    "control plane range": (
        raw_config(raytpu_cluster={**CLUSTER, "masterIpv4CidrBlock": "172.16.0.0/24"}),
        Keys("raytpu:cluster"), lambda: gke_args(master_ipv4_cidr_block="172.16.0.0/24")),
    "system pool range": (
        raw_config(raytpu_cluster={**CLUSTER, "systemPool": {"minNodes": 3, "maxNodes": 1}}),
        Keys("raytpu:cluster.systemPool"), lambda: SystemPoolArgs(min_nodes=3, max_nodes=1)),
    "system pool disk": (
        raw_config(raytpu_cluster={**CLUSTER, "systemPool": {"diskSizeGb": 5}}),
        Keys("raytpu:cluster.systemPool"), lambda: SystemPoolArgs(disk_size_gb=5)),
    "ray access is the internet": (
        raw_config(raytpu_network={"rayAccessCidrs": ["0.0.0.0/0"]}), Keys("raytpu:network"),
        lambda: net_args(ray_access_cidrs=("0.0.0.0/0",))),
    "overlapping ranges": (
        raw_config(raytpu_network={"podsCidr": "10.0.0.0/14"}), Keys("raytpu:network"),
        lambda: net_args(pods_cidr="10.0.0.0/14")),
    "spot with a reservation": (
        raw_config(raytpu_slices=[{"name": "v5e-4", "tpu": "v5litepod-4", "spot": True,
                                   "reservation": "r"}]),
        Keys("raytpu:slices[0]"), lambda: pool_args(V5E, spot=True, reservation="r")),
    "bucket name": (
        raw_config(raytpu_storage={"bucket": "Bad..bucket"}),
        Keys("raytpu:storage", {("bucket_name",): "raytpu:storage.bucket"}),
        lambda: storage_args(bucket_name="Bad..bucket")),
    "repository id": (
        raw_config(raytpu_registry={"repository": "Bad_Repo"}),
        Keys("raytpu:registry", {("repository_id",): "raytpu:registry.repository"}),
        lambda: ImageRegistryArgs(project=PROJECT, location="us-west4",
                                  repository_id="Bad_Repo")),
}


@pytest.mark.parametrize("case", SAME_VALUE)
def test_composed_args_are_refused_as_the_stack_is(case: str) -> None:
    raw, keys, compose = SAME_VALUE[case]
    with pytest.raises(ConfigError) as stack:
        run_program("test", raw)
    with pytest.raises(ValueError) as composed:
        compose()
    # The composed error names the Args field; in the stack's words it is the stack's line.
    lines = keys.lines(composed.value)
    assert lines and set(lines) <= set(stack.value.problems), (lines, stack.value.problems)


def test_the_comparison_sees_a_different_message() -> None:
    with pytest.raises(ValueError) as composed:
        gke_args(master_ipv4_cidr_block="172.16.0.0/24")
    with pytest.raises(ConfigError) as stack:
        run_program("test", raw_config(raytpu_cluster={**CLUSTER, "name": "Bad_Name"}))
    assert not set(Keys("raytpu:cluster").lines(composed.value)) & set(stack.value.problems)



def test_the_readme_composition_example_runs(calls: list[tuple[str, dict[str, Any]]]) -> None:
    """``calls`` answers the example's cluster lookup."""
    page = (REPO / "docs" / "components.md").read_text()
    code = page[page.index("```python\n") + len("```python\n"):]
    code = code[:code.index("```")]
    plan = run_alone(lambda: exec(compile(code, "docs/components.md", "exec"), {}))
    pools = plan.by_type("gcp:container/nodePool:NodePool")
    assert sorted(p.inputs["name"] for p in pools) == ["v5e-0", "v5e-1"]
    assert len(plan.by_type("kubernetes:ray.io/v1:RayCluster")) == 1
