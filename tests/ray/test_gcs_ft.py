"""GCS fault tolerance: the stack key, its refusals, and the RayCluster objects it makes
(validated against the KubeRay 1.7.0 CRD)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from ray_support import STACKS_DIR
from raytpu.components.ray_groups import ray_cluster_spec
from raytpu.components.ray_resources import wire_value
from raytpu.config.file import load_stack_file
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config
from raytpu.program.ray_cluster_config import cluster_args

Validate = Callable[[Mapping[str, Any]], list[str]]


def _prod_raw() -> dict[str, Any]:
    return dict(load_stack_file("prod", STACKS_DIR))


def _refused(ft: dict[str, Any], **ray: Any) -> list[str]:
    raw = _prod_raw()
    raw["raytpu:ray"] = {**raw["raytpu:ray"], "gcsFaultTolerance": ft, **ray}
    with pytest.raises(ConfigError) as e:
        parse_stack_config("prod", raw)
    return e.value.problems


def _spec(cfg_raw: dict[str, Any], stack: str = "prod") -> dict[str, Any]:
    cfg = parse_stack_config(stack, cfg_raw)
    args = cluster_args(cfg, gsa_email="gsa@example.com", image="rayproject/ray:2.60.0-py311")
    return dict(wire_value(ray_cluster_spec(args, {"app": "raytpu"})))


def test_prod_keeps_the_gcs_in_redis_with_the_password_from_a_secret(
        validate_crd: Validate) -> None:
    spec = _spec(_prod_raw())
    ft = spec["gcsFaultToleranceOptions"]
    assert ft["redisAddress"].startswith("rediss://")
    assert ft["redisPassword"] == {"valueFrom": {"secretKeyRef": {
        "name": "raytpu-gcs-redis", "key": "password"}}}
    head = spec["headGroupSpec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in head["containers"][0]["env"]}
    assert env["RAY_REDIS_CA_CERT"] == "/etc/raytpu/redis-ca/ca.crt"
    assert {"name": "redis-ca", "configMap": {"name": "raytpu-gcs-redis-ca"}} in head["volumes"]
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "raytpu", "namespace": "ray"}, "spec": spec}
    assert validate_crd(obj) == []


def test_dev_has_no_gcs_fault_tolerance() -> None:
    spec = _spec(dict(load_stack_file("dev", STACKS_DIR)), "dev")
    assert "gcsFaultToleranceOptions" not in spec


def test_existing_redis_and_a_worker_timeout_reach_the_spec(validate_crd: Validate) -> None:
    raw = _prod_raw()
    raw["raytpu:ray"] = {**raw["raytpu:ray"], "gcsFaultTolerance": {
        "existingRedis": {"address": "10.1.2.3:6379", "passwordSecret": "my-redis"},
        "workerReconnectTimeoutSeconds": 900}}
    spec = _spec(raw)
    assert spec["gcsFaultToleranceOptions"]["redisAddress"] == "10.1.2.3:6379"
    for w in spec["workerGroupSpecs"]:
        env = {e["name"]: e["value"] for e in w["template"]["spec"]["containers"][0]["env"]}
        assert env["RAY_gcs_rpc_server_reconnect_timeout_s"] == "900"
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "raytpu", "namespace": "ray"}, "spec": spec}
    assert validate_crd(obj) == []


def test_an_address_without_a_secret_is_refused() -> None:
    problems = _refused({"existingRedis": {"address": "10.1.2.3:6379"}})
    assert any("passwordSecret" in p for p in problems), problems


def test_both_or_neither_backend_is_refused() -> None:
    problems = _refused({})
    assert any("set exactly one of memorystore" in p for p in problems), problems


def test_a_reconnect_setting_without_gcs_ft_is_refused() -> None:
    raw = _prod_raw()
    raw["raytpu:ray"] = {k: v for k, v in raw["raytpu:ray"].items()
                         if k != "gcsFaultTolerance"}
    raw["raytpu:slices"] = [{**raw["raytpu:slices"][1],
                             "env": {"RAY_gcs_rpc_server_reconnect_timeout_s": "600"}}]
    with pytest.raises(ConfigError) as e:
        parse_stack_config("prod", raw)
    assert any(p.startswith("raytpu:slices[0].env.RAY_gcs_rpc_server_reconnect_timeout_s")
               and "without GCS fault tolerance" in p for p in e.value.problems)


def test_kuberay_managed_head_env_and_a_short_timeout_are_refused() -> None:
    problems = _refused({"memorystore": {}, "workerReconnectTimeoutSeconds": 5},
                        headEnv={"REDIS_PASSWORD": "x"})
    assert any(p.startswith("raytpu:ray.headEnv.REDIS_PASSWORD") for p in problems), problems
    assert any("workerReconnectTimeoutSeconds: 5" in p for p in problems), problems
