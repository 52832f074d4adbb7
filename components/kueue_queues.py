"""Team queues on a shared TPU fleet: ResourceFlavors, one ClusterQueue per team in one
cohort, a LocalQueue in each team's namespace, and the WorkloadPriorityClasses.

The model (Kueue concepts, ``site/content/en/docs/concepts``):

* **One ResourceFlavor per TPU slice shape.** Its ``nodeLabels`` are exactly the labels the
  Ray worker group selects its nodes by (:attr:`raytpu.facts.catalog.SliceShape.node_selector`):
  Kueue gives a PodSet only a flavor whose labels agree with the pods' nodeSelector, so
  anything else is a queue that never admits. Its tolerations let admitted pods onto the
  tainted TPU nodes.
* **CPU and memory** are counted too (Kueue refuses a workload that requests a resource no
  resource group of its ClusterQueue covers), in a second resource group with one flavor
  without node labels: the Ray head (system pool) and the TPU hosts both draw from it, and
  it adds no nodeSelector to either.
* **One ClusterQueue per team**, all in one cohort: ``nominalQuota`` is the team's own
  share; unused quota is lent to the cohort; ``borrowingLimit`` caps what the team takes from
  it (0 where the team declared no borrowing: an unset limit means unlimited).
  ``reclaimWithinCohort: Any`` lets a team take its lent quota back by preempting
  borrowers, whatever their priority; ``withinClusterQueue: LowerPriority`` lets a team's
  higher-priority job preempt its own lower-priority ones.
* **A LocalQueue named ``default``** in each team namespace: Kueue puts jobs without a
  ``kueue.x-k8s.io/queue-name`` label there, so a team's RayJob cannot skip its quota.
"""

from __future__ import annotations

import pulumi
from raytpu.components._options import depends_on_of
from raytpu.components.kueue_objects import (
    ClusterQueue,
    ClusterQueueSpec,
    FlavorQuotas,
    LocalQueue,
    ResourceFlavor,
    ResourceFlavorSpec,
    ResourceGroup,
    ResourceQuota,
    WorkloadPriorityClass,
)
from raytpu.components.ray_pod_templates import TPU_TOLERATION
from raytpu.facts.catalog import TPU_RESOURCE
from raytpu.spec.kueue_queues import (
    CPU_RESOURCES,
    KueueQueuesArgs,
    TeamQueue,
    TpuFlavor,
)

# Values of the priorities a team's jobs get (raytpu:teams[].priority): only their order
# matters to Kueue. Named as the stack key's values.


def flavor_spec(f: TpuFlavor) -> ResourceFlavorSpec:
    return {"nodeLabels": dict(f.node_labels),
            "tolerations": [TPU_TOLERATION]}


def cluster_queue_spec(t: TeamQueue, args: KueueQueuesArgs) -> ClusterQueueSpec:
    """The team's ClusterQueue spec (module docstring)."""
    host = t.host
    cpu_group: ResourceGroup = {"coveredResources": list(CPU_RESOURCES), "flavors": [{
        "name": args.cpu_flavor,
        "resources": [
            {"name": "cpu", "nominalQuota": host.cpu, "borrowingLimit": host.cpu_borrowing},
            {"name": "memory", "nominalQuota": host.memory,
             "borrowingLimit": host.memory_borrowing},
        ],
    }]}
    tpu_flavors: list[FlavorQuotas] = []
    for q in t.tpu:
        quota: ResourceQuota = {"name": TPU_RESOURCE, "nominalQuota": q.nominal_chips,
                                "borrowingLimit": q.borrowing_chips}
        tpu_flavors.append({"name": q.flavor, "resources": [quota]})
    groups: list[ResourceGroup] = [cpu_group]
    if tpu_flavors:
        groups.append({"coveredResources": [TPU_RESOURCE], "flavors": tpu_flavors})
    return {
        "cohortName": args.cohort,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": t.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": groups,
    }


class KueueQueues(pulumi.ComponentResource):
    """The flavors, queues and priority classes of :class:`KueueQueuesArgs`. Pass the Kueue
    install (its CRDs and webhooks) and the team namespaces in ``opts.depends_on``."""

    flavors: dict[str, ResourceFlavor]
    cluster_queues: dict[str, ClusterQueue]
    local_queues: dict[str, LocalQueue]
    priority_classes: dict[str, WorkloadPriorityClass]

    def __init__(self, name: str, args: KueueQueuesArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("raytpu:kueue:KueueQueues", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=depends_on_of(opts))
        labels = {"app.kubernetes.io/part-of": "raytpu"}
        self.flavors = {
            f.name: ResourceFlavor(f"{name}-flavor-{f.name}",
                                   metadata={"name": f.name, "labels": labels},
                                   spec=flavor_spec(f), opts=child)
            for f in args.flavors
        }
        cpu_flavor = ResourceFlavor(f"{name}-flavor-{args.cpu_flavor}",
                                    metadata={"name": args.cpu_flavor, "labels": labels},
                                    spec={}, opts=child)
        self.priority_classes = {
            p: WorkloadPriorityClass(f"{name}-priority-{p}", metadata={"name": p,
                                                                      "labels": labels},
                                     value=v, description=f"raytpu team priority {p!r}",
                                     opts=child)
            for p, v in args.priority_values.items()
        }
        self.cluster_queues, self.local_queues = {}, {}
        for t in args.teams:
            flavors = [cpu_flavor, *(self.flavors[q.flavor] for q in t.tpu)]
            cq = ClusterQueue(
                f"{name}-cq-{t.team}", metadata={"name": t.cluster_queue, "labels": labels},
                spec=cluster_queue_spec(t, args),
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    depends_on=flavors)))
            self.cluster_queues[t.team] = cq
            self.local_queues[t.team] = LocalQueue(
                f"{name}-lq-{t.team}",
                metadata={"name": t.local_queue, "namespace": t.namespace, "labels": labels},
                spec={"clusterQueue": t.cluster_queue},
                opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                    depends_on=[cq])))
        self.outputs = {
            "cohort": args.cohort,
            "flavors": [f.name for f in args.flavors],
            "clusterQueues": {t.team: t.cluster_queue for t in args.teams},
            "localQueues": {t.team: f"{t.namespace}/{t.local_queue}" for t in args.teams},
        }
        self.register_outputs(self.outputs)
