"""``raytpu manifests`` writes no value the offline providers made up: what only the provider
computes (the built image's digest, service-account e-mails) is an explicit placeholder, or
the ``--image`` given, and stderr lists each one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_support import STACKS, STACKS_DIR
from raytpu.cli.app import app
from raytpu.plan.engine import PlanResult, run_plan
from raytpu.plan.objects import objects
from raytpu.plan.values import UNKNOWN_TEXT, is_unknown
from typer.testing import CliRunner

DIGEST_REF = "us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu@sha256:" + "cd" * 32


def _made_up(preview: Any, faked: Any, found: set[str]) -> None:
    """The values the mocks give where the preview has an unknown."""
    if is_unknown(preview):
        if isinstance(faked, str) and not is_unknown(faked):
            found.add(faked)
    elif isinstance(preview, dict) and isinstance(faked, dict):
        for k in preview:
            _made_up(preview[k], faked.get(k), found)
    elif isinstance(preview, list) and isinstance(faked, list):
        for a, b in zip(preview, faked, strict=False):
            _made_up(a, b, found)


def _manifests(stack: str, out: Path, *extra: str) -> Any:
    return CliRunner().invoke(app, ["manifests", "--stack", stack, "--stacks-dir",
                                    str(STACKS_DIR), "--out", str(out), *extra])


def _images(out: Path) -> set[str]:
    rc = yaml.safe_load((out / "raycluster-ray-raytpu.yaml").read_text())
    groups = [rc["spec"]["headGroupSpec"], *rc["spec"]["workerGroupSpecs"]]
    return {c["image"] for g in groups for c in g["template"]["spec"]["containers"]}


@pytest.mark.parametrize("stack", STACKS)
def test_no_file_holds_a_value_the_mocks_made_up(stack: str, tmp_path: Path,
                                                 stack_previews: dict[str, PlanResult]) -> None:
    faked = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")): o
             for o in objects(run_plan(stack, STACKS_DIR))}
    invented: set[str] = set()
    for o in objects(stack_previews[stack]):
        _made_up(o, faked[(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))],
                 invented)
    assert any("@sha256:" in v for v in invented)  # the test sees the digest it guards
    assert any(v.endswith(".iam.gserviceaccount.com") for v in invented)

    result = _manifests(stack, tmp_path)
    assert result.exit_code == 0, result.output
    texts = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert [(name, v) for name, text in texts.items() for v in invented if v in text] == []
    cfg = stack_previews[stack].config
    assert _images(tmp_path) == {cfg.built_image_placeholder()}
    assert f"  iam.gke.io/gcp-service-account: {UNKNOWN_TEXT}" in \
        texts["serviceaccount-ray-ray-workload.yaml"]
    # stderr names every placeholder, object and path.
    assert "value(s) only `pulumi up` knows are placeholders" in result.stderr
    assert ("  RayCluster ray/raytpu spec.headGroupSpec.template.spec.containers[0].image"
            in result.stderr.splitlines())
    assert ('  ServiceAccount ray/ray-workload metadata.annotations'
            '["iam.gke.io/gcp-service-account"]' in result.stderr.splitlines())


def test_image_given_by_digest_replaces_the_placeholder(tmp_path: Path) -> None:
    result = _manifests("dev", tmp_path, "--image", DIGEST_REF)
    assert result.exit_code == 0, result.output
    assert _images(tmp_path) == {DIGEST_REF}


@pytest.mark.parametrize(("image", "needle"), [
    ("us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu:0.1.0",
     "--image: 'us-west4-docker.pkg.dev/acme-ml/raytpu/raytpu:0.1.0' is not pinned by digest"),
])
def test_image_by_tag_is_refused(image: str, needle: str, tmp_path: Path) -> None:
    result = _manifests("dev", tmp_path, "--image", image)
    assert result.exit_code == 2
    assert needle in result.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_manifests_refuse_a_plan_with_the_mocks_stand_ins() -> None:
    from raytpu.operations.manifests import manifest_files
    from raytpu.plan.engine import PlanError

    with pytest.raises(PlanError, match="written from the preview"):
        manifest_files(run_plan("dev", STACKS_DIR))
