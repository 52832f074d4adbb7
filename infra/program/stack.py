"""The stack program: validated config in, components out.

``pulumi up`` runs it through ``deploy/__main__.py``; ``raytpu plan`` runs the same function
under mocks. Config is read and validated here, once; components only see typed Args.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
from raytpu.components.gcp_resources import ENGINE_VERSIONS_TOKEN
from raytpu.components.gke_cluster import GkeCluster
from raytpu.components.network import Network
from raytpu.components.registry import ImageRegistry, TrainerImage
from raytpu.components.storage import CheckpointStorage
from raytpu.components.tpu_slice_pool import TpuSlicePool
from raytpu.config.stack import NAMESPACE, ConfigError, StackConfig
from raytpu.config.validate import stack_warnings
from raytpu.facts.names import SYSTEM_POOL
from raytpu.program.apis import after_apis, declare_project_services
from raytpu.program.args import gke_args, stack_labels, stack_problems
from raytpu.program.gcs_ft_program import build_memorystore
from raytpu.program.isolation_program import build_teams
from raytpu.program.kueue_program import build_kueue
from raytpu.program.load import validated_config
from raytpu.program.monitoring_program import build_monitoring
from raytpu.program.ray_program import build_ray

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
    return validated_config(pulumi.get_stack(), raw)


# ---------------------------------------------------------------------------------------
# The GKE side: component Args (raytpu.program.args) -> components.


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


def build_infra(cfg: StackConfig) -> Infra:
    """Declare the network, the cluster, the TPU slice pools, storage and registry."""
    a = gke_args(cfg)
    net_args, cluster_args, pool_args = a.network, a.cluster, a.pools
    storage_args, registry_args, image_args = a.storage, a.registry, a.image

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
    # Every component's problems (names, image vs rayVersion, ...) before anything is declared.
    problems = stack_problems(cfg)
    if problems:
        raise ConfigError(problems)
    infra = build_infra(cfg)
    outputs = infra_outputs(cfg, infra)
    # The GCS's Redis in the cluster's VPC, before the RayCluster that names it.
    redis = build_memorystore(cfg, infra.network.network, stack_labels(cfg), infra.api_options)
    outputs |= build_ray(
        cfg,
        provider=infra.provider,
        gsa_email=infra.checkpoint_gsa_email,
        depends_on=infra.depends_on,
        operator_depends_on=infra.operator_depends_on,
        system_pool=infra.system_pool_name,
        tpu_pools=infra.tpu_pool_labels,
        image=infra.image,
        redis=redis,
    )
    # Teams: namespaces, identities, RBAC and NetworkPolicy; Kueue on the system pool (never
    # waiting on TPU pools) and the team queues in those namespaces.
    team_namespaces, team_outputs = build_teams(
        cfg, provider=infra.provider, cluster=infra.cluster.cluster,
        stack_bucket=infra.checkpoint_bucket, gcp_options=infra.api_options,
        labels=stack_labels(cfg))
    outputs |= team_outputs
    kueue_outputs, _ = build_kueue(
        cfg, provider=infra.provider, depends_on=infra.operator_depends_on,
        queues_depend_on=team_namespaces, system_pool=infra.system_pool_name)
    outputs |= kueue_outputs
    outputs |= build_monitoring(cfg, stack_labels(cfg), infra.api_options)
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
