"""Every RayCluster/RayJob the stacks produce: KubeRay CRD schema, Kubernetes pod schema, TPU
rules. Two sources: the Ray layer run alone (build_ray) on the built-in samples and on every
``stacks/Pulumi.*.yaml``, and the whole stack program (``run_plan``,
``raytpu.program.stack.build``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from ray_support import (
    RAYCLUSTER,
    RAYJOB,
    SAMPLES,
    STACKS_DIR,
    as_object,
    plan_ray,
    pod_templates,
    raw_stack,
    require_crds,
    semantic_problems,
    stack_files,
    validate_pod,
)
from raytpu.plan.engine import PlanResult, run_plan

Validate = Callable[[Mapping[str, Any]], list[str]]


def _check_plan(plan: PlanResult, validate_crd: Validate) -> int:
    """Validate every Ray object of ``plan``; returns how many there were."""
    ray_objects = [as_object(r.inputs) for r in plan.resources if r.type in (RAYCLUSTER, RAYJOB)]
    for obj in ray_objects:
        where = f"{plan.stack}: {obj['kind']} {obj['metadata'].get('name')}"
        assert validate_crd(obj) == [], where
        pods = [p for w, t in pod_templates(obj) for p in validate_pod(w, t)]
        assert pods == [], where
        # The whole program's pods run the digest of the image it builds (plan output).
        assert semantic_problems(obj, plan.config, plan.outputs.get("image")) == [], where
    return len(ray_objects)


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_sample_stacks_ray_layer(
    sample: str, sample_plans: dict[str, PlanResult], validate_crd: Validate,
) -> None:
    assert _check_plan(sample_plans[sample], validate_crd) == 1


@pytest.mark.parametrize("stack", stack_files())
def test_stack_files_ray_layer(stack: str, validate_crd: Validate) -> None:
    """Each stack file's config through build_ray alone (independent of program.build)."""
    assert _check_plan(plan_ray(raw_stack(stack), stack=stack), validate_crd) == 1


@pytest.mark.parametrize("stack", stack_files())
def test_stack_files_whole_program(stack: str, validate_crd: Validate) -> None:
    plan = run_plan(stack, STACKS_DIR)
    assert len(plan.by_type("raytpu:kuberay:KubeRayOperator")) == 1
    assert _check_plan(plan, validate_crd) == 1


# -- the validators themselves catch what they are meant to catch ---------------------------


def _broken(plan: PlanResult, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    (rc,) = plan.by_type(RAYCLUSTER)
    obj = as_object(copy.deepcopy(rc.inputs))
    edit(obj)
    return obj


def _worker(obj: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = obj["spec"]["workerGroupSpecs"][0]
    return group


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: _worker(o).update(numOfHosts=1), "numOfHosts 1 x chips 4"),
        (lambda o: _worker(o)["template"]["spec"].pop("tolerations"), "no toleration"),
        (lambda o: _worker(o)["template"]["metadata"]["labels"].update(
            {"app.kubernetes.io/name": "x"}), "overrides app.kubernetes.io/name"),
        (lambda o: _worker(o)["template"]["spec"]["containers"][0]["resources"]["requests"]
         .update({"google.com/tpu": "1"}), "google.com/tpu requests 1"),
        (lambda o: _worker(o)["template"]["spec"]["nodeSelector"].update(
            {"cloud.google.com/gke-tpu-topology": "2x2x4"}), "nodeSelector"),
        (lambda o: o["metadata"].update(name="r" * 60), "-headless"),
        (lambda o: _worker(o).update(maxReplicas=2), "min/replicas/max (1, 1, 2) != (1, 1, 1)"),
    ],
)
def test_semantic_rules_catch_broken_clusters(
    edit: Callable[[dict[str, Any]], None], message: str, sample_plans: dict[str, PlanResult],
) -> None:
    plan = sample_plans["v4-fixed"]
    problems = semantic_problems(_broken(plan, edit), plan.config)
    assert any(message in p for p in problems), problems


def test_pod_schema_catches_a_misspelled_field(sample_plans: dict[str, PlanResult]) -> None:
    obj = _broken(sample_plans["v4-fixed"], lambda o: _worker(o)["template"]["spec"][
        "containers"][0].update(imagePullpolicy="Always"))
    problems = [p for w, t in pod_templates(obj) for p in validate_pod(w, t)]
    assert problems and "imagePullpolicy" in problems[0]


def test_crd_schema_catches_a_wrong_type(
    sample_plans: dict[str, PlanResult], validate_crd: Validate,
) -> None:
    obj = _broken(sample_plans["v4-fixed"], lambda o: _worker(o).update(numOfHosts="2"))
    assert any("numOfHosts" in p for p in validate_crd(obj))


def test_missing_crds_skip_with_instructions_or_fail_when_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAYTPU_KUBERAY_CRDS", str(tmp_path))
    monkeypatch.delenv("RAYTPU_REQUIRE_CRDS", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_crds()
    message = str(skipped.value)
    assert "ray.io_rayclusters.yaml" in message and "RAYTPU_KUBERAY_CRDS=" in message
    assert ("curl -LO https://raw.githubusercontent.com/ray-project/kuberay/v1.7.0/"
            "helm-chart/kuberay-operator/crds/") in message
    monkeypatch.setenv("RAYTPU_REQUIRE_CRDS", "1")
    with pytest.raises(pytest.fail.Exception):
        require_crds()
