"""One Ray, one torch, one torch_xla: the package extra, the image and the RayCluster agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from raytpu.facts import versions

ROOT = Path(__file__).parents[1]


def _workloads_pins() -> dict[str, str]:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["workloads"]
    pins = {}
    for req in extra:
        m = re.fullmatch(r"([A-Za-z_]+)(?:\[[^\]]*\])?==(\S+)", req)
        if m:
            pins[m.group(1)] = m.group(2)
    return pins


def test_pyproject_pins_match_versions_module() -> None:
    pins = _workloads_pins()
    assert pins["ray"] == versions.RAY_VERSION
    assert pins["torch"] == versions.TORCH_VERSION
    assert pins["torch_xla"] == versions.TORCH_XLA_VERSION
    assert pins["jax"] == versions.JAX_VERSION


def test_dockerfile_builds_on_the_pinned_ray_image() -> None:
    dockerfile = (ROOT / "workloads" / "Dockerfile").read_text()
    assert f"FROM {versions.RAY_IMAGE}\n" in dockerfile
    assert f'"torch=={versions.TORCH_VERSION}"' in dockerfile
    assert f'"torch_xla[tpu]=={versions.TORCH_XLA_VERSION}"' in dockerfile
    assert f'"jax[tpu]=={versions.JAX_VERSION}"' in dockerfile


def test_installed_ray_is_the_pinned_one() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("ray")
    except PackageNotFoundError:  # core install without the workloads extra
        return
    assert installed == versions.RAY_VERSION
