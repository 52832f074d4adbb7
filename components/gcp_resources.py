"""The Google Cloud resource types this package declares, as thin typed bindings.

Why not ``pulumi_gcp``'s generated classes: importing one resource of a ``pulumi_gcp``
module executes the whole module (its ``__init__`` star-imports every resource and every
nested ``*Args`` type): ``container`` ~0.3 s, ``storage`` ~0.13 s, ``artifactregistry``
~0.12 s, ``compute`` ~1.8 s and 60 MB. That was most of the time ``raytpu plan`` took.
A resource on the wire is only a type token, camelCase inputs, the provider version and a
few options, so each binding below declares exactly that:

* ``TOKEN``: the generated class's type token (the URN, hence the state, is unchanged),
* inputs as the provider receives them (camelCase, ``None`` left out at every depth),
* ``OUTPUTS``: the provider-computed properties the program may read,
* ``SECRET_OUTPUTS`` and ``ALIASES``: the options the generated class adds itself,
* the provider plugin version pinned to the installed SDK's, as generated classes do.

``tests/infra/test_gcp_resources.py`` registers each binding next to its generated class
under mocks and requires the same type, inputs and options, so an SDK upgrade that changes
the wire format fails a test instead of drifting silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import pulumi
from raytpu.components.provider_inputs import drop_unset

# Node VMs get the broad scope; what they may do is decided by IAM on their service account.
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def _provider_defaults() -> pulumi.ResourceOptions:
    from pulumi_gcp import _utilities  # the package root only: cheap

    return _utilities.get_resource_opts_defaults()


class GcpResource(pulumi.CustomResource):
    """A ``gcp:`` resource declared by type token with wire-format (camelCase) inputs."""

    TOKEN: ClassVar[str]
    OUTPUTS: ClassVar[tuple[str, ...]] = ()
    SECRET_OUTPUTS: ClassVar[tuple[str, ...]] = ()
    ALIASES: ClassVar[tuple[str, ...]] = ()
    """Former type tokens the generated class lists as aliases."""

    def __init__(
        self,
        resource_name: str,
        props: Mapping[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        inputs: dict[str, Any] = drop_unset(props)
        for out in self.OUTPUTS:
            inputs.setdefault(out, None)  # a slot the engine fills with the provider's value
        # In the generated classes' order: provider version, the caller's, then their own.
        merged = pulumi.ResourceOptions.merge(_provider_defaults(), opts)
        own = pulumi.ResourceOptions(
            additional_secret_outputs=list(self.SECRET_OUTPUTS) or None,
            aliases=[pulumi.Alias(type_=t) for t in self.ALIASES] or None,
        )
        merged = pulumi.ResourceOptions.merge(merged, own)
        super().__init__(self.TOKEN, resource_name, inputs, merged)

    def output(self, prop: str) -> pulumi.Output[Any]:
        """The resolved property ``prop`` (wire name, e.g. ``selfLink``)."""
        try:
            return cast(pulumi.Output[Any], self.__dict__[prop])
        except KeyError:
            raise AttributeError(f"{self.TOKEN} declares no property {prop!r}") from None

    @property
    def gcp_name(self) -> pulumi.Output[str]:
        """The resource's ``name`` property (for most types: its name in GCP)."""
        return self.output("name")


class _HasSelfLink(GcpResource):
    @property
    def self_link(self) -> pulumi.Output[str]:
        return self.output("selfLink")


# -- compute ----------------------------------------------------------------------------


class ComputeNetwork(_HasSelfLink):
    TOKEN = "gcp:compute/network:Network"
    OUTPUTS = ("name", "selfLink")


class ComputeSubnetwork(_HasSelfLink):
    TOKEN = "gcp:compute/subnetwork:Subnetwork"
    OUTPUTS = ("name", "selfLink")


class ComputeRouter(_HasSelfLink):
    TOKEN = "gcp:compute/router:Router"
    OUTPUTS = ("name", "selfLink")


class ComputeRouterNat(GcpResource):
    TOKEN = "gcp:compute/routerNat:RouterNat"
    OUTPUTS = ("name",)


class ComputeFirewall(_HasSelfLink):
    TOKEN = "gcp:compute/firewall:Firewall"
    OUTPUTS = ("name", "selfLink")


class ComputeGlobalAddress(_HasSelfLink):
    """A global address; ``purpose: VPC_PEERING`` reserves a range for private service
    access."""

    TOKEN = "gcp:compute/globalAddress:GlobalAddress"
    OUTPUTS = ("name", "selfLink")
    SECRET_OUTPUTS = ("effectiveLabels", "pulumiLabels")


class ServiceNetworkingConnection(GcpResource):
    """The VPC's peering with a Google service producer (private service access)."""

    TOKEN = "gcp:servicenetworking/connection:Connection"
    OUTPUTS = ("peering",)


class RedisInstance(GcpResource):
    """A Memorystore for Redis instance; ``authString`` is secret, as in the generated class."""

    TOKEN = "gcp:redis/instance:Instance"
    OUTPUTS = ("host", "port", "authString", "serverCaCerts")
    SECRET_OUTPUTS = ("authString", "effectiveLabels", "pulumiLabels")


# -- container (GKE) --------------------------------------------------------------------


class ContainerCluster(_HasSelfLink):
    TOKEN = "gcp:container/cluster:Cluster"
    OUTPUTS = (
        "name", "endpoint", "masterAuth", "masterVersion", "selfLink",
        "controlPlaneEndpointsConfig",
    )
    SECRET_OUTPUTS = ("effectiveLabels", "pulumiLabels")

    @property
    def endpoint(self) -> pulumi.Output[str]:
        """The control plane's IP endpoint."""
        return self.output("endpoint")

    @property
    def dns_endpoint(self) -> pulumi.Output[str]:
        """``controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint``
        (``<uid>.<region>.gke.goog``)."""
        return self.output("controlPlaneEndpointsConfig").apply(
            lambda c: ((c or {}).get("dnsEndpointConfig") or {}).get("endpoint")
        )

    @property
    def cluster_ca_certificate(self) -> pulumi.Output[str]:
        """``masterAuth.clusterCaCertificate`` (base64 PEM)."""
        return self.output("masterAuth").apply(lambda auth: auth["clusterCaCertificate"])


class ComputeResourcePolicy(GcpResource):
    TOKEN = "gcp:compute/resourcePolicy:ResourcePolicy"
    OUTPUTS = ("name", "selfLink")


class ContainerNodePool(GcpResource):
    TOKEN = "gcp:container/nodePool:NodePool"
    OUTPUTS = ("name", "instanceGroupUrls", "managedInstanceGroupUrls")


ENGINE_VERSIONS_TOKEN = "gcp:container/getEngineVersions:getEngineVersions"


def gke_engine_versions(
    location: str, project: str, depends_on: Sequence[pulumi.Resource] = ()
) -> pulumi.Output[dict[str, Any]]:
    """``gcp.container.getEngineVersions`` (wire-format result: camelCase keys).

    ``depends_on``: resources the call waits for (the enabled Kubernetes Engine API); while
    they are still to be created, a preview gets an unknown result instead of an error."""
    from pulumi_gcp import _utilities

    own = pulumi.InvokeOutputOptions(depends_on=list(depends_on)) if depends_on else None
    opts = pulumi.InvokeOutputOptions.merge(_utilities.get_invoke_opts_defaults(), own)
    return pulumi.runtime.invoke_output(
        ENGINE_VERSIONS_TOKEN,
        {"location": location, "project": project},
        opts=opts,
    )


GET_CLUSTER_TOKEN = "gcp:container/getCluster:getCluster"


def gke_cluster_lookup(
    name: pulumi.Input[str], location: pulumi.Input[str], project: str
) -> pulumi.Output[dict[str, Any]]:
    """``gcp.container.getCluster`` of a cluster this program does not manage (wire-format
    result: ``endpoint``, ``masterAuths[0].clusterCaCertificate``,
    ``controlPlaneEndpointsConfigs[0].dnsEndpointConfigs[0].endpoint``, ...)."""
    from pulumi_gcp import _utilities

    return pulumi.runtime.invoke_output(
        GET_CLUSTER_TOKEN,
        {"name": name, "location": location, "project": project},
        opts=pulumi.InvokeOutputOptions.merge(_utilities.get_invoke_opts_defaults(), None),
    )


# -- IAM and service accounts -----------------------------------------------------------


class ServiceAccount(GcpResource):
    TOKEN = "gcp:serviceaccount/account:Account"
    OUTPUTS = ("email", "member", "name", "uniqueId")
    ALIASES = ("gcp:serviceAccount/account:Account",)

    @property
    def email(self) -> pulumi.Output[str]:
        return self.output("email")

    @property
    def member(self) -> pulumi.Output[str]:
        """``serviceAccount:<email>``: the IAM principal."""
        return self.output("member")


class ServiceAccountIamMember(GcpResource):
    TOKEN = "gcp:serviceaccount/iAMMember:IAMMember"
    OUTPUTS = ("etag",)
    ALIASES = ("gcp:serviceAccount/iAMMember:IAMMember",)


class ProjectIamMember(GcpResource):
    TOKEN = "gcp:projects/iAMMember:IAMMember"
    OUTPUTS = ("etag",)


# -- storage and registry ---------------------------------------------------------------


class StorageBucket(_HasSelfLink):
    TOKEN = "gcp:storage/bucket:Bucket"
    OUTPUTS = ("name", "selfLink", "url")
    SECRET_OUTPUTS = ("effectiveLabels", "pulumiLabels")

    @property
    def url(self) -> pulumi.Output[str]:
        """``gs://<bucket>``."""
        return self.output("url")


class StorageBucketIamMember(GcpResource):
    TOKEN = "gcp:storage/bucketIAMMember:BucketIAMMember"
    OUTPUTS = ("etag",)


class ArtifactRegistryRepository(GcpResource):
    TOKEN = "gcp:artifactregistry/repository:Repository"
    OUTPUTS = ("name", "repositoryId", "registryUri")
    SECRET_OUTPUTS = ("effectiveLabels", "pulumiLabels")

    @property
    def repository_id(self) -> pulumi.Output[str]:
        return self.output("repositoryId")


class ArtifactRegistryRepositoryIamMember(GcpResource):
    TOKEN = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
    OUTPUTS = ("etag",)


# -- projects ---------------------------------------------------------------------------


class ProjectService(GcpResource):
    """An enabled Google API (``gcp.projects.Service``)."""

    TOKEN = "gcp:projects/service:Service"
    OUTPUTS = ("service",)


# -- monitoring -------------------------------------------------------------------------


class MonitoringDashboard(GcpResource):
    """A Cloud Monitoring dashboard; ``dashboardJson`` is the API's Dashboard object."""

    TOKEN = "gcp:monitoring/dashboard:Dashboard"
    OUTPUTS = ("dashboardJson",)


class MonitoringAlertPolicy(GcpResource):
    TOKEN = "gcp:monitoring/alertPolicy:AlertPolicy"
    OUTPUTS = ("name", "creationRecords")

    @property
    def policy_name(self) -> pulumi.Output[str]:
        """``projects/<p>/alertPolicies/<id>``."""
        return self.output("name")
