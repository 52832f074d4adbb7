"""Typed Kueue objects (``kueue.x-k8s.io/v1beta2``): ResourceFlavor, ClusterQueue,
LocalQueue and WorkloadPriorityClass.

Specs are typed dicts keyed by the API's own (camelCase) field names, as
:mod:`raytpu.components.k8s_objects` does for pod templates: a misspelt or snake_case key is
a type error here rather than a field the API server prunes silently. Hand-written from the
Kueue v0.19.2 CRDs (``config/components/crd/bases``) for the fields this package sets;
``tests/kueue`` validates every emitted object against those CRDs, strictly, and evaluates
their CEL rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypedDict

import pulumi
from raytpu.components.k8s_objects import KubeObject, ObjectMeta, Toleration
from raytpu.facts.versions import KUEUE_API_VERSION

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that puts a job in a LocalQueue of its namespace."""
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
"""The label that gives a job a WorkloadPriorityClass."""


class ResourceFlavorSpec(TypedDict, total=False):
    nodeLabels: Mapping[str, str]
    """Labels the flavor's nodes carry: a PodSet whose nodeSelector disagrees with one of
    them cannot get the flavor, and admitted pods get them as nodeSelector."""
    tolerations: Sequence[Toleration]
    """Added to the pods admitted with this flavor."""


class ResourceQuota(TypedDict, total=False):
    name: str
    nominalQuota: str | int
    borrowingLimit: str | int
    lendingLimit: str | int


class FlavorQuotas(TypedDict):
    name: str
    resources: Sequence[ResourceQuota]


class ResourceGroup(TypedDict):
    coveredResources: Sequence[str]
    flavors: Sequence[FlavorQuotas]


PreemptionPolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"]


class ClusterQueuePreemption(TypedDict, total=False):
    reclaimWithinCohort: Literal["Never", "LowerPriority", "Any"]
    withinClusterQueue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]


class LabelSelector(TypedDict, total=False):
    matchLabels: Mapping[str, str]


class ClusterQueueSpec(TypedDict, total=False):
    cohortName: str
    namespaceSelector: LabelSelector
    queueingStrategy: Literal["StrictFIFO", "BestEffortFIFO"]
    preemption: ClusterQueuePreemption
    resourceGroups: Sequence[ResourceGroup]


class LocalQueueSpec(TypedDict):
    clusterQueue: str


class _KueueObject(KubeObject):
    """Declared as ``apiextensions.CustomResource`` would (type token
    ``kubernetes:kueue.x-k8s.io/v1beta2:<Kind>``), through the package's light base."""

    GROUP_VERSION = KUEUE_API_VERSION
    API_VERSION = KUEUE_API_VERSION
    OUTPUTS = ()


class ResourceFlavor(_KueueObject):
    """Cluster-scoped: one kind of node a ClusterQueue's quota is counted on."""

    KIND = "ResourceFlavor"

    def __init__(self, resource_name: str, *, metadata: ObjectMeta, spec: ResourceFlavorSpec,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(resource_name, metadata=metadata, spec=spec, opts=opts)


class ClusterQueue(_KueueObject):
    """Cluster-scoped: quota per flavor and resource, shared in a cohort."""

    KIND = "ClusterQueue"

    def __init__(self, resource_name: str, *, metadata: ObjectMeta, spec: ClusterQueueSpec,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        groups = spec.get("resourceGroups") or ()
        for g in groups:
            for f in g["flavors"]:
                names = [r["name"] for r in f["resources"]]
                if names != list(g["coveredResources"]):
                    # Kueue's CEL rule checks the count; the order must match too (webhook).
                    raise ValueError(f"ClusterQueue {metadata.get('name')!r} flavor "
                                     f"{f['name']!r}: resources {names} must be the resource "
                                     f"group's coveredResources {list(g['coveredResources'])}")
                if "cohortName" not in spec and any("borrowingLimit" in r for r in f["resources"]):
                    raise ValueError(f"ClusterQueue {metadata.get('name')!r}: borrowingLimit "
                                     "needs a cohortName")
        super().__init__(resource_name, metadata=metadata, spec=spec, opts=opts)


class LocalQueue(_KueueObject):
    """Namespaced: where a namespace's jobs queue, pointing at one ClusterQueue."""

    KIND = "LocalQueue"

    def __init__(self, resource_name: str, *, metadata: ObjectMeta, spec: LocalQueueSpec,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        if not metadata.get("namespace"):
            raise ValueError("LocalQueue: metadata.namespace is required")
        super().__init__(resource_name, metadata=metadata, spec=spec, opts=opts)


class WorkloadPriorityClass(_KueueObject):
    """Cluster-scoped: a priority value jobs name with ``kueue.x-k8s.io/priority-class``
    (for Kueue's ordering and preemption only; pods keep their own PriorityClass)."""

    KIND = "WorkloadPriorityClass"

    def __init__(self, resource_name: str, *, metadata: ObjectMeta, value: int,
                 description: str | None = None,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        fields: dict[str, object] = {"value": value}
        if description:
            fields["description"] = description
        super().__init__(resource_name, metadata=metadata, fields=fields, opts=opts)
