"""GCS fault tolerance in a RayCluster spec: ``gcsFaultToleranceOptions`` and what the pods
need beyond what KubeRay injects.

KubeRay 1.7.0 (``common/pod.go configureGCSFaultTolerance``) adds, once the field is set:
the head's ``RAY_REDIS_ADDRESS``, ``REDIS_PASSWORD`` (from ``redisPassword.valueFrom``, so
the password is a ``secretKeyRef``, never a value in the object), the storage namespace
(the RayCluster's UID, distinct per RayJob cluster, so clusters can share one Redis) and
the ``ray.io/ft-enabled`` annotation; each worker's ``RAY_gcs_rpc_server_reconnect_timeout_s``
(600 unless set). This module adds the rest: the CA file Ray 2.60 verifies a ``rediss://``
server with (``RAY_REDIS_CA_CERT``, mounted on the head from a ConfigMap; KubeRay's Redis
cleanup Job copies the head's container, so it reads it too), and a worker timeout other
than KubeRay's when one is asked for.
"""

from __future__ import annotations

from collections.abc import Mapping

from raytpu.components.k8s_objects import EnvVar, PodTemplateSpec
from raytpu.components.ray_resources import GcsFaultToleranceOptionsArgs
from raytpu.facts.gcs_ft_env import CA_ENV, KUBERAY_HEAD_ENV, RECONNECT_ENV
from raytpu.facts.names import DNS_LABEL
from raytpu.facts.problems import Path, Problem
from raytpu.spec.ray_cluster import GcsFaultTolerance, TpuRayClusterArgs

CA_KEY = "ca.crt"
CA_VOLUME = "redis-ca"
CA_DIR = "/etc/raytpu/redis-ca"


def ft_options(ft: GcsFaultTolerance) -> GcsFaultToleranceOptionsArgs:
    return GcsFaultToleranceOptionsArgs(
        redis_address=ft.redis_address,
        redis_password={"valueFrom": {"secretKeyRef": {"name": ft.password_secret,
                                                       "key": ft.password_key}}},
    )


def worker_env(ft: GcsFaultTolerance | None) -> list[EnvVar]:
    if ft is None or ft.worker_reconnect_timeout_s is None:
        return []  # KubeRay's KUBERAY_RECONNECT_TIMEOUT_S
    return [{"name": RECONNECT_ENV, "value": str(ft.worker_reconnect_timeout_s)}]


def with_head_ca(template: PodTemplateSpec, ft: GcsFaultTolerance | None) -> PodTemplateSpec:
    """The head template with the Redis CA mounted read-only and named in ``RAY_REDIS_CA_CERT``
    (unchanged without a CA)."""
    if ft is None or ft.ca_config_map is None:
        return template
    spec = template["spec"]
    container = spec["containers"][0]
    container["env"] = sorted([*container.get("env", []),
                               {"name": CA_ENV, "value": f"{CA_DIR}/{CA_KEY}"}],
                              key=lambda e: e["name"])
    container["volumeMounts"] = [*container.get("volumeMounts", []),
                                 {"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True}]
    spec["volumes"] = [*spec.get("volumes", []),
                       {"name": CA_VOLUME, "configMap": {"name": ft.ca_config_map}}]
    return template


def ft_problems(args: TpuRayClusterArgs) -> list[Problem]:
    """Why ``args`` cannot run with (or without) GCS fault tolerance, naming the field."""
    ft = args.gcs_fault_tolerance
    problems: list[Problem] = []
    for field, env in (("env", args.env), ("head_env", args.head_env)):
        problems += [Problem("", (field,), ("KubeRay sets it from gcsFaultToleranceOptions and "
                                            "rejects it set by hand",), item=name)
                     for name in KUBERAY_HEAD_ENV if name in env]
    envs: list[tuple[Path, Mapping[str, str]]] = [(("env",), args.env),
                                                  (("head_env",), args.head_env)]
    envs += [(("worker_groups", i, "env"), g.env) for i, g in enumerate(args.worker_groups)]
    for path, env in envs:
        if RECONNECT_ENV in env:
            # Without GCS FT the new head knows none of the old nodes: waiting only delays
            # the restart; with it, the field below is the one place to say it.
            problems.append(Problem("", path, (
                "set gcs_fault_tolerance.worker_reconnect_timeout_s instead" if ft else
                "cannot keep a worker through a head restart without gcs_fault_tolerance",),
                item=RECONNECT_ENV))
    if ft is None:
        return problems
    where: Path = ("gcs_fault_tolerance",)
    for name, value in (("password_secret", ft.password_secret),
                        ("ca_config_map", ft.ca_config_map)):
        if value is not None and not DNS_LABEL.match(value):
            problems.append(Problem("", where, (f"{name} {value!r} is not an object name "
                                                "(a DNS label)",)))
    if ft.ca_cert is not None and ft.ca_config_map is None:
        problems.append(Problem("", where, ("ca_cert needs ca_config_map, the ConfigMap to "
                                            "hold it",)))
    t = ft.worker_reconnect_timeout_s
    if t is not None and t < 1:
        problems.append(Problem("", where, (f"worker_reconnect_timeout_s {t} must be >= 1",)))
    if (isinstance(ft.redis_address, str) and ft.ca_config_map is not None
            and not ft.redis_address.startswith("rediss://")):
        problems.append(Problem("", where, (f"a CA is only read over TLS; redis_address "
                                            f"{ft.redis_address!r} is not rediss://",)))
    return problems
