"""The thin GCP bindings must be wire-identical to pulumi_gcp's generated classes.

Each case declares one resource both ways, with the same arguments (snake_case through
the generated ``*Args``; camelCase dicts through the binding), and compares what the
engine receives: type token, inputs, options (secret outputs, aliases, ...) and the
provider version. A pulumi-gcp upgrade that changes any of these fails here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pytest
from infra_support import PROJECT, REGION, ZONE, marker, run_alone
from raytpu.components import gcp_resources as thin
from raytpu.components.provider_inputs import drop_unset
from raytpu.plan.engine import PlannedResource
from raytpu.plan.mocks import RecordingMocks

CLUSTER_ID = f"projects/{PROJECT}/locations/{ZONE}/clusters/c"

# name -> (generated declaration, thin declaration); both get the same resource name.
Case = tuple[Callable[[str], pulumi.CustomResource], Callable[[str], thin.GcpResource]]
CASES: dict[str, Case] = {
    "network": (
        lambda n: gcp.compute.Network(n, name="vpc", project=PROJECT,
                                      auto_create_subnetworks=False, routing_mode="REGIONAL"),
        lambda n: thin.ComputeNetwork(n, {"name": "vpc", "project": PROJECT,
                                          "autoCreateSubnetworks": False,
                                          "routingMode": "REGIONAL"}),
    ),
    "subnetwork": (
        lambda n: gcp.compute.Subnetwork(
            n, name="s", project=PROJECT, region=REGION, network="vpc",
            ip_cidr_range="10.0.0.0/20", private_ip_google_access=True,
            secondary_ip_ranges=[gcp.compute.SubnetworkSecondaryIpRangeArgs(
                range_name="pods", ip_cidr_range="10.16.0.0/14")]),
        lambda n: thin.ComputeSubnetwork(n, {
            "name": "s", "project": PROJECT, "region": REGION, "network": "vpc",
            "ipCidrRange": "10.0.0.0/20", "privateIpGoogleAccess": True,
            "secondaryIpRanges": [{"rangeName": "pods", "ipCidrRange": "10.16.0.0/14"}]}),
    ),
    "router": (
        lambda n: gcp.compute.Router(n, name="r", project=PROJECT, region=REGION,
                                     network="vpc"),
        lambda n: thin.ComputeRouter(n, {"name": "r", "project": PROJECT, "region": REGION,
                                         "network": "vpc"}),
    ),
    "router-nat": (
        lambda n: gcp.compute.RouterNat(
            n, name="n", project=PROJECT, region=REGION, router="r",
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[gcp.compute.RouterNatSubnetworkArgs(
                name="s", source_ip_ranges_to_nats=["ALL_IP_RANGES"])],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY")),
        lambda n: thin.ComputeRouterNat(n, {
            "name": "n", "project": PROJECT, "region": REGION, "router": "r",
            "natIpAllocateOption": "AUTO_ONLY",
            "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
            "subnetworks": [{"name": "s", "sourceIpRangesToNats": ["ALL_IP_RANGES"]}],
            "logConfig": {"enable": True, "filter": "ERRORS_ONLY"}}),
    ),
    "firewall": (
        lambda n: gcp.compute.Firewall(
            n, name="f", project=PROJECT, network="vpc", direction="INGRESS",
            priority=1000, description="d",
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            source_ranges=["35.235.240.0/20"], target_tags=["t"]),
        lambda n: thin.ComputeFirewall(n, {
            "name": "f", "project": PROJECT, "network": "vpc", "direction": "INGRESS",
            "priority": 1000, "description": "d",
            "allows": [{"protocol": "tcp", "ports": ["22"]}],
            "sourceRanges": ["35.235.240.0/20"], "targetTags": ["t"]}),
    ),
    "cluster": (
        lambda n: gcp.container.Cluster(
            n, name="c", project=PROJECT, location=ZONE, networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name="pods"),
            remove_default_node_pool=True, initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account="sa@x", oauth_scopes=["scope"],
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA")),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True, enable_private_endpoint=False),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block="10.0.0.0/8")]),
            addons_config=gcp.container.ClusterAddonsConfigArgs(ray_operator_configs=[
                gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=False)]),
            control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
                dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                    allow_external_traffic=True)),
            deletion_protection=True,
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=["SYSTEM_COMPONENTS", "POD"],
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(
                    enabled=True)),
            cost_management_config=gcp.container.ClusterCostManagementConfigArgs(enabled=True),
            opts=pulumi.ResourceOptions(ignore_changes=["nodeConfig"])),
        lambda n: thin.ContainerCluster(n, {
            "name": "c", "project": PROJECT, "location": ZONE, "networkingMode": "VPC_NATIVE",
            "ipAllocationPolicy": {"clusterSecondaryRangeName": "pods",
                                   "servicesSecondaryRangeName": None},
            "removeDefaultNodePool": True, "initialNodeCount": 1,
            "nodeConfig": {"serviceAccount": "sa@x", "oauthScopes": ["scope"],
                           "workloadMetadataConfig": {"mode": "GKE_METADATA"}},
            "privateClusterConfig": {"enablePrivateNodes": True,
                                     "enablePrivateEndpoint": False,
                                     "masterIpv4CidrBlock": None},
            "masterAuthorizedNetworksConfig": {
                "cidrBlocks": [{"cidrBlock": "10.0.0.0/8", "displayName": None}]},
            "addonsConfig": {"rayOperatorConfigs": [{"enabled": False}]},
            "controlPlaneEndpointsConfig": {"dnsEndpointConfig": {"allowExternalTraffic": True}},
            "deletionProtection": True,
            "resourceLabels": None,
            "monitoringConfig": {"enableComponents": ["SYSTEM_COMPONENTS", "POD"],
                                 "managedPrometheus": {"enabled": True}},
            "costManagementConfig": {"enabled": True},
        }, pulumi.ResourceOptions(ignore_changes=["nodeConfig"])),
    ),
    "resource-policy": (
        lambda n: gcp.compute.ResourcePolicy(
            n, name="c-train", project=PROJECT, region="us-central1",
            workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                type="HIGH_THROUGHPUT", accelerator_topology="2x2x2")),
        lambda n: thin.ComputeResourcePolicy(n, {
            "name": "c-train", "project": PROJECT, "region": "us-central1",
            "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x2"}}),
    ),
    "node-pool": (
        lambda n: gcp.container.NodePool(
            n, name="p", project=PROJECT, cluster=CLUSTER_ID, location=ZONE,
            node_locations=[ZONE], initial_node_count=4,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                min_node_count=0, max_node_count=4, location_policy="ANY"),
            placement_policy=gcp.container.NodePoolPlacementPolicyArgs(
                type="COMPACT", tpu_topology="2x2x2"),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True,
                                                            auto_upgrade=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type="ct4p-hightpu-4t", spot=True,
                reservation_affinity=gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                    consume_reservation_type="SPECIFIC_RESERVATION",
                    key="compute.googleapis.com/reservation-name", values=["r"]),
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                tags=["tpu"], labels={"a": "b"})),
        lambda n: thin.ContainerNodePool(n, {
            "name": "p", "project": PROJECT, "cluster": CLUSTER_ID, "location": ZONE,
            "nodeLocations": [ZONE], "initialNodeCount": 4, "nodeCount": None,
            "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"},
            "placementPolicy": {"type": "COMPACT", "tpuTopology": "2x2x2"},
            "management": {"autoRepair": True, "autoUpgrade": True},
            "nodeConfig": {
                "machineType": "ct4p-hightpu-4t", "spot": True,
                "reservationAffinity": {
                    "consumeReservationType": "SPECIFIC_RESERVATION",
                    "key": "compute.googleapis.com/reservation-name", "values": ["r"]},
                "gvnic": {"enabled": True}, "tags": ["tpu"], "labels": {"a": "b"}}}),
    ),
    "service-account": (
        lambda n: gcp.serviceaccount.Account(n, account_id="nodes", display_name="d",
                                             project=PROJECT),
        lambda n: thin.ServiceAccount(n, {"accountId": "nodes", "displayName": "d",
                                          "project": PROJECT}),
    ),
    "service-account-iam": (
        lambda n: gcp.serviceaccount.IAMMember(
            n, service_account_id="projects/p/serviceAccounts/x",
            role="roles/iam.workloadIdentityUser", member="serviceAccount:p.svc.id.goog[ns/ksa]"),
        lambda n: thin.ServiceAccountIamMember(n, {
            "serviceAccountId": "projects/p/serviceAccounts/x",
            "role": "roles/iam.workloadIdentityUser",
            "member": "serviceAccount:p.svc.id.goog[ns/ksa]"}),
    ),
    "project-iam": (
        lambda n: gcp.projects.IAMMember(n, project=PROJECT, role="roles/logging.logWriter",
                                         member="serviceAccount:x"),
        lambda n: thin.ProjectIamMember(n, {"project": PROJECT,
                                            "role": "roles/logging.logWriter",
                                            "member": "serviceAccount:x"}),
    ),
    "project-service": (
        lambda n: gcp.projects.Service(n, project=PROJECT, service="container.googleapis.com",
                                       disable_on_destroy=False),
        lambda n: thin.ProjectService(n, {"project": PROJECT,
                                          "service": "container.googleapis.com",
                                          "disableOnDestroy": False}),
    ),
    "bucket": (
        lambda n: gcp.storage.Bucket(
            n, name="b", project=PROJECT, location="US-WEST4", uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    days_since_noncurrent_time=30, with_state="ARCHIVED")),
                gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    num_newer_versions=2, with_state="ARCHIVED"))],
            force_destroy=False),
        lambda n: thin.StorageBucket(n, {
            "name": "b", "project": PROJECT, "location": "US-WEST4",
            "uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced",
            "versioning": {"enabled": True},
            "lifecycleRules": [{"action": {"type": "Delete"},
                                "condition": {"daysSinceNoncurrentTime": 30,
                                              "withState": "ARCHIVED"}},
                               {"action": {"type": "Delete"},
                                "condition": {"numNewerVersions": 2,
                                              "withState": "ARCHIVED"}}],
            "forceDestroy": False, "labels": None}),
    ),
    "bucket-iam": (
        lambda n: gcp.storage.BucketIAMMember(n, bucket="b", role="roles/storage.objectUser",
                                              member="serviceAccount:x"),
        lambda n: thin.StorageBucketIamMember(n, {"bucket": "b",
                                                  "role": "roles/storage.objectUser",
                                                  "member": "serviceAccount:x"}),
    ),
    "repository": (
        lambda n: gcp.artifactregistry.Repository(
            n, repository_id="raytpu", project=PROJECT, location=REGION, format="DOCKER",
            description="d", labels={"a": "b"}),
        lambda n: thin.ArtifactRegistryRepository(n, {
            "repositoryId": "raytpu", "project": PROJECT, "location": REGION,
            "format": "DOCKER", "description": "d", "labels": {"a": "b"}}),
    ),
    "repository-iam": (
        lambda n: gcp.artifactregistry.RepositoryIamMember(
            n, project=PROJECT, location=REGION, repository="raytpu",
            role="roles/artifactregistry.reader", member="serviceAccount:x"),
        lambda n: thin.ArtifactRegistryRepositoryIamMember(n, {
            "project": PROJECT, "location": REGION, "repository": "raytpu",
            "role": "roles/artifactregistry.reader", "member": "serviceAccount:x"}),
    ),
    "global-address": (
        lambda n: gcp.compute.GlobalAddress(n, name="psa", project=PROJECT,
                                            purpose="VPC_PEERING", address_type="INTERNAL",
                                            prefix_length=24, network="vpc"),
        lambda n: thin.ComputeGlobalAddress(n, {"name": "psa", "project": PROJECT,
                                                "purpose": "VPC_PEERING",
                                                "addressType": "INTERNAL", "prefixLength": 24,
                                                "network": "vpc"}),
    ),
    "service-networking-connection": (
        lambda n: gcp.servicenetworking.Connection(
            n, network="vpc", service="servicenetworking.googleapis.com",
            reserved_peering_ranges=["psa"]),
        lambda n: thin.ServiceNetworkingConnection(n, {
            "network": "vpc", "service": "servicenetworking.googleapis.com",
            "reservedPeeringRanges": ["psa"]}),
    ),
    "redis-instance": (
        lambda n: gcp.redis.Instance(
            n, name="gcs", project=PROJECT, region=REGION, tier="STANDARD_HA",
            memory_size_gb=1, redis_version="REDIS_7_2", authorized_network="vpc",
            connect_mode="PRIVATE_SERVICE_ACCESS", reserved_ip_range="psa", auth_enabled=True,
            transit_encryption_mode="SERVER_AUTHENTICATION", labels={"stack": "s"}),
        lambda n: thin.RedisInstance(n, {
            "name": "gcs", "project": PROJECT, "region": REGION, "tier": "STANDARD_HA",
            "memorySizeGb": 1, "redisVersion": "REDIS_7_2", "authorizedNetwork": "vpc",
            "connectMode": "PRIVATE_SERVICE_ACCESS", "reservedIpRange": "psa",
            "authEnabled": True, "transitEncryptionMode": "SERVER_AUTHENTICATION",
            "labels": {"stack": "s"}}),
    ),
    "dashboard": (
        lambda n: gcp.monitoring.Dashboard(n, project=PROJECT,
                                           dashboard_json='{"displayName": "d"}'),
        lambda n: thin.MonitoringDashboard(n, {"project": PROJECT,
                                               "dashboardJson": '{"displayName": "d"}'}),
    ),
    "alert-policy": (
        lambda n: gcp.monitoring.AlertPolicy(
            n, project=PROJECT, display_name="a", combiner="OR", severity="ERROR",
            conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                display_name="c",
                condition_prometheus_query_language=(
                    gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                        query="vector(0) < 1", duration="600s", evaluation_interval="60s")))],
            notification_channels=["projects/p/notificationChannels/1"],
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                mime_type="text/markdown", content="x"),
            user_labels={"stack": "s"}),
        lambda n: thin.MonitoringAlertPolicy(n, {
            "project": PROJECT, "displayName": "a", "combiner": "OR", "severity": "ERROR",
            "conditions": [{"displayName": "c", "conditionPrometheusQueryLanguage": {
                "query": "vector(0) < 1", "duration": "600s", "evaluationInterval": "60s"}}],
            "notificationChannels": ["projects/p/notificationChannels/1"],
            "documentation": {"mimeType": "text/markdown", "content": "x"},
            "userLabels": {"stack": "s"}}),
    ),
}


def _snake(wire: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", wire).lower()


@pytest.mark.parametrize("case", sorted(CASES))
def test_binding_is_wire_identical_to_pulumi_gcp(case: str) -> None:
    generated, binding = CASES[case]
    made: dict[str, Any] = {}

    def program() -> None:
        made["real"] = generated("real")
        made["thin"] = binding("thin")

    plan = run_alone(program)
    by_name: dict[str, PlannedResource] = {r.name: r for r in plan.resources}
    real, mine = by_name["real"], by_name["thin"]
    assert mine.type == real.type == type(made["thin"]).TOKEN
    assert mine.inputs == real.inputs
    assert mine.options == real.options
    assert mine.provider_version == real.provider_version != ""
    # Every output the binding declares is a property of the generated class too.
    for wire in type(made["thin"]).OUTPUTS:
        assert hasattr(made["real"], _snake(wire)), (case, wire)


def test_every_binding_has_a_case() -> None:
    bindings = {
        cls for cls in vars(thin).values()
        if isinstance(cls, type) and issubclass(cls, thin.GcpResource) and hasattr(cls, "TOKEN")
    }
    covered: set[type] = set()

    def program() -> None:
        for _, binding in CASES.values():
            covered.add(type(binding(f"b{len(covered)}")))

    run_alone(program)
    assert bindings == covered


def test_drop_unset_drops_unset_fields_at_every_depth() -> None:
    assert drop_unset({"a": None, "b": {"c": None, "d": [{"e": None, "f": 1}]}, "g": 0}) == {
        "b": {"d": [{"f": 1}]}, "g": 0,
    }


def test_engine_versions_invoke_matches_pulumi_gcp(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, dict[str, Any], str]] = []
    original = RecordingMocks.call

    def spy(self: RecordingMocks, args: Any) -> Any:
        calls.append((args.token, dict(args.args), args.provider))
        return original(self, args)

    monkeypatch.setattr(RecordingMocks, "call", spy)
    results: dict[str, Any] = {}

    def program() -> None:
        real = gcp.container.get_engine_versions_output(location=ZONE, project=PROJECT)
        mine = thin.gke_engine_versions(location=ZONE, project=PROJECT)
        real.release_channel_default_version.apply(lambda v: results.setdefault("real", v))
        mine.apply(lambda v: results.setdefault("thin", v["releaseChannelDefaultVersion"]))
        marker()

    run_alone(program)
    assert len(calls) == 2 and calls[0] == calls[1]
    assert results["thin"] == results["real"] and results["real"]["REGULAR"]


def test_cluster_lookup_invoke_matches_pulumi_gcp(calls: list[tuple[str, dict[str, Any]]]) -> None:
    results: dict[str, Any] = {}

    def program() -> None:
        real = gcp.container.get_cluster_output(name="theirs", location=ZONE, project=PROJECT)
        mine = thin.gke_cluster_lookup("theirs", ZONE, PROJECT)
        real.endpoint.apply(lambda v: results.setdefault("real", v))
        mine.apply(lambda v: results.setdefault("thin", v["endpoint"]))
        marker()

    run_alone(program)
    assert len(calls) == 2 and calls[0] == calls[1]
    assert results["thin"] == results["real"] == "10.0.0.3"
