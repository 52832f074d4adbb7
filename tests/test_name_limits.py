"""The slice-group name limit (24 characters) at its boundary: the longest accepted name
still gives GKE node-pool names within GKE's 40 characters, one more character is refused."""

from __future__ import annotations

from typing import Any

import pytest
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config

GKE_NODE_POOL_NAME_MAX = 40  # GKE: node pool names are at most 40 characters


def _stack(name: str, **slice_: Any) -> dict[str, Any]:
    return {"gcp:project": "acme-ml", "raytpu:zone": "us-west4-a",
            "raytpu:slices": [{"name": name, "tpu": "v5litepod-16", **slice_}]}


def test_a_24_character_slice_name_is_accepted_and_its_pools_fit_gke() -> None:
    cfg = parse_stack_config("t", _stack("a" * 24, autoscaling={"min": 0, "max": 64}))
    (group,) = cfg.slices
    assert max(len(p) for p in group.group.pool_names) <= GKE_NODE_POOL_NAME_MAX


def test_a_25_character_slice_name_is_refused() -> None:
    with pytest.raises(ConfigError) as e:
        parse_stack_config("t", _stack("a" * 25))
    assert e.value.problems == [
        f"raytpu:slices[0].name: {'a' * 25!r} must be a DNS label (lowercase letters, digits, "
        "'-') of at most 24 characters"]
