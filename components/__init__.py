"""Pulumi ComponentResources of raytpu; each is usable on its own from any Pulumi program.

One re-export per line (``X as X`` marks it public for ruff and mypy).
"""

from .gke_cluster import GkeCluster as GkeCluster
from .gke_cluster_args import AuthorizedNetwork as AuthorizedNetwork
from .gke_cluster_args import GkeClusterArgs as GkeClusterArgs
from .gke_cluster_args import SystemPoolArgs as SystemPoolArgs
from .monitoring import FleetMonitoring as FleetMonitoring
from .monitoring import FleetMonitoringArgs as FleetMonitoringArgs
from .monitoring import MonitoredSliceGroup as MonitoredSliceGroup
from .monitoring import PodMonitoring as PodMonitoring
from .network import ExistingNetwork as ExistingNetwork
from .network import Network as Network
from .network import NetworkArgs as NetworkArgs
from .project_services import ProjectServices as ProjectServices
from .project_services import ProjectServicesArgs as ProjectServicesArgs
from .registry import ImageRegistry as ImageRegistry
from .registry import ImageRegistryArgs as ImageRegistryArgs
from .storage import CheckpointStorage as CheckpointStorage
from .storage import CheckpointStorageArgs as CheckpointStorageArgs
from .tpu_slice_pool import SliceAutoscaling as SliceAutoscaling
from .tpu_slice_pool import TpuSlicePool as TpuSlicePool
from .tpu_slice_pool import TpuSlicePoolArgs as TpuSlicePoolArgs
