"""The stack's component Args: :class:`~raytpu.config.stack.StackConfig` in, every
component's typed Args out, each problem as a line naming its stack key.

The one place config is mapped to Args. :func:`stack_problems` builds every Args of the
stack (the GKE side, the Ray layer, Kueue, monitoring, the jobs) without declaring
anything: what every command that reads a stack checks (:mod:`raytpu.program.load`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from raytpu.components import (
    AuthorizedNetwork,
    CheckpointStorageArgs,
    ExistingNetwork,
    GkeClusterArgs,
    ImageRegistryArgs,
    NetworkArgs,
    SystemPoolArgs,
    TpuSlicePoolArgs,
    TrainerImageArgs,
)
from raytpu.config.key_paths import stack_key_message
from raytpu.config.stack import ConfigError, SliceGroupConfig, StackConfig
from raytpu.facts import versions
from raytpu.program.isolation_program import isolation_problems
from raytpu.program.kueue_program import kueue_problems
from raytpu.program.monitoring_program import monitoring_args
from raytpu.program.ray_program import ray_problems
from raytpu.program.training_job import training_rayjob

# Stands in for outputs of components not declared yet, so that every Args is built (and
# validated) before the first resource exists; `dataclasses.replace` wires the real ones.
PENDING = "pending"
_A = TypeVar("_A")


@dataclass(frozen=True)
class GkeArgs:
    """The Args of the GKE side, outputs of other components still :data:`PENDING`."""

    network: NetworkArgs
    cluster: GkeClusterArgs
    pools: list[TpuSlicePoolArgs]
    """One per ``raytpu:slices`` entry, in order."""
    storage: CheckpointStorageArgs
    registry: ImageRegistryArgs
    image: TrainerImageArgs | None
    """None when ``raytpu:ray.image`` names an image built elsewhere."""


def stack_labels(cfg: StackConfig) -> dict[str, str]:
    return {"app": "raytpu", "stack": re.sub(r"[^a-z0-9_-]", "-", cfg.stack.lower())[:63]}


def cost_labels(cfg: StackConfig, s: SliceGroupConfig) -> dict[str, str]:
    """GCE labels of a slice group's VMs: the stack's, the group, and the team when exactly
    one team has quota on the group (a shared group is split by GKE cost allocation)."""
    teams = [t.name for t in cfg.teams if s.name in t.quota]
    return {**stack_labels(cfg), "slice-group": s.name, **({"team": teams[0]} if len(teams) == 1
                                                      else {})}


def _account_id(base: str, suffix: str) -> str:
    return f"{base[: 30 - len(suffix) - 1].rstrip('-')}-{suffix}"


def _required_gke_versions(cfg: StackConfig) -> dict[str, str]:
    """Minimum GKE versions for what this stack runs, by reason."""
    required: dict[str, str] = {}
    for s in cfg.slices:
        gen = s.shape.generation
        if gen.min_gke_version:
            required[f"TPU {gen.name}"] = gen.min_gke_version
    if cfg.kuberay.mode == "gke-addon":
        required["GKE Ray Operator add-on"] = versions.MIN_GKE_FOR_RAY_ADDON
    else:
        required["KubeRay TPU webhook"] = versions.MIN_GKE_FOR_TPU_WEBHOOK
    return required


def gke_args(cfg: StackConfig) -> GkeArgs:
    """The GKE side's Args, validated; Args problems become ConfigError lines."""
    problems: list[str] = []

    def make(key: str, factory: Callable[[], _A]) -> _A:
        try:
            return factory()
        except (ValueError, TypeError) as e:
            problem = stack_key_message(key, str(e))
            if problem not in problems:  # NetworkArgs and GkeClusterArgs share the master range
                problems.append(problem)
            return None  # type: ignore[return-value]

    c, n = cfg.cluster, cfg.network
    node_tag, tpu_tag = f"{c.name}-node", f"{c.name}-tpu"
    network = make("raytpu:network", lambda: NetworkArgs(
        project=cfg.project,
        region=cfg.region,
        node_tag=node_tag,
        tpu_node_tag=tpu_tag,
        master_ipv4_cidr_block=c.master_ipv4_cidr_block,
        create=n.create,
        existing=ExistingNetwork(**n.existing.model_dump()) if n.existing and not n.create
        else None,
        subnet_cidr=n.subnet_cidr,
        pods_cidr=n.pods_cidr,
        services_cidr=n.services_cidr,
        iap_ssh=n.iap_ssh,
        ray_access_cidrs=tuple(n.ray_access_cidrs),
    ))
    cluster = make("raytpu:cluster", lambda: GkeClusterArgs(
        project=cfg.project,
        location=cfg.cluster_location,
        cluster_name=c.name,
        network=PENDING,
        subnetwork=PENDING,
        pods_range_name=PENDING,
        services_range_name=PENDING,
        node_tags=(node_tag,),
        release_channel=c.release_channel,
        min_master_version=c.min_master_version,
        master_ipv4_cidr_block=c.master_ipv4_cidr_block,
        private_endpoint=c.private_endpoint,
        dns_endpoint=c.dns_endpoint,
        master_authorized_networks=tuple(
            AuthorizedNetwork(a.cidr_block, a.display_name) for a in c.master_authorized_networks
        ),
        deletion_protection=c.deletion_protection,
        system_pool=SystemPoolArgs(
            machine_type=c.system_pool.machine_type,
            min_nodes=c.system_pool.min_nodes,
            max_nodes=c.system_pool.max_nodes,
            disk_size_gb=c.system_pool.disk_size_gb,
        ),
        ray_operator_addon=cfg.kuberay.mode == "gke-addon",
        min_versions=_required_gke_versions(cfg),
        node_service_account_id=_account_id(c.name, "nodes"),
        resource_labels=stack_labels(cfg),
        dataplane_v2=c.dataplane_v2,
        security_group=c.security_group,
    ))
    def pool(s: SliceGroupConfig) -> TpuSlicePoolArgs:
        return TpuSlicePoolArgs.of(
            s.group, cluster=PENDING, zone=cfg.zone, node_service_account=PENDING,
            project=cfg.project, location=cfg.cluster_location, node_tags=(node_tag, tpu_tag),
            resource_labels=cost_labels(cfg, s),
        )

    pools = [make(f"raytpu:slices[{i}]", partial(pool, s)) for i, s in enumerate(cfg.slices)]
    storage = make("raytpu:storage", lambda: CheckpointStorageArgs(
        project=cfg.project,
        bucket_name=cfg.bucket_name,
        location=cfg.storage.location or cfg.region,
        namespace=cfg.ray.namespace,
        ksa_name=cfg.ray.service_account,
        gsa_account_id=_account_id(c.name, "ckpt"),
        retention_days=cfg.storage.retention_days,
        noncurrent_versions=cfg.storage.noncurrent_versions,
        force_destroy=cfg.storage.force_destroy,
        labels=stack_labels(cfg),
    ))
    registry = make("raytpu:registry", lambda: ImageRegistryArgs(
        project=cfg.project,
        location=cfg.region,
        repository_id=cfg.registry.repository,
        create=cfg.registry.create,
        labels=stack_labels(cfg),
    ))
    image = make("raytpu:ray.imageTag", lambda: TrainerImageArgs(
        repository_url=PENDING,
        tag=cfg.ray.image_tag,
        context=cfg.ray.image_build.context,
        dockerfile=cfg.ray.image_build.dockerfile,
    )) if cfg.builds_image else None
    if problems:
        raise ConfigError(problems)
    return GkeArgs(network, cluster, pools, storage, registry, image)




def _raised(check: Callable[[], object]) -> list[str]:
    try:
        check()
    except ConfigError as e:
        return e.problems
    return []


def stack_problems(cfg: StackConfig, *, config_refused: bool = False) -> list[str]:
    """Every problem building the stack's component Args (GKE side, Ray layer, Kueue, team
    isolation, monitoring, the jobs' RayJobs), one line each naming its stack key; nothing
    is declared. ``config_refused``: the config has problems of its own, so a check that
    breaks on a value they name is skipped (they say why)."""
    checks: list[Callable[[], list[str]]] = [
        partial(ray_problems, cfg), partial(kueue_problems, cfg),
        partial(isolation_problems, cfg),
        partial(_raised, partial(monitoring_args, cfg, stack_labels(cfg))),
        partial(_raised, partial(gke_args, cfg)),
        *(partial(_raised, partial(training_rayjob, cfg, job, key=f"raytpu:jobs[{i}]"))
          for i, job in enumerate(cfg.jobs)),
    ]
    problems: list[str] = []
    for check in checks:
        try:
            found = check()
        except Exception:
            if not config_refused:
                raise
            continue
        problems += [p for p in found if p not in problems]
    return problems
