"""The slice context a user's command sees: the documented variables, their agreement with
what GKE's TPU webhook and device plugin inject (the platform's values win on a real slice),
and the launcher command line that carries a command."""

from __future__ import annotations

from typing import Any

import pytest
from raytpu.components.ray_env import tpu_env
from raytpu.facts.catalog import slice_shape
from raytpu.facts.versions import Ports
from raytpu.spec.training import LaunchOptions, TrainConfig, from_argv, to_argv
from raytpu.workloads import SliceContext, slice_context
from raytpu.workloads.context import SliceContextError, command_env

V5E_16 = slice_shape("v5litepod-16")  # 4 hosts x 4 chips, 4x4


def _ctx(**kw: Any) -> SliceContext:
    base: dict[str, Any] = dict(
        slice_index=1, num_slices=2, host_index=3, hosts_per_slice=V5E_16.hosts,
        chips_per_host=V5E_16.chips_per_vm, topology=V5E_16.topology,
        accelerator_type=V5E_16.accelerator_type, coordinator_address="10.0.0.5:41000",
        checkpoint_dir="gs://b/runs/r1/checkpoints",
        worker_hostnames=("10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"), slice_name="g-1")
    return SliceContext(**{**base, **kw})


def test_the_context_round_trips_through_the_documented_variables() -> None:
    ctx = _ctx()
    env = ctx.env()
    assert (ctx.process_index, ctx.process_count, ctx.is_coordinator) == (7, 8, False)
    assert env["RAYTPU_PROCESS_INDEX"] == "7" and env["RAYTPU_PROCESS_COUNT"] == "8"
    assert env["TPU_WORKER_ID"] == env["RAYTPU_HOST_INDEX"] == "3"
    megascale = {"MEGASCALE_SLICE_ID": "1", "MEGASCALE_NUM_SLICES": "2"}
    assert slice_context({**env, **megascale}) == ctx


def test_process_index_is_slice_major() -> None:
    """Slice s, host h of H hosts is process s * H + h: the hosts of one slice are
    consecutive (numbers where host * slices + slice would differ: 2 * 4 + 1 = 9, not 7)."""
    assert _ctx(slice_index=2, num_slices=3, host_index=1).process_index == 9
    order = [(s, h) for s in range(3) for h in range(V5E_16.hosts)]
    assert [_ctx(slice_index=s, num_slices=3, host_index=h).process_index
            for s, h in order] == list(range(len(order)))


def test_values_agree_with_what_the_platform_injects() -> None:
    """TPU_ACCELERATOR_TYPE/TPU_TOPOLOGY in the device plugin's form, the very values the
    RayCluster's worker containers carry; one hostname per host of the slice, in worker-id
    order, as the webhook lists them; MEGASCALE_PORT the webhook's 8081."""
    env = _ctx().env()
    assert {e["name"]: e["value"] for e in tpu_env(V5E_16)} == {
        "TPU_ACCELERATOR_TYPE": env["TPU_ACCELERATOR_TYPE"],
        "TPU_TOPOLOGY": env["TPU_TOPOLOGY"]} == {
        "TPU_ACCELERATOR_TYPE": "v5litepod-16", "TPU_TOPOLOGY": "4x4"}
    assert len(env["TPU_WORKER_HOSTNAMES"].split(",")) == V5E_16.hosts
    assert Ports.MEGASCALE == 8081


def test_on_a_real_slice_the_platforms_values_win() -> None:
    webhook = {  # what the TPU webhook and device plugin set on host 3 of replica 1
        "TPU_WORKER_ID": "3", "TPU_NAME": "v5e-16-1", "TPU_ACCELERATOR_TYPE": "v5litepod-16",
        "TPU_TOPOLOGY": "4x4",
        "TPU_WORKER_HOSTNAMES": ",".join(f"v5e-16-1-{i}.rc-headless" for i in range(4))}
    megascale = {"MEGASCALE_SLICE_ID": "1", "MEGASCALE_NUM_SLICES": "2",
                 "MEGASCALE_COORDINATOR_ADDRESS": "10.0.0.5", "MEGASCALE_PORT": "8081"}
    env = command_env(_ctx(), webhook, megascale)
    assert env["TPU_WORKER_HOSTNAMES"] == webhook["TPU_WORKER_HOSTNAMES"]
    assert env["TPU_NAME"] == "v5e-16-1"
    assert env["MEGASCALE_PORT"] == "8081"
    seen = slice_context({**webhook, **env})
    assert seen.worker_hostnames[0] == "v5e-16-1-0.rc-headless" and seen.process_index == 7


def test_the_local_slice_gets_the_same_variables() -> None:
    local = {"TPU_WORKER_ID": "3", "TPU_NAME": "sim-v5litepod-16-s1",
             "TPU_ACCELERATOR_TYPE": "v5litepod-16", "TPU_TOPOLOGY": "4x4"}
    env = command_env(_ctx(num_slices=1, slice_index=0), local, {"MEGASCALE_SLICE_ID": "9"})
    assert env["TPU_WORKER_HOSTNAMES"] == "10.0.1.1,10.0.1.2,10.0.1.3,10.0.1.4"
    assert "MEGASCALE_SLICE_ID" not in env  # one slice: no multislice variables


def test_a_host_whose_variables_disagree_is_refused() -> None:
    env = _ctx(num_slices=1, slice_index=0).env()
    with pytest.raises(SliceContextError, match="RAYTPU_HOST_INDEX=3 disagrees"):
        slice_context({**env, "TPU_WORKER_ID": "2"})  # a webhook's duplicate worker id
    with pytest.raises(SliceContextError, match="RAYTPU_NUM_SLICES is not set: this process is "
                                                "not a host of a raytpu run"):
        slice_context({})


def test_host_context_checks_the_tpu_variables_against_the_run() -> None:
    pytest.importorskip("ray.train")
    from raytpu.workloads.command import host_context
    from raytpu.workloads.tpu_env import TpuEnvError

    config = {"train": TrainConfig(tpu="v4-16").to_dict(), "checkpoint_dir": "/c"}
    env = {"TPU_WORKER_ID": "1", "TPU_NAME": "sim", "TPU_ACCELERATOR_TYPE": "v4-16",
           "TPU_TOPOLOGY": "2x2x2", "RAYTPU_COORDINATOR_ADDRESS": "127.0.0.1:5",
           "RAYTPU_SLICE_HOSTS": "127.0.0.1,127.0.0.1", "PJRT_DEVICE": "CPU"}
    ctx = host_context(config, env)
    assert (ctx.host_index, ctx.hosts_per_slice, ctx.chips_per_host) == (1, 2, 4)
    with pytest.raises(TpuEnvError, match="TPU_TOPOLOGY='4x4' but v4-16 is '2x2x2'"):
        host_context(config, {**env, "TPU_TOPOLOGY": "4x4"})


def test_the_first_failing_host_of_the_last_attempt_sets_the_status() -> None:
    pytest.importorskip("ray.train")
    from raytpu.workloads.command import first_failure

    exits = [{"attempt": "a", "where": "host 1", "rc": 3, "time": 1.0},
             {"attempt": "b", "where": "host 0", "rc": 0, "time": 2.0},
             {"attempt": "b", "where": "host 1", "rc": 7, "time": 4.0},
             {"attempt": "b", "where": "host 2", "rc": -9, "time": 3.0}]
    assert first_failure(exits) == exits[3]
    assert first_failure(exits[1:2]) is None


def test_the_launcher_carries_a_command_and_only_the_slice_shape() -> None:
    cfg = TrainConfig(tpu="v5litepod-8", topology="2x4", machine_type="ct5lp-hightpu-4t",
                      slices=2, steps=9)
    opts = LaunchOptions(storage_path="gs://b/runs", run_name="r", slice_group="g",
                         command=("python", "t.py", "--steps", "5", "--", "--x"))
    argv = to_argv(cfg, opts)
    assert "--steps" not in argv[:argv.index("--")]  # the trainer's flags are not the command's
    back_cfg, back_opts = from_argv(argv)
    assert back_opts == opts
    assert (back_cfg.tpu, back_cfg.topology, back_cfg.machine_type, back_cfg.slices) == (
        "v5litepod-8", "2x4", "ct5lp-hightpu-4t", 2)
    assert back_cfg.shape().hosts == 2
