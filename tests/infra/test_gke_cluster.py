"""GkeCluster alone: private/VPC-native/WI cluster, least-privilege nodes, version check,
add-on flag, kubeconfig and Kubernetes provider."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml
from infra_support import (
    CLUSTER,
    NODE_POOL,
    PROJECT,
    PROJECT_IAM,
    ZONE,
    program_errors,
    refused_alone,
    run_alone,
)
from raytpu.components import AuthorizedNetwork, GkeCluster, GkeClusterArgs, SystemPoolArgs
from raytpu.components.gke_version_policy import GkeVersionError, check_gke_version
from raytpu.facts.versions import version_tuple
from raytpu.plan.engine import PlanResult
from raytpu.spec.gke_cluster import NODE_SERVICE_ACCOUNT_ROLES


def gke_args(**kw: Any) -> GkeClusterArgs:
    base: dict[str, Any] = dict(
        project=PROJECT, location=ZONE, cluster_name="gke", network="vpc", subnetwork="subnet",
        pods_range_name="pods", services_range_name="services", node_tags=("gke-node",),
        master_authorized_networks=(AuthorizedNetwork("203.0.113.0/24", "office"),),
    )
    return GkeClusterArgs(**{**base, **kw})


def plan_gke(**kw: Any) -> PlanResult:
    return run_alone(lambda: GkeCluster("gke", gke_args(**kw)))


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return plan_gke()


def test_cluster_is_private_vpc_native_workload_identity(plan: PlanResult) -> None:
    c = plan.get(CLUSTER, "gke")
    assert c.parent == "gke"
    i = c.inputs
    assert i["name"] == "gke" and i["location"] == ZONE
    assert i["privateClusterConfig"] == {
        "enablePrivateNodes": True, "enablePrivateEndpoint": False,
        "masterIpv4CidrBlock": "172.16.0.32/28",
    }
    assert i["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "office"}]
    }
    assert i["workloadIdentityConfig"] == {"workloadPool": f"{PROJECT}.svc.id.goog"}
    assert i["enableShieldedNodes"] is True
    assert i["releaseChannel"] == {"channel": "REGULAR"}
    assert i["removeDefaultNodePool"] is True and i["initialNodeCount"] == 1
    assert i["networkingMode"] == "VPC_NATIVE"
    assert i["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "services"
    }
    assert i["deletionProtection"] is True
    # The legacy 2VM TPU integration must never be switched on.
    assert "tpuConfig" not in i and "enableTpu" not in i
    assert "minMasterVersion" not in i
    # The short-lived default pool runs as our node account, not the Compute default one.
    assert i["nodeConfig"]["serviceAccount"] == f"gke-nodes@{PROJECT}.iam.gserviceaccount.com"
    assert c.options["ignoreChanges"] == ["nodeConfig"]


@pytest.mark.parametrize("protect", [False, True])
def test_deletion_protection_is_explicit(protect: bool) -> None:
    c = plan_gke(deletion_protection=protect).get(CLUSTER, "gke")
    assert c.inputs["deletionProtection"] is protect


def test_node_service_account_is_least_privilege(plan: PlanResult) -> None:
    sa = plan.get("gcp:serviceaccount/account:Account", "gke-nodes")
    assert sa.inputs["accountId"] == "gke-nodes"
    grants = plan.by_type(PROJECT_IAM)
    assert sorted(g.inputs["role"] for g in grants) == sorted(NODE_SERVICE_ACCOUNT_ROLES)
    assert {g.inputs["member"] for g in grants} == {
        f"serviceAccount:gke-nodes@{PROJECT}.iam.gserviceaccount.com"
    }
    assert not any(g.inputs["role"] in ("roles/editor", "roles/owner") for g in grants)
    # The cluster waits for the grants: nodes must be able to log from the first boot.
    assert set(plan.get(CLUSTER, "gke").options["dependsOn"]) >= {g.urn for g in grants}


def test_system_pool(plan: PlanResult) -> None:
    pool = plan.get(NODE_POOL, "gke-system")
    i = pool.inputs
    assert i["name"] == "system"
    assert i["autoscaling"] == {"minNodeCount": 1, "maxNodeCount": 3}
    assert i["initialNodeCount"] == 1 and "nodeCount" not in i
    assert i["management"] == {"autoRepair": True, "autoUpgrade": True}
    nc = i["nodeConfig"]
    assert nc["machineType"] == "n2-standard-8"
    assert nc["shieldedInstanceConfig"] == {"enableSecureBoot": True,
                                            "enableIntegrityMonitoring": True}
    assert nc["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert nc["serviceAccount"] == f"gke-nodes@{PROJECT}.iam.gserviceaccount.com"
    assert nc["tags"] == ["gke-node"]
    assert "guestAccelerators" not in nc
    assert pool.options["ignoreChanges"] == ["initialNodeCount"]


@pytest.mark.parametrize("addon", [False, True])
def test_ray_operator_addon_flag(addon: bool) -> None:
    c = plan_gke(ray_operator_addon=addon).get(CLUSTER, "gke")
    assert c.inputs["addonsConfig"]["rayOperatorConfigs"] == [{"enabled": addon}]


def test_kubeconfig_and_provider(plan: PlanResult) -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        gke = GkeCluster("gke", gke_args())
        gke.kubeconfig.apply(lambda k: outputs.update(kubeconfig=k))
        gke.endpoint.apply(lambda e: outputs.update(endpoint=e))
        gke.ca_certificate.apply(lambda c: outputs.update(ca=c))

    run_alone(program)
    doc = yaml.safe_load(outputs["kubeconfig"])
    assert doc["kind"] == "Config"
    cluster = doc["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://{outputs['endpoint']}"  # the cluster's own endpoint
    assert cluster["certificate-authority-data"] == outputs["ca"]  # the cluster's own CA
    assert base64.b64decode(cluster["certificate-authority-data"]).startswith(b"-----BEGIN")
    ctx = f"gke_{PROJECT}_{ZONE}_gke"
    assert doc["current-context"] == ctx
    user = doc["users"][0]["user"]["exec"]
    assert user["command"] == "gke-gcloud-auth-plugin"
    assert user["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert "token" not in doc["users"][0]["user"]

    provider = plan.get("pulumi:providers:kubernetes", "gke-k8s")
    assert provider.parent == "gke"
    # Operators need a node to land on.
    assert plan.get(NODE_POOL, "gke-system").urn in provider.options["dependsOn"]
    assert "gke-gcloud-auth-plugin" in str(provider.inputs["kubeconfig"])


def test_version_check_passes_and_reports_the_version() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        gke = GkeCluster("gke", gke_args(min_versions={"TPU v6e": "1.31.2-gke.1115000"}))
        gke.gke_version.apply(lambda v: outputs.update(version=v))

    run_alone(program)
    # The reported version is one that satisfies what was required of it.
    assert version_tuple(outputs["version"]) >= version_tuple("1.31.2-gke.1115000")


def test_version_check_fails_for_too_old_channel() -> None:
    chain = program_errors(lambda: GkeCluster("gke", gke_args(
        min_versions={"TPU v99": "1.99.0", "TPU v6e": "1.31.2-gke.1115000"}
    )))
    messages = [m for t, m in chain if issubclass(t, GkeVersionError)]
    assert messages, chain
    assert "1.34.1-gke.1000000" in messages[0] and "TPU v99 needs >= 1.99.0" in messages[0]
    assert "TPU v6e" not in messages[0]


def test_check_gke_version_rules() -> None:
    defaults = {"REGULAR": "1.30.1-gke.100", "RAPID": "1.33.0-gke.1"}
    need = {"add-on": "1.30.0-gke.1747000"}
    assert check_gke_version(channel_defaults=defaults, channel="REGULAR", pinned=None,
                             required=need, location=ZONE) == "1.30.1-gke.100"
    with pytest.raises(GkeVersionError, match="minMasterVersion"):
        check_gke_version(channel_defaults=defaults, channel="REGULAR",
                          pinned="1.29.0-gke.5", required=need, location=ZONE)
    with pytest.raises(GkeVersionError, match="no default version"):
        check_gke_version(channel_defaults=defaults, channel="STABLE", pinned=None,
                          required=need, location=ZONE)


def test_regional_location() -> None:
    c = plan_gke(location="us-west4").get(CLUSTER, "gke")
    assert c.inputs["location"] == "us-west4"


def test_dataplane_v2_enforces_network_policy_unless_turned_off(plan: PlanResult) -> None:
    assert plan.get(CLUSTER, "gke").inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    # Off: unset, never LEGACY_DATAPATH, so a cluster created without it keeps its state.
    assert "datapathProvider" not in plan_gke(dataplane_v2=False).get(CLUSTER, "gke").inputs


def test_google_groups_for_rbac_is_a_cluster_setting(plan: PlanResult) -> None:
    assert "authenticatorGroupsConfig" not in plan.get(CLUSTER, "gke").inputs
    c = plan_gke(security_group="gke-security-groups@example.com").get(CLUSTER, "gke")
    assert c.inputs["authenticatorGroupsConfig"] == {
        "securityGroup": "gke-security-groups@example.com"}


@pytest.mark.parametrize(("kw", "message"), [
    ({"security_group": "ml-team@example.com"},
     r"security_group: 'ml-team@example.com' must be gke-security-groups@<your domain>"),
    ({"location": "mars"}, r"location: 'mars'"),
    ({"cluster_name": "Bad_Name"}, r"cluster_name: 'Bad_Name'"),
    ({"release_channel": "NIGHTLY"}, r"release_channel: 'NIGHTLY' is not valid"),
    ({"master_ipv4_cidr_block": "8.8.8.0/28"}, r"private /28"),
    ({"master_authorized_networks": (AuthorizedNetwork("0.0.0.0/0"),)}, r"whole internet"),
    ({"node_service_account_roles": ("roles/editor",)}, r"roles/editor is not least privilege"),
    ({"min_versions": {"x": "latest"}}, r"min_versions: 'x': 'latest' is not a GKE version"),
    ({"node_service_account_id": "x"}, r"node_service_account_id: 'x'"),
])
def test_bad_args_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gke_args(**kw)


def test_bad_system_pool_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_nodes: 1 is below SystemPoolArgs.min_nodes \(3\)"):
        SystemPoolArgs(min_nodes=3, max_nodes=1)


def test_bad_component_registers_nothing() -> None:
    errors = refused_alone(
        lambda: GkeCluster("gke", gke_args(release_channel="NIGHTLY")),
        lambda: GkeCluster("gke", {"project": PROJECT}),  # type: ignore[arg-type]
    )
    assert isinstance(errors[0], ValueError) and type(errors[1]) is TypeError
