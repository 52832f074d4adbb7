"""Pulumi ComponentResources of raytpu; each is usable on its own from any Pulumi program.

The public API is ``__all__``: every component with its typed Args (frozen dataclasses whose
fields are documented and validated on construction, so a composed program is refused with
the messages a stack file gets), plus the value types the Args take. A TPU slice's shape
comes from the catalog: ``raytpu.facts.catalog.slice_shape("v5litepod-16")``; a slice group
(``SliceGroup``: a shape, a name and a slice range) makes its pools, worker group and
monitoring Args through ``TpuSlicePoolArgs.of``, ``TpuWorkerGroup.of`` and
``MonitoredSliceGroup.of``.

One re-export per line (``X as X`` marks it public for ruff and mypy).
"""

from raytpu.components.existing_gke_cluster import ExistingGkeCluster as ExistingGkeCluster
from raytpu.components.existing_gke_cluster import ExistingGkeClusterArgs as ExistingGkeClusterArgs
from raytpu.components.gke_cluster import GkeCluster as GkeCluster
from raytpu.components.gke_cluster_args import AuthorizedNetwork as AuthorizedNetwork
from raytpu.components.gke_cluster_args import GkeClusterArgs as GkeClusterArgs
from raytpu.components.gke_cluster_args import MaintenanceExclusion as MaintenanceExclusion
from raytpu.components.gke_cluster_args import MaintenancePolicyArgs as MaintenancePolicyArgs
from raytpu.components.gke_cluster_args import MaintenanceWindow as MaintenanceWindow
from raytpu.components.gke_cluster_args import SystemPoolArgs as SystemPoolArgs
from raytpu.components.kuberay_operator import KubeRayOperator as KubeRayOperator
from raytpu.components.kuberay_operator import KubeRayOperatorArgs as KubeRayOperatorArgs
from raytpu.components.kueue import Kueue as Kueue
from raytpu.components.kueue import KueueArgs as KueueArgs
from raytpu.components.kueue_queues import HostQuota as HostQuota
from raytpu.components.kueue_queues import KueueQueues as KueueQueues
from raytpu.components.kueue_queues import KueueQueuesArgs as KueueQueuesArgs
from raytpu.components.kueue_queues import TeamQueue as TeamQueue
from raytpu.components.kueue_queues import TpuFlavor as TpuFlavor
from raytpu.components.kueue_queues import TpuQuota as TpuQuota
from raytpu.components.memorystore import MemorystoreRedis as MemorystoreRedis
from raytpu.components.memorystore import MemorystoreRedisArgs as MemorystoreRedisArgs
from raytpu.components.monitoring import FleetMonitoring as FleetMonitoring
from raytpu.components.monitoring import FleetMonitoringArgs as FleetMonitoringArgs
from raytpu.components.monitoring import MonitoredSliceGroup as MonitoredSliceGroup
from raytpu.components.monitoring import PodMonitoring as PodMonitoring
from raytpu.components.network import ExistingNetwork as ExistingNetwork
from raytpu.components.network import Network as Network
from raytpu.components.network import NetworkArgs as NetworkArgs
from raytpu.components.network_policy import OperatorPeer as OperatorPeer
from raytpu.components.network_policy import RayNetworkPolicies as RayNetworkPolicies
from raytpu.components.network_policy import RayNetworkPoliciesArgs as RayNetworkPoliciesArgs
from raytpu.components.project_services import ProjectServices as ProjectServices
from raytpu.components.project_services import ProjectServicesArgs as ProjectServicesArgs
from raytpu.components.ray_cluster_args import GcsFaultTolerance as GcsFaultTolerance
from raytpu.components.registry import ImageRegistry as ImageRegistry
from raytpu.components.registry import ImageRegistryArgs as ImageRegistryArgs
from raytpu.components.registry import TrainerImage as TrainerImage
from raytpu.components.registry import TrainerImageArgs as TrainerImageArgs
from raytpu.components.storage import CheckpointStorage as CheckpointStorage
from raytpu.components.storage import CheckpointStorageArgs as CheckpointStorageArgs
from raytpu.components.team_access import TeamAccess as TeamAccess
from raytpu.components.team_access import TeamAccessArgs as TeamAccessArgs
from raytpu.components.tpu_ray_cluster import TpuRayCluster as TpuRayCluster
from raytpu.components.tpu_ray_cluster import TpuRayClusterArgs as TpuRayClusterArgs
from raytpu.components.tpu_ray_cluster import TpuWorkerGroup as TpuWorkerGroup
from raytpu.components.tpu_slice_pool import SliceAutoscaling as SliceAutoscaling
from raytpu.components.tpu_slice_pool import TpuSlicePool as TpuSlicePool
from raytpu.components.tpu_slice_pool import TpuSlicePoolArgs as TpuSlicePoolArgs
from raytpu.facts.catalog import SliceShape as SliceShape
from raytpu.facts.catalog import slice_shape as slice_shape
from raytpu.facts.slice_group import SliceGroup as SliceGroup

__all__ = [
    "AuthorizedNetwork",
    "CheckpointStorage",
    "CheckpointStorageArgs",
    "ExistingGkeCluster",
    "ExistingGkeClusterArgs",
    "ExistingNetwork",
    "FleetMonitoring",
    "FleetMonitoringArgs",
    "GcsFaultTolerance",
    "GkeCluster",
    "GkeClusterArgs",
    "HostQuota",
    "ImageRegistry",
    "ImageRegistryArgs",
    "KubeRayOperator",
    "KubeRayOperatorArgs",
    "Kueue",
    "KueueArgs",
    "KueueQueues",
    "KueueQueuesArgs",
    "MaintenanceExclusion",
    "MaintenancePolicyArgs",
    "MaintenanceWindow",
    "MemorystoreRedis",
    "MemorystoreRedisArgs",
    "MonitoredSliceGroup",
    "Network",
    "NetworkArgs",
    "OperatorPeer",
    "PodMonitoring",
    "ProjectServices",
    "ProjectServicesArgs",
    "RayNetworkPolicies",
    "RayNetworkPoliciesArgs",
    "SliceAutoscaling",
    "SliceGroup",
    "SliceShape",
    "SystemPoolArgs",
    "TeamAccess",
    "TeamAccessArgs",
    "TeamQueue",
    "TpuFlavor",
    "TpuQuota",
    "TpuRayCluster",
    "TpuRayClusterArgs",
    "TpuSlicePool",
    "TpuSlicePoolArgs",
    "TpuWorkerGroup",
    "TrainerImage",
    "TrainerImageArgs",
    "slice_shape",
]
