"""A local Ray cluster whose nodes look to Ray exactly like the hosts of TPU slices.

One CPU-only head node (as on KubeRay, where the head pod has no TPU) plus one
``ray start`` node per simulated TPU host, each with ``--resources '{"TPU": chips_per_vm}'``
and the four variables Ray's TPU manager reads (``TPU_NAME``, ``TPU_WORKER_ID``,
``TPU_ACCELERATOR_TYPE``, ``TPU_TOPOLOGY``); without any one of them Ray queries the GCE
metadata server, with no timeout. Ray then advertises what a real slice does: the
``TPU-<type>-head`` resource on worker 0, the slice-name resource and ``ray.io/tpu-*``
labels (shared/ref/notes/ray-torchxla.md §4.1).

Every node is started in its own session, so its process group holds everything it
spawned (raylet, agents, workers): killing that group is a host's preemption, and
stopping the cluster kills only those groups, never ``ray stop`` (machine-wide). The OS
side of that (groups, marked processes, signals) is :mod:`raytpu.workloads.processes`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from raytpu.facts.catalog import SliceShape
from raytpu.spec import ray_auth

from .gcs_redis import GcsRedis
from .processes import (
    free_port,
    group_alive,
    group_members,
    kill_group,
    kill_pids,
    marked,
    psutil_module,
    wait_group_gone,
    wait_pids_gone,
)

OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the trainer moves no objects
NODE_START_TIMEOUT_S = 60.0

# Ray observability that only the dashboard's task views and debug logs read, off in every
# process of a simulated cluster (each Ray process pays for it on the hosts' cores):
# per-worker task-event reports to the GCS every second, and event-loop handler stats.
# Together ~2% of a core for an idle 3-node cluster; `ray list tasks` then shows nothing.
_QUIET_RAY = {
    "RAY_task_events_report_interval_ms": "0",
    "RAY_event_stats": "0",
}


class LocalClusterError(RuntimeError):
    """A simulated node did not come up, or the cluster could not be stopped."""


def _ray_cli() -> list[str]:
    """``ray`` under this interpreter: a node's workers run on the interpreter that started
    it, which must see this package (a ``ray`` script on PATH may belong to another env)."""
    return [sys.executable, "-m", "ray.scripts.scripts"]


@dataclass
class SimHost:
    """One simulated TPU VM: a Ray node in its own process group."""

    slice_index: int
    worker_id: int
    slice_name: str
    env: dict[str, str]
    pgid: int | None = None
    restarts: int = 0

    @property
    def name(self) -> str:
        return f"{self.slice_name}-w{self.worker_id}"


@dataclass
class LocalSlices:
    """``num_slices`` simulated slices of ``shape`` on this machine, plus a CPU head node.

    Use as a context manager; it connects this process as the Ray driver (``ray.init``)
    and on exit disconnects and kills every process it started, SIGKILL for those
    that ignore SIGTERM (Ray's agents do).
    """

    shape: SliceShape
    num_slices: int = 1
    scratch: Path | None = None
    cpus_per_host: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    runtime_env: dict[str, object] | None = None
    """The driver's job runtime environment (``ray.init(runtime_env=...)``): a working
    directory travels to the hosts as on a stack's cluster."""
    log_to_driver: bool = True
    """Print the Ray processes' logs here (off where the caller prints the hosts' output)."""
    gcs_redis: GcsRedis | None = None
    """Keep the GCS in this Redis (GCS fault tolerance): the hosts outlive a head restart."""
    connect_driver: bool = True
    """Connect this process as the Ray driver. Off where the head will be killed: a driver
    dies with its node's raylet, and this process must outlive it."""
    hosts: list[SimHost] = field(default_factory=list, init=False)
    _head_pgid: int | None = field(default=None, init=False)
    _owns_scratch: bool = field(default=False, init=False)
    _port: int = field(default=0, init=False)
    _client_port: int = field(default=0, init=False)
    _agent_port: int = field(default=0, init=False)
    dashboard_port: int = field(default=0, init=False)
    _saved_env: dict[str, str | None] = field(default_factory=dict, init=False)
    _mark: str = field(default_factory=lambda: uuid.uuid4().hex, init=False)
    # Ray >= 2.52 turns token auth on for `ray start --head` whenever a token file exists
    # (~/.ray/auth_token, which any local `ray.init()` writes), yet not for the nodes that
    # join it: those are refused with InvalidAuthToken. So a simulated cluster never depends
    # on ~/.ray: every process of it, the driver included, gets token auth and this token,
    # which also keeps other users of the machine out of the simulated hosts.
    _token: str = field(default_factory=lambda: secrets.token_hex(16), init=False, repr=False)

    # -- lifecycle -------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._port}"

    @property
    def temp_dir(self) -> Path:
        assert self.scratch is not None
        return self.scratch / "ray"

    def _base_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("RAY_ADDRESS", "TPU_")) and k not in ray_auth.ENV
        }
        env.update(
            **{ray_auth.MODE_ENV: "token", ray_auth.TOKEN_ENV: self._token},
            RAY_TMPDIR=str(self.temp_dir),
            RAY_USAGE_STATS_ENABLED="0",
            PJRT_DEVICE="CPU",
            # Processes share the cores: one intra-op thread each (notes §2.3: 21 -> 52 steps/s).
            OMP_NUM_THREADS="1",
            # The same for XLA:CPU, which sizes its thread pool from NPROC, else from every
            # core (measured ~15% more tokens/s for 2 simulated hosts on 2 cores).
            NPROC="1",
            # Notice a killed host in ~3 s instead of Ray's default of ~30 s.
            RAY_health_check_period_ms="1000",
            RAY_health_check_timeout_ms="1000",
            RAY_health_check_failure_threshold="3",
            # Nobody scrapes a simulation's Prometheus metrics; exporting them costs every
            # Ray process CPU that the simulated hosts' training shares.
            RAY_enable_metrics_collection="0",
            # A raylet waits this long for its agents to start (then aborts): on a loaded
            # machine a restarted head's agents took longer than Ray's default.
            RAY_agent_register_timeout_ms="120000",
            **_QUIET_RAY,
            # Inherited by every process a node starts: Ray starts some workers in process
            # groups of their own, so teardown also finds processes by this mark.
            RAYTPU_SIM_CLUSTER=self._mark,
        )
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        import ray

        if self.scratch is None:
            # Short path: Ray's unix sockets live under it (108-byte limit).
            self.scratch = Path(tempfile.mkdtemp(prefix="rtpu-"))
            self._owns_scratch = True
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        self._port = free_port()
        self.dashboard_port = free_port()
        self._client_port, self._agent_port = free_port(), free_port()
        self._start_head()
        for s in range(self.num_slices):
            slice_name = f"sim-{self.shape.accelerator_type}-s{s}"
            for w in range(self.shape.hosts):
                env = dict(
                    self._base_env(),
                    TPU_NAME=slice_name,
                    TPU_WORKER_ID=str(w),
                    TPU_ACCELERATOR_TYPE=self.shape.accelerator_type,
                    TPU_TOPOLOGY=self.shape.topology,
                )
                self.hosts.append(SimHost(s, w, slice_name, env))
        for host in self.hosts:
            self.start_host(host)
        driver_env = self.driver_env()
        for key, value in driver_env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        ray_auth.reload_from_env()
        if self.connect_driver:
            ray.init(address=self.address, logging_level=logging.WARNING,
                     log_to_driver=self.log_to_driver, runtime_env=self.runtime_env)
        self.wait_for_hosts(len(self.hosts))

    def driver_env(self) -> dict[str, str]:
        """What a driver of this cluster needs in its environment (its token included)."""
        return {
            "RAY_TMPDIR": str(self.temp_dir),  # the driver keeps its files in the scratch too
            "RAY_USAGE_STATS_ENABLED": "0",
            # Nothing drains a simulated node: Ray Train's preemption watcher actor
            # (~120 MB) would have nothing to watch.
            "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
            "RAY_TRAIN_METRICS_ENABLED": "0",
            "RAY_enable_metrics_collection": "0",
            **_QUIET_RAY,
            ray_auth.MODE_ENV: "token",
            ray_auth.TOKEN_ENV: self._token,
        }

    def _start_head(self) -> None:
        head_env = dict(self._base_env(), RAYTPU_SIM_NODE="head")
        redis_args: list[str] = []
        if self.gcs_redis is not None:
            head_env.update(self.gcs_redis.head_env())
            # KubeRay passes the password to `ray start` too (REDIS_PASSWORD's value).
            redis_args = [f"--redis-password={self.gcs_redis.password}"]
        self._head_pgid = self._ray_start(
            "head",
            [
                "--head",
                f"--port={self._port}",
                # The dashboard serves the state API Ray Train's placement-group cleaner polls.
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
                f"--ray-client-server-port={self._client_port}",
                f"--dashboard-agent-listen-port={self._agent_port}",
                "--num-cpus=1",
                "--resources={}",
                *redis_args,
            ],
            head_env,
        )

    def _ray_start(self, name: str, args: list[str], env: dict[str, str]) -> int:
        assert self.scratch is not None
        log = self.scratch / f"ray-start-{name}.log"
        common = [
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [*_ray_cli(), "start", *args, *common],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: everything it spawns
            )
        try:
            rc = proc.wait(timeout=NODE_START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGKILL)
            raise LocalClusterError(f"`ray start` for {name} timed out; see {log}") from None
        if rc != 0:
            kill_group(proc.pid, signal.SIGKILL)
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise LocalClusterError(f"`ray start` for {name} failed ({rc}): {' | '.join(tail)}")
        return proc.pid  # the session leader's pid is the group id

    def start_host(self, host: SimHost) -> None:
        # Started one at a time: raylets on one machine starting together race for ports.
        env = dict(host.env, RAYTPU_SIM_NODE=self._node_mark(host))
        if self.gcs_redis is not None:
            env.update(self.gcs_redis.host_env())
        host.pgid = self._ray_start(
            host.name,
            [
                f"--address={self.address}",
                f"--num-cpus={self.cpus_per_host}",
                f"--resources={json.dumps({'TPU': self.shape.chips_per_vm})}",
                f"--node-name={host.name}",
                # Explicit: the defaults are fixed ports other clusters on this machine use.
                f"--dashboard-agent-listen-port={free_port()}",
                "--include-log-monitor=false",  # the head's monitor reads the shared logs dir
            ],
            env,
        )

    @staticmethod
    def _node_mark(host: SimHost) -> str:
        return f"{host.name}#{host.restarts}"

    def nodes(self) -> list[dict[str, object]]:
        """The GCS's node table: ``node_id``, ``name``, ``alive``, ``tpu`` (chips) per node."""
        if self.connect_driver:
            import ray

            table = ray.nodes()
        else:  # a short-lived driver of its own: this process never joins the cluster
            probe = (f"import json, logging, ray; ray.init(address={self.address!r}, "
                     "logging_level=logging.ERROR, log_to_driver=False); "
                     "print(json.dumps(ray.nodes()))")
            env = {**self._base_env(), "RAY_ADDRESS": ""}
            env.pop("RAYTPU_SIM_CLUSTER", None)  # not a process of the cluster: never killed
            out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                                 text=True, timeout=NODE_START_TIMEOUT_S, check=False)
            if out.returncode != 0:
                raise LocalClusterError(f"the GCS at {self.address} did not answer: "
                                        f"{out.stderr.strip()[-300:]}")
            table = json.loads(out.stdout.strip().splitlines()[-1])
        return [{"node_id": n["NodeID"], "name": n.get("NodeName", ""), "alive": n["Alive"],
                 "tpu": n["Resources"].get("TPU", 0)} for n in table]

    def tpu_nodes_alive(self) -> int:
        return sum(1 for n in self.nodes() if n["alive"] and n["tpu"])

    def wait_for_hosts(self, count: int, timeout_s: float = NODE_START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while self.tpu_nodes_alive() != count:
            if time.monotonic() > deadline:
                raise LocalClusterError(
                    f"{self.tpu_nodes_alive()} simulated TPU hosts alive after {timeout_s:.0f}s, "
                    f"expected {count}"
                )
            time.sleep(0.2)

    # -- preemption rehearsal ----------------------------------------------------------

    def host(self, slice_index: int, worker_id: int) -> SimHost:
        for h in self.hosts:
            if (h.slice_index, h.worker_id) == (slice_index, worker_id):
                return h
        raise KeyError((slice_index, worker_id))

    def kill_host(self, host: SimHost) -> None:
        """SIGKILL the host's whole node (raylet, agents, its training worker)."""
        members = marked(
            {"RAYTPU_SIM_CLUSTER": self._mark, "RAYTPU_SIM_NODE": self._node_mark(host)}
        )
        if host.pgid is not None:
            kill_group(host.pgid, signal.SIGKILL)
        kill_pids(members, signal.SIGKILL)
        if host.pgid is not None:
            wait_group_gone(host.pgid, 10.0)
        wait_pids_gone(members, 10.0)
        host.pgid = None

    def replace_host(self, host: SimHost) -> None:
        """Bring up a new node with the same TPU identity, as GKE recreates a TPU VM."""
        expected = len(self.hosts)
        # Ray must first declare the old node dead, or both count as alive.
        self.wait_for_hosts(expected - 1, timeout_s=30.0)
        host.restarts += 1
        self.start_host(host)
        self.wait_for_hosts(expected)

    def processes(self) -> list[int]:
        """Every live process of the cluster: the nodes' groups plus marked strays."""
        pids = set(marked({"RAYTPU_SIM_CLUSTER": self._mark}))
        for g in self._groups():
            pids.update(group_members(g))
        return sorted(pids)

    def memory_pss_bytes(self) -> int:
        """Proportional set size of the whole cluster (shared libraries counted once)."""
        psutil = psutil_module()
        total = 0
        for pid in self.processes():
            with contextlib.suppress(psutil.Error):
                total += psutil.Process(pid).memory_full_info().pss
        return total

    # -- teardown ----------------------------------------------------------------------

    def _groups(self) -> list[int]:
        groups = [h.pgid for h in self.hosts if h.pgid is not None]
        if self._head_pgid is not None:
            groups.append(self._head_pgid)
        return groups

    def stop(self) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()
        groups = self._groups()
        mark = {"RAYTPU_SIM_CLUSTER": self._mark}
        for g in groups:
            kill_group(g, signal.SIGTERM)
        kill_pids(marked(mark), signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and (
            any(group_alive(g) for g in groups) or marked(mark)
        ):
            time.sleep(0.1)
        for g in groups:
            kill_group(g, signal.SIGKILL)  # agents ignore SIGTERM
        left = marked(mark)
        kill_pids(left, signal.SIGKILL)
        for g in groups:
            wait_group_gone(g, 10.0)
        wait_pids_gone(left, 10.0)
        for h in self.hosts:
            h.pgid = None
        self._head_pgid = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._saved_env:
            ray_auth.reload_from_env()
        self._saved_env.clear()
        if self._owns_scratch and self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
