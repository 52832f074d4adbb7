"""The Kubernetes shapes this package writes: typed pod templates and the built-in kinds.

Why not ``pulumi_kubernetes.core.v1``: its ``__init__`` imports every core/v1 resource and
all of their ``*Args`` types (~0.3 s), more than the rest of the Ray layer together, and
``raytpu plan`` runs it on every call. What is needed here is small:

* pod templates, services and metadata as typed dicts whose keys are the API's own
  (camelCase) field names, so a type checker catches a misspelt or snake_case key (which
  the API server would silently prune); the objects are validated against the Kubernetes
  schema in ``tests/ray``;
* ``Namespace``, ``ServiceAccount``, ``Service``, ``Job``, ``NetworkPolicy`` and the RBAC
  kinds declared with the type tokens, inputs and provider version of the generated classes
  (``tests/ray/test_k8s_objects.py`` checks them against ``pulumi_kubernetes``, so the
  state is the same either way).

Users may still pass ``pulumi_kubernetes`` ``*Args`` objects where a template is taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypedDict

import pulumi
from raytpu.components.provider_inputs import drop_unset
from raytpu.facts.versions import POD_SECURITY_LEVEL
from raytpu.spec.pod_resources import ResourceRequirements as ResourceRequirements

# -- object shapes (wire names) ---------------------------------------------------------


class ObjectMeta(TypedDict, total=False):
    name: pulumi.Input[str]
    namespace: pulumi.Input[str]
    labels: Mapping[str, str]
    annotations: Mapping[str, pulumi.Input[str]]


class EnvVar(TypedDict):
    name: str
    value: pulumi.Input[str]


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int
    protocol: str


class Toleration(TypedDict, total=False):
    key: str
    operator: str
    value: str
    effect: str


class Capabilities(TypedDict, total=False):
    add: Sequence[str]
    drop: Sequence[str]


class SeccompProfile(TypedDict, total=False):
    type: str
    """``RuntimeDefault``, ``Localhost`` (with ``localhostProfile``) or ``Unconfined``."""
    localhostProfile: str


class SecurityContext(TypedDict, total=False):
    """A container's ``securityContext``."""

    runAsNonRoot: bool
    runAsUser: int
    runAsGroup: int
    allowPrivilegeEscalation: bool
    privileged: bool
    readOnlyRootFilesystem: bool
    capabilities: Capabilities
    seccompProfile: SeccompProfile


class PodSecurityContext(TypedDict, total=False):
    """A pod's ``securityContext`` (defaults for every container of the pod)."""

    runAsNonRoot: bool
    runAsUser: int
    runAsGroup: int
    fsGroup: int
    seccompProfile: SeccompProfile


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    readOnly: bool


class EmptyDirVolumeSource(TypedDict, total=False):
    medium: str
    """``""`` (the node's disk) or ``Memory`` (tmpfs, counted against the memory limit)."""
    sizeLimit: str


class Volume(TypedDict, total=False):
    name: str
    emptyDir: EmptyDirVolumeSource
    secret: Mapping[str, Any]
    configMap: Mapping[str, Any]


class Container(TypedDict, total=False):
    name: str
    image: pulumi.Input[str]
    command: Sequence[str]
    args: Sequence[str]
    env: Sequence[EnvVar]
    ports: Sequence[ContainerPort]
    resources: ResourceRequirements
    volumeMounts: Sequence[VolumeMount]
    securityContext: SecurityContext


class PodSpec(TypedDict, total=False):
    serviceAccountName: str
    automountServiceAccountToken: bool
    nodeSelector: Mapping[str, str]
    tolerations: Sequence[Toleration]
    securityContext: PodSecurityContext
    initContainers: Sequence[Container]
    containers: Sequence[Container]
    volumes: Sequence[Volume]
    restartPolicy: str


class PodTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class ServicePort(TypedDict, total=False):
    name: str
    port: int
    targetPort: int
    protocol: str


class ServiceSpec(TypedDict, total=False):
    type: str
    selector: Mapping[str, str]
    ports: Sequence[ServicePort]
    loadBalancerSourceRanges: Sequence[str]
    externalTrafficPolicy: str
    """``Local`` keeps the client's source IP (no second hop), which NetworkPolicy ipBlocks
    need to see."""


def pod_security_labels(level: str | None = None) -> dict[str, str]:
    """Namespace labels that make the API server enforce (and warn and audit) a Pod Security
    Standard level; default :data:`raytpu.facts.versions.POD_SECURITY_LEVEL`, the level the Ray
    pods pass. Every namespace that runs Ray pods carries them."""
    value = level or POD_SECURITY_LEVEL
    return {f"pod-security.kubernetes.io/{mode}": value for mode in ("enforce", "warn", "audit")}


# -- resources --------------------------------------------------------------------------


class KubeObject(pulumi.CustomResource):
    """A built-in Kubernetes kind, declared as ``pulumi_kubernetes`` would declare it."""

    GROUP_VERSION: ClassVar[str] = "core/v1"
    """The type token's module: ``core/v1`` for the core group."""
    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str]
    OUTPUTS: ClassVar[tuple[str, ...]] = ("status",)
    ALIASES: ClassVar[tuple[str, ...]] = ()
    """Older type tokens of the kind, as the generated class aliases them."""
    SECRET_FIELDS: ClassVar[tuple[str, ...]] = ()
    """Top-level fields kept secret in state and in the plan, as the generated class keeps
    them (a Secret's ``data``/``stringData``)."""

    def __init__(
        self,
        resource_name: str,
        *,
        metadata: ObjectMeta,
        spec: Mapping[str, Any] | None = None,
        fields: Mapping[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """``fields``: top-level fields of kinds without a ``spec`` (RBAC ``rules``,
        ``roleRef``, ``subjects``), by their wire names."""
        from pulumi_kubernetes import _utilities  # the package root only: cheap

        props: dict[str, Any] = {
            "apiVersion": self.API_VERSION,
            "kind": self.KIND,
            "metadata": drop_unset(metadata),
        }
        if spec is not None:
            props["spec"] = drop_unset(spec)
        for key, value in (fields or {}).items():
            props[key] = drop_unset(value)
            if key in self.SECRET_FIELDS:
                # Each value secret, not the map: a value known only after `up` (a generated
                # password) then leaves the keys known in a preview, as the provider's own
                # preview shows them, instead of turning the whole map unknown.
                props[key] = ({k: pulumi.Output.secret(v) for k, v in props[key].items()}
                              if isinstance(props[key], Mapping)
                              else pulumi.Output.secret(props[key]))
        for out in ("metadata", *self.OUTPUTS):
            props.setdefault(out, None)
        merged = pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), opts)
        if self.SECRET_FIELDS:
            merged = pulumi.ResourceOptions.merge(merged, pulumi.ResourceOptions(
                additional_secret_outputs=list(self.SECRET_FIELDS)))
        if self.ALIASES:
            merged = pulumi.ResourceOptions.merge(merged, pulumi.ResourceOptions(
                aliases=[pulumi.Alias(type_=t) for t in self.ALIASES]))
        super().__init__(f"kubernetes:{self.GROUP_VERSION}:{self.KIND}", resource_name, props,
                         merged)

    @property
    def metadata_name(self) -> pulumi.Output[str]:
        """``metadata.name`` as the API server returns it."""
        metadata = pulumi.Output.from_input(self.__dict__["metadata"])
        return metadata.apply(lambda m: str(m["name"]))


class Namespace(KubeObject):
    KIND = "Namespace"


class ServiceAccount(KubeObject):
    KIND = "ServiceAccount"
    OUTPUTS = ()


class Service(KubeObject):
    KIND = "Service"


class ConfigMap(KubeObject):
    KIND = "ConfigMap"
    OUTPUTS = ()


class Secret(KubeObject):
    """A Secret: its ``stringData``/``data`` are secret in state, in the plan and in logs."""

    KIND = "Secret"
    OUTPUTS = ()
    SECRET_FIELDS = ("data", "stringData")


class Job(KubeObject):
    """batch/v1 Job. pulumi-kubernetes waits for it to complete (its Job awaiter, 10 minutes
    unless ``customTimeouts.create`` says otherwise) and fails the update if it fails."""

    GROUP_VERSION = "batch/v1"
    API_VERSION = "batch/v1"
    KIND = "Job"


class NetworkPolicy(KubeObject):
    GROUP_VERSION = "networking.k8s.io/v1"
    API_VERSION = "networking.k8s.io/v1"
    KIND = "NetworkPolicy"
    ALIASES = ("kubernetes:extensions/v1beta1:NetworkPolicy",)


class Role(KubeObject):
    GROUP_VERSION = "rbac.authorization.k8s.io/v1"
    API_VERSION = "rbac.authorization.k8s.io/v1"
    KIND = "Role"
    OUTPUTS = ()
    ALIASES = ("kubernetes:rbac.authorization.k8s.io/v1alpha1:Role",
               "kubernetes:rbac.authorization.k8s.io/v1beta1:Role")


class RoleBinding(KubeObject):
    GROUP_VERSION = "rbac.authorization.k8s.io/v1"
    API_VERSION = "rbac.authorization.k8s.io/v1"
    KIND = "RoleBinding"
    OUTPUTS = ()
    ALIASES = ("kubernetes:rbac.authorization.k8s.io/v1alpha1:RoleBinding",
               "kubernetes:rbac.authorization.k8s.io/v1beta1:RoleBinding")


class ClusterRole(KubeObject):
    GROUP_VERSION = "rbac.authorization.k8s.io/v1"
    API_VERSION = "rbac.authorization.k8s.io/v1"
    KIND = "ClusterRole"
    OUTPUTS = ()
    ALIASES = ("kubernetes:rbac.authorization.k8s.io/v1alpha1:ClusterRole",
               "kubernetes:rbac.authorization.k8s.io/v1beta1:ClusterRole")


class ClusterRoleBinding(KubeObject):
    GROUP_VERSION = "rbac.authorization.k8s.io/v1"
    API_VERSION = "rbac.authorization.k8s.io/v1"
    KIND = "ClusterRoleBinding"
    OUTPUTS = ()
    ALIASES = ("kubernetes:rbac.authorization.k8s.io/v1alpha1:ClusterRoleBinding",
               "kubernetes:rbac.authorization.k8s.io/v1beta1:ClusterRoleBinding")
