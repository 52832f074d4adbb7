"""The stacks' PodMonitoring objects against the Managed Service for Prometheus CRDs, and the
ports they scrape on the Ray pod templates.

CRDs: ``../shared/ref/gmp`` (prometheus-engine, see its SOURCE.txt) or ``$RAYTPU_GMP_CRDS``;
missing CRDs skip with the way to get them, or fail with ``RAYTPU_REQUIRE_CRDS=1`` (CI).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ray_support import REPO, _path, as_object, raw_stack, stack_files, strict_schema
from raytpu.components.monitoring import PODMONITORING_TYPE
from raytpu.facts import versions
from raytpu.plan.engine import PlanResult, run_program

GMP_FILE = "monitoring.googleapis.com_podmonitorings.yaml"
GMP_COMMIT = "2ffde4ec7b7e4ca1da4e32f36b692945b78a60e4"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"


def gmp_dir() -> Path:
    return Path(os.environ.get("RAYTPU_GMP_CRDS") or REPO / ".." / "shared" / "ref" / "gmp")


def require_gmp_crds() -> Path:
    folder = gmp_dir()
    if not (folder / GMP_FILE).is_file():
        message = (
            f"GMP CRD {GMP_FILE} not found in {folder.resolve()}. Get it with:  mkdir -p "
            f"gmp-crds && curl -Lo gmp-crds/{GMP_FILE} https://raw.githubusercontent.com/"
            f"GoogleCloudPlatform/prometheus-engine/{GMP_COMMIT}/charts/operator/crds/"
            f"{GMP_FILE}  and run with RAYTPU_GMP_CRDS=$PWD/gmp-crds. Set "
            "RAYTPU_REQUIRE_CRDS=1 (CI) to fail instead of skipping."
        )
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return folder


@functools.cache
def _validator(folder: Path) -> jsonschema.Draft202012Validator:
    crd = yaml.safe_load((folder / GMP_FILE).read_text())
    assert crd["spec"]["names"]["kind"] == "PodMonitoring"
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = strict_schema(v1["schema"]["openAPIV3Schema"])
    schema["properties"].pop("status", None)
    schema["additionalProperties"] = False
    return jsonschema.Draft202012Validator(schema)


def gmp_problems(obj: Mapping[str, Any]) -> list[str]:
    validator = _validator(require_gmp_crds().resolve())
    return sorted(f"{_path(e)}: {e.message}" for e in validator.iter_errors(dict(obj)))


@functools.cache
def _plan(stack: str) -> PlanResult:
    return run_program(stack, raw_stack(stack))


def _pod_monitorings(plan: PlanResult) -> list[dict[str, Any]]:
    return [as_object(r.inputs) for r in plan.by_type(PODMONITORING_TYPE)]


def _stack_pod_monitoring(stack: str) -> dict[str, Any]:
    """The PodMonitoring of the stack's RayCluster (team namespaces have their own)."""
    (rc,) = [as_object(r.inputs) for r in _plan(stack).by_type(RAYCLUSTER)]
    (pm,) = [pm for pm in _pod_monitorings(_plan(stack))
             if pm["metadata"]["namespace"] == rc["metadata"]["namespace"]]
    return pm


@pytest.mark.parametrize("stack", stack_files())
def test_stack_pod_monitorings_validate_against_the_gmp_crd(stack: str) -> None:
    for each in _pod_monitorings(_plan(stack)):  # the RayCluster's and each team's
        assert each["apiVersion"] == "monitoring.googleapis.com/v1"
        assert gmp_problems(each) == [], each["metadata"]
    pm = _stack_pod_monitoring(stack)
    (rc,) = [as_object(r.inputs) for r in _plan(stack).by_type(RAYCLUSTER)]
    # The selector picks this RayCluster's head and workers by KubeRay's pod labels.
    sel = pm["spec"]["selector"]
    assert sel["matchLabels"] == {"ray.io/cluster": rc["metadata"]["name"]}
    assert sel["matchExpressions"] == [{"key": "ray.io/node-type", "operator": "In",
                                        "values": ["head", "worker"]}]


@pytest.mark.parametrize("stack", stack_files())
def test_scraped_port_is_declared_on_every_ray_container(stack: str) -> None:
    pm = _stack_pod_monitoring(stack)
    ports = {e["port"] for e in pm["spec"]["endpoints"]}
    (rc,) = [as_object(r.inputs) for r in _plan(stack).by_type(RAYCLUSTER)]
    templates = [rc["spec"]["headGroupSpec"]["template"],
                 *(w["template"] for w in rc["spec"]["workerGroupSpecs"])]
    for t in templates:
        (c,) = t["spec"]["containers"]
        declared = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports <= set(declared), (c["name"], declared)
        assert declared["metrics"] == versions.Ports.RAY_METRICS
    for w in rc["spec"]["workerGroupSpecs"]:
        (c,) = w["template"]["spec"]["containers"]
        # GKE reads the TPU runtime metrics only from containers declaring 8431.
        assert {"name": "tpu-metrics", "containerPort": versions.Ports.TPU_RUNTIME_METRICS} in \
            c["ports"]


def test_validator_rejects_what_the_api_server_would_refuse_or_prune() -> None:
    (pm,) = _pod_monitorings(_plan("dev"))
    no_interval = copy.deepcopy(pm)
    del no_interval["spec"]["endpoints"][0]["interval"]
    assert any("interval" in p for p in gmp_problems(no_interval))
    snake = copy.deepcopy(pm)
    snake["spec"]["target_labels"] = snake["spec"].pop("targetLabels")
    assert any("target_labels" in p for p in gmp_problems(snake))


def test_disabled_monitoring_declares_no_pod_monitoring() -> None:
    raw = {**raw_stack("dev"), "raytpu:monitoring": {"enabled": False}}
    plan = run_program("dev", raw)
    assert plan.by_type(PODMONITORING_TYPE) == []
    assert plan.by_type("gcp:monitoring/dashboard:Dashboard") == []


def test_missing_gmp_crds_skip_with_instructions_or_fail_when_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAYTPU_GMP_CRDS", str(tmp_path))
    monkeypatch.delenv("RAYTPU_REQUIRE_CRDS", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_gmp_crds()
    assert "RAYTPU_GMP_CRDS=" in str(skipped.value) and GMP_COMMIT in str(skipped.value)
    monkeypatch.setenv("RAYTPU_REQUIRE_CRDS", "1")
    with pytest.raises(pytest.fail.Exception):
        require_gmp_crds()


# Reads the reference data beside the checkout (../shared/ref): deselected by name where it is
# absent (-m "not ref", .github/workflows/preview.yml; docs/tests-in-ci.md).
pytestmark = pytest.mark.ref
