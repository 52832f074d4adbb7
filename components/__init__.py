"""Pulumi ComponentResources of raytpu; each is usable on its own from any Pulumi program.

The public API is ``__all__``: every component with its typed Args (frozen dataclasses whose
fields are documented and validated on construction, so a composed program is refused with
the messages a stack file gets), plus the value types the Args take. A TPU slice's shape
comes from the catalog: ``raytpu.facts.catalog.slice_shape("v5litepod-16")``; a slice group
(``SliceGroup``: a shape, a name and a slice range) makes its pools, worker group and
monitoring Args through ``TpuSlicePoolArgs.of``, ``TpuWorkerGroup.of`` and
``MonitoredSliceGroup.of``.

Names load on first use (PEP 562 ``__getattr__``): importing one component module, or the
spec types a stack configuration parses into, does not load every provider SDK. Inside the
package, modules import from the defining module, never from this barrel
(``tests/test_import_graph.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raytpu.components.existing_gke_cluster import ExistingGkeCluster as ExistingGkeCluster
    from raytpu.components.gke_cluster import GkeCluster as GkeCluster
    from raytpu.components.kuberay_operator import KubeRayOperator as KubeRayOperator
    from raytpu.components.kueue import Kueue as Kueue
    from raytpu.components.kueue_queues import KueueQueues as KueueQueues
    from raytpu.components.memorystore import MemorystoreRedis as MemorystoreRedis
    from raytpu.components.monitoring import FleetMonitoring as FleetMonitoring
    from raytpu.components.monitoring import PodMonitoring as PodMonitoring
    from raytpu.components.network import Network as Network
    from raytpu.components.network_policy import OperatorPeer as OperatorPeer
    from raytpu.components.network_policy import RayNetworkPolicies as RayNetworkPolicies
    from raytpu.components.network_policy import RayNetworkPoliciesArgs as RayNetworkPoliciesArgs
    from raytpu.components.project_services import ProjectServices as ProjectServices
    from raytpu.components.registry import ImageRegistry as ImageRegistry
    from raytpu.components.registry import TrainerImage as TrainerImage
    from raytpu.components.storage import CheckpointStorage as CheckpointStorage
    from raytpu.components.team_access import TeamAccess as TeamAccess
    from raytpu.components.tpu_ray_cluster import TpuRayCluster as TpuRayCluster
    from raytpu.components.tpu_slice_pool import SliceAutoscaling as SliceAutoscaling
    from raytpu.components.tpu_slice_pool import TpuSlicePool as TpuSlicePool
    from raytpu.components.tpu_slice_pool import TpuSlicePoolArgs as TpuSlicePoolArgs
    from raytpu.facts.catalog import SliceShape as SliceShape
    from raytpu.facts.catalog import slice_shape as slice_shape
    from raytpu.facts.slice_group import SliceGroup as SliceGroup
    from raytpu.spec.existing_gke_cluster import ExistingGkeClusterArgs as ExistingGkeClusterArgs
    from raytpu.spec.gke_cluster import AuthorizedNetwork as AuthorizedNetwork
    from raytpu.spec.gke_cluster import GkeClusterArgs as GkeClusterArgs
    from raytpu.spec.gke_cluster import MaintenanceExclusion as MaintenanceExclusion
    from raytpu.spec.gke_cluster import MaintenancePolicyArgs as MaintenancePolicyArgs
    from raytpu.spec.gke_cluster import MaintenanceWindow as MaintenanceWindow
    from raytpu.spec.gke_cluster import SystemPoolArgs as SystemPoolArgs
    from raytpu.spec.kuberay_operator import KubeRayOperatorArgs as KubeRayOperatorArgs
    from raytpu.spec.kueue import KueueArgs as KueueArgs
    from raytpu.spec.kueue_queues import HostQuota as HostQuota
    from raytpu.spec.kueue_queues import KueueQueuesArgs as KueueQueuesArgs
    from raytpu.spec.kueue_queues import TeamQueue as TeamQueue
    from raytpu.spec.kueue_queues import TpuFlavor as TpuFlavor
    from raytpu.spec.kueue_queues import TpuQuota as TpuQuota
    from raytpu.spec.memorystore import MemorystoreRedisArgs as MemorystoreRedisArgs
    from raytpu.spec.monitoring import FleetMonitoringArgs as FleetMonitoringArgs
    from raytpu.spec.monitoring import MonitoredSliceGroup as MonitoredSliceGroup
    from raytpu.spec.network import ExistingNetwork as ExistingNetwork
    from raytpu.spec.network import NetworkArgs as NetworkArgs
    from raytpu.spec.project_services import ProjectServicesArgs as ProjectServicesArgs
    from raytpu.spec.ray_cluster import GcsFaultTolerance as GcsFaultTolerance
    from raytpu.spec.ray_cluster import TpuRayClusterArgs as TpuRayClusterArgs
    from raytpu.spec.ray_cluster import TpuWorkerGroup as TpuWorkerGroup
    from raytpu.spec.registry import ImageRegistryArgs as ImageRegistryArgs
    from raytpu.spec.registry import TrainerImageArgs as TrainerImageArgs
    from raytpu.spec.storage import CheckpointStorageArgs as CheckpointStorageArgs
    from raytpu.spec.team_access import TeamAccessArgs as TeamAccessArgs

# Each public name and the module that defines it.
_WHERE: dict[str, str] = {
    "AuthorizedNetwork": "raytpu.spec.gke_cluster",
    "CheckpointStorage": "raytpu.components.storage",
    "CheckpointStorageArgs": "raytpu.spec.storage",
    "ExistingGkeCluster": "raytpu.components.existing_gke_cluster",
    "ExistingGkeClusterArgs": "raytpu.spec.existing_gke_cluster",
    "ExistingNetwork": "raytpu.spec.network",
    "FleetMonitoring": "raytpu.components.monitoring",
    "FleetMonitoringArgs": "raytpu.spec.monitoring",
    "GcsFaultTolerance": "raytpu.spec.ray_cluster",
    "GkeCluster": "raytpu.components.gke_cluster",
    "GkeClusterArgs": "raytpu.spec.gke_cluster",
    "HostQuota": "raytpu.spec.kueue_queues",
    "ImageRegistry": "raytpu.components.registry",
    "ImageRegistryArgs": "raytpu.spec.registry",
    "KubeRayOperator": "raytpu.components.kuberay_operator",
    "KubeRayOperatorArgs": "raytpu.spec.kuberay_operator",
    "Kueue": "raytpu.components.kueue",
    "KueueArgs": "raytpu.spec.kueue",
    "KueueQueues": "raytpu.components.kueue_queues",
    "KueueQueuesArgs": "raytpu.spec.kueue_queues",
    "MaintenanceExclusion": "raytpu.spec.gke_cluster",
    "MaintenancePolicyArgs": "raytpu.spec.gke_cluster",
    "MaintenanceWindow": "raytpu.spec.gke_cluster",
    "MemorystoreRedis": "raytpu.components.memorystore",
    "MemorystoreRedisArgs": "raytpu.spec.memorystore",
    "MonitoredSliceGroup": "raytpu.spec.monitoring",
    "Network": "raytpu.components.network",
    "NetworkArgs": "raytpu.spec.network",
    "OperatorPeer": "raytpu.components.network_policy",
    "PodMonitoring": "raytpu.components.monitoring",
    "ProjectServices": "raytpu.components.project_services",
    "ProjectServicesArgs": "raytpu.spec.project_services",
    "RayNetworkPolicies": "raytpu.components.network_policy",
    "RayNetworkPoliciesArgs": "raytpu.components.network_policy",
    "slice_shape": "raytpu.facts.catalog",
    "SliceAutoscaling": "raytpu.components.tpu_slice_pool",
    "SliceGroup": "raytpu.facts.slice_group",
    "SliceShape": "raytpu.facts.catalog",
    "SystemPoolArgs": "raytpu.spec.gke_cluster",
    "TeamAccess": "raytpu.components.team_access",
    "TeamAccessArgs": "raytpu.spec.team_access",
    "TeamQueue": "raytpu.spec.kueue_queues",
    "TpuFlavor": "raytpu.spec.kueue_queues",
    "TpuQuota": "raytpu.spec.kueue_queues",
    "TpuRayCluster": "raytpu.components.tpu_ray_cluster",
    "TpuRayClusterArgs": "raytpu.spec.ray_cluster",
    "TpuSlicePool": "raytpu.components.tpu_slice_pool",
    "TpuSlicePoolArgs": "raytpu.components.tpu_slice_pool",
    "TpuWorkerGroup": "raytpu.spec.ray_cluster",
    "TrainerImage": "raytpu.components.registry",
    "TrainerImageArgs": "raytpu.spec.registry",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
