"""``raytpu submit --team``: a RayJob Kueue can admit, in the team's namespace, for its queue,
created through the official kubernetes client (faked at the HTTP boundary) or printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kueue_support import REPO
from raytpu.cli.app import app
from raytpu.config.node_fit import parse_quantity
from raytpu.operations.team_job import (
    ApplyError,
    TeamJob,
    apply_team_job,
    job_name,
    max_worker_groups,
    prepare_team_job,
)
from raytpu.plan.engine import run_program
from raytpu.plan.objects import objects
from typer.testing import CliRunner

sys.path.insert(0, str(REPO / "tests" / "ray"))  # the KubeRay CRD and Pod validators
from pod_security import restricted_problems
from ray_support import crd_problems, pod_templates, validate_pod
from raytpu.config.teams import DEFAULT_JOB_DEADLINE_SECONDS

CONFIG: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "raytpu:zone": "us-west4-a",
    "raytpu:slices": [
        {"name": "pod16", "tpu": "v5litepod-16", "count": 2,
         "autoscaling": {"min": 0, "max": 4}},
        {"name": "single", "tpu": "v5litepod-4", "autoscaling": {"min": 0, "max": 3}},
    ],
    "raytpu:ray": {"imageTag": "0.1.0"},
    # vision's members are a Google Group: Google Groups for RBAC.
    "raytpu:cluster": {"securityGroup": "gke-security-groups@example.com"},
    "raytpu:teams": [
        {"name": "vision", "members": ["group:vision@example.com"], "quota": {"pod16": 1},
         "borrowing": {"pod16": 1}, "priority": "high"},
        {"name": "speech", "members": ["user:ana@example.com"],
         "quota": {"single": 2, "pod16": 0}, "bucketAccess": "bucket"},
    ],
}


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stacks")
    (folder / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": CONFIG}))
    return folder


# What `pulumi up` pushed: the stack output `image` (faked where a test submits).
IMAGE = ("us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu:0.1.0@sha256:"
         "4f2a81c0e5b7d9a3c6f1e8b2d4a7c9e0f3b5d8a1c4e7f0b2d5a8c1e4f7a0b3d6")


def _job(stacks: Path, team: str = "vision", **kw: Any) -> TeamJob:
    from raytpu.cli.workloads import TRAINER_FLAGS  # the CLI's defaults

    trainer = {p.name: p.default for p in TRAINER_FLAGS} | {"log_every": 10}
    args: dict[str, Any] = {"slice_group": None, "slices": None, "run_name": "Run 7",
                            "max_failures": 3, "trainer": trainer, "image": IMAGE} | kw
    return prepare_team_job(stack="t", stacks_dir=stacks, team=team, **args)


def _requests(template: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in template["spec"]["containers"]:
        for k, v in c.get("resources", {}).get("requests", {}).items():
            out[k] = out.get(k, 0) + float(parse_quantity(v))
    return out


def test_the_rayjob_is_queued_suspended_and_valid(stacks: Path) -> None:
    job = _job(stacks)
    m = job.manifest
    assert (job.namespace, job.name) == ("vision", "run-7")
    assert m["metadata"]["namespace"] == "vision"
    assert m["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert m["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    spec = m["spec"]
    assert spec["suspend"] is True and spec["shutdownAfterJobFinishes"] is True
    assert "clusterSelector" not in spec  # Kueue refuses an existing cluster
    assert "gs://acme-ml-t-raytpu/teams/vision/runs" in spec["entrypoint"]
    assert crd_problems(m) == []  # KubeRay 1.7.0 RayJob CRD, strict
    for where, template in pod_templates(m):
        assert validate_pod(where, template) == []
        # The team namespace enforces the restricted Pod Security Standard.
        assert restricted_problems(template["spec"]) == [], where
        # Every Ray pod and the submitter run the stack's image by digest.
        assert [c["image"] for c in template["spec"]["containers"]] == [IMAGE], where
    # A stuck job gives its quota back: KubeRay fails it a day after admission by default.
    assert spec["activeDeadlineSeconds"] == DEFAULT_JOB_DEADLINE_SECONDS == 86400


def test_kueue_admits_it_as_one_gang_within_the_team_quota(stacks: Path) -> None:
    """What Kueue v0.19 checks: webhook rules, PodSet count, a flavor per PodSet, quota."""
    job = _job(stacks, slices=2)  # the team's quota (1) + borrowing (1) on pod16
    spec = job.manifest["spec"]
    cluster = spec["rayClusterSpec"]
    assert not cluster.get("enableInTreeAutoscaling")  # refused without elastic workloads
    workers = cluster["workerGroupSpecs"]
    assert [w["groupName"] for w in workers] == ["pod16"]
    assert workers[0]["replicas"] == workers[0]["minReplicas"] == workers[0]["maxReplicas"] == 2
    podsets = 1 + len(workers) + (spec["submissionMode"] == "K8sJobMode")
    assert podsets <= 18

    plan = run_program("t", CONFIG)
    (cq,) = [o for o in objects(plan) if o["kind"] == "ClusterQueue"
             and o["metadata"]["name"] == "vision"]
    flavors = {o["metadata"]["name"]: o["spec"] for o in objects(plan)
               if o["kind"] == "ResourceFlavor"}
    limits: dict[str, float] = {}
    for group in cq["spec"]["resourceGroups"]:
        for f in group["flavors"]:
            for r in f["resources"]:
                node_labels = flavors[f["name"]].get("nodeLabels", {})
                worker_selector = workers[0]["template"]["spec"]["nodeSelector"]
                if r["name"] == "google.com/tpu":
                    assert node_labels == worker_selector  # the flavor Kueue assigns
                limits[r["name"]] = limits.get(r["name"], 0) + float(
                    parse_quantity(r["nominalQuota"]) + parse_quantity(r["borrowingLimit"]))
    need: dict[str, float] = {}
    pods = [(cluster["headGroupSpec"]["template"], 1), (spec["submitterPodTemplate"], 1)]
    pods += [(w["template"], w["replicas"] * w["numOfHosts"]) for w in workers]
    for template, count in pods:
        for k, v in _requests(template).items():
            need[k] = need.get(k, 0) + v * count
    assert need["google.com/tpu"] == 32
    for resource, amount in need.items():
        assert amount <= limits[resource], (resource, amount, limits[resource])


def test_a_job_beyond_quota_and_borrowing_is_refused(stacks: Path) -> None:
    from raytpu.spec.train_options import BadFlags

    with pytest.raises(BadFlags, match=r"--slices: 3 slices of 'single' can never be admitted "
                                       r"for team 'speech': its quota 2 \+ borrowing 0 = 2"):
        _job(stacks, team="speech", slice_group="single", slices=3)


def test_a_team_bucket_holds_its_checkpoints(stacks: Path) -> None:
    job = _job(stacks, team="speech")
    assert job.manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] == "single"
    assert "--storage-path gs://acme-ml-t-raytpu-speech/runs" in job.manifest["spec"][
        "entrypoint"]


@pytest.mark.parametrize(("args", "expected"), [
    (["--team", "nope"], "--team: 'nope' is not a team of stack 't'; valid: vision, speech"),
    (["--team", "vision", "--slice-group", "single"],
     "--slice-group: team 'vision' has no quota on 'single'; its slice groups: pod16"),
    (["--team", "vision", "--run-name", "--"], "--run-name: '--' does not give a RayJob name"),
])
def test_bad_team_flags_exit_2(stacks: Path, args: list[str], expected: str) -> None:
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--dry-run", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output


def test_dry_run_prints_the_rayjob(stacks: Path) -> None:
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--team", "vision", "--dry-run", "--run-name", "r1",
                                      "--image", IMAGE])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{"):])
    assert printed == _job(stacks, run_name="r1").manifest


def test_dry_run_reads_no_stack_output_and_never_names_a_tag(
        stacks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import raytpu.operations.stack_outputs

    def contacted(*a: Any, **kw: Any) -> str:
        raise AssertionError("a dry run read the stack's outputs")

    monkeypatch.setattr(raytpu.operations.stack_outputs, "stack_output", contacted)
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--team", "vision", "--dry-run"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{"):])
    images = {c["image"] for _, t in pod_templates(printed) for c in t["spec"]["containers"]}
    (image,) = images
    assert image.startswith("us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu@sha256:<digest of "
                            "stack output 'image' of stack t"), image


def test_submit_runs_the_digest_the_stack_pushed(
        stacks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import raytpu.operations.stack_outputs
    import raytpu.operations.status

    asked: list[tuple[str, str]] = []

    def output(stack: str, key: str, **_: Any) -> str:
        asked.append((stack, key))
        return IMAGE

    api_client, pool = _client(201)
    monkeypatch.setattr(raytpu.operations.status, "connect", lambda *a: (api_client, "test"))
    monkeypatch.setattr(raytpu.operations.stack_outputs, "stack_output", output)
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--team", "vision", "--run-name", "Run 7"])
    assert result.exit_code == 0, result.output
    assert asked == [("t", "image")]
    created = pool.calls[0][2]
    assert {c["image"] for _, t in pod_templates(created) for c in t["spec"]["containers"]} == {
        IMAGE}


def test_without_a_digest_nothing_is_created(
        stacks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import raytpu.operations.stack_outputs
    import raytpu.operations.status

    monkeypatch.setattr(raytpu.operations.stack_outputs, "stack_output", lambda *a, **k: None)
    monkeypatch.setattr(raytpu.operations.status, "connect", lambda *a: pytest.fail("contacted"))
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--team", "vision"])
    assert result.exit_code == 1
    assert "cannot read the digest of the image of stack 't'" in result.output


def test_a_tag_is_refused_as_the_image(stacks: Path) -> None:
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--team", "vision", "--dry-run", "--image", "r/ray:1.0"])
    assert result.exit_code == 2
    assert "--image: 'r/ray:1.0' is not pinned by digest" in result.output


def test_the_deadline_is_the_teams_key(tmp_path: Path) -> None:
    teams = [dict(CONFIG["raytpu:teams"][0], jobDeadlineSeconds=7200),
             CONFIG["raytpu:teams"][1]]
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump(
        {"config": {**CONFIG, "raytpu:teams": teams}}))
    assert _job(tmp_path).manifest["spec"]["activeDeadlineSeconds"] == 7200
    assert _job(tmp_path, team="speech").manifest["spec"]["activeDeadlineSeconds"] == 86400
    teams[0]["jobDeadlineSeconds"] = 0
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump(
        {"config": {**CONFIG, "raytpu:teams": teams}}))
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(tmp_path),
                                      "--team", "vision", "--dry-run"])
    assert result.exit_code == 2
    assert "raytpu:teams[0].jobDeadlineSeconds" in result.output


def test_team_and_stack_jobs_come_from_one_builder(stacks: Path) -> None:
    """A raytpu:jobs RayJob and a team RayJob of the same group: the same pod templates
    (security contexts, volumes, resources, selectors), only where and as whom differ."""
    from raytpu.config.jobs import JobConfig
    from raytpu.config.validate import parse_stack_config
    from raytpu.program.training_job import training_rayjob

    cfg = parse_stack_config("t", CONFIG)
    stack_job = training_rayjob(cfg, JobConfig(name="run-7", slice_group="pod16", slices=1),
                                image=IMAGE).manifest()
    team_job = _job(stacks).manifest
    assert crd_problems(stack_job) == crd_problems(team_job) == []
    ours, theirs = dict(pod_templates(stack_job)), dict(pod_templates(team_job))
    assert ours.keys() == theirs.keys()
    for where, template in ours.items():
        a, b = template["spec"], theirs[where]["spec"]
        assert a["securityContext"] == b["securityContext"], where
        for ca, cb in zip(a["containers"], b["containers"], strict=True):
            assert ca["securityContext"] == cb["securityContext"], where
            assert ca["securityContext"]["readOnlyRootFilesystem"] is True, where
            assert (ca["image"], ca["resources"]) == (cb["image"], cb["resources"]), where
        assert a["volumes"] == b["volumes"] and a.get("nodeSelector") == b.get("nodeSelector")
        assert (a["serviceAccountName"], b["serviceAccountName"]) == ("ray-workload", "ray-team")


def test_no_teams_no_team_jobs(tmp_path: Path) -> None:
    config = {k: v for k, v in CONFIG.items() if k != "raytpu:teams"}
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": config}))
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(tmp_path),
                                      "--team", "vision", "--dry-run"])
    assert result.exit_code == 2
    assert "--team: stack 't' declares no raytpu:teams" in result.output


# -- the kubernetes client, faked at its HTTP boundary ----------------------------------------


class _Response:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.reason = status, {201: "Created", 409: "Conflict"}.get(status, "Err")
        self.data = json.dumps(body).encode()
        self.headers: dict[str, str] = {"content-type": "application/json"}


class _Pool:
    """Stands in for urllib3's pool manager: records each request, answers ``status``."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.calls: list[tuple[str, str, Any]] = []

    def request(self, method: str, url: str, body: Any = None, **_: Any) -> _Response:
        self.calls.append((method, url, json.loads(body) if body else None))
        if self.status == 201:
            return _Response(201, self.calls[-1][2])
        return _Response(self.status, {"kind": "Status", "message": "rayjobs \"run-7\" already "
                                       "exists", "reason": "AlreadyExists"})


def _client(status: int) -> tuple[Any, _Pool]:
    from kubernetes import client

    api_client = client.ApiClient(client.Configuration(host="https://k8s.example"))
    pool = _Pool(status)
    api_client.rest_client.pool_manager = pool
    return api_client, pool


def test_apply_creates_the_rayjob_in_the_team_namespace(stacks: Path) -> None:
    job = _job(stacks)
    api_client, pool = _client(201)
    assert apply_team_job(job, api_client) == "vision/run-7"
    ((method, url, body),) = pool.calls
    assert method == "POST"
    assert url == "https://k8s.example/apis/ray.io/v1/namespaces/vision/rayjobs"
    assert body == job.manifest


def test_apply_reports_an_existing_job_clearly(stacks: Path) -> None:
    api_client, _ = _client(409)
    with pytest.raises(ApplyError, match="RayJob vision/run-7 exists already"):
        apply_team_job(_job(stacks), api_client)


def test_submit_team_applies_through_the_stack_credentials(
        stacks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import raytpu.operations.status

    api_client, pool = _client(201)
    monkeypatch.setattr(raytpu.operations.status, "connect", lambda *a: (api_client, "test"))
    result = CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                      "--team", "vision", "--run-name", "Run 7",
                                      "--image", IMAGE])
    assert result.exit_code == 0, result.output
    assert "vision/run-7" in result.stdout
    assert pool.calls[0][2]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"


def test_worker_group_limit_is_kueues_podset_limit() -> None:
    # Kueue v0.19.2: Workload podSets maxItems 18 = head + groups (+ K8sJobMode submitter).
    assert max_worker_groups("K8sJobMode") == 16
    assert max_worker_groups("SidecarMode") == 17
    assert job_name("A" * 60) == "a" * 47


def test_the_digest_is_read_from_the_stack_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from raytpu.operations.stack_outputs import stack_output

    fake = tmp_path / "pulumi"
    # Answers only the exact call raytpu makes; anything else fails.
    fake.write_text("#!/bin/sh\n"
                    '[ "$*" = "stack output image --stack t" ] || exit 3\n'
                    f"echo {IMAGE}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert stack_output("t", "image") == IMAGE
    assert stack_output("t", "image", secret=True) is None  # exit 3: not the call it knows


# Reads the reference data beside the checkout (../shared/ref): deselected by name where it is
# absent (-m "not ref", .github/workflows/preview.yml; docs/tests-in-ci.md).
pytestmark = pytest.mark.ref
