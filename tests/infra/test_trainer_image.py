"""The trainer image is built (BuildKit, pulumi-docker-build) and pushed to the stack's Artifact
Registry repository, and every Ray pod names it by digest; or, with ``raytpu:ray.image``, an
image built elsewhere is used as given. Under mocks: no Docker, no provider binary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from infra_support import STACKS_DIR, refused_alone
from raytpu.components import TrainerImageArgs
from raytpu.config.stack import ConfigError
from raytpu.plan.engine import PlanResult, load_stack_file, run_program

IMAGE = "docker-build:index:Image"
RAY_TYPES = ("kubernetes:ray.io/v1:RayCluster", "kubernetes:ray.io/v1:RayJob")
REPO_ROOT = Path(__file__).resolve().parents[2]


def _images(obj: Any) -> list[str]:
    """Every container image in a recorded object."""
    if isinstance(obj, dict):
        found = [obj["image"]] if isinstance(obj.get("image"), str) and "name" in obj else []
        return found + [i for v in obj.values() for i in _images(v)]
    if isinstance(obj, list):
        return [i for v in obj for i in _images(v)]
    return []


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_shipped_stacks_build_push_and_pin_by_digest(
    stack: str, stack_plans: dict[str, PlanResult]
) -> None:
    plan = stack_plans[stack]
    cfg = plan.config
    (image,) = plan.by_type(IMAGE)
    i = image.inputs
    repo = f"{cfg.region}-docker.pkg.dev/{cfg.project}/{cfg.registry.repository}"
    assert i["push"] is True
    assert i["tags"] == [f"{repo}/raytpu:{cfg.ray.image_tag}"]
    assert i["platforms"] == ["linux/amd64"]
    # Relative to the Pulumi project's directory (the mocks name it "root_directory").
    root = Path(i["context"]["location"])
    assert root.name == "root_directory"
    assert i["dockerfile"] == {"location": str(root / "workloads" / "Dockerfile")}
    # The access token makes the list a secret (the engine's secret envelope).
    registries = i["registries"]
    assert "4dabf18193072939515e22adb298388d" in registries
    (registry,) = registries["value"]
    assert registry["address"] == f"{cfg.region}-docker.pkg.dev"
    assert registry["username"] == "oauth2accesstoken"
    # The pods: every Ray container (head, workers, a RayJob's submitter) runs the build's
    # digest in this stack's repository.
    digest = plan.outputs["image"].rsplit("@", 1)[1]
    assert digest.startswith("sha256:") and len(digest) == 71
    pinned = f"{repo}/raytpu@{digest}"
    assert plan.outputs["image"] == pinned
    images = [img for r in plan.resources if r.type in RAY_TYPES for img in _images(r.inputs)]
    assert images and set(images) == {pinned}


def test_the_build_inputs_exist_in_the_repository() -> None:
    """The default context and Dockerfile are the repository root's (the Pulumi project)."""
    assert (REPO_ROOT / "Pulumi.yaml").is_file()
    dockerfile = REPO_ROOT / TrainerImageArgs.dockerfile
    text = dockerfile.read_text()
    for copied in ("pyproject.toml", "infra", "components", "workloads"):
        assert (REPO_ROOT / TrainerImageArgs.context / copied).exists(), copied
        assert copied in text


def test_a_given_image_is_used_as_is_and_nothing_is_built() -> None:
    raw = load_stack_file("dev", STACKS_DIR)
    given = "us-docker.pkg.dev/ci-proj/images/raytpu@sha256:" + "ab" * 32
    raw["raytpu:ray"] = {**raw["raytpu:ray"], "image": given}
    plan = run_program("dev", raw)
    assert plan.by_type(IMAGE) == []
    images = {img for r in plan.resources if r.type in RAY_TYPES for img in _images(r.inputs)}
    assert images == {given}


def test_bad_image_tag_names_the_stack_key() -> None:
    raw = load_stack_file("dev", STACKS_DIR)
    raw["raytpu:ray"] = {**raw["raytpu:ray"], "imageTag": "bad tag!"}
    with pytest.raises(ConfigError, match=r"raytpu:ray.imageTag: .*'bad tag!' is not a Docker tag"):
        run_program("dev", raw)


def test_trainer_image_args_refused_alone() -> None:
    errors = refused_alone(lambda: TrainerImageArgs(repository_url="r", name="Bad Name"),
                           lambda: TrainerImageArgs(repository_url="r", tag=""))
    assert [str(e).split(":")[0] for e in errors] == ["TrainerImageArgs.name",
                                                       "TrainerImageArgs.tag"]


def _dockerfile_lines() -> list[str]:
    text = (REPO_ROOT / "workloads" / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip()
            and not line.lstrip().startswith("#")]


def test_build_context_is_only_what_the_dockerfile_copies() -> None:
    # Without a .dockerignore the whole repository (.venv, tests, stacks) is the context, and
    # a change there is a new context hash: a rebuild for nothing.
    ignore = [line.strip() for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*"  # allow-list: everything else stays out
    allowed = {line.removeprefix("!").rstrip("/") for line in ignore if line.startswith("!")}
    copied = set()
    for line in _dockerfile_lines():
        if line.startswith("COPY"):
            words = [w for w in line.split()[1:] if not w.startswith("--")]
            copied |= set(words[:-1])  # sources; the last word is the destination
    assert copied == allowed, (copied, allowed)


def test_every_image_install_takes_the_constraints() -> None:
    installs = [line for line in _dockerfile_lines() if "pip install" in line]
    assert installs
    for line in installs:
        assert "-c constraints.txt" in line, line
