"""GKE node pools for Cloud TPU slices of one shape.

Rules (sources in shared/ref/notes/gke-tpu.md §2):

* One multi-host slice = one node pool, created, repaired and removed as a unit. N slices
  = N pools (``<pool_name>-0`` ... ``-<N-1>``: ``raytpu.facts.names.TPU_POOL_NAME``), each
  with COMPACT placement + the slice's ``tpu_topology``, one zone, and exactly ``hosts``
  nodes (GKE rejects any other size: "Requested invalid target size ... in the gang
  mode", AI-Hypercomputer/xpk#751).
* Ironwood (tpu7x) multi-host pools are placed by a ``HIGH_THROUGHPUT`` workload policy
  (a compute resource policy carrying the slice's topology, one per group) named as the
  pool's ``placementPolicy.policyName`` instead: GKE refuses COMPACT for them ("Use
  workload policy instead", vllm-project/ci-infra#547). GKE then stores ``policyName`` and
  ``tpuTopology`` and no ``type``; pulumi-gcp requires ``type``, so it is sent empty, as
  the API reports it, and a second ``up`` has nothing to change.
* Elastic multi-host pools autoscale all-or-nothing between 0 and ``hosts`` with the
  per-zone ``min_node_count``/``max_node_count`` and ``location_policy="ANY"``.
* Single-host slices (one VM) carry no topology/placement at all (GKE: "TPU topology can't
  be specified with single-host TPU slice pool", AI-Hypercomputer/xpk#825) and share ONE
  pool whose node count is the number of slices.
* No ``guest_accelerators`` (TPU chips come with the machine type) and no re-declared
  ``google.com/tpu`` taint (GKE adds it; changing taints replaces the pool,
  pulumi/pulumi-gcp#1139).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from raytpu.components.gcp_resources import (
    CLOUD_PLATFORM_SCOPE,
    ComputeResourcePolicy,
    ContainerNodePool,
)
from raytpu.facts.capacity import FLEX_START_MAX_RUN_SECONDS
from raytpu.facts.catalog import DRA_NETWORKING_LABEL, GENERATIONS, SliceShape
from raytpu.facts.names import (
    DNS_LABEL,
    LABEL_KEY,
    LABEL_VALUE,
    NODE_POOL_NAME_MAX_LEN,
    ZONE,
    tpu_pool_names,
)
from raytpu.facts.problems import args_error
from raytpu.facts.slice_group import SliceGroup

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# 1 TPU pod per node plus kube-system daemons; keeps Pod IP use small (xpk and the
# tpu-provisioner both use 15).
TPU_MAX_PODS_PER_NODE = 15



@dataclass(frozen=True)
class SliceAutoscaling:
    """Elastic slices: how many slices of the shape may exist at once."""

    min_slices: int
    """Slices Ray keeps at least (GKE pools still scale per pool between 0 and hosts)."""
    max_slices: int
    """Most slices at once; a multi-host shape gets this many node pools."""

    def __post_init__(self) -> None:
        if not 0 <= self.min_slices <= self.max_slices or self.max_slices < 1:
            raise args_error(
                self, (), f"need 0 <= min_slices ({self.min_slices}) <= max_slices "
                f"({self.max_slices}) and max_slices >= 1"
            )


@dataclass(frozen=True)
class TpuSlicePoolArgs:
    """Inputs of :class:`TpuSlicePool`."""

    shape: SliceShape
    """The slice shape from the catalog (``raytpu.facts.catalog.slice_shape``)."""
    cluster: pulumi.Input[str]
    """Cluster id (``GkeCluster.cluster_id``)."""
    zone: str
    """The one zone the slices live in (COMPACT placement is single-zone)."""
    node_service_account: pulumi.Input[str]
    """Email of the nodes' service account (``GkeCluster.node_service_account_email``)."""
    project: str
    """GCP project of the cluster."""
    location: str | None = None
    """The cluster's location (its zone, or its region for a regional cluster); default
    ``zone``."""
    pool_name: str | None = None
    """GKE node pool name (prefix for multi-host: ``<pool_name>-<i>``); default: the
    component's name."""
    slices: int = 1
    """Slices provisioned at creation. Static pools: the slice count. With ``autoscaling``:
    how many start provisioned (pools ``< slices`` start at ``hosts`` nodes, the rest at 0),
    within ``[min_slices, max_slices]``."""
    autoscaling: SliceAutoscaling | None = None
    """Elastic slices; ``None``: a fixed number of slices."""
    spot: bool = False
    """Spot VMs (preemptible, much cheaper; a preempted host takes its whole slice down)."""
    reservation: str | None = None
    """Consume this specific reservation (name, or ``projects/<p>/reservations/<name>`` for
    a shared one). Exclusive with ``spot``."""
    flex_start: bool = False
    """Flex-start VMs (Dynamic Workload Scheduler): the pools autoscale from 0 and GKE
    provisions a slice when capacity frees up, for at most ``max_run_seconds``; never Spot,
    no reservation, no auto-repair (:mod:`raytpu.facts.capacity`)."""
    max_run_seconds: int | None = None
    """Flex-start: seconds GKE lets a VM run before it reclaims it (at most 7 days, the
    default)."""
    node_tags: tuple[str, ...] = ()
    """Network tags of the TPU nodes (firewall rules target them)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra Kubernetes node labels. GKE already sets the accelerator/topology labels."""
    max_pods_per_node: int = TPU_MAX_PODS_PER_NODE
    """Pod IPs reserved per node."""
    resource_labels: Mapping[str, str] = field(default_factory=dict)
    """GCE labels on the pools' VMs, for cost allocation in the billing export (stack,
    slice group, team)."""
    workload_policy_name: str | None = None
    """Name of the workload policy a multi-host Ironwood group's pools are placed by (unique
    per project and region); default ``<pool_name>-<topology>``. Unused by other shapes."""

    def __post_init__(self) -> None:
        if not isinstance(self.shape, SliceShape):
            raise TypeError(
                f"TpuSlicePoolArgs.shape: a raytpu.facts.catalog.SliceShape is required, not "
                f"{type(self.shape).__name__}"
            )
        gen = self.shape.generation
        if gen.name not in GENERATIONS:
            raise args_error(self, "shape", f"TPU generation {gen.name!r} is not "
                             f"supported; supported: {', '.join(GENERATIONS)}")
        if self.shape.chips % self.shape.chips_per_vm or self.shape.hosts < 1:
            raise args_error(
                self, "shape", f"{self.shape.topology} does not split into "
                f"{self.shape.chips_per_vm}-chip VMs"
            )
        if self.shape.multi_host and self.shape.chips_per_vm != gen.multi_host_chips_per_vm:
            raise args_error(
                self, "shape", f"multi-host {self.shape.accelerator_type} needs "
                f"{gen.machine_types[gen.multi_host_chips_per_vm]}, not {self.shape.machine_type}"
            )
        m = ZONE.match(self.zone)
        if not m:
            raise args_error(self, "zone", f"{self.zone!r} is not a GCP zone "
                             "(e.g. us-central2-b)")
        if self.location is not None and self.location not in (self.zone, m.group(1)):
            raise args_error(
                self, "location", f"{self.location!r} must be the zone {self.zone!r} or "
                f"its region {m.group(1)!r}"
            )
        if not self.project:
            raise args_error(self, "project", "required")
        if self.slices < 0 or (self.autoscaling is None and self.slices < 1):
            raise args_error(self, "slices", f"{self.slices} must be >= 1")
        if self.autoscaling is not None and not (
            self.autoscaling.min_slices <= self.slices <= self.autoscaling.max_slices
        ):
            raise args_error(
                self, "slices", f"{self.slices} slices at start is outside autoscaling "
                f"[{self.autoscaling.min_slices}, {self.autoscaling.max_slices}]"
            )
        if self.spot and self.reservation:
            raise args_error(
                self, (), "spot and reservation exclude each other (Spot VMs do not "
                "consume reservations); pick one"
            )
        if self.flex_start and (self.spot or self.reservation):
            raise args_error(
                self, "flex_start", "flex-start VMs are never Spot and consume no "
                "reservation; drop spot/reservation or flex_start"
            )
        if self.max_run_seconds is not None and (
                not self.flex_start
                or not 0 < self.max_run_seconds <= FLEX_START_MAX_RUN_SECONDS):
            raise args_error(
                self, "max_run_seconds", f"{self.max_run_seconds} needs flex_start and "
                f"0 < seconds <= {FLEX_START_MAX_RUN_SECONDS} (7 days)"
            )
        if self.reservation is not None and not self.reservation.strip():
            raise args_error(self, "reservation", "empty name")
        if not 8 <= self.max_pods_per_node <= 256:
            raise args_error(
                self, "max_pods_per_node", f"{self.max_pods_per_node} is outside 8-256"
            )
        if self.workload_policy_name is not None and (
                not DNS_LABEL.match(self.workload_policy_name)
                or len(self.workload_policy_name) > 63):
            raise args_error(self, "workload_policy_name", f"{self.workload_policy_name!r} "
                             "is not a resource policy name (a DNS label of at most 63)")
        for tag in self.node_tags:
            if not DNS_LABEL.match(tag) or len(tag) > 63:
                raise args_error(self, "node_tags", f"{tag!r} is not a valid network tag")
        for key, value in self.resource_labels.items():
            if not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
                raise args_error(
                    self, "resource_labels", f"{key!r}: {value!r} is not a GCE label "
                    "(lowercase letters, digits, '_', '-'; at most 63; keys start with a letter)"
                )

    @classmethod
    def of(cls, group: SliceGroup, *, cluster: pulumi.Input[str], zone: str,
           node_service_account: pulumi.Input[str], project: str,
           **rest: Any) -> TpuSlicePoolArgs:
        """The pools of a slice group: named after it, its shape, slice range and capacity;
        ``rest``: the other fields."""
        return cls(
            shape=group.shape, cluster=cluster, zone=zone,
            node_service_account=node_service_account, project=project, pool_name=group.name,
            slices=group.initial_slices,
            autoscaling=(SliceAutoscaling(group.min_slices, group.max_slices) if group.elastic
                         else None),
            spot=group.spot, reservation=group.reservation,
            flex_start=group.capacity == "flex-start", max_run_seconds=group.max_run_seconds,
            **rest,
        )

    @property
    def elastic(self) -> bool:
        return self.autoscaling is not None

    @property
    def min_slices(self) -> int:
        return self.autoscaling.min_slices if self.autoscaling else self.slices

    @property
    def max_slices(self) -> int:
        return self.autoscaling.max_slices if self.autoscaling else self.slices


class TpuSlicePool(pulumi.ComponentResource):
    """Node pools for up to ``slices`` TPU slices of one shape, in one zone."""

    node_pools: list[ContainerNodePool]
    """Multi-host: one pool per slice (index order). Single-host: one pool for all slices."""
    node_pool_names: list[str]
    """GKE names of ``node_pools``."""
    node_selector: dict[str, str]
    """The labels GKE puts on this shape's nodes (accelerator, topology, machine type):
    ``SliceShape.node_selector``, the selector Ray worker groups use."""
    hosts_per_slice: int
    """GKE nodes (TPU VMs, Ray worker pods) per slice."""
    slices: int
    """Most slices these pools can hold (``max_slices`` when elastic)."""
    min_slices: int
    initial_slices: int
    """Slices provisioned at creation."""
    shape: SliceShape
    workload_policy: ComputeResourcePolicy | None
    """The HIGH_THROUGHPUT workload policy of a multi-host Ironwood group (else None)."""

    def __init__(
        self, name: str, args: TpuSlicePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        if not isinstance(args, TpuSlicePoolArgs):
            raise TypeError(
                f"TpuSlicePool {name!r}: args must be TpuSlicePoolArgs, not {type(args)!r}"
            )
        pool_name = args.pool_name or name
        gke_names = tpu_pool_names(pool_name, args.shape.multi_host, args.max_slices)
        if not DNS_LABEL.match(pool_name) or max(map(len, gke_names)) > NODE_POOL_NAME_MAX_LEN:
            raise ValueError(
                f"TpuSlicePool {name!r}: pool name {pool_name!r} must be a DNS label short enough "
                f"for '-<index>' within GKE's {NODE_POOL_NAME_MAX_LEN} characters"
            )
        super().__init__("raytpu:tpu:TpuSlicePool", name, None, opts)
        shape = args.shape
        self.shape = shape
        self.hosts_per_slice = shape.hosts
        self.node_selector = dict(shape.node_selector)
        self.slices = args.max_slices
        self.min_slices = args.min_slices
        self.initial_slices = args.slices
        self.node_pools = []
        self.node_pool_names = gke_names

        location = args.location or args.zone
        reservation = (
            {
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": RESERVATION_KEY,
                "values": [args.reservation],
            }
            if args.reservation
            else None
        )
        profile = shape.accelerator_network_profile
        network_labels = dict([DRA_NETWORKING_LABEL]) if profile else {}
        if args.flex_start:
            # xpk 1.16 --flex: --reservation-affinity=none, never --spot.
            reservation = {"consumeReservationType": "NO_RESERVATION"}
        node_config = {
            "machineType": shape.machine_type,
            "spot": args.spot,
            "flexStart": True if args.flex_start else None,
            "maxRunDuration": (f"{args.max_run_seconds or FLEX_START_MAX_RUN_SECONDS}s"
                               if args.flex_start else None),
            "reservationAffinity": reservation,
            "serviceAccount": args.node_service_account,
            "oauthScopes": [CLOUD_PLATFORM_SCOPE],
            "tags": list(args.node_tags),
            "labels": {**args.labels, **network_labels} or None,
            "gvnic": {"enabled": True},
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
            "resourceLabels": dict(args.resource_labels) or None,
        }
        # Auto-upgrade cannot be turned off on a release-channel cluster; an upgrade of a
        # multi-host pool recreates the whole slice, so the cluster's maintenance policy
        # (GkeClusterArgs.maintenance) decides when, rather than fighting the flag.
        # Flex-start: auto-repair off (xpk --no-enable-autorepair; a repair would return the
        # VM and queue for capacity again).
        management = {"autoRepair": not args.flex_start, "autoUpgrade": True}
        # Flex-start pools always autoscale from 0 (xpk --enable-autoscaling --num-nodes=0):
        # GKE provisions them when pods ask, never at creation.
        autoscaled = args.elastic or args.flex_start

        def pool(
            resource_name: str,
            gke_name: str,
            *,
            size: int,
            autoscaling: dict[str, Any] | None,
            placement: dict[str, Any] | None,
        ) -> ContainerNodePool:
            if autoscaling is None:
                node_count, initial_node_count = size, None
                extra: pulumi.ResourceOptions | None = None
            else:
                # node_count must not be combined with autoscaling (pulumi-gcp doc);
                # initial_node_count forces replacement when changed (pulumi/pulumi-gcp#412)
                # and the autoscaler owns the size afterwards.
                node_count, initial_node_count = None, size
                extra = pulumi.ResourceOptions(ignore_changes=["initialNodeCount"])
            return ContainerNodePool(
                resource_name,
                {
                    "name": gke_name,
                    "project": args.project,
                    "cluster": args.cluster,
                    "location": location,
                    "nodeLocations": [args.zone],
                    "autoscaling": autoscaling,
                    "placementPolicy": placement,
                    "maxPodsPerNode": args.max_pods_per_node,
                    "management": management,
                    "nodeConfig": node_config,
                    "networkConfig": ({"acceleratorNetworkProfile": profile}
                                      if profile else None),
                    "nodeCount": node_count,
                    "initialNodeCount": initial_node_count,
                },
                pulumi.ResourceOptions.merge(pulumi.ResourceOptions(
                    parent=self,
                    # The pool names the policy by its (known) name: wait for it to exist.
                    depends_on=[self.workload_policy] if self.workload_policy else None,
                ), extra),
            )

        self.workload_policy = None
        policy_name = args.workload_policy_name or f"{pool_name}-{shape.topology.lower()}"
        if shape.workload_policy:
            region = ZONE.match(args.zone).group(1)  # type: ignore[union-attr]
            # One policy per group: every slice pool of the shape is placed by it (xpk shares
            # one per shape, "<device>-<topology>-placement-policy").
            self.workload_policy = ComputeResourcePolicy(
                f"{name}-workload-policy",
                {"name": policy_name, "project": args.project, "region": region,
                 "workloadPolicy": {"type": "HIGH_THROUGHPUT",
                                    "acceleratorTopology": shape.topology}},
                pulumi.ResourceOptions(parent=self),
            )
        if shape.multi_host:
            placement: dict[str, Any] = (
                # `type` empty: what GKE stores for a workload policy (see module docstring).
                {"type": "", "policyName": policy_name, "tpuTopology": shape.topology}
                if self.workload_policy is not None
                else {"type": "COMPACT", "tpuTopology": shape.topology})
            # Per-zone limits: total_max_node_count leaves the per-zone max at 0 and GKE
            # rejects the slice ("Maximum node count 0 is not a valid size of TPU pod slice",
            # vllm-project/ci-infra#545). A pool is all-or-nothing: 0 or `hosts` nodes.
            elastic = (
                {"minNodeCount": 0, "maxNodeCount": shape.hosts, "locationPolicy": "ANY"}
                if autoscaled
                else None
            )
            for i, gke_name in enumerate(gke_names):
                # Elastic: the first `slices` pools start provisioned (Ray's worker group
                # starts with that many replicas; its pods keep the nodes non-empty so the
                # cluster autoscaler, which only removes empty nodes, leaves them), the others
                # start empty and scale up when Ray schedules a slice.
                size = (0 if args.flex_start
                        else shape.hosts if (not args.elastic or i < args.slices) else 0)
                self.node_pools.append(pool(
                    f"{name}-{i}", gke_name, size=size, autoscaling=elastic, placement=placement,
                ))
        else:
            # Single-host: no topology, no placement; one node per slice.
            elastic = (
                {
                    "minNodeCount": 0 if args.flex_start else args.min_slices,
                    "maxNodeCount": args.max_slices,
                    "locationPolicy": "ANY",
                }
                if autoscaled
                else None
            )
            (gke_name,) = gke_names
            self.node_pools.append(pool(
                name, gke_name, size=0 if args.flex_start else args.slices,
                autoscaling=elastic, placement=None,
            ))

        self.register_outputs({
            "nodePools": self.node_pool_names,
            "nodeSelector": self.node_selector,
            "hostsPerSlice": self.hosts_per_slice,
            "slices": self.slices,
        })
