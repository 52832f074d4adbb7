"""Resident hosts: per-host training processes that outlive the run's driver.

Ray Train's workers belong to the run's driver, and on KubeRay the driver runs in the head
pod, so a lost head takes them too: the resubmitted run starts new processes (Ray, torch,
torch_xla, the corpus, the first step's compile), about 40 s on the simulation, minutes
on TPU. With ``--resident`` the launcher instead puts one detached actor per host on a
detached placement group of the run's slices, both named after the run. A lost driver
leaves them: with GCS fault tolerance the restarted GCS still knows them (without it they
go with their nodes). The resubmitted run (same ``--run-name``) finds them by name, has
them stop what they were doing at a step they all agree on, and resumes from its last
checkpoint in processes that have imported, initialised and compiled everything.

Checkpoints are the trainer's own files (``state.pt`` and ``meta.json``, written last) in
``<storage path>/<run name>/checkpoint_step<N>_<time>`` through fsspec, the layout Ray
Train's run uses, so a folder or ``gs://`` works alike. Only one run of a name at a time:
a second driver for the same name takes the hosts over. A lost host (an actor gone)
tears the group down and starts a new one from the last checkpoint, up to
``--max-failures`` times. The run's end kills the actors and frees the slices; hosts no
driver has heartbeated for :func:`orphan_timeout_s` free them on their own.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from raytpu.facts.gcs_ft_env import KUBERAY_RECONNECT_TIMEOUT_S, RECONNECT_ENV
from raytpu.spec.scaling import SCALE_UP_TIMEOUT_S, WORKER_GROUP_START_TIMEOUT_ENV, TrainScaling
from raytpu.spec.training import LaunchOptions, TrainConfig

from .gang import group_envs, host_order, request_capacity, setup_worker, worker_info
from .ray_hooks import RayHooks

NAMESPACE = "raytpu"
"""The Ray namespace of a resident run's driver, its actors and placement group: a
resubmitted driver looks them up there (placement group names are per namespace)."""
PREFIX = "raytpu-resident-"
ATTACH_TIMEOUT_S = 30.0  # a resident host that does not answer in this long is lost
HEARTBEAT_S = 5.0  # the driver tells its hosts it is alive this often
ORPHAN_ENV = "RAYTPU_RESIDENT_ORPHAN_S"


def orphan_timeout_s(env: Mapping[str, str] = os.environ) -> float:
    """How long resident hosts wait for a driver before they free their slices and exit (a
    run stopped for good must not hold TPUs): the hosts' raylets wait no longer than
    ``RAY_gcs_rpc_server_reconnect_timeout_s`` for a lost head (KubeRay sets 600 s on
    workers, the stack's ``workerReconnectTimeoutSeconds`` more) and exit with every actor
    on them, so a longer orphan timer could never run out. ``$RAYTPU_RESIDENT_ORPHAN_S``
    shortens it, never past that limit."""
    reconnect = float(env.get(RECONNECT_ENV, KUBERAY_RECONNECT_TIMEOUT_S))
    return min(float(env.get(ORPHAN_ENV, reconnect)), reconnect)
SINK_TIMEOUT_S = 30.0  # after that, step records for a lost driver are dropped
KEEP_CHECKPOINTS = 2


class Superseded(Exception):
    """A newer driver of the same run took the hosts over (this run ends here)."""


def group_name(run_name: str) -> str:
    return f"{PREFIX}{run_name}"


def _actor_name(run_name: str, bundle: int) -> str:
    return f"{group_name(run_name)}-{bundle}"


# -- checkpoints -----------------------------------------------------------------------


def _checkpoint_dirs(run_dir: str) -> list[tuple[int, str]]:
    """(step, path) of the run's complete checkpoints (``meta.json`` present), oldest first."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(run_dir)
    try:
        entries = fs.ls(root, detail=False)
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        name = str(entry).rstrip("/").rsplit("/", 1)[-1]
        if name.startswith("checkpoint_step") and fs.exists(f"{entry}/meta.json"):
            found.append((int(name[len("checkpoint_step"):].split("_")[0]), str(entry)))
    return sorted(found)


def latest_checkpoint(run_dir: str) -> dict[str, Any] | None:
    """The state of the run's latest complete checkpoint, or None."""
    import fsspec

    from .trainer import read_checkpoint

    dirs = _checkpoint_dirs(run_dir)
    if not dirs:
        return None
    fs, _ = fsspec.core.url_to_fs(run_dir)
    with tempfile.TemporaryDirectory(prefix="raytpu-restore-") as d:
        fs.get(f"{dirs[-1][1]}/", f"{d}/", recursive=True)
        return read_checkpoint(Path(d))


def write_run_checkpoint(run_dir: str, step: int, state: dict[str, Any]) -> None:
    """Write ``state`` as the run's checkpoint of ``step`` (``meta.json`` last: a checkpoint
    cut short is never restored), then keep the newest :data:`KEEP_CHECKPOINTS`."""
    import fsspec

    from .trainer import META_FILE, STATE_FILE, write_checkpoint

    fs, root = fsspec.core.url_to_fs(run_dir)
    target = f"{root}/checkpoint_step{step:07d}_{time.strftime('%Y%m%d-%H%M%S')}"
    fs.makedirs(target, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="raytpu-ckpt-") as d:
        write_checkpoint(Path(d), state)
        fs.put(f"{d}/{STATE_FILE}", f"{target}/{STATE_FILE}")
        fs.put(f"{d}/{META_FILE}", f"{target}/{META_FILE}")
    for _, old in _checkpoint_dirs(run_dir)[:-KEEP_CHECKPOINTS]:
        fs.rm(old, recursive=True)


# -- on each host ----------------------------------------------------------------------


class ResidentHooks(RayHooks):
    """:class:`RayHooks` without Ray Train: checkpoints in the run's folder, and a stop
    that every host takes at the same checkpoint once a newer driver asks for it."""

    def __init__(self, sink: Any, rank: int, run_dir: str, stop: threading.Event,
                 started: tuple[float, float] | None = None) -> None:
        super().__init__(sink, rank, run_dir, started)
        self._run_dir = run_dir
        self._stop = stop

    def restore(self) -> dict[str, Any] | None:
        return latest_checkpoint(self._run_dir)

    def save(self, step: int, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        import torch
        import torch.distributed as dist

        if state is not None:
            write_run_checkpoint(self._run_dir, step, state)
            self._pending.append(self._sink.checkpointed.remote(step))
        # Collective, after rank 0 wrote: every host leaves at the same checkpoint if any
        # of them was asked to (hosts told at different steps must not part mid-step).
        flag = torch.tensor([1 if self._stop.is_set() else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if int(flag.item()):
            raise Superseded(f"stopped at the checkpoint of step {step} for a newer driver")

    def settle(self) -> None:
        pass  # save() returns once the checkpoint is complete on every host

    def holding(self, step: int) -> None:
        super().holding(step)
        # The rehearsed kill takes the driver and the head; these hosts stay, and wait
        # for the resubmitted run (every host is here, after the same step).
        while not self._stop.wait(0.2):
            pass
        raise Superseded(f"held after step {step}; a newer driver took over")

    # The driver's sink may be gone (with its head, or a driver killed alone): its step
    # records are then lost, not the run; the next driver records from its checkpoint on.

    def _send(self) -> None:
        try:
            super()._send()
        except ray.exceptions.RayError:
            self._pending.clear()

    def flush(self) -> None:
        self._send()
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            ray.get(self._pending, timeout=SINK_TIMEOUT_S)
        self._pending.clear()


class ResidentHost:
    """One host's resident training process (a detached, threaded Ray actor)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one run at a time
        self._stop = threading.Event()
        self.rank = -1
        self.world = 0
        self._seen = time.monotonic()
        orphan_s = orphan_timeout_s()
        threading.Thread(target=self._watch, args=(orphan_s,), name="raytpu-orphan",
                         daemon=True).start()

    def _watch(self, orphan_s: float) -> None:
        while time.monotonic() - self._seen < orphan_s:
            time.sleep(min(1.0, orphan_s / 10))
        # Free the slices' heads, then the group: removing it kills every host of it (this
        # one too); exit if that fails.
        with contextlib.suppress(Exception):
            pg = ray.util.get_current_placement_group()
            if pg is not None:
                _release_slice_heads(ray.util.placement_group_table(pg)["name"])
                remove_placement_group(pg)
        os._exit(0)

    def heartbeat(self) -> None:
        """A driver of this run is alive."""
        self._seen = time.monotonic()

    def info(self) -> dict[str, Any]:
        self._seen = time.monotonic()
        return {**worker_info(), "pid": os.getpid(), "rank": self.rank}

    def join(self, env: dict[str, str], addr: str, port: int, rank: int, world: int) -> None:
        """Join the group's gloo process group (once, when the group is made)."""
        setup_worker(env, addr, port, rank, world, gloo=True)
        self.rank, self.world = rank, world

    def supersede(self) -> None:
        """Ask the run in progress, if any, to stop at its next checkpoint (or hold)."""
        self._stop.set()

    def run(self, train: dict[str, Any], sink: Any, run_dir: str) -> None:
        """Train from the run's latest checkpoint to the end; waits for a superseded run
        to stop first."""
        began = time.time()
        from .trainer import train_host  # imported already, but for the first run

        with self._lock:
            self._stop = threading.Event()
            hooks = ResidentHooks(sink, self.rank, run_dir, self._stop, (began, time.time()))
            train_host(TrainConfig.from_dict(train), self.rank, self.world, hooks)


# -- the driver ------------------------------------------------------------------------


# Ray's node label of a TPU slice's name (ray._raylet.RAY_NODE_TPU_SLICE_NAME_KEY, typed
# nowhere): SlicePlacementGroup takes a slice named in its bundle_label_selector as given.
SLICE_NAME_LABEL = "ray.io/tpu-slice-name"


def _head_group(name: str, slice_index: int) -> str:
    return f"{name}-head-{slice_index}"


def _hold_slice_heads(scaling: TrainScaling, name: str, timeout: float) -> list[str]:
    """Take each slice by its ``TPU-<pod type>-head`` resource in a detached placement group
    named after the run, and return the slices' names. Ray's ``reserve_tpu_slice`` takes a
    slice the same way, but its group belongs to the driver: once it is gone (released, or
    with the driver) another run's reservation lands on this slice's worker 0 while its hosts
    are busy here, and that run waits out its whole timeout. Held as long as the run's
    slices are (:func:`_release_slice_heads`)."""
    from ray._private.accelerators.tpu import fetch_tpu_slice_name_from_pg
    from ray.util.placement_group import placement_group

    names: list[str] = []
    for i in range(scaling.slices):
        pg = placement_group(
            [{f"TPU-{scaling.pod_type}-head": 1}], name=_head_group(name, i),
            lifetime="detached", bundle_label_selector=[{
                "ray.io/tpu-worker-id": "0", "ray.io/tpu-pod-type": scaling.pod_type}])
        ready, _ = ray.wait([pg.ready()], timeout=timeout)
        slice_name = fetch_tpu_slice_name_from_pg(pg) if ready else None
        if slice_name is None:
            remove_placement_group(pg)
            _release_slice_heads(name)
            raise TimeoutError(f"no free {scaling.pod_type} slice within {timeout:g} s "
                               f"(slice {i + 1} of {scaling.slices})")
        names.append(slice_name)
    return names


def _release_slice_heads(name: str) -> None:
    """Remove the run's slice-head groups (what exists of them)."""
    i = 0
    while True:
        try:
            pg = ray.util.get_placement_group(_head_group(name, i))
        except ValueError:
            return
        with contextlib.suppress(Exception):
            remove_placement_group(pg)
        i += 1


def _reserve(cfg: TrainConfig, scaling: TrainScaling, name: str) -> PlacementGroup:
    from ray.util.tpu import SlicePlacementGroup, get_tpu_version_from_type

    # As long as Ray Train would wait for its worker group (TPU VMs take minutes from zero).
    timeout = float(os.environ.get(WORKER_GROUP_START_TIMEOUT_ENV, SCALE_UP_TIMEOUT_S))
    # Multi-host slices are taken by their heads first, held for the run's lifetime; the
    # slice group then names them, so SlicePlacementGroup reserves no head of its own.
    slices = (_hold_slice_heads(scaling, name, timeout) if scaling.hosts_per_slice > 1
              else [])
    selector = [{SLICE_NAME_LABEL: s} for s in slices
                for _ in range(scaling.hosts_per_slice)] or None
    try:
        spg = SlicePlacementGroup(
            topology=scaling.topology,
            accelerator_version=get_tpu_version_from_type(scaling.accelerator_type),
            resources_per_bundle=dict(scaling.resources_per_worker), strategy="STRICT_SPREAD",
            name=name, lifetime="detached", num_slices=cfg.slices,
            head_reservation_timeout_s=timeout, bundle_label_selector=selector)
        pg = spg.placement_group
        assert pg is not None
        ray.get(pg.ready(), timeout=timeout)
    except BaseException:
        _release_slice_heads(name)
        raise
    return pg


def _create(cfg: TrainConfig, opts: LaunchOptions, scaling: TrainScaling) -> list[Any]:
    """A new group: the slices reserved, an actor per host, their gloo group formed."""
    name = group_name(opts.run_name)
    pg = _reserve(cfg, scaling, name)
    actor = ray.remote(ResidentHost)
    resources = dict(scaling.resources_per_worker)
    cpus = resources.pop("CPU", 0)
    hosts: list[Any] = [
        actor.options(
            name=_actor_name(opts.run_name, b), namespace=NAMESPACE, lifetime="detached",
            num_cpus=cpus, resources=resources, max_concurrency=4,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                pg, placement_group_bundle_index=b),
        ).remote()
        for b in range(scaling.num_workers)
    ]
    infos = ray.get([h.info.remote() for h in hosts])
    # Ranks in slice order, each slice's TPU worker 0 first (the coordinator's host).
    order = sorted(range(len(hosts)), key=lambda i: (infos[i]["slice"], host_order(infos[i])))
    hosts, infos = [hosts[i] for i in order], [infos[i] for i in order]
    envs = group_envs(infos, cfg.slices)
    ray.get([h.join.remote(env, infos[0]["ip"], int(infos[0]["port"]), rank, len(hosts))
             for rank, (h, env) in enumerate(zip(hosts, envs, strict=True))])
    return hosts


def attach(run_name: str) -> list[Any] | None:
    """The run's resident hosts in rank order, if the whole group is alive; None (and
    whatever was left of it torn down) otherwise."""
    try:
        pg = ray.util.get_placement_group(group_name(run_name))
    except ValueError:
        return None
    hosts = []
    for bundle in range(pg.bundle_count):
        try:
            hosts.append(ray.get_actor(_actor_name(run_name, bundle), namespace=NAMESPACE))
        except ValueError:
            teardown(run_name)
            return None
    try:
        infos: list[dict[str, Any]] = ray.get([h.info.remote() for h in hosts],
                                              timeout=ATTACH_TIMEOUT_S)
    except (ray.exceptions.RayError, TimeoutError):
        teardown(run_name)
        return None
    ranked = sorted(zip(infos, hosts, strict=True), key=lambda p: int(p[0]["rank"]))
    if [int(i["rank"]) for i, _ in ranked] != list(range(len(hosts))):
        teardown(run_name)  # a group made by a driver that died before joining it
        return None
    return [h for _, h in ranked]


def teardown(run_name: str) -> None:
    """Kill the run's resident actors and free its slices (what exists of them)."""
    try:
        pg = ray.util.get_placement_group(group_name(run_name))
    except ValueError:
        return
    for bundle in range(pg.bundle_count):
        try:
            ray.kill(ray.get_actor(_actor_name(run_name, bundle), namespace=NAMESPACE))
        except ValueError:
            continue
    remove_placement_group(pg)
    _release_slice_heads(group_name(run_name))


def _run(hosts: list[Any], cfg: TrainConfig, sink: Any, run_dir: str) -> None:
    """The run on every host, heartbeating them; raises the first host's failure."""
    pending = [h.run.remote(cfg.to_dict(), sink, run_dir) for h in hosts]
    while pending:
        ready, pending = ray.wait(pending, num_returns=len(pending), timeout=HEARTBEAT_S)
        ray.get(ready)
        for h in hosts:
            h.heartbeat.remote()


def pids(hosts: list[Any]) -> list[int]:
    """The resident hosts' process ids, in rank order."""
    return [int(i["pid"]) for i in ray.get([h.info.remote() for h in hosts])]


# Told each time the run gets its hosts: whether they were found (a resumed run) and pids.
HostsCallback = Callable[[bool, list[int]], None]


def fit_resident(cfg: TrainConfig, opts: LaunchOptions, sink: Any,
                 on_hosts: HostsCallback | None = None) -> None:
    """Run ``cfg`` to its last step on the run's resident hosts (found or made); raises
    once ``opts.max_failures`` is spent."""
    namespace = ray.get_runtime_context().namespace
    if namespace != NAMESPACE:
        raise RuntimeError(f"resident hosts need a driver in Ray namespace {NAMESPACE!r} "
                           f"(ray.init(namespace=...)), not {namespace!r}: a resubmitted "
                           "driver finds the hosts' placement group there")
    run_dir = f"{opts.storage_path.rstrip('/')}/{opts.run_name}"
    scaling = TrainScaling.of(cfg, opts.slice_group)
    if scaling.capacity_request:
        request_capacity(scaling.capacity_request)
    try:
        hosts = attach(opts.run_name)
        failures = 0
        while True:
            found = hosts is not None
            if hosts is None:
                hosts = _create(cfg, opts, scaling)
            else:
                ray.get([h.supersede.remote() for h in hosts])
            if on_hosts is not None:
                on_hosts(found, pids(hosts))
            try:
                _run(hosts, cfg, sink, run_dir)
                break
            except ray.exceptions.RayError:
                failures += 1
                teardown(opts.run_name)
                hosts = None
                if failures > opts.max_failures:
                    raise
        teardown(opts.run_name)
    finally:
        if scaling.capacity_request:
            request_capacity([])
