"""Team isolation in the whole program: namespaces, Workload Identity limited to the team's
checkpoints, RBAC for members, NetworkPolicy between teams; all objects schema-valid."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from infra_support import PROJECT, PROJECT_IAM, REPO, raw_config
from raytpu.components.storage import prefix_condition
from raytpu.components.team_access import TEAM_ROLE_RULES
from raytpu.config.stack import ConfigError
from raytpu.plan.engine import PlanResult, run_program
from raytpu.plan.objects import objects
from raytpu.spec.storage import CheckpointStorageArgs
from raytpu.spec.team_access import TeamAccessArgs, rbac_subject

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ray"))
from netpol import Pod, allowed

BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
WI_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
GSA = "gcp:serviceaccount/account:Account"
GROUP = "gke-security-groups@example.com"
TEAMS = [
    {"name": "vision", "members": ["group:ml-vision@example.com", "user:ann@example.com"],
     "quota": {"v5e-4": 1}},
    {"name": "speech", "members": ["user:bob@example.com",
                                   "serviceAccount:ci@acme-ml.iam.gserviceaccount.com"],
     "quota": {"v5e-4": 1}, "bucketAccess": "bucket"},
]


def team_raw(teams: list[dict[str, Any]] = TEAMS, **cluster: Any) -> dict[str, Any]:
    return raw_config(
        raytpu_cluster={"name": "raytpu-test", "deletionProtection": False,
                        "dataplaneV2": True, "securityGroup": GROUP, **cluster},
        raytpu_slices=[{"name": "v5e-4", "tpu": "v5litepod-4",  # 1 shared + 1 per team
                                       "autoscaling": {"min": 0, "max": 3}}],
        raytpu_teams=teams)


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return run_program("test", team_raw())


def in_namespace(plan: PlanResult, ns: str) -> list[dict[str, Any]]:
    return [o for o in objects(plan)
            if o["metadata"].get("namespace") == ns or (o["kind"] == "Namespace"
                                                       and o["metadata"]["name"] == ns)]


# -- a model of the IAM grants: which principal may touch which object --------------------


def _condition_allows(condition: dict[str, str] | None, bucket: str, obj: str) -> bool:
    """The only condition shape the stack writes: resource.name.startsWith(...) || list."""
    if condition is None:
        return True
    (resource_prefix,) = re.findall(r'resource\.name\.startsWith\("([^"]*)"\)',
                                    condition["expression"])
    return f"projects/_/buckets/{bucket}/objects/{obj}".startswith(resource_prefix)


def _list_allows(condition: dict[str, str] | None, prefix: str) -> bool:
    if condition is None:
        return True
    (list_prefix,) = re.findall(r'objectListPrefix", ""\)\.startsWith\("([^"]*)"\)',
                                condition["expression"])
    return prefix.startswith(list_prefix)


def gsa_member(plan: PlanResult, name: str) -> str:
    account = plan.get(GSA, f"{name}-gsa").inputs["accountId"]
    return f"serviceAccount:{account}@{PROJECT}.iam.gserviceaccount.com"


def may_touch(plan: PlanResult, member: str, bucket: str, obj: str) -> bool:
    return any(r.inputs["member"] == member and r.inputs["bucket"] == bucket
               and _condition_allows(r.inputs.get("condition"), bucket, obj)
               for r in plan.by_type(BUCKET_IAM))


def may_list(plan: PlanResult, member: str, bucket: str, prefix: str) -> bool:
    return any(r.inputs["member"] == member and r.inputs["bucket"] == bucket
               and _list_allows(r.inputs.get("condition"), prefix)
               for r in plan.by_type(BUCKET_IAM))


# -- tests ---------------------------------------------------------------------------------


def test_every_team_object_is_a_valid_kubernetes_object(plan: PlanResult) -> None:
    for team in ("vision", "speech"):
        objs = in_namespace(plan, team)
        kinds = sorted(o["kind"] for o in objs if o["kind"] != "LocalQueue")
        assert kinds == ["Namespace", *["NetworkPolicy"] * 4, "PodMonitoring", "Role",
                         "RoleBinding", "ServiceAccount"], kinds
        for obj in objs:
            # Kueue's and GMP's CRDs: tests/kueue, tests/ray/test_monitoring_crds.py
            if obj["kind"] not in ("LocalQueue", "PodMonitoring"):
                kubernetes_validate.validate(obj, "1.33", strict=True)


def test_team_namespace_enforces_the_ray_pods_pod_security_level(plan: PlanResult) -> None:
    (ns,) = [o for o in in_namespace(plan, "vision") if o["kind"] == "Namespace"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert ns["metadata"]["labels"]["raytpu.io/team"] == "vision"


def test_members_get_the_team_role_in_their_namespace_only(plan: PlanResult) -> None:
    objs = objects(plan)
    bindings = [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
                and any(s["kind"] in ("User", "Group") for s in o.get("subjects", []))]
    assert {(b["kind"], b["metadata"]["namespace"]) for b in bindings} == {
        ("RoleBinding", "vision"), ("RoleBinding", "speech")}
    vision = next(b for b in bindings if b["metadata"]["namespace"] == "vision")
    assert vision["subjects"] == [
        {"kind": "Group", "name": "ml-vision@example.com", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "User", "name": "ann@example.com", "apiGroup": "rbac.authorization.k8s.io"}]
    speech = next(b for b in bindings if b["metadata"]["namespace"] == "speech")
    assert speech["subjects"][1] == {"kind": "User", "name": "ci@acme-ml.iam.gserviceaccount.com",
                                     "apiGroup": "rbac.authorization.k8s.io"}
    (role,) = [o for o in in_namespace(plan, "vision") if o["kind"] == "Role"]
    assert vision["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                 "name": role["metadata"]["name"]}
    assert role["rules"] == [dict(r) for r in TEAM_ROLE_RULES]


def test_the_role_is_what_the_issue_asks_and_no_more() -> None:
    grants = {(g, res, v) for r in TEAM_ROLE_RULES for g in r["apiGroups"]
              for res in r["resources"] for v in r["verbs"]}
    for kind in ("rayjobs", "rayclusters"):
        assert {("ray.io", kind, v) for v in ("create", "get", "list", "delete")} <= grants
        assert ("ray.io", kind, "update") not in grants  # spec.suspend is Kueue's
    assert {("", "pods", "get"), ("", "pods/log", "get")} <= grants
    assert not {g for g in grants if g[1] in ("secrets", "pods/exec", "pods/portforward")
                or g[2] == "*" or (g[1] == "pods" and g[2] == "create")}


def test_members_may_fetch_credentials_and_nothing_else_project_wide(plan: PlanResult) -> None:
    grants = sorted((r.inputs["member"], r.inputs["role"]) for r in plan.by_type(PROJECT_IAM)
                    if "@example.com" in r.inputs["member"] or "ci@" in r.inputs["member"])
    members = sorted({m for t in TEAMS for m in t["members"]})
    assert grants == [(m, "roles/container.clusterViewer") for m in members]


def test_team_identity_is_bound_to_its_own_ksa_only(plan: PlanResult) -> None:
    for team in ("vision", "speech"):
        (wi,) = [r for r in plan.by_type(WI_IAM) if r.name == f"team-{team}-wi"]
        assert wi.inputs["member"] == f"serviceAccount:{PROJECT}.svc.id.goog[{team}/ray-team]"
        # The cluster makes the identity pool the member lives in.
        assert any(d.endswith("Cluster::raytpu-test") for d in wi.options["dependsOn"])
        (ksa,) = [o for o in in_namespace(plan, team) if o["kind"] == "ServiceAccount"]
        assert ksa["metadata"]["name"] == "ray-team"


def test_team_a_identity_has_no_grant_on_team_b_data(plan: PlanResult) -> None:
    bucket = plan.config.bucket_name
    speech_bucket = f"{bucket}-speech"
    vision, speech = gsa_member(plan, "team-vision"), gsa_member(plan, "team-speech")
    # vision: its prefix of the stack's bucket, nothing else.
    assert may_touch(plan, vision, bucket, "teams/vision/runs/exp/checkpoint_0/model.pt")
    assert may_list(plan, vision, bucket, "teams/vision/runs/")
    for obj in ("teams/speech/runs/x", "teams/visionary/x", "runs/stack-run/x", "teams/x"):
        assert not may_touch(plan, vision, bucket, obj), obj
    for prefix in ("", "teams/", "teams/speech/", "runs/"):
        assert not may_list(plan, vision, bucket, prefix), prefix
    assert not may_touch(plan, vision, speech_bucket, "runs/x")
    # speech: its own bucket, and nothing in the stack's bucket (vision's prefix included).
    assert may_touch(plan, speech, speech_bucket, "runs/x")
    assert not may_touch(plan, speech, bucket, "teams/vision/runs/x")
    assert not may_list(plan, speech, bucket, "teams/vision/")
    # The grants are object-level only: no bucket admin role for a team.
    assert {r.inputs["role"] for r in plan.by_type(BUCKET_IAM)} == {"roles/storage.objectUser"}


def test_team_bucket_is_private_and_created_only_for_bucket_access(plan: PlanResult) -> None:
    buckets = {r.inputs["name"]: r.inputs for r in plan.by_type("gcp:storage/bucket:Bucket")}
    assert set(buckets) == {plan.config.bucket_name, f"{plan.config.bucket_name}-speech"}
    own = buckets[f"{plan.config.bucket_name}-speech"]
    assert own["uniformBucketLevelAccess"] is True
    assert own["publicAccessPrevention"] == "enforced"


def test_team_ray_pods_cannot_reach_another_team(plan: PlanResult) -> None:
    pols = [o for o in objects(plan) if o["kind"] == "NetworkPolicy"]

    def ray(ns: str, cluster: str, node_type: str) -> Pod:
        return Pod(ns, {"ray.io/cluster": cluster, "ray.io/node-type": node_type,
                        "ray.io/is-ray-node": "yes"})

    head_a, worker_a = ray("vision", "job1-x", "head"), ray("vision", "job1-x", "worker")
    assert allowed(pols, worker_a, head_a, 6379)
    assert allowed(pols, Pod("vision", {"ray.io/originated-from-crd": "RayJob"}), head_a, 8265)
    for intruder in (ray("speech", "job2-y", "worker"), ray("ray", "raytpu", "head"),
                     Pod("speech", {"ray.io/originated-from-crd": "RayJob"})):
        for port in (6379, 8265, 10001, 10002):
            assert not allowed(pols, intruder, head_a, port), (intruder, port)
            assert not allowed(pols, intruder, worker_a, port), (intruder, port)


def test_kueue_local_queues_wait_for_the_team_namespaces(plan: PlanResult) -> None:
    for lq in plan.by_type("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"):
        ns = lq.inputs["metadata"]["namespace"]
        assert any(d.endswith(f"Namespace::team-{ns}-ns") for d in lq.options["dependsOn"])


def test_teams_on_a_cluster_that_cannot_enforce_isolation_are_refused() -> None:
    with pytest.raises(ConfigError) as info:
        run_program("test", team_raw(dataplaneV2=False))
    assert any(p.startswith("raytpu:cluster.dataplaneV2: false, but raytpu:teams")
               for p in info.value.problems), info.value.problems


def test_group_members_without_google_groups_for_rbac_warn(plan: PlanResult) -> None:
    assert not [w for w in plan.warnings if "Google Group" in w]
    raw = team_raw()
    del raw["raytpu:cluster"]["securityGroup"]
    warnings = [w for w in run_program("test", raw).warnings if "Google Group" in w]
    # Only vision lists a group; user: and serviceAccount: members need no security group.
    assert [w.split(":", 2)[:2] for w in warnings] == [["raytpu", "teams[0].members[0]"]]


def test_component_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match=r"members: 'domain:example\.com'"):
        rbac_subject("domain:example.com")
    with pytest.raises(ValueError, match=r"TeamAccessArgs\.namespace: 'Team_A'"):
        TeamAccessArgs(team="a", namespace="Team_A", members=["user:a@example.com"],
                       service_account="ray-team", gsa_email="x")
    with pytest.raises(ValueError, match=r"object_prefix: 'teams/a\"\)' must be"):
        CheckpointStorageArgs(project=PROJECT, bucket_name="b-bucket", location="us",
                              namespace="a", ksa_name="k", gsa_account_id="team-a-123",
                              object_prefix='teams/a")')
    cond = prefix_condition("b", "teams/a/")
    assert _condition_allows(cond, "b", "teams/a/x") and not _condition_allows(cond, "b",
                                                                               "teams/ab/x")


def test_no_service_account_mounts_a_token_by_default() -> None:
    # checkov CKV_K8S_38: a token only where a pod calls the API. The KSAs turn automount off;
    # the one pod that needs a token (the autoscaling head) asks for it in its own spec.
    from raytpu.plan.engine import run_plan

    for stack in ("dev", "staging", "prod"):
        plan = run_plan(stack)
        accounts = [o for o in objects(plan) if o["kind"] == "ServiceAccount"
                    and o["metadata"]["name"] in ("ray-workload", "ray-team")]
        assert accounts, stack
        for sa in accounts:
            assert sa.get("automountServiceAccountToken") is False, (stack, sa["metadata"])
        (rc,) = [o for o in objects(plan) if o["kind"] == "RayCluster"]
        head = rc["spec"]["headGroupSpec"]["template"]["spec"]
        assert head["automountServiceAccountToken"] is bool(
            rc["spec"].get("enableInTreeAutoscaling")), stack


def test_the_teams_page_says_members_cannot_open_a_job_dashboard() -> None:
    # L-2: the Role grants neither pods/portforward nor a Secret read (asserted above), so
    # the docs must not leave a member expecting the dashboard.
    page = (REPO / "docs" / "teams.md").read_text()
    assert "a member cannot open a job's Ray dashboard" in " ".join(page.split())
