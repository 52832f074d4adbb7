"""``raytpu submit ... -- CMD`` and ``raytpu run --local ... -- CMD`` before anything runs: each
bad input exits 2 with a line naming the flag and nothing is contacted; the working
directory is packaged as Ray packages it (never ``.git`` or a virtual environment, within
Ray's size limit); the Job Submission API receives the command's entrypoint and runtime
environment; a team's RayJob gets the working directory from the team's bucket."""

from __future__ import annotations

import json
import shlex
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from raytpu.cli.app import app
from raytpu.spec.training import from_argv
from typer.testing import CliRunner

pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[2]
IMAGE = "r.example/raytpu/raytpu@sha256:" + "ab" * 32
CONFIG: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "raytpu:zone": "us-central2-b",
    "raytpu:slices": [{"name": "v4", "tpu": "v4-16", "count": 1,
                       "autoscaling": {"min": 0, "max": 2}}],
    "raytpu:ray": {"imageTag": "0.1.0"},
    "raytpu:teams": [{"name": "vision", "members": ["user:a@example.com"],
                      "quota": {"v4": 1}, "jobDeadlineSeconds": 3600}],
}


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    d = tmp_path / "stacks"
    d.mkdir()
    (d / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": CONFIG}))
    return d


@pytest.fixture
def work(tmp_path: Path) -> Path:
    d = tmp_path / "code"
    (d / "pkg").mkdir(parents=True)
    (d / "train.py").write_text("print('hi')\n")
    (d / "pkg" / "model.py").write_text("X = 1\n")
    (d / ".git" / "objects").mkdir(parents=True)
    (d / ".git" / "objects" / "blob").write_bytes(b"g" * 1000)
    (d / "env" / "lib").mkdir(parents=True)  # a virtual environment under any name
    (d / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (d / "env" / "lib" / "big.so").write_bytes(b"v" * 1000)
    (d / "data.bin").write_bytes(b"d" * 1000)
    (d / ".rayignore").write_text("data.bin\n")
    return d


@pytest.fixture(autouse=True)
def nothing_contacted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every way out of this machine records the call (a test that expects none checks)."""
    import ray.job_submission
    import raytpu.operations.own_code
    import raytpu.operations.stack_outputs
    import raytpu.operations.status

    calls: list[Any] = []

    class Client:
        def __init__(self, address: str) -> None:
            calls.append(("client", address))

        def submit_job(self, **kw: Any) -> str:
            calls.append(("submit_job", kw))
            return "raysubmit_1"

    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", Client)
    monkeypatch.setattr(raytpu.operations.stack_outputs, "stack_output",
                        lambda *a, **k: calls.append(("stack_output", a)) or IMAGE)
    monkeypatch.setattr(raytpu.operations.status, "connect",
                        lambda *a: calls.append(("connect", a)) or (None, "test"))
    monkeypatch.setattr(raytpu.operations.own_code, "upload",
                        lambda cmd, uri: calls.append(("upload", uri)))
    monkeypatch.setenv("RAY_AUTH_TOKEN", "t0k3n")
    return calls


def _submit(stacks: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["submit", "--stack", "t", "--stacks-dir", str(stacks),
                                    *args])


def test_dry_run_is_the_submission_and_contacts_nothing(
        stacks: Path, work: Path, nothing_contacted: list[Any]) -> None:
    result = _submit(stacks, "--working-dir", str(work), "--env", "WANDB_MODE=off",
                     "--dry-run", "--", "python", "train.py", "--lr", "0.1")
    assert result.exit_code == 0, result.output
    sub = json.loads(result.stdout)
    argv = shlex.split(sub["entrypoint"])
    cfg, opts = from_argv(argv[3:])
    assert (cfg.tpu, cfg.topology, cfg.machine_type, cfg.slices) == (
        "v4-16", "2x2x2", "ct4p-hightpu-4t", 1)
    assert opts.command == ("python", "train.py", "--lr", "0.1")
    assert opts.storage_path == "gs://acme-ml-t-raytpu/runs" and opts.slice_group == "v4"
    env = sub["runtime_env"]
    assert env["env_vars"]["WANDB_MODE"] == "off" and env["env_vars"]["PJRT_DEVICE"] == "TPU"
    assert (sub["slices"], sub["hosts"], sub["topology"], sub["queue"]) == (1, 2, "2x2x2", None)
    assert nothing_contacted == []


def test_the_package_is_what_ray_uploads_without_git_or_venvs(work: Path) -> None:
    from raytpu.operations.own_code import package

    pkg = package(work)
    with zipfile.ZipFile(pkg.zip_path) as z:
        names = sorted(n for n in z.namelist() if not n.endswith("/"))
    assert names == [".rayignore", "pkg/model.py", "train.py"]
    assert "/env/" in pkg.excludes and ".git" in pkg.excludes


def test_a_working_dir_over_rays_limit_names_size_limit_and_the_fix(work: Path) -> None:
    from raytpu.operations.own_code import package
    from raytpu.spec.train_options import BadFlags

    (work / "weights").mkdir()
    (work / "weights" / "w.bin").write_bytes(bytes(range(256)) * 400)  # barely compressible
    with pytest.raises(BadFlags) as e:
        package(work, limit=50_000)
    (problem,) = e.value.problems
    assert f"--working-dir: {str(work)!r} is 0.1 MiB zipped, over Ray's 0.0 MiB limit" in problem
    assert "largest: weights/ (0.1 MiB)" in problem
    assert ".rayignore" in problem and ".git and virtual environments are never" in problem


def test_rays_own_limit_is_the_one_checked(
        stacks: Path, work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ray._private.runtime_env.packaging as packaging

    monkeypatch.setattr(packaging, "GCS_STORAGE_MAX_SIZE", 100)
    result = _submit(stacks, "--working-dir", str(work), "--dry-run", "--", "python", "t.py")
    assert result.exit_code == 2
    assert "over Ray's 0.0 MiB limit" in result.output


@pytest.mark.parametrize(("args", "needle"), [
    (["--working-dir", "{work}", "--dry-run"], "--: no command after `--`"),
    (["--dry-run", "--", "python", "t.py"], "--working-dir: required with a command"),
    (["--working-dir", "{work}/nope", "--", "python", "t.py"], "nope' does not exist"),
    (["--working-dir", "{work}/train.py", "--", "python", "t.py"], "train.py' is not a folder"),
    (["--working-dir", "{work}", "--slice-group", "v5", "--", "python"],
     "--slice-group: 'v5' is not a slice of stack 't'; valid: v4"),
    (["--working-dir", "{work}", "--slices", "3", "--", "python"],
     "--slices: 3 is outside 1..1 (the shared RayCluster's maxReplicas for 'v4': its 2 "
     "pools less the teams' nominal quotas and the raytpu:jobs clusters; more runs with "
     "--team)"),
    (["--working-dir", "{work}", "--team", "speech", "--", "python"],
     "--team: 'speech' is not a team of stack 't'; valid: vision"),
    (["--working-dir", "{work}", "--team", "vision", "--slices", "2", "--", "python"],
     "--slices: 2 slices of 'v4' can never be admitted for team 'vision'"),
    (["--working-dir", "{work}", "--requirements", "{work}/req.txt", "--", "python"],
     "--requirements: '{work}/req.txt' line 2: 'torch>=>2' does not parse"),
    (["--working-dir", "{work}", "--requirements", "{work}/nope.txt", "--", "python"],
     "nope.txt' cannot be read"),
    (["--working-dir", "{work}", "--env", "A", "--", "python"], "--env: 'A' is not NAME=VALUE"),
    (["--working-dir", "{work}", "--steps", "7", "--", "python"],
     "--steps: a flag of the bundled trainer"),
])
def test_bad_input_exits_2_before_contacting_anything(
        stacks: Path, work: Path, nothing_contacted: list[Any], args: list[str],
        needle: str) -> None:
    (work / "req.txt").write_text("numpy==2.1.0\ntorch>=>2\n--index-url https://x/simple\n")
    result = _submit(stacks, *[a.format(work=work) for a in args])
    assert result.exit_code == 2, result.output
    assert needle.format(work=work) in result.output
    assert nothing_contacted == []


def test_requirements_travel_as_ray_pip(stacks: Path, work: Path) -> None:
    (work / "req.txt").write_text("# deps\nnumpy==2.1.0  # pinned\n\n--extra-index-url "
                                  "https://x/simple\nrequests[socks]>=2\n")
    result = _submit(stacks, "--working-dir", str(work), "--requirements", str(work / "req.txt"),
                     "--dry-run", "--", "python", "t.py")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runtime_env"]["pip"] == [
        "numpy==2.1.0", "--extra-index-url https://x/simple", "requests[socks]>=2"]


def test_submit_sends_the_command_through_the_job_submission_api(
        stacks: Path, work: Path, nothing_contacted: list[Any]) -> None:
    result = _submit(stacks, "--working-dir", str(work), "--address", "http://ray:8265", "--",
                     "python", "train.py")
    assert result.exit_code == 0, result.output
    assert "raysubmit_1" in result.stdout
    (_, address), (_, job) = nothing_contacted
    assert address == "http://ray:8265"
    assert job["runtime_env"]["working_dir"] == str(work.resolve())
    assert shlex.split(job["entrypoint"])[-2:] == ["python", "train.py"]
    assert job["metadata"]["command"] == "python train.py"


@pytest.mark.ref  # validates the RayJob against ../shared/ref's KubeRay CRD
def test_team_command_uploads_the_working_dir_then_queues_the_rayjob(
        stacks: Path, work: Path, nothing_contacted: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(REPO / "tests" / "ray"))
    from ray_support import crd_problems, pod_templates

    created: list[dict[str, Any]] = []
    import raytpu.operations.team_job

    monkeypatch.setattr(raytpu.operations.team_job, "apply_team_job",
                        lambda job, client: created.append(job.manifest) or "vision/r1")
    dry = _submit(stacks, "--team", "vision", "--working-dir", str(work), "--run-name", "r1",
                  "--dry-run", "--", "python", "train.py")
    assert dry.exit_code == 0, dry.output
    view = json.loads(dry.stdout)
    assert nothing_contacted == []
    uri = view["working_dir"]["uri"]
    assert uri.startswith("gs://acme-ml-t-raytpu/teams/vision/runs/r1/code/_ray_pkg_")
    assert view["queue"] == {"team": "vision", "namespace": "vision", "local_queue": "default",
                             "cluster_queue": "vision", "priority": "default"}
    result = _submit(stacks, "--team", "vision", "--working-dir", str(work), "--run-name", "r1",
                     "--", "python", "train.py")
    assert result.exit_code == 0, result.output
    assert [c[0] for c in nothing_contacted] == ["stack_output", "upload", "connect"]
    assert nothing_contacted[1] == ("upload", uri)
    (job,) = created
    assert crd_problems(job) == []
    spec = job["spec"]
    assert yaml.safe_load(spec["runtimeEnvYAML"])["working_dir"] == uri
    assert spec["suspend"] is True and spec["activeDeadlineSeconds"] == 3600
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert {c["image"] for _, t in pod_templates(job) for c in t["spec"]["containers"]} == {
        IMAGE}
    assert view["rayjob"]["spec"]["entrypoint"] == spec["entrypoint"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--working-dir", "{work}", "--", "python"], "--local: not given"),
    (["--local", "--working-dir", "{work}"], "--: no command after `--`"),
    (["--local", "--working-dir", "{work}", "--slices", "5", "--", "python"],
     "--slices: 5 is outside 1..2"),
    (["--local", "--working-dir", "{work}", "--slice-group", "x", "--", "python"],
     "--slice-group: 'x' is not a slice of stack 't'"),
    (["--local", "--working-dir", "{work}", "--max-failures", "-1", "--", "python"],
     "--max-failures: -1 must not be negative"),
])
def test_run_local_refuses_bad_input(stacks: Path, work: Path, args: list[str],
                                     needle: str) -> None:
    result = CliRunner().invoke(app, ["run", "--stack", "t", "--stacks-dir", str(stacks),
                                      *[a.format(work=work) for a in args]])
    assert result.exit_code == 2, result.output
    assert needle in result.output
