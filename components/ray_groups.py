"""Group shaping: a :class:`~raytpu.spec.ray_cluster.TpuRayClusterArgs` as a KubeRay
``RayCluster.spec`` (also a RayJob's ``rayClusterSpec``).

* One worker-group *replica* is one TPU slice = one GKE node pool; ``numOfHosts`` = VMs of the
  slice, and ``replicas``/``minReplicas``/``maxReplicas`` count slices (kuberay-tpu.md §2.2).
* The worker nodeSelector is exactly the labels GKE puts on the slice's nodes
  (``SliceShape.node_selector``: accelerator + topology, which Ray's autoscaler needs to name
  the ``TPU-<type>-head`` resource, + machine type, so that one shape on two VM types -- v5e
  2x4 on one 8t or two 4t VMs -- does not share a selector).
* Ray resources and labels are the groups' top-level ``resources``/``labels`` (KubeRay >= 1.5),
  never ``rayStartParams``: KubeRay 1.7 rejects ``rayStartParams.labels`` and refuses
  ``num-cpus`` there next to ``resources`` (``validateRayGroupResources``), and Ray 2.60's
  autoscaler reads node-type labels only from the top-level field. Each TPU group carries
  the :data:`~raytpu.facts.names.SLICE_GROUP_LABEL` label: what the launcher's capacity request
  selects to scale the group up from zero (:mod:`raytpu.spec.scaling`).
* ``idleTimeoutSeconds`` only where autoscaler v2 runs (KubeRay rejects it otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raytpu.components.ray_env import ray_env, tpu_env
from raytpu.components.ray_gcs_ft import ft_options, with_head_ca, worker_env
from raytpu.components.ray_pod_templates import (
    HEAD_PORTS,
    TPU_TOLERATION,
    WORKER_PORTS,
    container_security_context,
    pod_template,
    writable_mounts,
)
from raytpu.components.ray_resources import (
    AuthOptionsArgs,
    AutoscalerOptionsArgs,
    HeadGroupSpecArgs,
    RayClusterSpecArgs,
    WorkerGroupSpecArgs,
)
from raytpu.facts.names import NODEPOOL_LABEL, SLICE_GROUP_LABEL
from raytpu.spec.pod_resources import worker_resources
from raytpu.spec.ray_cluster import TpuRayClusterArgs, TpuWorkerGroup


def head_group_spec(args: TpuRayClusterArgs, labels: Mapping[str, str]) -> HeadGroupSpecArgs:
    a = args
    head_selector = {NODEPOOL_LABEL: a.system_pool} if a.system_pool else None
    return HeadGroupSpecArgs(
        service_type="ClusterIP",  # dashboard/client via kubectl port-forward
        # No Ray tasks on the head: it is small, on the CPU pool, and runs the autoscaler.
        resources={"CPU": "0", **a.head_ray_resources},
        labels=dict(a.head_labels) or None,
        template=with_head_ca(pod_template(
            labels=dict(labels),
            service_account=a.service_account,
            node_selector=head_selector,
            container="ray-head",
            image=a.image,
            env=ray_env(a.env, a.head_env, checkpoint_uri=a.checkpoint_uri),
            ports=HEAD_PORTS,
            resources={
                "requests": {"cpu": a.head_cpu, "memory": a.head_memory},
                "limits": {"cpu": a.head_cpu, "memory": a.head_memory},
            },
            # The autoscaler sidecar reads and patches the RayCluster and its pods.
            automount_token=a.autoscaling_enabled,
            read_only_root=a.read_only_root_filesystem,
        ), a.gcs_fault_tolerance),
    )


def worker_group_spec(
    args: TpuRayClusterArgs, group: TpuWorkerGroup, labels: Mapping[str, str]
) -> WorkerGroupSpecArgs:
    s, shape = group, group.shape
    res = worker_resources(shape)
    return WorkerGroupSpecArgs(
        group_name=s.name,
        replicas=s.initial_slices,
        min_replicas=s.min_slices,
        max_replicas=s.max_slices,
        num_of_hosts=shape.hosts,
        # KubeRay maps the google.com/tpu limit to the Ray resource TPU itself.
        resources={"CPU": res["requests"]["cpu"], **s.ray_resources},
        labels={SLICE_GROUP_LABEL: s.name, **s.labels},
        idle_timeout_seconds=(args.idle_timeout_seconds
                              if args.autoscaling_enabled and s.elastic else None),
        template=pod_template(
            labels={**labels, SLICE_GROUP_LABEL: s.name},
            service_account=args.service_account,
            node_selector=dict(shape.node_selector),
            tolerations=[TPU_TOLERATION],
            container="ray-worker",
            image=args.image,
            env=[*ray_env(args.env, s.env, checkpoint_uri=args.checkpoint_uri),
                 *tpu_env(shape), *worker_env(args.gcs_fault_tolerance)],
            ports=WORKER_PORTS,
            resources=res,
            read_only_root=args.read_only_root_filesystem,
        ),
    )


def ray_cluster_spec(args: TpuRayClusterArgs, labels: Mapping[str, str]) -> RayClusterSpecArgs:
    """The RayCluster spec of ``args``; ``labels``: every pod template's labels."""
    a = args
    autoscale = a.autoscaling_enabled
    return RayClusterSpecArgs(
        ray_version=a.ray_version,
        head_group_spec=head_group_spec(a, labels),
        worker_group_specs=[worker_group_spec(a, s, labels) for s in a.worker_groups],
        enable_in_tree_autoscaling=True if autoscale else None,
        autoscaler_options=AutoscalerOptionsArgs(
            version="v2", idle_timeout_seconds=a.idle_timeout_seconds,
            upscaling_mode="Default",
            # KubeRay adds the /tmp/ray (ray-logs) mount itself; the sidecar runs the
            # head's image, so the same user and read-only root apply.
            security_context=container_security_context(a.read_only_root_filesystem),
            volume_mounts=[m for m in writable_mounts() if m["mountPath"] != "/tmp/ray"],
        ) if autoscale else None,
        # Unset means disabled: left out then, so older CRDs accept the object too.
        auth_options=AuthOptionsArgs(mode="token") if a.auth == "token" else None,
        gcs_fault_tolerance_options=(ft_options(a.gcs_fault_tolerance)
                                     if a.gcs_fault_tolerance else None),
    )


def group_summary(s: TpuWorkerGroup) -> dict[str, Any]:
    return {
        "group": s.name,
        "accelerator": s.shape.accelerator_type,
        "topology": s.shape.topology,
        "hostsPerSlice": s.shape.hosts,
        "chipsPerHost": s.shape.chips_per_vm,
        "minSlices": s.min_slices,
        "initialSlices": s.initial_slices,
        "maxSlices": s.max_slices,
    }
