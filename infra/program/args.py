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

from raytpu.components.tpu_slice_pool import TpuSlicePoolArgs
from raytpu.config.schema import From, build_args
from raytpu.config.stack import ConfigError, SliceGroupConfig, StackConfig
from raytpu.facts import versions
from raytpu.program.gcs_ft_program import memorystore_problems
from raytpu.program.isolation_program import isolation_problems
from raytpu.program.kueue_program import kueue_problems
from raytpu.program.monitoring_program import monitoring_args
from raytpu.program.ray_program import ray_problems
from raytpu.program.training_job import training_rayjob
from raytpu.spec.gke_cluster import GkeClusterArgs
from raytpu.spec.network import NetworkArgs
from raytpu.spec.registry import ImageRegistryArgs, TrainerImageArgs
from raytpu.spec.storage import CheckpointStorageArgs

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
    c = cfg.cluster
    project = From(cfg.project, "gcp:project")
    name = "raytpu:cluster.name"  # tags and account ids derive from it
    node_tag, tpu_tag = From(f"{c.name}-node", name), From(f"{c.name}-tpu", name)
    network = build_args(
        NetworkArgs, "raytpu:network", cfg.network, problems, project=project,
        region=From(cfg.region, "raytpu:zone"), node_tag=node_tag, tpu_node_tag=tpu_tag,
        # A job spans slices of one group only (raytpu:jobs[].slices), so a group of at
        # most one slice never sends DCN traffic.
        multislice=any(s.max_slices > 1 for s in cfg.slices),
        master_ipv4_cidr_block=From(c.master_ipv4_cidr_block,
                                    "raytpu:cluster.masterIpv4CidrBlock"),
        existing=None if cfg.network.create else cfg.network.existing)
    cluster = build_args(
        GkeClusterArgs, "raytpu:cluster", c, problems, project=project,
        location=From(cfg.cluster_location, "raytpu:zone"), cluster_name=From(c.name, name),
        network=PENDING, subnetwork=PENDING, pods_range_name=PENDING,
        services_range_name=PENDING, node_tags=From((node_tag.value,), name),
        ray_operator_addon=From(cfg.kuberay.mode == "gke-addon", "raytpu:kuberay.mode"),
        min_versions=_required_gke_versions(cfg),
        node_service_account_id=From(_account_id(c.name, "nodes"), name),
        resource_labels=stack_labels(cfg))
    pools = [build_args(
        partial(TpuSlicePoolArgs.of, s.group), f"raytpu:slices[{i}]", None, problems,
        cluster=PENDING, zone=From(cfg.zone, "raytpu:zone"), node_service_account=PENDING,
        project=project, location=From(cfg.cluster_location, "raytpu:zone"),
        node_tags=From((node_tag.value, tpu_tag.value), name),
        resource_labels=cost_labels(cfg, s),
        # Resource policies are named per project and region: the cluster's name keeps two
        # stacks' groups of one name apart.
        workload_policy_name=From(f"{c.name[:62 - len(s.name)].rstrip('-')}-{s.name}",
                                  f"raytpu:slices[{i}].name"))
        for i, s in enumerate(cfg.slices)]
    storage = build_args(
        CheckpointStorageArgs, "raytpu:storage", cfg.storage, problems, project=project,
        bucket_name=From(cfg.bucket_name, "raytpu:storage.bucket"),
        location=cfg.storage.location or cfg.region,
        namespace=From(cfg.ray.namespace, "raytpu:ray.namespace"),
        ksa_name=From(cfg.ray.service_account, "raytpu:ray.serviceAccount"),
        gsa_account_id=From(_account_id(c.name, "ckpt"), name), labels=stack_labels(cfg))
    registry = build_args(
        ImageRegistryArgs, "raytpu:registry", cfg.registry, problems, project=project,
        location=From(cfg.region, "raytpu:zone"),
        repository_id=From(cfg.registry.repository, "raytpu:registry.repository"),
        labels=stack_labels(cfg))
    image = build_args(
        TrainerImageArgs, "raytpu:ray.imageBuild", cfg.ray.image_build, problems,
        repository_url=PENDING, tag=From(cfg.ray.image_tag, "raytpu:ray.imageTag"),
    ) if cfg.builds_image else None
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
        partial(_raised, partial(gke_args, cfg)), partial(memorystore_problems, cfg),
        # The build's digest exists only after `up`: its placeholder stands in for the check.
        *(partial(_raised, partial(training_rayjob, cfg, job, key=f"raytpu:jobs[{i}]",
                                   image=cfg.built_image_placeholder() if cfg.builds_image
                                   else None))
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
