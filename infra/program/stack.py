"""The stack program: validated config in, components out.

``pulumi up`` runs it through ``deploy/__main__.py``; ``raytpu plan`` runs the same function
under mocks. Config is read and validated here, once; components only see typed Args.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import pulumi
from raytpu.components import (
    AuthorizedNetwork,
    CheckpointStorage,
    CheckpointStorageArgs,
    ExistingNetwork,
    GkeCluster,
    GkeClusterArgs,
    ImageRegistry,
    ImageRegistryArgs,
    Network,
    NetworkArgs,
    SystemPoolArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
    TrainerImage,
    TrainerImageArgs,
)
from raytpu.components.gcp_resources import ENGINE_VERSIONS_TOKEN
from raytpu.config.key_paths import stack_key_message
from raytpu.config.stack import NAMESPACE, ConfigError, SliceGroupConfig, StackConfig
from raytpu.config.validate import parse_stack_config, stack_warnings
from raytpu.facts import versions
from raytpu.facts.names import SYSTEM_POOL
from raytpu.program.apis import after_apis, declare_project_services
from raytpu.program.isolation_program import build_teams, isolation_problems
from raytpu.program.kueue_program import build_kueue, kueue_problems
from raytpu.program.monitoring_program import build_monitoring, monitoring_args
from raytpu.program.ray_program import build_ray, ray_problems

if TYPE_CHECKING:
    import pulumi_kubernetes as k8s
    from raytpu.components.gcp_resources import ContainerNodePool


def read_stack_config() -> StackConfig:
    """The running stack's config, as Pulumi hands it to the program, validated."""
    from pulumi.runtime.config import CONFIG, get_config_env

    raw: dict[str, Any] = {}
    for key, value in {**get_config_env(), **CONFIG.get()}.items():
        if not (key.startswith(f"{NAMESPACE}:") or key == "gcp:project"):
            continue
        if isinstance(value, str) and value[:1] in "[{":
            value = json.loads(value)
        raw[key] = value
    return parse_stack_config(pulumi.get_stack(), raw)


# ---------------------------------------------------------------------------------------
# The GKE side: StackConfig -> component Args -> components. The only place config is
# mapped to Args.

# Stands in for outputs of components not declared yet, so that every Args is built (and
# validated) before the first resource exists; `dataclasses.replace` wires the real ones.
_PENDING = "pending"
_A = TypeVar("_A")


@dataclass(frozen=True)
class Infra:
    """What the GKE side hands to the Ray layer (KubeRay operator + RayCluster)."""

    provider: k8s.Provider
    """Kubernetes provider of the cluster (exec auth through gke-gcloud-auth-plugin)."""
    cluster: GkeCluster
    network: Network
    tpu_pools: dict[str, TpuSlicePool]
    """TPU slice pools by ``raytpu:slices[].name``."""
    checkpoint_gsa_email: pulumi.Output[str]
    """GSA the Ray pods' KSA impersonates (annotation ``iam.gke.io/gcp-service-account``)."""
    bucket_name: pulumi.Output[str]
    bucket_url: pulumi.Output[str]
    registry_url: pulumi.Output[str]
    image: pulumi.Input[str]
    """Trainer image: ``raytpu:ray.image``, or the stack's build by digest."""
    system_pool_name: str
    """GKE name of the CPU pool the Ray head and operators run on."""
    api_options: pulumi.ResourceOptions | None = None
    """For later gcp: components: each resource waits for its API (``after_apis``)."""
    checkpoint_bucket: pulumi.Resource | None = None
    """The stack's checkpoint bucket (teams' prefixes are granted on it)."""

    @property
    def node_pools(self) -> list[ContainerNodePool]:
        """Every TPU node pool: what Ray worker groups depend on."""
        return [p for pool in self.tpu_pools.values() for p in pool.node_pools]

    @property
    def tpu_pool_labels(self) -> dict[str, dict[str, str]]:
        """Node labels of each TPU node pool, by GKE pool name."""
        return {
            name: pool.node_selector
            for pool in self.tpu_pools.values()
            for name in pool.node_pool_names
        }

    @property
    def depends_on(self) -> list[pulumi.Resource]:
        """What the RayCluster must wait for: the cluster, its system and TPU pools."""
        return [*self.operator_depends_on, *self.node_pools]

    @property
    def operator_depends_on(self) -> list[pulumi.Resource]:
        """What the operators (cert-manager, KubeRay, the TPU webhook) wait for: the cluster and
        the system pool they run on. Never the TPU pools: a TPU stockout must not hold them."""
        return [self.cluster.cluster, self.cluster.system_pool]


def _labels(cfg: StackConfig) -> dict[str, str]:
    return {"app": "raytpu", "stack": re.sub(r"[^a-z0-9_-]", "-", cfg.stack.lower())[:63]}


def cost_labels(cfg: StackConfig, s: SliceGroupConfig) -> dict[str, str]:
    """GCE labels of a slice group's VMs: the stack's, the group, and the team when exactly
    one team has quota on the group (a shared group is split by GKE cost allocation)."""
    teams = [t.name for t in cfg.teams if s.name in t.quota]
    return {**_labels(cfg), "slice-group": s.name, **({"team": teams[0]} if len(teams) == 1
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


def _stack_args(cfg: StackConfig) -> tuple[
    NetworkArgs, GkeClusterArgs, list[TpuSlicePoolArgs], CheckpointStorageArgs, ImageRegistryArgs,
    TrainerImageArgs | None,
]:
    """Every component's Args, validated; Args problems become ConfigError lines."""
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
        network=_PENDING,
        subnetwork=_PENDING,
        pods_range_name=_PENDING,
        services_range_name=_PENDING,
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
        resource_labels=_labels(cfg),
        dataplane_v2=c.dataplane_v2,
        security_group=c.security_group,
    ))
    def pool(s: SliceGroupConfig) -> TpuSlicePoolArgs:
        return TpuSlicePoolArgs.of(
            s.group, cluster=_PENDING, zone=cfg.zone, node_service_account=_PENDING,
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
        labels=_labels(cfg),
    ))
    registry = make("raytpu:registry", lambda: ImageRegistryArgs(
        project=cfg.project,
        location=cfg.region,
        repository_id=cfg.registry.repository,
        create=cfg.registry.create,
        labels=_labels(cfg),
    ))
    image = make("raytpu:ray.imageTag", lambda: TrainerImageArgs(
        repository_url=_PENDING,
        tag=cfg.ray.image_tag,
        context=cfg.ray.image_build.context,
        dockerfile=cfg.ray.image_build.dockerfile,
    )) if cfg.builds_image else None
    if problems:
        raise ConfigError(problems)
    return network, cluster, pools, storage, registry, image


def build_infra(cfg: StackConfig) -> Infra:
    """Declare the network, the cluster, the TPU slice pools, storage and registry."""
    net_args, cluster_args, pool_args, storage_args, registry_args, image_args = _stack_args(cfg)

    # Every gcp: resource of the components below waits for the API it calls.
    apis = declare_project_services(cfg)
    opts = after_apis(apis)
    network = Network(cfg.cluster.name, net_args, opts)
    gke = GkeCluster(cfg.cluster.name, dataclasses.replace(
        cluster_args,
        network=network.network,
        subnetwork=network.subnetwork,
        pods_range_name=network.pods_range_name,
        services_range_name=network.services_range_name,
        # The version lookup is an invoke: transformations do not reach it.
        api_dependencies=tuple(apis.depends_on_for(ENGINE_VERSIONS_TOKEN)) if apis else (),
    ), opts)
    tpu_pools = {
        s.name: TpuSlicePool(s.name, dataclasses.replace(
            args, cluster=gke.cluster_id, node_service_account=gke.node_service_account_email
        ), opts)
        for s, args in zip(cfg.slices, pool_args, strict=True)
    }
    # The cluster creates the <project>.svc.id.goog pool the binding's member lives in.
    storage = CheckpointStorage("checkpoints", dataclasses.replace(
        storage_args, workload_identity_depends_on=(gke.cluster,)
    ), opts)
    registry = ImageRegistry("registry", dataclasses.replace(
        registry_args, readers=(gke.node_service_account_member,)
    ), opts)
    image: pulumi.Input[str] = cfg.image
    if image_args is not None:  # built here, pushed to the registry, named by digest
        image = TrainerImage("trainer-image", dataclasses.replace(
            image_args, repository_url=registry.url), opts).ref
    return Infra(
        provider=gke.provider,
        cluster=gke,
        network=network,
        tpu_pools=tpu_pools,
        checkpoint_gsa_email=storage.gsa_email,
        bucket_name=storage.bucket_name,
        bucket_url=storage.bucket_url,
        registry_url=registry.url,
        image=image,
        system_pool_name=SYSTEM_POOL,
        api_options=opts,
        checkpoint_bucket=storage.bucket,
    )


def infra_outputs(cfg: StackConfig, infra: Infra) -> dict[str, Any]:
    """Stack outputs of the GKE side."""
    gke = infra.cluster
    return {
        "cluster_name": gke.cluster_name,
        "cluster_location": gke.location,
        "cluster_endpoint": gke.endpoint,
        "cluster_dns_endpoint": gke.dns_endpoint,
        "kubeconfig": gke.kubeconfig,  # secret
        "gke_version": gke.gke_version,
        "node_service_account": gke.node_service_account_email,
        "network": infra.network.network,
        "subnetwork": infra.network.subnetwork,
        "node_pools": {name: p.node_pool_names for name, p in infra.tpu_pools.items()},
        "slices": {s.name: s.group.output() for s in cfg.slices},
        "bucket_name": infra.bucket_name,
        "bucket_url": infra.bucket_url,
        "checkpoint_gsa_email": infra.checkpoint_gsa_email,
        "registry_url": infra.registry_url,
        "image": infra.image,
    }


def build(cfg: StackConfig) -> dict[str, Any]:
    """Declare every resource of the stack; return the stack outputs."""
    # Ray-side problems (names, image vs rayVersion, ...) before anything is declared.
    problems = ray_problems(cfg) + kueue_problems(cfg) + isolation_problems(cfg)
    if problems:
        raise ConfigError(problems)
    monitoring_args(cfg, _labels(cfg))  # raises ConfigError before anything is declared
    infra = build_infra(cfg)
    outputs = infra_outputs(cfg, infra)
    outputs |= build_ray(
        cfg,
        provider=infra.provider,
        gsa_email=infra.checkpoint_gsa_email,
        depends_on=infra.depends_on,
        operator_depends_on=infra.operator_depends_on,
        system_pool=infra.system_pool_name,
        tpu_pools=infra.tpu_pool_labels,
        image=infra.image,
    )
    # Teams: namespaces, identities, RBAC and NetworkPolicy; Kueue on the system pool (never
    # waiting on TPU pools) and the team queues in those namespaces.
    team_namespaces, team_outputs = build_teams(
        cfg, provider=infra.provider, cluster=infra.cluster.cluster,
        stack_bucket=infra.checkpoint_bucket, gcp_options=infra.api_options,
        labels=_labels(cfg))
    outputs |= team_outputs
    outputs |= build_kueue(cfg, provider=infra.provider, depends_on=infra.operator_depends_on,
                           queues_depend_on=team_namespaces, system_pool=infra.system_pool_name)
    outputs |= build_monitoring(cfg, _labels(cfg), infra.api_options)
    return outputs


def declare() -> None:
    """Read the stack's config and declare everything. Raises ConfigError on bad input."""
    cfg = read_stack_config()
    for warning in stack_warnings(cfg):
        pulumi.log.warn(warning)
    for key, value in build(cfg).items():
        pulumi.export(key, value)


def main() -> None:
    """Entry point of `pulumi up` / `preview`."""
    try:
        declare()
    except ConfigError as e:
        # RunError prints the message without a Python traceback.
        raise pulumi.RunError("invalid stack configuration:\n" + str(e)) from None
