"""The TPU catalog against the reference data it was written from.

The reference tables live outside the project (``../shared/ref/tpu``); point
``RAYTPU_TPU_REF`` at a copy elsewhere. Without them the cross-checks skip (and fail when
``RAYTPU_REQUIRE_REF=1``, as CI sets it); the rule-based tests always run.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from raytpu.facts.catalog import (
    GENERATIONS,
    CatalogError,
    accelerator_types,
    slice_shape,
    topology_chips,
    valid_topologies,
)

REF = Path(os.environ.get("RAYTPU_TPU_REF", Path(__file__).parents[1] / ".." / "shared/ref/tpu"))
FAMILY = {"v4": "v4", "v5litepod": "v5e", "v5e": "v5e", "v5p": "v5p", "v6e": "v6e"}


def _rows(name: str) -> list[dict[str, str]]:
    path = REF / name
    if not path.is_file():
        msg = (f"{path} is missing: set RAYTPU_TPU_REF to a folder holding {name} "
               "(the project's shared/ref/tpu reference data)")
        if os.environ.get("RAYTPU_REQUIRE_REF") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize(
    ("tpu", "topology", "chips", "hosts", "machine", "multi"),
    [
        ("v4-8", "2x2x1", 4, 1, "ct4p-hightpu-4t", False),
        ("v4-16", "2x2x2", 8, 2, "ct4p-hightpu-4t", True),  # names count TensorCores
        ("v4-32", "2x2x4", 16, 4, "ct4p-hightpu-4t", True),
        ("v5litepod-1", "1x1", 1, 1, "ct5lp-hightpu-1t", False),
        ("v5litepod-4", "2x2", 4, 1, "ct5lp-hightpu-4t", False),
        ("v5litepod-8", "2x4", 8, 1, "ct5lp-hightpu-8t", False),
        ("v5litepod-16", "4x4", 16, 4, "ct5lp-hightpu-4t", True),  # names count chips
        ("v5e-16", "4x4", 16, 4, "ct5lp-hightpu-4t", True),  # Ray's spelling
        ("v5p-8", "2x2x1", 4, 1, "ct5p-hightpu-4t", False),
        ("v5p-32", "2x2x4", 16, 4, "ct5p-hightpu-4t", True),
        ("v6e-4", "2x2", 4, 1, "ct6e-standard-4t", False),
        ("v6e-8", "2x4", 8, 1, "ct6e-standard-8t", False),
        ("v6e-64", "8x8", 64, 16, "ct6e-standard-4t", True),
    ],
)
def test_slice_shapes(
    tpu: str, topology: str, chips: int, hosts: int, machine: str, multi: bool
) -> None:
    s = slice_shape(tpu)
    assert (s.topology, s.chips, s.hosts, s.machine_type, s.multi_host) == (
        topology, chips, hosts, machine, multi,
    )
    assert s.hosts * s.chips_per_vm == s.chips
    assert s.node_selector == {
        "cloud.google.com/gke-tpu-accelerator": s.generation.accelerator_label,
        "cloud.google.com/gke-tpu-topology": topology,
        "node.kubernetes.io/instance-type": machine,
    }


def test_one_shape_on_two_machine_types_gets_two_selectors() -> None:
    """v5e 2x4: one ct5lp-hightpu-8t VM or two -4t VMs; each selector matches its own nodes."""
    one = slice_shape("v5litepod-8", machine_type="ct5lp-hightpu-8t")
    two = slice_shape("v5litepod-8", machine_type="ct5lp-hightpu-4t")
    assert one.topology == two.topology == "2x4"
    assert one.node_selector != two.node_selector
    assert one.node_selector["node.kubernetes.io/instance-type"] == "ct5lp-hightpu-8t"


def test_eight_chip_v5e_v6e_can_be_two_four_chip_hosts() -> None:
    for tpu, machine in (("v5litepod-8", "ct5lp-hightpu-4t"), ("v6e-8", "ct6e-standard-4t")):
        s = slice_shape(tpu, machine_type=machine)
        assert (s.hosts, s.chips_per_vm, s.multi_host) == (2, 4, True)


def test_tensorcore_names_reject_odd_counts() -> None:
    with pytest.raises(CatalogError) as e:
        slice_shape("v4-12")
    assert e.value.field == "tpu"
    assert "v4-8" in e.value.valid and "v4-16" in e.value.valid
    with pytest.raises(CatalogError, match="count TensorCores"):
        slice_shape("v5p-9")


@pytest.mark.parametrize(
    ("tpu", "topology", "machine", "field"),
    [
        ("v9-8", None, None, "tpu"),
        ("v4-0", None, None, "tpu"),
        ("v5litepod-16", "2x8", None, "topology"),  # 2x8 is not a v5e topology
        ("v4-16", "2x2x1", None, "topology"),  # chips do not match the name
        ("v5litepod-16", None, "ct5lp-hightpu-8t", "machineType"),  # 8t VMs are single-host
        ("v4-8", None, "ct5p-hightpu-4t", "machineType"),
    ],
)
def test_bad_shapes_name_the_field(
    tpu: str, topology: str | None, machine: str | None, field: str
) -> None:
    with pytest.raises(CatalogError) as e:
        slice_shape(tpu, topology, machine)
    assert e.value.field == field
    assert e.value.valid, "the error must list the valid choices"


def test_alternative_topology_with_same_chips() -> None:
    s = slice_shape("v4-1024", topology="4x8x16")
    assert (s.chips, s.hosts) == (512, 128)


def test_large_3d_topologies_are_sorted_multiples_of_four() -> None:
    for gen in ("v4", "v5p"):
        for t in valid_topologies(gen)[4:]:
            dims = [int(d) for d in t.split("x")]
            assert dims == sorted(dims) and all(d % 4 == 0 for d in dims), t
            assert topology_chips(t) <= GENERATIONS[gen].max_chips


def test_largest_documented_slices() -> None:
    assert slice_shape("v4-6144").topology == "12x16x16"
    assert slice_shape("v5p-12288").topology == "16x16x24"
    assert accelerator_types("v5e")[-1] == "v5litepod-256"
    assert accelerator_types("v6e")[-1] == "v6e-256"


def test_peak_flops_drive_mfu() -> None:
    assert slice_shape("v5litepod-16").peak_bf16_flops == 16 * 197e12
    assert slice_shape("v4-16").peak_bf16_flops == 8 * 275e12


def test_matches_cloud_tpu_docs_table() -> None:
    """Every row of the hand-assembled docs table (incl. 1t/8t shapes) resolves identically."""
    rows = [r for r in _rows("tpu_machine_types_docs.csv") if r["family"] in FAMILY]
    assert len(rows) > 40
    for r in rows:
        name = r["tpu_api_accelerator_type"].split(" ")[0]
        s = slice_shape(name, r["topology"], r["gce_machine_type"])
        assert s.generation.name == FAMILY[r["family"]]
        assert s.generation.accelerator_label == r["gke_tpu_accelerator_label"]
        assert s.chips == int(r["total_chips"])
        assert s.tensorcores == int(r["total_tensorcores"])
        assert s.hosts == int(r["gke_nodes_vms"])
        assert s.multi_host == (r["host_mode"] == "multi-host")


def test_matches_xpk_catalog() -> None:
    """xpk's table: labels, machine types and host counts agree for every shape we accept.

    Default topologies agree for v5e/v5p/v6e; for v4 xpk's defaults past the documented
    ladder are 4x4xN (it does not enforce A<=B<=C), we pick the most cubic shape as GKE's
    docs do (v4-6144 = 12x16x16).
    """
    checked = 0
    for r in _rows("tpu_catalog_xpk.csv"):
        gen = FAMILY.get(r["family"])
        if gen is None or int(r["total_chips"]) > GENERATIONS[gen].max_chips:
            continue
        dims = [int(d) for d in r["topology"].split("x")]
        if dims != sorted(dims) or r["topology"] not in valid_topologies(gen):
            continue
        s = slice_shape(r["accelerator_type_name"], r["topology"], r["gce_machine_type"])
        assert s.generation.accelerator_label == r["gke_tpu_accelerator_label"]
        assert s.hosts == int(r["hosts_vms_per_slice"])
        assert s.multi_host == (r["xpk_sets_placement_compact_and_tpu_topology"] == "True")
        if r["is_default_topology_for_accelerator_type"] == "True" and gen != "v4":
            assert slice_shape(r["accelerator_type_name"]).topology == r["topology"]
        checked += 1
    assert checked > 300


# -- Ray's own TPU topology rule ------------------------------------------------------------


def _ray_accepts() -> object:
    try:
        from ray._private.accelerators.tpu import TPUAcceleratorManager
    except ImportError:
        pytest.skip("ray is not installed (pip install -e '.[workloads]'): the catalog's copy "
                    "of Ray's TPU topology rule cannot be checked against Ray itself")
    return TPUAcceleratorManager.is_valid_tpu_accelerator_topology


def test_ray_topology_rule_matches_ray_for_every_catalog_shape() -> None:
    is_valid = _ray_accepts()
    import ray
    from raytpu.facts.ray_topologies import RAY_VERSION_OF_TOPOLOGIES

    assert ray.__version__ == RAY_VERSION_OF_TOPOLOGIES, "re-read Ray's table for this version"
    checked = 0
    for gen in GENERATIONS.values():
        for t in valid_topologies(gen.name):
            assert gen.ray_topologies.accepts(t) == is_valid(gen.ray_accelerator_type, t), (  # type: ignore[operator]
                gen.name, t)
            checked += 1
    assert checked > 400


def test_ray_topology_rule_matches_ray_table_entries() -> None:
    """Ray's own table, unsorted 3-D shapes included (16x4x4 is in Ray's v5p set)."""
    _ray_accepts()
    from ray._private.accelerators import tpu as ray_tpu

    for gen in GENERATIONS.values():
        key = gen.ray_accelerator_type.removeprefix("TPU-").lower()
        table = ray_tpu.VALID_TPU_TOPOLOGY[key]
        assert all(gen.ray_topologies.accepts(t) for t in table), gen.name
        assert not gen.ray_topologies.accepts("4x4x4x4")


def test_ray_rejects_gke_documented_v4_shapes() -> None:
    assert slice_shape("v4-16").ray_accepts_topology
    assert not slice_shape("v4-4096", topology="8x16x16").ray_accepts_topology  # y > 12
    assert not slice_shape("v4-6144").ray_accepts_topology  # 12x16x16: z <= 16 but y > 12
    assert slice_shape("v5p-12288").ray_accepts_topology  # 16x16x24 is Ray's v5p maximum


# tpu_chip_specs.csv's SOURCE.txt: each generation's page states HBM in its own unit, and
# the pages disagree on GB vs GiB for v5p and v6e; either reading is accepted for those two.
_UNIT = {"GB": 10**9, "GiB": 2**30}
_EITHER_UNIT = {"v5p", "v6e"}


def test_peak_flops_and_hbm_match_the_chip_specs() -> None:
    specs = {r["generation"]: r for r in _rows("tpu_chip_specs.csv")}
    for name, gen in GENERATIONS.items():
        row = specs[name]  # every generation of the catalog has its sourced row
        assert gen.peak_bf16_flops_per_chip == float(row["peak_bf16_tflops_per_chip"]) * 1e12, name
        assert gen.tensorcores_per_chip == int(row["tensorcores_per_chip"]), name
        hbm = int(row["hbm_per_chip"])
        units = set(_UNIT) if name in _EITHER_UNIT else {row["hbm_unit_as_stated"]}
        assert gen.hbm_bytes_per_chip in {hbm * _UNIT[u] for u in units}, (
            name, gen.hbm_bytes_per_chip, row["hbm_per_chip"], row["hbm_unit_as_stated"])


# Reads the reference data beside the checkout (../shared/ref): deselected by name where it is
# absent (-m "not ref", .github/workflows/preview.yml; docs/tests-in-ci.md).
pytestmark = pytest.mark.ref
