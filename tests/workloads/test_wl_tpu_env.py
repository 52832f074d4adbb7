"""TPU environment validation: a clear error instead of a hang."""

from __future__ import annotations

import pytest
from raytpu.facts.catalog import slice_shape
from raytpu.workloads.tpu_env import TpuEnvError, check_host_indices, host_identity

V4_16 = slice_shape("v4-16")
SIM = {
    "TPU_NAME": "sim-a",
    "TPU_WORKER_ID": "1",
    "TPU_ACCELERATOR_TYPE": "v4-16",
    "TPU_TOPOLOGY": "2x2x2",
}
REAL = {**SIM, "TPU_WORKER_HOSTNAMES": "host-0,host-1"}


def test_simulated_host_identity() -> None:
    ident = host_identity(SIM, V4_16, real_tpu=False)
    assert (ident.worker_id, ident.slice_id, ident.data_index, ident.num_hosts) == (1, 0, 1, 2)


def test_real_slice_identity_and_multislice_data_index() -> None:
    env = {**REAL, "MEGASCALE_SLICE_ID": "2", "MEGASCALE_NUM_SLICES": "3"}
    ident = host_identity(env, V4_16, real_tpu=True, num_slices=3)
    assert (ident.slice_id, ident.worker_id, ident.data_index, ident.num_hosts) == (2, 1, 5, 6)


@pytest.mark.parametrize(
    ("env", "real", "slices", "message"),
    [
        ({k: v for k, v in REAL.items() if k != "TPU_WORKER_ID"}, True, 1,
         "TPU_WORKER_ID is not set"),
        ({**REAL, "TPU_WORKER_ID": "two"}, True, 1, "TPU_WORKER_ID='two' is not an integer"),
        ({**REAL, "TPU_WORKER_ID": "2"}, True, 1, r"TPU_WORKER_ID=2 is out of range .*0\.\.1"),
        ({**REAL, "TPU_WORKER_HOSTNAMES": "host-0"}, True, 1,
         "TPU_WORKER_HOSTNAMES lists 1 host.* v4-16 has 2"),
        ({k: v for k, v in REAL.items() if k != "TPU_WORKER_HOSTNAMES"}, True, 1,
         "TPU_WORKER_HOSTNAMES lists 0 host"),
        ({**REAL, "TPU_ACCELERATOR_TYPE": "v4-32"}, True, 1,
         "TPU_ACCELERATOR_TYPE='v4-32' but the run asks for 'v4-16'"),
        ({**REAL, "TPU_TOPOLOGY": "2x2x4"}, True, 1, "TPU_TOPOLOGY='2x2x4'"),
        ({k: v for k, v in SIM.items() if k != "TPU_NAME"}, False, 1,
         "TPU_NAME not set on this simulated host"),
        ({**REAL, "MEGASCALE_NUM_SLICES": "2"}, True, 2, "MEGASCALE_SLICE_ID is not set"),
        ({**REAL, "MEGASCALE_SLICE_ID": "0", "MEGASCALE_NUM_SLICES": "4"}, True, 2,
         "MEGASCALE_NUM_SLICES=4 but the run asks for 2"),
    ],
)
def test_bad_environments(env: dict[str, str], real: bool, slices: int, message: str) -> None:
    with pytest.raises(TpuEnvError, match=message):
        host_identity(env, V4_16, real_tpu=real, num_slices=slices)


def test_single_host_slice_needs_no_hostnames() -> None:
    env = {"TPU_WORKER_ID": "0", "TPU_ACCELERATOR_TYPE": "v4-8"}
    assert host_identity(env, slice_shape("v4-8"), real_tpu=True).num_hosts == 1


def test_host_indices_must_cover_every_shard_once() -> None:
    check_host_indices([1, 0, 3, 2])
    with pytest.raises(TpuEnvError, match=r"claim data shards \[0, 1, 1\].*duplicate"):
        check_host_indices([0, 1, 1])
