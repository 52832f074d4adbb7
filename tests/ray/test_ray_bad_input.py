"""Bad Ray-side input: one clear line naming the key and value, and nothing Ray declared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.runtime import settings
from ray_support import SAMPLES, plan_ray, ray_program
from raytpu.config.stack import ConfigError, StackConfig
from raytpu.config.validate import parse_stack_config
from raytpu.facts.catalog import slice_shape
from raytpu.plan.engine import run_program

RAW = SAMPLES["v4-fixed"]


def _problems_before_program(raw: dict[str, Any]) -> list[str]:
    """Config errors that stop the run before the program declares anything."""
    called: list[bool] = []
    with pytest.raises(ConfigError) as e:
        run_program("dev", raw, lambda: called.append(True))
    assert called == []
    return e.value.problems


def _declared_urns() -> list[str]:
    monitor: Any = settings.get_monitor()
    return list(monitor.resources)


def _ray_layer_problems(raw: dict[str, Any], **build_kwargs: Any) -> list[str]:
    """Problems of the Ray layer's config: from config validation, or from build_ray before
    it declares anything Ray (then asserted on the mocks' registrations)."""
    started: list[bool] = []

    def program() -> None:
        started.append(True)
        ray_program(parse_stack_config("dev", raw), **build_kwargs)()

    with pytest.raises(ConfigError) as e:
        run_program("dev", raw, program)
    if started:  # refused by build_ray: at most the test's provider was registered
        declared = [u for u in _declared_urns() if "pulumi:pulumi:Stack" not in u]
        assert {u.rsplit("::", 1)[-1] for u in declared} <= {"k8s"}, declared
    return e.value.problems


def test_unknown_kuberay_mode() -> None:
    problems = _problems_before_program({**RAW, "raytpu:kuberay": {"mode": "operator"}})
    assert problems == ["raytpu:kuberay.mode: 'operator' is not valid; valid: 'helm', 'gke-addon'"]


def test_ray_version_below_what_kuberay_supports() -> None:
    problems = _problems_before_program({**RAW, "raytpu:ray": {"version": "2.30.0"}})
    # The config's rule and the RayCluster's (token auth) in one report.
    assert problems == ["raytpu:ray.version: '2.30.0' is older than KubeRay 1.7.0 supports; "
                        "need >= 2.38.0",
                        "raytpu:ray.auth: 'token' needs Ray >= 2.52.0, rayVersion is 2.30.0; "
                        "upgrade Ray or set 'disabled'"]


def test_cluster_name_too_long() -> None:
    # 54 characters: its headless service would fit 63, but KubeRay 1.7.0 refuses a
    # RayCluster name over 53 (utils/constant.go MaxRayClusterNameLength).
    name = "ray-" + "x" * 50
    problems = _ray_layer_problems({**RAW, "raytpu:ray": {"clusterName": name}})
    assert problems[0] == (f"raytpu:ray.clusterName: {name!r} (54 characters) is longer than "
                           f"KubeRay's RayCluster name limit of 53 ('{name}-serve-svc' must fit "
                           "63)")
    at_limit = _ray_layer_problems({**RAW, "raytpu:ray": {"clusterName": "ray-" + "x" * 49}})
    assert not any("RayCluster name limit" in p for p in at_limit), at_limit


def test_cluster_and_group_names_too_long_for_pod_names() -> None:
    raw = {**RAW, "raytpu:ray": {"clusterName": "c" * 30},
           "raytpu:slices": [{"name": "g" * 20, "tpu": "v4-16"}]}
    (problem,) = _ray_layer_problems(raw)
    assert problem.startswith(f"raytpu:slices[0].name: {'g' * 20!r} with raytpu:ray.clusterName "
                              f"{'c' * 30!r} makes")
    assert "63" in problem or "64" in problem


def test_worker_group_without_a_matching_pool() -> None:
    pools = {"pool-v5e": slice_shape("v5litepod-16").node_selector}
    (problem,) = _ray_layer_problems(RAW, tpu_pools=pools)
    assert problem.startswith("raytpu:slices[0]: no TPU node pool has the labels "
                              "{'cloud.google.com/gke-tpu-accelerator': 'tpu-v4-podslice'")
    assert "pools: pool-v5e" in problem


def test_internal_lb_without_allowed_ranges() -> None:
    (problem,) = _ray_layer_problems({**RAW, "raytpu:ray": {"dashboardInternalLb": True}})
    assert problem.startswith("raytpu:network.rayAccessCidrs: required ")
    assert "load balancer" in problem


def test_image_and_ray_version_disagree() -> None:
    (problem,) = _ray_layer_problems(
        {**RAW, "raytpu:ray": {"image": "rayproject/ray:2.52.0-py311"}})
    assert problem.startswith("raytpu:ray.image: 'rayproject/ray:2.52.0-py311' ")
    assert "carries Ray 2.52.0" in problem and "2.60.0" in problem


def test_unknown_auth_mode() -> None:
    problems = _problems_before_program({**RAW, "raytpu:ray": {"auth": "password"}})
    assert problems == ["raytpu:ray.auth: 'password' is not valid; valid: 'token', 'disabled'"]


def test_token_auth_needs_ray_2_52() -> None:
    (problem,) = _ray_layer_problems({**RAW, "raytpu:ray": {"version": "2.50.0"}})
    assert problem == ("raytpu:ray.auth: 'token' needs Ray >= 2.52.0, rayVersion is 2.50.0; "
                       "upgrade Ray or set 'disabled'")
    plan_ray({**RAW, "raytpu:ray": {"version": "2.50.0", "auth": "disabled"}})  # accepted


def test_token_auth_needs_a_kuberay_with_auth_options() -> None:
    # An older CRD would prune spec.authOptions: the cluster would run without auth.
    (problem,) = _ray_layer_problems({**RAW, "raytpu:kuberay": {"version": "1.4.2"}})
    assert problem == ("raytpu:ray.auth: 'token' needs KubeRay >= 1.5.1, raytpu:kuberay.version "
                       "is 1.4.2; upgrade it or set 'disabled'")


def test_cli_plan_exits_2_naming_the_key(tmp_path: Path) -> None:
    """The real CLI on the real program: a Ray-side problem is refused before anything."""
    from raytpu.cli.app import app
    from typer.testing import CliRunner

    name = "x" * 60
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump(
        {"config": {**RAW, "raytpu:ray": {"clusterName": name}}}))
    result = CliRunner().invoke(app, ["plan", "--stack", "bad", "--stacks-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"error: raytpu:ray.clusterName: {name!r}" in result.output


def test_operator_namespace_taken_by_the_webhook_chart() -> None:
    (problem,) = _ray_layer_problems({**RAW, "raytpu:kuberay": {"namespace": "ray-system"}})
    assert problem.startswith("raytpu:kuberay.namespace: 'ray-system' belongs to another chart")


def test_ray_problems_lists_everything_without_declaring() -> None:
    from raytpu.program.ray_program import ray_problems

    # Structural validation only: config.py may also carry these rules.
    cfg = StackConfig.model_validate({"stack": "dev", **RAW,
                                      "raytpu:kuberay": {"namespace": "cert-manager"},
                                      "raytpu:ray": {"image": "rayproject/ray:2.52.0"}})
    keys = [p.split(":", 2)[0] + ":" + p.split(":", 2)[1] for p in ray_problems(cfg)]
    assert keys == ["raytpu:ray.image", "raytpu:kuberay.namespace"]
    assert ray_problems(parse_stack_config("dev", RAW)) == []
