"""What a first `pulumi up` on a new GCP project needs, checked on the recorded plan:

* the Workload Identity binding waits for the cluster (which creates the identity pool),
* the APIs are enabled (left enabled on destroy) and every GCP resource waits for its API,
* the control plane is reachable through the DNS-based endpoint when enabled,
* checkpoint lifecycle rules only ever expire noncurrent versions.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from infra_support import CLUSTER, PROJECT, STACKS, raw_config, run_alone
from pulumi.runtime.rpc import UNKNOWN
from raytpu.components import CheckpointStorage, CheckpointStorageArgs, GkeCluster
from raytpu.components import gke_cluster as gke_module
from raytpu.components.project_services import API_OF_TYPE, api_of
from raytpu.plan.engine import PlannedResource, PlanResult, run_program
from raytpu.plan.mocks import _FAKE_CA
from raytpu.plan.tables import output_tables
from raytpu.program import apis
from test_gke_cluster import gke_args

SERVICE = "gcp:projects/service:Service"
WI_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
BUCKET = "gcp:storage/bucket:Bucket"


def depends_on(r: PlannedResource, type_: str, name: str) -> bool:
    """Whether ``r`` waits for resource ``type_``/``name`` (dependsOn as bare names or URNs)."""
    return any(d == name or d.endswith(f"{type_}::{name}") for d in r.options.get("dependsOn", []))


def is_named(ref: str | None, name: str) -> bool:
    """A parent/dependency reference (bare name or URN) to ``name``."""
    return ref is not None and (ref == name or ref.endswith(f"::{name}"))


def service_of(plan: PlanResult, api: str) -> PlannedResource:
    (svc,) = [s for s in plan.by_type(SERVICE) if s.inputs["service"] == api]
    return svc


# -- Workload Identity before its pool ---------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_workload_identity_binding_waits_for_the_cluster(
    stack: str, stack_plans: dict[str, PlanResult]
) -> None:
    plan = stack_plans[stack]
    bindings = [r for r in plan.by_type(WI_MEMBER)
                if r.inputs["role"] == "roles/iam.workloadIdentityUser"]
    assert len(bindings) == 1 + len(plan.config.teams)  # the Ray KSA and one per team
    for wi in bindings:
        assert ".svc.id.goog[" in wi.inputs["member"]
        assert depends_on(wi, CLUSTER, plan.config.cluster.name), wi.options


def test_checkpoint_storage_takes_what_the_binding_waits_for() -> None:
    def program(wait: bool) -> None:
        gke = GkeCluster("gke", gke_args())
        CheckpointStorage("ckpt", CheckpointStorageArgs(
            project=PROJECT, bucket_name="acme-ckpt", location="us-west4", namespace="ray",
            ksa_name="ray-workload", gsa_account_id="raytpu-ckpt",
            workload_identity_depends_on=(gke.cluster,) if wait else (),
        ))

    for wait in (True, False):
        wi = run_alone(lambda w=wait: program(w)).get(WI_MEMBER, "ckpt-wi")
        assert depends_on(wi, CLUSTER, "gke") is wait


# -- APIs --------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_apis_enabled_and_every_gcp_resource_waits_for_its_api(
    stack: str, stack_plans: dict[str, PlanResult]
) -> None:
    plan = stack_plans[stack]
    services = plan.by_type(SERVICE)
    # Memorystore's two APIs only where the stack creates an instance (prod: GCS FT).
    assert {s.inputs["service"] for s in services} == set(apis.stack_apis(plan.config))
    ft = plan.config.ray.gcs_fault_tolerance
    assert ("redis.googleapis.com" in {s.inputs["service"] for s in services}) is bool(
        ft and ft.memorystore)
    for s in services:
        # Destroying the stack must not turn off an API other workloads of the project use.
        assert s.inputs["disableOnDestroy"] is False
        assert s.inputs["project"] == plan.config.project
        assert is_named(s.parent, "apis")
    checked = 0
    for r in plan.resources:
        if not r.custom or not r.type.startswith("gcp:") or r.type == SERVICE:
            continue
        api = api_of(r.type)
        assert api is not None, f"{r.type} has no API in API_OF_TYPE"
        assert depends_on(r, SERVICE, service_of(plan, api).name), (r.type, r.name, r.options)
        checked += 1
    assert checked >= 15


def test_every_resource_api_is_in_the_stack_list() -> None:
    assert set(API_OF_TYPE.values()) <= {*apis.STACK_APIS, *apis.MEMORYSTORE_APIS}
    # What the issue names, plus what the declared resources call.
    assert {"container.googleapis.com", "compute.googleapis.com",
            "artifactregistry.googleapis.com", "storage.googleapis.com", "iam.googleapis.com",
            "iamcredentials.googleapis.com", "cloudresourcemanager.googleapis.com",
            } <= set(apis.STACK_APIS)


def test_enable_apis_false_declares_no_service() -> None:
    plan = run_program("test", raw_config(raytpu_project={"enableApis": False}))
    assert plan.by_type(SERVICE) == []
    for r in plan.resources:
        assert not [d for d in r.options.get("dependsOn", []) if "apis-" in d], r


def test_gke_version_lookup_waits_for_the_container_api(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    original = gke_module.gke_engine_versions

    def spy(location: str, project: str, depends_on: Any = ()) -> Any:
        seen.append(sorted(r._name for r in depends_on))
        return original(location, project, depends_on)

    monkeypatch.setattr(gke_module, "gke_engine_versions", spy)
    run_program("test", raw_config())
    assert seen == [["apis-container"]]


# -- Control plane reachable from CI -----------------------------------------------------


def _kubeconfig(**kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def program() -> None:
        GkeCluster("gke", gke_args(**kw)).kubeconfig.apply(lambda k: out.update(k=k))

    plan = run_alone(program)
    out["plan"] = plan
    return {"doc": yaml.safe_load(out["k"]), "plan": plan}


def test_dns_endpoint_kubeconfig_and_cluster_input() -> None:
    got = _kubeconfig(dns_endpoint=True)
    cluster = got["doc"]["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://") and cluster["server"].endswith(".gke.goog")
    # The DNS endpoint's certificate is publicly trusted: no cluster CA pinned.
    assert "certificate-authority-data" not in cluster
    c = got["plan"].get(CLUSTER, "gke").inputs
    assert c["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    provider = got["plan"].get("pulumi:providers:kubernetes", "gke-k8s")
    assert ".gke.goog" in str(provider.inputs["kubeconfig"])


def test_ip_endpoint_kubeconfig_when_dns_endpoint_is_off() -> None:
    got = _kubeconfig(dns_endpoint=False)
    cluster = got["doc"]["clusters"][0]["cluster"]
    assert cluster == {"certificate-authority-data": _FAKE_CA, "server": "https://10.0.0.2"}
    c = got["plan"].get(CLUSTER, "gke").inputs
    # Explicit, so that switching it off is a change.
    assert c["controlPlaneEndpointsConfig"] == {
        "dnsEndpointConfig": {"allowExternalTraffic": False}}


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_deploy_through_the_dns_endpoint(
    stack: str, stack_previews: dict[str, PlanResult]
) -> None:
    # As `pulumi preview` sees it before the first up: GKE assigns the endpoint
    # (dnsEndpointConfig.endpoint, computed inside an input object), so the output is
    # unknown and the plan prints "(known after up)", never None or a stand-in.
    plan = stack_previews[stack]
    assert plan.config.cluster.dns_endpoint is True
    c = plan.by_type(CLUSTER)[0].inputs
    assert c["controlPlaneEndpointsConfig"]["dnsEndpointConfig"] == {"allowExternalTraffic": True}
    assert plan.outputs["cluster_dns_endpoint"] == UNKNOWN
    doc = plan.to_dict()
    assert "outputs.cluster_dns_endpoint" in doc["unknown"]
    shown = dict(row for t in output_tables(plan) for row in t.rows)
    assert shown["cluster_dns_endpoint"] == "(known after up)"


def test_dns_endpoint_stack_key_reaches_the_cluster() -> None:
    raw = raw_config(raytpu_cluster={"name": "raytpu-test", "deletionProtection": False,
                                     "dnsEndpoint": True})
    plan = run_program("test", raw)
    c = plan.get(CLUSTER, "raytpu-test").inputs
    assert c["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True


# -- Checkpoint lifecycle ----------------------------------------------------------------


def _expires_live_objects(rule: dict[str, Any]) -> bool:
    """A Delete rule that can match a live object: anything not limited to noncurrent
    versions (withState ARCHIVED, or isLive false)."""
    cond = rule["condition"]
    return rule["action"]["type"] == "Delete" and not (
        cond.get("withState") == "ARCHIVED" or cond.get("isLive") is False
    )


@pytest.mark.parametrize("stack", STACKS)
def test_lifecycle_never_deletes_a_live_checkpoint(
    stack: str, stack_plans: dict[str, PlanResult]
) -> None:
    plan = stack_plans[stack]
    b = plan.by_type(BUCKET)[0].inputs
    assert b["versioning"] == {"enabled": True}
    rules = b["lifecycleRules"]
    assert rules and not [r for r in rules if _expires_live_objects(r)], rules
    s = plan.config.storage
    assert rules == [
        {"action": {"type": "Delete"},
         "condition": {"daysSinceNoncurrentTime": s.retention_days, "withState": "ARCHIVED"}},
        {"action": {"type": "Delete"},
         "condition": {"numNewerVersions": s.noncurrent_versions + 1, "withState": "ARCHIVED"}},
    ]


def test_noncurrent_versions_stack_key() -> None:
    raw = raw_config(raytpu_storage={"retentionDays": 3, "noncurrentVersions": 2})
    rules = run_program("test", raw).by_type(BUCKET)[0].inputs["lifecycleRules"]
    assert {"action": {"type": "Delete"},
            "condition": {"numNewerVersions": 3, "withState": "ARCHIVED"}} in rules
    assert {"action": {"type": "Delete"},
            "condition": {"daysSinceNoncurrentTime": 3, "withState": "ARCHIVED"}} in rules


def test_unversioned_bucket_gets_no_expiry_at_all() -> None:
    def program() -> None:
        CheckpointStorage("ckpt", CheckpointStorageArgs(
            project=PROJECT, bucket_name="acme-ckpt", location="us-west4", namespace="ray",
            ksa_name="ray-workload", gsa_account_id="raytpu-ckpt", versioning=False))

    b = run_alone(program).get(BUCKET, "ckpt-bucket").inputs
    assert b["versioning"] == {"enabled": False} and "lifecycleRules" not in b



def test_project_services_alone_and_bad_api_names() -> None:
    from infra_support import refused_alone
    from raytpu.components import ProjectServices, ProjectServicesArgs

    plan = run_alone(lambda: ProjectServices("apis", ProjectServicesArgs(
        project=PROJECT, services={"container.googleapis.com": "GKE"})))
    (svc,) = plan.by_type(SERVICE)
    assert svc.name == "apis-container" and is_named(svc.parent, "apis")
    assert svc.inputs == {"project": PROJECT, "service": "container.googleapis.com",
                          "disableOnDestroy": False}
    errors = refused_alone(
        lambda: ProjectServices("a", ProjectServicesArgs(project=PROJECT,
                                                         services={"container": "x"})),
        lambda: ProjectServices("b", {"project": PROJECT}),  # type: ignore[arg-type]
    )
    assert "'container' is not a Google API name" in str(errors[0])
