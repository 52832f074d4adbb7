"""Pulumi ComponentResources of raytpu; each is usable on its own from any Pulumi program.

The public API is ``__all__``: every component with its typed Args (frozen dataclasses whose
fields are documented and validated on construction, so a composed program is refused with
the messages a stack file gets), plus the value types the Args take. A TPU slice's shape
comes from the catalog: ``raytpu.catalog.slice_shape("v5litepod-16")``.

One re-export per line (``X as X`` marks it public for ruff and mypy).
"""

from raytpu.catalog import SliceShape as SliceShape
from raytpu.catalog import slice_shape as slice_shape

from .existing_gke_cluster import ExistingGkeCluster as ExistingGkeCluster
from .existing_gke_cluster import ExistingGkeClusterArgs as ExistingGkeClusterArgs
from .gke_cluster import GkeCluster as GkeCluster
from .gke_cluster_args import AuthorizedNetwork as AuthorizedNetwork
from .gke_cluster_args import GkeClusterArgs as GkeClusterArgs
from .gke_cluster_args import SystemPoolArgs as SystemPoolArgs
from .kuberay_operator import KubeRayOperator as KubeRayOperator
from .kuberay_operator import KubeRayOperatorArgs as KubeRayOperatorArgs
from .kueue import Kueue as Kueue
from .kueue import KueueArgs as KueueArgs
from .kueue_queues import HostQuota as HostQuota
from .kueue_queues import KueueQueues as KueueQueues
from .kueue_queues import KueueQueuesArgs as KueueQueuesArgs
from .kueue_queues import TeamQueue as TeamQueue
from .kueue_queues import TpuFlavor as TpuFlavor
from .kueue_queues import TpuQuota as TpuQuota
from .monitoring import FleetMonitoring as FleetMonitoring
from .monitoring import FleetMonitoringArgs as FleetMonitoringArgs
from .monitoring import MonitoredSliceGroup as MonitoredSliceGroup
from .monitoring import PodMonitoring as PodMonitoring
from .network import ExistingNetwork as ExistingNetwork
from .network import Network as Network
from .network import NetworkArgs as NetworkArgs
from .network_policy import OperatorPeer as OperatorPeer
from .network_policy import RayNetworkPolicies as RayNetworkPolicies
from .network_policy import RayNetworkPoliciesArgs as RayNetworkPoliciesArgs
from .project_services import ProjectServices as ProjectServices
from .project_services import ProjectServicesArgs as ProjectServicesArgs
from .registry import ImageRegistry as ImageRegistry
from .registry import ImageRegistryArgs as ImageRegistryArgs
from .registry import TrainerImage as TrainerImage
from .registry import TrainerImageArgs as TrainerImageArgs
from .storage import CheckpointStorage as CheckpointStorage
from .storage import CheckpointStorageArgs as CheckpointStorageArgs
from .team_access import TeamAccess as TeamAccess
from .team_access import TeamAccessArgs as TeamAccessArgs
from .tpu_ray_cluster import TpuRayCluster as TpuRayCluster
from .tpu_ray_cluster import TpuRayClusterArgs as TpuRayClusterArgs
from .tpu_ray_cluster import TpuWorkerGroup as TpuWorkerGroup
from .tpu_slice_pool import SliceAutoscaling as SliceAutoscaling
from .tpu_slice_pool import TpuSlicePool as TpuSlicePool
from .tpu_slice_pool import TpuSlicePoolArgs as TpuSlicePoolArgs

__all__ = [
    "AuthorizedNetwork",
    "CheckpointStorage",
    "CheckpointStorageArgs",
    "ExistingGkeCluster",
    "ExistingGkeClusterArgs",
    "ExistingNetwork",
    "FleetMonitoring",
    "FleetMonitoringArgs",
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
