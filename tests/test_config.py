"""Stack config validation: every problem named by key path, value and valid choices."""

from __future__ import annotations

from typing import Any

import pytest
from raytpu.config.validate import parse_stack_config, stack_warnings
from stack_configs import problems_of, stack_config


def _raw(**overrides: Any) -> dict[str, Any]:
    """A v4-16 stack in us-central2-b (the v4 zone), ``overrides`` replacing its keys."""
    return {**stack_config(zone="us-central2-b", slices=[{"name": "train", "tpu": "v4-16"}]),
            **overrides}


_problems = problems_of


def test_minimal_stack_resolves_shapes_and_defaults() -> None:
    cfg = parse_stack_config("dev", _raw())
    s = cfg.slices[0]
    assert (s.shape.hosts, s.shape.chips_per_vm, s.count, s.elastic) == (2, 4, 1, False)
    assert cfg.region == "us-central2"
    assert cfg.cluster_location == "us-central2-b"
    assert cfg.bucket_name == "acme-ml-dev-raytpu"
    assert cfg.kuberay.mode == "helm"
    assert cfg.image == "us-central2-docker.pkg.dev/acme-ml/raytpu/raytpu:latest"
    assert cfg.cluster.dataplane_v2
    # The one warning: the unstated Dataplane V2 default would replace an older cluster.
    assert [w.split(":", 2)[1] for w in stack_warnings(cfg)] == ["cluster.dataplaneV2"]
    stated = parse_stack_config("dev", _raw(**{"raytpu:cluster": {"dataplaneV2": True}}))
    assert stack_warnings(stated) == []


def test_provider_keys_of_other_namespaces_are_left_alone() -> None:
    cfg = parse_stack_config("dev", _raw(**{"gcp:region": "us-central2", "kubernetes:x": "y"}))
    assert cfg.project == "acme-ml"


def test_camel_case_keys_and_autoscaling() -> None:
    cfg = parse_stack_config("prod", _raw(**{"raytpu:slices": [
        {"name": "v6", "tpu": "v6e-8", "machineType": "ct6e-standard-4t",
         "autoscaling": {"min": 0, "max": 3}, "spot": True},
    ], "raytpu:zone": "us-east5-b"}))
    s = cfg.slices[0]
    assert s.shape.hosts == 2 and s.spot
    assert (s.min_slices, s.initial_slices, s.max_slices) == (0, 1, 3)


def test_catalog_errors_carry_the_key_path_and_valid_choices() -> None:
    problems = _problems(_raw(**{"raytpu:slices": [
        {"name": "a", "tpu": "v4-16"},
        {"name": "b", "tpu": "v4-12"},
    ]}))
    assert len(problems) == 1
    assert problems[0].startswith("raytpu:slices[1].tpu: 'v4-12' is not a TPU v4 accelerator type")
    assert "valid: v4-8, v4-16, v4-32" in problems[0]


def test_every_problem_is_reported_once() -> None:
    problems = _problems({
        "raytpu:zone": "us-central2-b",
        "raytpu:slices": [
            {"name": "a", "tpu": "v4-12"},
            {"name": "b", "tpu": "v4-16", "spto": True},
            {"name": "c", "tpu": "v5litepod-16", "topology": "2x8"},
        ],
        "raytpu:kuberay": {"mode": "hlm"},
        "raytpu:clustr": {},
    })
    joined = "\n".join(problems)
    assert "gcp:project: required key is missing" in joined
    assert "raytpu:slices[1].spto: unknown key; valid keys: name, tpu, topology" in joined
    assert "raytpu:kuberay.mode: 'hlm' is not valid; valid: 'helm', 'gke-addon'" in joined
    assert "raytpu:clustr: unknown key" in joined
    assert "raytpu:slices[0].tpu: 'v4-12'" in joined
    assert (
        "raytpu:slices[2].topology: '2x8' is not a topology of v5litepod-16; valid: 4x4" in joined
    )
    assert len(problems) == 6


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"raytpu:slices": [{"name": "A_b", "tpu": "v4-8"}]}, "raytpu:slices[0].name: 'A_b'"),
        ({"raytpu:slices": [{"name": "a", "tpu": "v4-8"}, {"name": "a", "tpu": "v4-8"}]},
         "raytpu:slices[1].name: 'a' is used by another slice"),
        ({"raytpu:slices": [{"name": "a", "tpu": "v4-8", "count": 0}]},
         "raytpu:slices[0].count: 0 on a fixed group"),
        ({"raytpu:slices": [{"name": "a", "tpu": "v4-8", "count": -1}]},
         "raytpu:slices[0].count: -1 is not valid"),
        ({"raytpu:slices": [{"name": "a", "tpu": "v4-8", "autoscaling": {"min": 3, "max": 2}}]},
         "raytpu:slices[0].autoscaling: min 3 is greater than max 2"),
        ({"raytpu:slices": [{"name": "a", "tpu": "v4-8", "count": 5,
                             "autoscaling": {"min": 0, "max": 2}}]},
         "raytpu:slices[0].count: 5 is outside autoscaling [0, 2]"),
        ({"raytpu:slices": []}, "raytpu:slices: [] is not valid"),
        ({"raytpu:zone": "mars"}, "raytpu:zone: 'mars' is not a GCP zone"),
        ({"raytpu:ray": {"version": "2.30.0"}}, "raytpu:ray.version: '2.30.0' is older"),
        ({"raytpu:network": {"rayAccessCidrs": ["0.0.0.0/0"]}},
         "raytpu:network.rayAccessCidrs[0]: '0.0.0.0/0' opens to the whole internet"),
        ({"raytpu:network": {"rayAccessCidrs": ["10.0.0.300/8"]}},
         "raytpu:network.rayAccessCidrs[0]: '10.0.0.300/8' is not a CIDR block"),
        ({"raytpu:network": {"create": False}}, "raytpu:network.existing: required"),
        ({"raytpu:cluster": {"minMasterVersion": "1.29.1-gke.1"},
          "raytpu:kuberay": {"mode": "gke-addon"}},
         "raytpu:cluster.minMasterVersion: '1.29.1-gke.1' is too old for raytpu:kuberay.mode"),
        ({"raytpu:zone": "us-east5-b", "raytpu:cluster": {"minMasterVersion": "1.30.1-gke.1"},
          "raytpu:slices": [{"name": "a", "tpu": "v6e-16"}]},
         "is too old for TPU v6e"),
    ],
)
def test_bad_input(override: dict[str, Any], expected: str) -> None:
    problems = _problems(_raw(**override))
    assert any(expected in p for p in problems), problems


def test_undocumented_zone_is_a_warning_not_an_error() -> None:
    cfg = parse_stack_config("dev", _raw(**{"raytpu:zone": "us-central1-a",
                                            "raytpu:cluster": {"dataplaneV2": True}}))
    assert stack_warnings(cfg) == [
        "raytpu:zone: TPU v4 (raytpu:slices[0].tpu 'v4-16') is not documented in "
        "'us-central1-a'; documented zones: us-central2-b"
    ]
