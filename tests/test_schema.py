"""One input schema per component: each stack section that feeds a component names its Args
class, its keys are that class's fields (same name, camelCase alias, same default), the Args
are built from the section by name, and problems come back in stack keys by one mechanism
(``Keys``), never by parsing message text."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.alias_generators import to_camel
from raytpu.components import AuthorizedNetwork, ExistingNetwork, GkeClusterArgs, SystemPoolArgs
from raytpu.config import stack
from raytpu.config.key_paths import Keys
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.config.validate import parse_stack_config
from raytpu.facts.problems import ArgsError, Problem, Ref
from raytpu.program.args import gke_args
from raytpu.program.ray_cluster_config import cluster_args

BASE: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "raytpu:zone": "us-west4-a",
    "raytpu:slices": [{"name": "train", "tpu": "v5litepod-4"}],
}
SECTIONS = [m for m in vars(stack).values()
            if isinstance(m, type) and issubclass(m, BaseModel) and "args" in vars(m)]
# A section key whose unset value (None) means "the component's own default".
UNSET_IS_COMPONENT_DEFAULT = {
    ("KubeRayConfig", "webhook_image"), ("KubeRayConfig", "multi_host_indexing"),
    ("StorageConfig", "location"),  # the cluster's region
    ("RayConfig", "image"),  # the stack's own build
}


# A key the stack keeps for itself and converts into the Args field of the same name: the
# stack says where the Redis is (an instance to create, or an address); the Args get the
# address and the Secret's name (raytpu.program.gcs_ft_program).
CONVERTED = {("RayConfig", "gcs_fault_tolerance")}


def _args_fields(section: type[BaseModel]) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(section.args)}  # type: ignore[attr-defined]


def test_every_section_that_feeds_a_component_says_which() -> None:
    assert {s.__name__ for s in SECTIONS} >= {"ClusterConfig", "NetworkConfig", "RayConfig",
                                              "KubeRayConfig", "StorageConfig", "RegistryConfig",
                                              "ImageBuildConfig", "MonitoringConfig"}


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_section_keys_are_args_fields_or_the_stacks_own(section: type[BaseModel]) -> None:
    fields = _args_fields(section)
    own = section.config_only  # type: ignore[attr-defined]
    converted = {key for sec, key in CONVERTED if sec == section.__name__}
    assert converted <= own & set(fields), "a converted key is the stack's and an Args field"
    assert not (own - converted) & set(fields), (
        "a key the stack keeps for itself would be given to the Args")
    assert set(section.model_fields) - own <= set(fields), "a key neither the Args' nor declared"
    for name, f in section.model_fields.items():
        assert (f.alias or to_camel(name)) == to_camel(name), "stack keys are camelCase aliases"


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_a_section_defaults_to_its_components_defaults(section: type[BaseModel]) -> None:
    fields = _args_fields(section)
    for name, f in section.model_fields.items():
        if name not in fields or (section.__name__, name) in UNSET_IS_COMPONENT_DEFAULT:
            continue
        a = fields[name]
        if a.default is dataclasses.MISSING and a.default_factory is dataclasses.MISSING:
            continue  # the component needs a value; the stack's default is the one given
        default = a.default if a.default is not dataclasses.MISSING else a.default_factory()
        assert f.get_default(call_default_factory=True) == default, (name, default)


def test_exact_sections_are_the_components_own_args() -> None:
    fields = StackConfig.model_fields
    assert fields["cluster"].annotation is stack.ClusterConfig
    assert stack.ClusterConfig.model_fields["system_pool"].annotation is SystemPoolArgs
    assert stack.ClusterConfig.model_fields["master_authorized_networks"].annotation == tuple[
        AuthorizedNetwork, ...]
    assert stack.NetworkConfig.model_fields["existing"].annotation == ExistingNetwork | None
    cfg = parse_stack_config("t", {**BASE, "raytpu:cluster": {
        "systemPool": {"machineType": "n2-standard-16", "maxNodes": 5},
        "masterAuthorizedNetworks": [{"cidrBlock": "10.1.0.0/16", "displayName": "office"}]}})
    assert cfg.cluster.system_pool == SystemPoolArgs(machine_type="n2-standard-16", max_nodes=5)
    assert cfg.cluster.master_authorized_networks == (AuthorizedNetwork("10.1.0.0/16", "office"),)
    # ... and the built Args hold those very objects: nothing copied field by field.
    built = gke_args(cfg).cluster
    assert built.system_pool is cfg.cluster.system_pool
    assert built.master_authorized_networks is cfg.cluster.master_authorized_networks


def _flipped(section: type[BaseModel]) -> dict[str, bool]:
    fields = _args_fields(section)
    return {name: not f.get_default() for name, f in section.model_fields.items()
            if name in fields and f.annotation is bool}


@pytest.mark.parametrize(("key", "section", "built"), [
    ("raytpu:cluster", stack.ClusterConfig, lambda c: gke_args(c).cluster),
    ("raytpu:network", stack.NetworkConfig, lambda c: gke_args(c).network),
    ("raytpu:storage", stack.StorageConfig, lambda c: gke_args(c).storage),
    ("raytpu:registry", stack.RegistryConfig, lambda c: gke_args(c).registry),
    ("raytpu:ray", stack.RayConfig, lambda c: cluster_args(c, gsa_email="g")),
])
def test_every_shared_key_reaches_the_args(key: str, section: type[BaseModel],
                                           built: Any) -> None:
    """Each boolean key the section shares with its Args, set to its non-default value in
    a stack, arrives in the Args the program builds."""
    flips = _flipped(section)
    if key == "raytpu:network" and "create" in flips:
        flips.pop("create")  # create: false needs an existing network (its own test)
    assert flips, key
    raw = {**BASE, key: {to_camel(n): v for n, v in flips.items()}}
    if key == "raytpu:ray" and flips.get("dashboard_internal_lb"):
        raw["raytpu:network"] = {"rayAccessCidrs": ["10.0.0.0/8"]}
    args = built(parse_stack_config("t", raw))
    assert {n: getattr(args, n) for n in flips} == flips


def test_problems_name_args_fields_for_composers_and_stack_keys_for_stacks() -> None:
    with pytest.raises(ArgsError) as e:
        SystemPoolArgs(min_nodes=5, max_nodes=2)
    assert str(e.value) == "SystemPoolArgs.max_nodes: 2 is below SystemPoolArgs.min_nodes (5)"
    (problem,) = e.value.problems
    assert problem == Problem("SystemPoolArgs", ("max_nodes",),
                              ("2 is below ", Ref(("min_nodes",)), " (5)"))
    assert Keys("raytpu:cluster.systemPool").line(problem) == (
        "raytpu:cluster.systemPool.maxNodes: 2 is below raytpu:cluster.systemPool.minNodes (5)")
    with pytest.raises(ConfigError) as stack_error:
        parse_stack_config("t", {**BASE, "raytpu:cluster": {"systemPool": {"minNodes": 5,
                                                                           "maxNodes": 2}}})
    assert stack_error.value.problems == [Keys("raytpu:cluster.systemPool").line(problem)]


def test_keys_map_fields_from_elsewhere_and_indexes() -> None:
    keys = Keys("raytpu:ray", {("worker_groups", int): "raytpu:slices[{0}]",
                               ("access_cidrs",): "raytpu:network.rayAccessCidrs"})
    assert keys.key(("cluster_name",)) == "raytpu:ray.clusterName"
    assert keys.key(("worker_groups", 3, "ray_resources")) == "raytpu:slices[3].rayResources"
    assert keys.key(("worker_groups", 3)) == "raytpu:slices[3]"
    assert keys.key(("access_cidrs", 1)) == "raytpu:network.rayAccessCidrs[1]"
    assert keys.key(()) == "raytpu:ray"
    assert keys.lines(ValueError("no field named")) == ["raytpu:ray: no field named"]


def test_a_composed_program_and_a_stack_get_one_sentence() -> None:
    """The same bad value: the Args' words for the composer, the stack's for the stack."""
    with pytest.raises(ArgsError) as composed:
        GkeClusterArgs(project="acme-ml", location="us-west4-a", cluster_name="raytpu",
                       network="n", subnetwork="s", pods_range_name="p",
                       services_range_name="v", security_group="admins@example.com")
    assert str(composed.value).startswith("GkeClusterArgs.security_group: 'admins@example.com'")
    with pytest.raises(ConfigError) as e:
        from raytpu.program.load import validated_config

        validated_config("t", {**BASE, "raytpu:cluster": {"securityGroup": "admins@example.com"}})
    assert e.value.problems == [Keys("raytpu:cluster").line(composed.value.problems[0])]
    assert e.value.problems[0].startswith("raytpu:cluster.securityGroup: 'admins@example.com'")
