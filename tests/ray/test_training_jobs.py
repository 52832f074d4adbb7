"""``raytpu:jobs``: typed RayJobs for a slice group, valid against the KubeRay 1.7.0 RayJob CRD,
the Kubernetes pod schema, the restricted Pod Security profile and KubeRay's own RayJob rules;
the same builder renders a plain manifest (``raytpu submit --team``)."""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pod_security import restricted_problems
from ray_support import RAYJOB, SAMPLES, as_object, plan_ray, pod_templates, validate_pod
from raytpu.components.ray_resources import RayClusterSpecArgs, RayJobSpecArgs
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config
from raytpu.facts.names import SLICE_GROUP_LABEL
from raytpu.plan.engine import PlanResult
from raytpu.program.training_job import training_rayjob
from raytpu.spec.scaling import RUNTIME_ENV_VARS
from raytpu.spec.training import from_argv

Validate = Callable[[Mapping[str, Any]], list[str]]

JOBS = [
    {"name": "pretrain", "sliceGroup": "pod16", "slices": 2,
     "train": {"steps": 500, "nLayers": 4, "dModel": 256, "nHeads": 8, "data": "gs://c/t",
               "maxFailures": 5}},
    {"name": "eval", "sliceGroup": "single8", "shutdownAfterJobFinishes": True,
     "ttlSecondsAfterFinished": 300, "activeDeadlineSeconds": 3600, "backoffLimit": 2,
     "train": {"steps": 20, "runName": "eval-run", "compile": False, "lr": 1}},
]
# The jobs' clusters hold slices outside the shared RayCluster: their groups are elastic,
# with pools for both (a fixed group's are all the shared cluster's).
JOB_SLICES = [{"name": "pod16", "tpu": "v5litepod-16", "autoscaling": {"min": 0, "max": 3}},
              {"name": "single8", "tpu": "v5litepod-8", "autoscaling": {"min": 0, "max": 2}}]
RAW = {**SAMPLES["v5e-elastic"], "raytpu:slices": JOB_SLICES, "raytpu:jobs": JOBS}
# The trainer image as the stack passes it once built: by digest.
IMAGE = "us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu@sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return plan_ray(RAW, image=IMAGE)


def _jobs(plan: PlanResult) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: as_object(r.inputs) for r in plan.by_type(RAYJOB)}


def test_jobs_are_valid_rayjobs(plan: PlanResult, validate_crd: Validate) -> None:
    jobs = _jobs(plan)
    assert sorted(jobs) == ["eval", "pretrain"]
    for name, obj in jobs.items():
        assert validate_crd(obj) == [], name
        for where, template in pod_templates(obj):
            assert validate_pod(where, template) == [], (name, where)
            assert restricted_problems(template["spec"]) == [], (name, where)
    assert plan.outputs["ray_jobs"] == ["pretrain", "eval"]


def test_job_cluster_is_its_slice_group_at_the_jobs_slices(plan: PlanResult) -> None:
    cfg = plan.config
    for name, obj in _jobs(plan).items():
        job = next(j for j in cfg.jobs if j.name == name)
        group = next(s for s in cfg.slices if s.name == job.slice_group)
        spec = obj["spec"]
        (w,) = spec["rayClusterSpec"]["workerGroupSpecs"]
        n = job.slices or group.initial_slices
        assert (w["groupName"], w["replicas"], w["minReplicas"], w["maxReplicas"]) == (
            group.name, n, n, n)
        assert w["numOfHosts"] == group.shape.hosts
        assert w["labels"] == {SLICE_GROUP_LABEL: group.name}
        # No autoscaler in a job's cluster, so no idleTimeoutSeconds (KubeRay rejects it).
        assert "idleTimeoutSeconds" not in w
        assert "enableInTreeAutoscaling" not in spec["rayClusterSpec"]
        argv = shlex.split(spec["entrypoint"])
        assert argv[:3] == ["python", "-m", "raytpu.workloads.launcher"]
        train, opts = from_argv(argv[3:])
        assert train.shape() == group.shape and train.slices == n
        assert opts.slice_group == group.name
        assert opts.storage_path == cfg.checkpoint_uri
        assert yaml.safe_load(spec["runtimeEnvYAML"]) == {"env_vars": RUNTIME_ENV_VARS}
        assert spec["submissionMode"] == "K8sJobMode"
        assert spec["shutdownAfterJobFinishes"] is True
        (c,) = spec["submitterPodTemplate"]["spec"]["containers"]
        assert c["name"] == "ray-job-submitter"
        head_image = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        assert c["image"] == head_image["image"] == w["template"]["spec"]["containers"][0]["image"]


def test_train_options_reach_the_launcher(plan: PlanResult) -> None:
    jobs = _jobs(plan)
    train, opts = from_argv(shlex.split(jobs["pretrain"]["spec"]["entrypoint"])[3:])
    assert (train.steps, train.model.n_layers, train.model.d_model, train.model.n_heads,
            train.data, train.log_every) == (500, 4, 256, 8, "gs://c/t", 10)
    assert (opts.run_name, opts.max_failures) == ("pretrain", 5)
    train, opts = from_argv(shlex.split(jobs["eval"]["spec"]["entrypoint"])[3:])
    assert (train.compile, train.optim.lr, opts.run_name) == (False, 1.0, "eval-run")
    spec = jobs["eval"]["spec"]
    assert (spec["ttlSecondsAfterFinished"], spec["activeDeadlineSeconds"],
            spec["backoffLimit"]) == (300, 3600, 2)


def test_manifest_is_what_the_stack_declares(plan: PlanResult) -> None:
    """One builder, two outputs: the plain manifest equals the declared object."""
    cfg = parse_stack_config("dev", RAW)
    for i, job in enumerate(cfg.jobs):
        # plan_ray declares no system pool (the whole program passes "system").
        built = training_rayjob(cfg, job, key=f"raytpu:jobs[{i}]", system_pool=None,
                                image=IMAGE).manifest()
        assert built == _jobs(plan)[job.name]


def test_manifest_carries_extra_labels_and_namespace() -> None:
    import dataclasses

    from raytpu.components.ray_job import TpuRayJobArgs, build_rayjob
    from raytpu.program.ray_cluster_config import cluster_args

    cfg = parse_stack_config("dev", RAW)
    cluster = dataclasses.replace(cluster_args(cfg, gsa_email="", image=IMAGE), namespace="team-a",
                                  service_account="team-a-ray")
    m = build_rayjob(TpuRayJobArgs(
        name="team-run", cluster=cluster, group="pod16", slices=1, entrypoint="python x.py",
        labels={"kueue.x-k8s.io/queue-name": "team-a"}, suspend=True)).manifest()
    assert m["metadata"]["namespace"] == "team-a"
    assert m["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert m["spec"]["suspend"] is True
    for _, template in pod_templates(m):
        assert template["spec"]["serviceAccountName"] == "team-a-ray"


def test_the_builder_refuses_what_kuberay_refuses() -> None:
    from raytpu.components.ray_job import TpuRayJobArgs, build_rayjob
    from raytpu.program.ray_cluster_config import cluster_args

    cluster = cluster_args(parse_stack_config("dev", RAW), gsa_email="", image=IMAGE)
    base = {"cluster": cluster, "group": "pod16", "slices": 1, "entrypoint": "python x.py"}
    for kwargs, needle in [
        ({"name": "x" * 48}, "name: '" + "x" * 48 + "' must be a DNS label of at most 47"),
        ({"name": "r", "group": "nope"}, "group: 'nope' is not a worker group; valid: pod16"),
        ({"name": "r", "slices": 0}, "slices: 0 must be at least 1"),
        ({"name": "r", "suspend": True, "shutdown_after_job_finishes": False},
         "suspend: only with rayClusterSpec and shutdownAfterJobFinishes"),
    ]:
        with pytest.raises(ValueError, match=re.escape(needle)):
            build_rayjob(TpuRayJobArgs(**{**base, **kwargs}))


def test_the_builder_refuses_an_image_by_tag_whoever_calls() -> None:
    """The digest rule lives in the one builder: a raytpu:jobs entry, a team job and any
    later caller alike (a tag may move between the hosts' pulls)."""
    from raytpu.components.ray_job import TpuRayJobArgs, build_rayjob
    from raytpu.program.ray_cluster_config import cluster_args

    tagged = "us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu:0.1.0"
    cluster = cluster_args(parse_stack_config("dev", RAW), gsa_email="", image=tagged)
    with pytest.raises(ValueError, match=re.escape(f"image: {tagged!r} is not pinned by digest")):
        build_rayjob(TpuRayJobArgs(name="r", cluster=cluster, group="pod16", slices=1,
                                   entrypoint="python x.py"))
    cfg = parse_stack_config("dev", RAW)
    with pytest.raises(ConfigError, match=re.escape(
            f"raytpu:jobs[0]: image: {tagged!r} is not pinned by digest")):
        training_rayjob(cfg, cfg.jobs[0], key="raytpu:jobs[0]")  # cfg.image: the tag


def test_jobs_of_a_stack_whose_ray_image_is_a_tag_are_refused() -> None:
    from raytpu.program.load import validated_config

    raw = {**RAW, "raytpu:ray": {**RAW.get("raytpu:ray", {}), "image": "rayproject/ray:2.55.1"}}
    with pytest.raises(ConfigError) as e:
        validated_config("dev", raw)
    assert [p for p in e.value.problems if "not pinned by digest" in p] == [
        f"raytpu:jobs[{i}]: image: 'rayproject/ray:2.55.1' is not pinned by digest (@sha256:...): "
        "every host of the job's slices and its submitter must run the same bits "
        "(raytpu:ray.image)" for i in (0, 1)]
    pinned = {**raw, "raytpu:ray": {**raw["raytpu:ray"], "image": IMAGE}}
    assert [j.name for j in validated_config("dev", pinned).jobs] == ["pretrain", "eval"]


def test_manifests_command_writes_the_rayjobs(tmp_path: Path) -> None:
    from raytpu.operations.manifests import write_plan_manifests

    written = {p.name for p in write_plan_manifests(plan_ray(RAW, image=IMAGE, preview=True),
                                                   tmp_path)}
    assert {"rayjob-ray-pretrain.yaml", "rayjob-ray-eval.yaml"} <= written
    obj = yaml.safe_load((tmp_path / "rayjob-ray-eval.yaml").read_text())
    assert obj["kind"] == "RayJob" and obj["apiVersion"] == "ray.io/v1"


@pytest.mark.parametrize(
    ("job", "needle"),
    [
        ({"name": "x" * 48, "sliceGroup": "pod16"},
         "raytpu:jobs[0].name: '" + "x" * 48 + "' must be a DNS label"),
        ({"name": "1run", "sliceGroup": "pod16"}, "raytpu:jobs[0].name: '1run'"),
        ({"name": "r", "sliceGroup": "nope"},
         "raytpu:jobs[0].sliceGroup: 'nope' is not a raytpu:slices entry; valid: pod16, single8"),
        ({"name": "r", "sliceGroup": "pod16", "slices": 4},
         "raytpu:jobs[0].slices: 4 is more than raytpu:slices entry 'pod16' has (3)"),
        ({"name": "r", "sliceGroup": "pod16", "shutdownAfterJobFinishes": False,
          "ttlSecondsAfterFinished": 60},
         "raytpu:jobs[0].ttlSecondsAfterFinished: needs shutdownAfterJobFinishes: true"),
        ({"name": "r", "sliceGroup": "pod16", "train": {"layers": 3}},
         "raytpu:jobs[0].train.layers: unknown key; valid keys: steps, data"),
        ({"name": "r", "sliceGroup": "pod16", "train": {"nLayers": 0}},
         "raytpu:jobs[0].train.nLayers: 0 is not valid"),
        ({"name": "r", "sliceGroup": "pod16", "train": {"steps": "10"}},
         "raytpu:jobs[0].train.steps: '10' is not valid"),
        ({"name": "r", "sliceGroup": "pod16", "train": {"dModel": 100, "nHeads": 3}},
         "raytpu:jobs[0].train.dModel: 100 is not a multiple of --n-heads 3"),
        ({"name": "r", "sliceGroup": "pod16", "backoffLimit": -1},
         "raytpu:jobs[0].backoffLimit"),
        ({"name": "r", "sliceGroup": "pod16", "activeDeadlineSeconds": 0},
         "raytpu:jobs[0].activeDeadlineSeconds"),
        ({"name": "r", "sliceGroup": "pod16", "mtbfHours": 0},
         "raytpu:jobs[0].mtbfHours"),
    ],
)
def test_bad_jobs_are_refused_with_their_key(job: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_stack_config("dev", {**SAMPLES["v5e-elastic"], "raytpu:jobs": [job]})
    assert any(needle in p for p in e.value.problems), e.value.problems


def test_duplicate_job_names_refused() -> None:
    jobs = [{"name": "r", "sliceGroup": "pod16"}, {"name": "r", "sliceGroup": "single8"}]
    with pytest.raises(ConfigError, match=r"raytpu:jobs\[1\].name: 'r' is used by another job"):
        parse_stack_config("dev", {**SAMPLES["v5e-elastic"], "raytpu:jobs": jobs})


def _problems(jobs: list[dict[str, Any]], slices: list[dict[str, Any]] | None = None,
              teams: list[dict[str, Any]] | None = None) -> list[str]:
    raw = {**SAMPLES["v5e-elastic"], "raytpu:jobs": jobs}
    raw.update({"raytpu:slices": slices} if slices else {})
    raw.update({"raytpu:teams": teams} if teams else {})
    with pytest.raises(ConfigError) as e:
        parse_stack_config("dev", raw)
    return e.value.problems


def test_a_job_on_a_fixed_group_is_refused() -> None:
    """The shared RayCluster holds every pool of a fixed group: the job's own cluster would
    wait for them forever."""
    assert _problems([{"name": "eval", "sliceGroup": "single8"}]) == [
        "raytpu:jobs[0].sliceGroup: 'single8' is a fixed group (raytpu:slices[1].count: 1, "
        "no autoscaling): the shared RayCluster (raytpu:ray) always holds all its 1 node "
        "pool(s), so the job's own RayCluster would wait for them forever. Make the group "
        "elastic (raytpu:slices[1].autoscaling: {min: 0, max: 2})"]


def test_jobs_teams_and_the_shared_cluster_beyond_the_pools_are_refused_once() -> None:
    # pod16: 3 pools; the shared cluster starts with 1, two jobs of 1 and team-a's 1: 4.
    jobs = [{"name": "a", "sliceGroup": "pod16"}, {"name": "b", "sliceGroup": "pod16"}]
    teams = [{"name": "team-a", "members": ["user:a@example.com"], "quota": {"pod16": 1}}]
    problems = _problems(jobs, slices=JOB_SLICES, teams=teams)
    assert problems == [
        "raytpu:jobs[0].slices: the raytpu:jobs clusters on 'pod16' hold 2 slice(s) and the "
        "teams' nominal quotas 1, with the 1 the shared RayCluster starts with more than the "
        "group's 3 node pools (raytpu:slices[0].autoscaling.max): a job's cluster could find "
        "no pool free. Raise autoscaling.max to at least 4"]


def test_quotas_over_the_pools_with_jobs_on_the_group_are_refused_once() -> None:
    """The teams' quotas alone overflow pod16 (3 + the shared cluster's 1 > 3 pools) and two
    jobs run there too: one problem, at the first job, with every number (the teams-only
    check leaves a group with jobs to it)."""
    jobs = [{"name": "a", "sliceGroup": "pod16"}, {"name": "b", "sliceGroup": "pod16"}]
    teams = [{"name": "team-a", "members": ["user:a@example.com"], "quota": {"pod16": 3}}]
    assert _problems(jobs, slices=JOB_SLICES, teams=teams) == [
        "raytpu:jobs[0].slices: the raytpu:jobs clusters on 'pod16' hold 2 slice(s) and the "
        "teams' nominal quotas 3, with the 1 the shared RayCluster starts with more than the "
        "group's 3 node pools (raytpu:slices[0].autoscaling.max): a job's cluster could find "
        "no pool free. Raise autoscaling.max to at least 6"]


# A group that starts with 2 slices: a job that names no slices holds 2 of its pools.
COUNT2 = [{"name": "pod16", "tpu": "v5litepod-16", "count": 2}, JOB_SLICES[1]]


def test_a_job_without_slices_holds_its_groups_count() -> None:
    from raytpu.program.ray_cluster_config import worker_groups

    slices = [{**COUNT2[0], "autoscaling": {"min": 0, "max": 5}}, COUNT2[1]]
    raw = {**SAMPLES["v5e-elastic"], "raytpu:slices": slices,
           "raytpu:jobs": [{"name": "a", "sliceGroup": "pod16"}]}
    cfg = parse_stack_config("dev", raw)
    # 5 pools less the job's 2: the shared cluster may scale to 3.
    shared = {g.name: g.max_slices for g in worker_groups(cfg)}
    assert shared == {"pod16": 3, "single8": 2}
    # 4 pools: the job's 2 and the shared cluster's 2 fill them; a second job overflows.
    slices[0]["autoscaling"] = {"min": 0, "max": 4}
    raw["raytpu:jobs"] = [{"name": "a", "sliceGroup": "pod16"},
                          {"name": "b", "sliceGroup": "pod16"}]
    assert _problems(raw["raytpu:jobs"], slices=slices) == [
        "raytpu:jobs[0].slices: the raytpu:jobs clusters on 'pod16' hold 4 slice(s) and the "
        "teams' nominal quotas 0, with the 2 the shared RayCluster starts with more than the "
        "group's 4 node pools (raytpu:slices[0].autoscaling.max): a job's cluster could find "
        "no pool free. Raise autoscaling.max to at least 6"]


def test_a_job_on_a_fixed_group_of_two_is_told_the_max_that_fits() -> None:
    """The job holds the group's 2 slices and the shared cluster its 2: max 4, which is
    then accepted."""
    assert _problems([{"name": "a", "sliceGroup": "pod16"}], slices=COUNT2) == [
        "raytpu:jobs[0].sliceGroup: 'pod16' is a fixed group (raytpu:slices[0].count: 2, "
        "no autoscaling): the shared RayCluster (raytpu:ray) always holds all its 2 node "
        "pool(s), so the job's own RayCluster would wait for them forever. Make the group "
        "elastic (raytpu:slices[0].autoscaling: {min: 0, max: 4})"]
    fixed = [{**COUNT2[0], "autoscaling": {"min": 0, "max": 4}}, COUNT2[1]]
    raw = {**SAMPLES["v5e-elastic"], "raytpu:slices": fixed,
           "raytpu:jobs": [{"name": "a", "sliceGroup": "pod16"}]}
    assert [j.name for j in parse_stack_config("dev", raw).jobs] == ["a"]


def test_the_shared_cluster_leaves_the_jobs_their_slices() -> None:
    from raytpu.program.ray_cluster_config import worker_groups

    cfg = parse_stack_config("dev", RAW)  # pretrain holds 2 of pod16's 3 pools, eval 1 of 2
    shared = {g.name: g.max_slices for g in worker_groups(cfg)}
    assert shared == {"pod16": 1, "single8": 1}


def _cluster_spec(plan: PlanResult) -> RayClusterSpecArgs:
    cfg = plan.config
    return training_rayjob(cfg, cfg.jobs[0], image=IMAGE).spec.ray_cluster_spec  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"cluster_selector": {"team": "a"}},
         "clusterSelector: needs a non-empty 'ray.io/cluster'"),
        ({"cluster_selector": {"ray.io/cluster": "rc"}, "submission_mode": "SidecarMode"},
         "SidecarMode does not take a clusterSelector"),
        ({"cluster_selector": {"ray.io/cluster": "rc"}, "backoff_limit": 1},
         "backoffLimit: incompatible with clusterSelector"),
        ({"cluster_selector": {"ray.io/cluster": "rc"}, "backoff_limit": 1,
          "submission_mode": "InteractiveMode"}, "backoffLimit: incompatible"),
        ({"cluster": True, "active_deadline_seconds": 0}, "activeDeadlineSeconds: 0"),
        ({"cluster": True, "ttl_seconds_after_finished": 60,
          "shutdown_after_job_finishes": False}, "ttlSecondsAfterFinished"),
        ({"cluster": True, "submission_mode": "SidecarMode",
          "submitter_pod_template": {"spec": {}}}, "SidecarMode does not take one"),
    ],
)
def test_rayjob_spec_refuses_what_kuberay_refuses(
    plan: PlanResult, kwargs: dict[str, Any], needle: str
) -> None:
    kwargs = copy.copy(kwargs)
    if kwargs.pop("cluster", False):
        kwargs["ray_cluster_spec"] = _cluster_spec(plan)
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        RayJobSpecArgs(entrypoint="python x.py", **kwargs)
