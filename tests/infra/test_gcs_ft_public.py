"""GCS fault tolerance's public pieces on their own (``raytpu.components`` is public API, and
these checks are its only guard): ``MemorystoreRedis`` and its Args, and the refusals of a
``TpuRayClusterArgs`` with (or without) ``GcsFaultTolerance``. The CA bundle during a
rotation: test_memorystore.py."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from infra_support import PROJECT, REGION, run_alone
from raytpu.components import (
    GcsFaultTolerance,
    MemorystoreRedis,
    MemorystoreRedisArgs,
    TpuRayClusterArgs,
    TpuWorkerGroup,
    slice_shape,
)
from raytpu.components.ray_gcs_ft import ft_problems
from raytpu.plan.engine import PlanResult
from raytpu.plan.mocks import RecordingMocks
from raytpu.plan.ray_tables import gcs_ft_table

NETWORK = "projects/acme-ml/global/networks/raytpu"
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_the_address_is_tls_at_the_instances_host_and_port(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance's outputs as Memorystore returns them: the GCS gets ``rediss://`` (Ray
    2.60 speaks TLS only to that scheme) and the first server CA."""
    original = RecordingMocks.new_resource

    def new_resource(self: RecordingMocks, args: Any) -> Any:
        resource_id, outputs = original(self, args)  # records the inputs
        if args.typ == "gcp:redis/instance:Instance":
            outputs = {**outputs, "host": "10.9.8.7", "port": 6378, "authString": "s3cret",
                       "serverCaCerts": [{"cert": PEM}]}
        return resource_id, outputs

    monkeypatch.setattr(RecordingMocks, "new_resource", new_resource)
    seen: dict[str, Any] = {}

    def program() -> None:
        redis = MemorystoreRedis("gcs-redis", MemorystoreRedisArgs(
            project=PROJECT, region=REGION, network=NETWORK))
        pulumi.Output.all(redis.address, redis.ca_cert, redis.auth_string).apply(
            lambda v: seen.update(address=v[0], ca=v[1], auth=v[2]))

    plan = run_alone(program)
    assert seen == {"address": "rediss://10.9.8.7:6378", "ca": PEM, "auth": "s3cret"}
    (instance,) = plan.by_type("gcp:redis/instance:Instance")
    assert (instance.inputs["authEnabled"], instance.inputs["transitEncryptionMode"],
            instance.inputs["connectMode"]) == (True, "SERVER_AUTHENTICATION",
                                                "PRIVATE_SERVICE_ACCESS")


@pytest.mark.parametrize(("kw", "message"), [
    ({"project": ""}, "MemorystoreRedisArgs.project: required"),
    ({"region": "us-west4-a"}, "MemorystoreRedisArgs.region: 'us-west4-a' is not a GCP region"),
    ({"tier": "PREMIUM"}, "MemorystoreRedisArgs.tier: 'PREMIUM'; valid: BASIC, STANDARD_HA"),
    ({"memory_size_gb": 0}, "MemorystoreRedisArgs.memory_size_gb: 0 is outside 1..300 GB"),
    ({"memory_size_gb": 301}, "MemorystoreRedisArgs.memory_size_gb: 301 is outside 1..300"),
    ({"private_service_access_prefix": 25},
     "MemorystoreRedisArgs.private_service_access_prefix: /25: use /16 to /24"),
    ({"private_service_access_prefix": 15}, "private_service_access_prefix: /15: use /16"),
])
def test_bad_memorystore_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        MemorystoreRedisArgs(**{"project": PROJECT, "region": REGION, "network": NETWORK, **kw})
    assert message in str(e.value)


def test_the_limits_themselves_are_accepted() -> None:
    for kw in ({"memory_size_gb": 1, "private_service_access_prefix": 16},
               {"memory_size_gb": 300, "private_service_access_prefix": 24, "tier": "BASIC"}):
        MemorystoreRedisArgs(project=PROJECT, region=REGION, network=NETWORK, **kw)


@pytest.mark.parametrize("name", ["1redis", "Redis", "redis-", "r", "r" * 38, "gcs_redis"])
def test_an_instance_name_memorystore_refuses_is_refused(name: str) -> None:
    args = MemorystoreRedisArgs(project=PROJECT, region=REGION, network=NETWORK)
    with pytest.raises(ValueError, match=rf"MemorystoreRedis.name: '{name}' must be 2-37 "
                                         "lowercase letters, digits and '-', starting with a "
                                         "letter"):
        MemorystoreRedis(name, args)


def _cluster(ft: GcsFaultTolerance | None = None, **kw: Any) -> list[str]:
    group_env = kw.pop("group_env", {})
    args = TpuRayClusterArgs(
        cluster_name="raytpu", namespace="ray", service_account="ray-workload",
        gsa_email="gsa@acme-ml.iam.gserviceaccount.com", image="rayproject/ray:2.60.0-py311",
        worker_groups=[TpuWorkerGroup("train", slice_shape("v4-16"), 1, 1, 1, env=group_env)],
        gcs_fault_tolerance=ft, **kw)
    return [str(p) for p in ft_problems(args)]


FT = GcsFaultTolerance(redis_address="rediss://10.9.8.7:6378", password_secret="gcs-redis",
                       ca_config_map="gcs-redis-ca", ca_cert=PEM, worker_reconnect_timeout_s=1)


def test_good_gcs_fault_tolerance_has_no_problems() -> None:
    assert _cluster(FT) == []
    assert _cluster(None) == []


@pytest.mark.parametrize(("ft", "kw", "problems"), [
    (FT, {"env": {"RAY_REDIS_ADDRESS": "x"}, "head_env": {"REDIS_PASSWORD": "x"}},
     ["env.RAY_REDIS_ADDRESS: KubeRay sets it from gcsFaultToleranceOptions and rejects it "
      "set by hand",
      "head_env.REDIS_PASSWORD: KubeRay sets it from gcsFaultToleranceOptions and rejects "
      "it set by hand"]),
    (FT, {"group_env": {"RAY_gcs_rpc_server_reconnect_timeout_s": "60"}},
     ["worker_groups[0].env.RAY_gcs_rpc_server_reconnect_timeout_s: set "
      "gcs_fault_tolerance.worker_reconnect_timeout_s instead"]),
    (None, {"env": {"RAY_gcs_rpc_server_reconnect_timeout_s": "60"}},
     ["env.RAY_gcs_rpc_server_reconnect_timeout_s: cannot keep a worker through a head "
      "restart without gcs_fault_tolerance"]),
    (GcsFaultTolerance("rediss://r:6378", "Gcs_Redis", ca_config_map="ca.map"), {},
     ["gcs_fault_tolerance: password_secret 'Gcs_Redis' is not an object name (a DNS label)",
      "gcs_fault_tolerance: ca_config_map 'ca.map' is not an object name (a DNS label)"]),
    (GcsFaultTolerance("rediss://r:6378", "gcs-redis", ca_cert=PEM), {},
     ["gcs_fault_tolerance: ca_cert needs ca_config_map, the ConfigMap to hold it"]),
    (GcsFaultTolerance("rediss://r:6378", "gcs-redis", worker_reconnect_timeout_s=0), {},
     ["gcs_fault_tolerance: worker_reconnect_timeout_s 0 must be >= 1"]),
    (GcsFaultTolerance("redis://r:6379", "gcs-redis", ca_config_map="gcs-redis-ca"), {},
     ["gcs_fault_tolerance: a CA is only read over TLS; redis_address 'redis://r:6379' is "
      "not rediss://"]),
])
def test_what_kuberay_or_ray_would_refuse_is_named(
        ft: GcsFaultTolerance | None, kw: dict[str, Any], problems: list[str]) -> None:
    assert _cluster(ft, **kw) == problems


def test_the_plan_says_workers_wait_kuberays_600_s_for_a_new_head(
        stack_plans: dict[str, PlanResult]) -> None:
    """Prod sets no worker timeout of its own: its workers get KubeRay 1.7.0's 600 s (the
    cluster tier holds the fact to what the real operator sets)."""
    table = gcs_ft_table(stack_plans["prod"])
    assert table is not None
    (row,) = [r for r in table.rows if r[0] == "RayCluster raytpu"]
    assert row[1:2] + row[-1:] == ["on (Redis)", "600 s (KubeRay)"]
