"""The one builder of test stack configurations: the flat ``config:`` map of a stack file, as
``raytpu.config.validate.parse_stack_config`` takes it, and the problems it is refused with."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config

PROJECT = "acme-ml"
ZONE = "us-west4-a"
ONE_V5E_4: tuple[dict[str, Any], ...] = ({"name": "v5e-4", "tpu": "v5litepod-4"},)
# Stated where teams are: no Dataplane V2 replacement warning, and the security group lets
# the teams' Google Group members be RBAC subjects.
TEAMS_CLUSTER: Mapping[str, Any] = {"dataplaneV2": True,
                                    "securityGroup": "gke-security-groups@example.com"}


def stack_config(*, zone: str = ZONE, slices: Sequence[Mapping[str, Any]] = ONE_V5E_4,
                 **keys: Any) -> dict[str, Any]:
    """A valid stack's config map: the project, ``zone`` and ``slices``, then ``keys`` as
    given (``**{"raytpu:cluster": {...}}``); everything deep-copied, so a test may mutate."""
    return copy.deepcopy({"gcp:project": PROJECT, "raytpu:zone": zone,
                          "raytpu:slices": list(slices), **keys})


def problems_of(raw: Mapping[str, Any], stack: str = "dev") -> list[str]:
    """The lines ``raw`` is refused with (it must be refused)."""
    with pytest.raises(ConfigError) as e:
        parse_stack_config(stack, dict(raw))
    return e.value.problems
