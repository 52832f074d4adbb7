"""``raytpu:teams``: the typed model, its checks (key path + value in every problem) and the
command line refusing bad team config with exit 2 before anything is declared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.config.teams import LOCAL_QUEUE_NAME, TeamConfig, cluster_queue_name, team_namespace
from raytpu.config.validate import parse_stack_config, stack_warnings
from stack_configs import TEAMS_CLUSTER, problems_of, stack_config

ROOT = Path(__file__).resolve().parents[1]
SLICES = [
    {"name": "pod16", "tpu": "v5litepod-16"},  # 1 slice, fixed
    {"name": "single", "tpu": "v5litepod-4", "count": 2, "autoscaling": {"min": 0, "max": 5}},
]


def _raw(teams: Any) -> dict[str, Any]:
    return stack_config(slices=SLICES, **{"raytpu:teams": teams,
                                          "raytpu:cluster": TEAMS_CLUSTER})


def _team(**overrides: Any) -> dict[str, Any]:
    return {"name": "vision", "members": ["group:ml-vision@example.com"],
            "quota": {"single": 1}, **overrides}


def _problems(teams: Any) -> list[str]:
    return problems_of(_raw(teams), stack="t")


def test_every_field_parses_into_the_typed_model() -> None:
    cfg = parse_stack_config("t", _raw([
        _team(members=["group:ml-vision@example.com", "user:ana@example.com",
                       "serviceAccount:ci@acme-ml.iam.gserviceaccount.com"],
              quota={"single": 1}, borrowing={"single": 2},
              priority="high", bucketAccess="bucket"),
        {"name": "speech", "members": ["user:bo@example.com"], "quota": {"single": 2}},
    ]))
    vision, speech = cfg.teams
    assert vision == TeamConfig(
        name="vision", members=["group:ml-vision@example.com", "user:ana@example.com",
                                "serviceAccount:ci@acme-ml.iam.gserviceaccount.com"],
        quota={"single": 1}, borrowing={"single": 2}, priority="high",
        bucket_access="bucket")
    assert (speech.priority, speech.bucket_access, speech.borrowing) == ("default", "prefix", {})
    assert vision.slice_groups == ["single"]
    assert stack_warnings(cfg) == []


def test_no_teams_key_means_no_teams() -> None:
    raw = _raw([])
    del raw["raytpu:teams"]
    assert parse_stack_config("t", raw).teams == []


def test_team_object_names_derive_from_the_team() -> None:
    assert team_namespace("vision") == "vision"
    assert cluster_queue_name("vision") == "vision"
    assert LOCAL_QUEUE_NAME == "default"  # Kueue's default queue for unlabelled jobs


@pytest.mark.parametrize(("teams", "expected"), [
    ([_team(quota={"pod32": 1})],
     "raytpu:teams[0].quota.pod32: unknown slice group; valid: pod16, single"),
    ([_team(borrowing={"nope": 1})],
     "raytpu:teams[0].borrowing.nope: unknown slice group; valid: pod16, single"),
    ([_team(quota={"pod16": 2})],
     "raytpu:teams[0].quota.pod16: 2 slices, but the fleet never holds more than 1 "
     "(raytpu:slices[0].count)"),
    ([_team(quota={"single": 6})],
     "raytpu:teams[0].quota.single: 6 slices, but the fleet never holds more than 5 "
     "(raytpu:slices[1].autoscaling.max)"),
    ([_team(), _team(members=["user:x@example.com"])],
     "raytpu:teams[1].name: 'vision' is used by another team"),
    ([_team(name="kube-system")], "raytpu:teams[0].name: 'kube-system' is the team's namespace "
                                  "and collides with a system namespace"),
    ([_team(name="default")], "raytpu:teams[0].name: 'default' is the team's namespace"),
    ([_team(name="ray")], "raytpu:teams[0].name: 'ray' is the team's namespace"),
    ([_team(name="kuberay-system")], "raytpu:teams[0].name: 'kuberay-system' is the team's"),
    ([_team(name="kueue-system")], "raytpu:teams[0].name: 'kueue-system' is the team's"),
    ([_team(name="cert-manager")], "raytpu:teams[0].name: 'cert-manager' is the team's"),
    ([_team(name="gmp-system")], "raytpu:teams[0].name: 'gmp-system' is the team's"),
    ([_team(name="gke-managed-x")], "raytpu:teams[0].name: 'gke-managed-x' is the team's"),
    ([_team(name="Vision")], "raytpu:teams[0].name: 'Vision' must be a DNS label"),
    ([_team(name="a" * 31)], f"raytpu:teams[0].name: {'a' * 31!r} must be a DNS label"),
    ([_team(members=["ml-vision@example.com"])],
     "raytpu:teams[0].members[0]: 'ml-vision@example.com' is not an IAM member; write "
     "user:EMAIL, group:EMAIL, serviceAccount:EMAIL"),
    ([_team(members=["group:ml-vision"])], "raytpu:teams[0].members[0]: 'group:ml-vision' is not"),
    ([_team(members=["domain:example.com"])], "raytpu:teams[0].members[0]: 'domain:example.com'"),
    ([_team(members=[])], "raytpu:teams[0].members: [] is not valid"),
    ([_team(quota={})], "raytpu:teams[0].quota: {} is not valid"),
    ([_team(quota={"pod16": -1})], "raytpu:teams[0].quota.pod16: -1 is not valid"),
    ([_team(quota={"pod16": True})], "raytpu:teams[0].quota.pod16: True is not valid"),
    ([_team(priority="urgent")],
     "raytpu:teams[0].priority: 'urgent' is not valid; valid: 'low', 'default', 'high'"),
    ([_team(bucketAccess="all")],
     "raytpu:teams[0].bucketAccess: 'all' is not valid; valid: 'prefix', 'bucket'"),
    ([_team(quotas={"pod16": 1})], "raytpu:teams[0].quotas: unknown key; valid keys: name, "
                                   "members, quota, borrowing, priority, bucketAccess"),
    ([{"members": ["user:a@example.com"], "quota": {"pod16": 1}}],
     "raytpu:teams[0].name: required key is missing"),
])
def test_bad_team_config_names_key_and_value(teams: Any, expected: str) -> None:
    problems = _problems(teams)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_bad_team_is_reported_once() -> None:
    problems = _problems([_team(quota={"pod32": 1}), _team(name="default", quota={"pod16": 9})])
    # unknown group; reserved name; above the fleet; on a fixed group
    assert len(problems) == 4, problems


def test_the_ray_namespace_of_this_stack_is_reserved() -> None:
    raw = {**_raw([_team(name="research")]), "raytpu:ray": {"namespace": "research"}}
    with pytest.raises(ConfigError) as e:
        parse_stack_config("t", raw)
    assert any(p.startswith("raytpu:teams[0].name: 'research'") for p in e.value.problems)


def test_quotas_and_the_shared_clusters_slices_beyond_the_pools_are_refused_with_the_numbers(
        ) -> None:
    """Kueue admits by quota alone: the teams' nominal slices plus what the shared RayCluster
    starts with must fit the group's node pools, or a team job is admitted with no pool."""
    problems = _problems([_team(quota={"single": 2}),
                          {**_team(name="speech"), "quota": {"single": 2}}])
    assert problems == [
        "raytpu:teams: nominal quotas on slice group 'single' add up to 4 slice(s) (vision 2, "
        "speech 2) and the shared RayCluster (raytpu:ray) starts with 2 "
        "(raytpu:slices[1].count: 2), but the group has 5 node pools "
        "(raytpu:slices[1].autoscaling.max: 5): Kueue admits by quota alone, so a team job "
        "could be admitted with no pool free. Raise autoscaling.max to at least 6, or lower "
        "the quotas; the shared RayCluster may scale to autoscaling.max less the teams' 4"]


def test_the_shared_cluster_scales_only_to_the_pools_the_quotas_leave() -> None:
    from raytpu.program.ray_cluster_config import worker_groups

    cfg = parse_stack_config("t", _raw([_team(quota={"single": 3})]))
    assert not [w for w in stack_warnings(cfg) if "single" in w]
    single = next(g for g in worker_groups(cfg) if g.name == "single")
    assert (single.min_slices, single.initial_slices, single.max_slices) == (0, 2, 2)


def test_teams_field_is_the_teams_model() -> None:
    assert StackConfig.model_fields["teams"].alias == "raytpu:teams"


def test_bad_team_in_stack_file_exits_2_before_anything_is_declared(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text(
        yaml.safe_dump({"config": _raw([_team(quota={"pod32": 1})])}))
    proc = subprocess.run(
        [sys.executable, "-m", "raytpu", "plan", "--json", "--stack", "bad",
         "--stacks-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert "error: raytpu:teams[0].quota.pod32: unknown slice group" in proc.stderr


def test_team_checkpoints_go_to_its_prefix_or_its_bucket() -> None:
    from raytpu.config.team_rules import team_checkpoint_uri

    cfg = parse_stack_config("t", _raw([_team(), _team(name="speech", bucketAccess="bucket")]))
    vision, speech = cfg.teams
    assert team_checkpoint_uri(cfg, vision) == "gs://acme-ml-t-raytpu/teams/vision/runs"
    assert team_checkpoint_uri(cfg, speech) == "gs://acme-ml-t-raytpu-speech/runs"


def test_a_team_bucket_name_must_fit_gcs() -> None:
    raw = {**_raw([_team(name="a" * 30, bucketAccess="bucket")]),
           "raytpu:storage": {"bucket": "b" * 40}}
    with pytest.raises(ConfigError) as e:
        parse_stack_config("t", raw)
    assert any(p.startswith("raytpu:teams[0].bucketAccess: the team's bucket")
               for p in e.value.problems), e.value.problems


def test_quota_on_a_fixed_group_is_refused_with_the_numbers() -> None:
    """A fixed group's pools are all the shared RayCluster's (it never scales down), so Kueue
    would admit a team job there that never schedules: the double booking, refused."""
    assert _problems([_team(quota={"pod16": 1})]) == [
        "raytpu:teams: nominal quotas on slice group 'pod16' add up to 1 slice(s) (vision 1), "
        "but the group is fixed (raytpu:slices[0].count: 1, no autoscaling): the shared "
        "RayCluster (raytpu:ray) always holds all its 1 node pool(s) outside Kueue's quotas, "
        "so a team job admitted there would wait for nodes it keeps. Make the group elastic "
        "(raytpu:slices[0].autoscaling: {min: 0, max: 2}), or keep teams' quotas off it"]
    # The fix the message names is accepted.
    raw = _raw([_team(quota={"pod16": 1})])
    raw["raytpu:slices"] = [{**SLICES[0], "autoscaling": {"min": 0, "max": 2}}, SLICES[1]]
    assert parse_stack_config("t", raw).teams[0].quota == {"pod16": 1}


def test_quota_on_a_fixed_group_of_two_is_told_the_max_that_fits() -> None:
    """The shared cluster keeps the group's 2 slices and the team's quota needs 1 more."""
    raw = _raw([_team(quota={"pod16": 1})])
    raw["raytpu:slices"] = [{**SLICES[0], "count": 2}, SLICES[1]]
    with pytest.raises(ConfigError) as e:
        parse_stack_config("t", raw)
    assert e.value.problems == [
        "raytpu:teams: nominal quotas on slice group 'pod16' add up to 1 slice(s) (vision 1), "
        "but the group is fixed (raytpu:slices[0].count: 2, no autoscaling): the shared "
        "RayCluster (raytpu:ray) always holds all its 2 node pool(s) outside Kueue's quotas, "
        "so a team job admitted there would wait for nodes it keeps. Make the group elastic "
        "(raytpu:slices[0].autoscaling: {min: 0, max: 3}), or keep teams' quotas off it"]
    raw["raytpu:slices"][0]["autoscaling"] = {"min": 0, "max": 3}
    assert parse_stack_config("t", raw).teams[0].quota == {"pod16": 1}


def test_cpu_quantities_round_up_to_a_millicore() -> None:
    from decimal import Decimal

    from raytpu.program.kueue_program import _cpu

    assert [_cpu(Decimal(x)) for x in ("721", "903.5", "0", "0.0004", "10", "1.05")] == [
        "721", "903.5", "0", "0.001", "10", "1.05"]
