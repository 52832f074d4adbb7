"""The head-loss rehearsal: a training run on a simulated slice loses its Ray head.

With GCS fault tolerance (the GCS in a real Redis, set as KubeRay sets it from
``gcsFaultToleranceOptions``), the head is SIGKILLed mid-run together with the job's driver
(on KubeRay the driver runs in the head pod), a new head starts on the same address against
the same Redis, and the hosts' raylets reconnect to it: same node ids, same processes. The
run is then resubmitted (the same entrypoint, storage path and run name, as a new
submission) and resumes from its last checkpoint. Without GCS fault tolerance the new head
knows none of the old nodes: the hosts' raylets exit and new ones are started, as the
kubelet restarts a worker pod's container.

``python -m raytpu.workloads.head_failover [--no-gcs-ft] [--json]`` runs it once; the test
(tests/workloads/test_wl_head_failover.py) and the benchmark (benchmarks/head_failover.py)
call :func:`rehearse_head_failover`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from raytpu.facts.catalog import slice_shape
from raytpu.spec.scaling import RUNTIME_ENV_VARS, WORKER_GROUP_START_TIMEOUT_ENV

from .gcs_redis import GcsRedis, redis_server, tls_front
from .launcher import HOLDING, RESIDENT_HOSTS
from .local_cluster import LocalClusterError, LocalSlices, SimHost
from .processes import kill_group, kill_pids, marked, psutil_module, wait_group_gone, wait_pids_gone

DRIVER_TIMEOUT_S = 300.0
RAYLET_EXIT_TIMEOUT_S = 90.0  # without GCS FT: Ray's own reconnect timeout is 60 s


class RestartableHead(LocalSlices):
    """Simulated slices whose head can be killed and started again on the same address."""

    def kill_head(self) -> None:
        """SIGKILL the head node (GCS, its raylet, dashboard, the drivers attached to it)."""
        members = marked({"RAYTPU_SIM_CLUSTER": self._mark, "RAYTPU_SIM_NODE": "head"})
        if self._head_pgid is not None:
            kill_group(self._head_pgid, signal.SIGKILL)
            wait_group_gone(self._head_pgid, 10.0)
        kill_pids(members, signal.SIGKILL)
        wait_pids_gone(members, 10.0)
        self._head_pgid = None

    def restart_head(self) -> None:
        """A new head on the same address, as KubeRay recreates the head pod behind its
        Service; with :attr:`gcs_redis` its GCS reloads the cluster's tables from Redis."""
        # `ray start --head` refuses an address its temp dir names while any process on the
        # machine mentions it (the hosts' raylets do): a new head pod has neither.
        (self.temp_dir / "ray_current_cluster").unlink(missing_ok=True)
        self._start_head()

    def host_processes(self, host: SimHost) -> list[int]:
        """The live processes of a simulated host's node (its raylet and agents)."""
        return sorted(marked({"RAYTPU_SIM_CLUSTER": self._mark,
                              "RAYTPU_SIM_NODE": self._node_mark(host)}))


@dataclass
class HeadFailoverReport:
    """What the rehearsal saw (``--json`` prints it)."""

    gcs_fault_tolerance: bool
    steps: int
    kill_at_step: int
    node_ids_before: dict[str, str]
    node_ids_after: dict[str, str]
    raylets_before: dict[str, int]
    raylets_after: dict[str, int]
    steps_first_run: list[int]
    steps_resubmitted: list[int]
    first_resumed_step: int | None
    head_kill_to_first_resumed_step_s: float | None
    head_restart_s: float
    trainers_before: tuple[str, list[int]] | None
    """With ``--resident``: how the first run got its hosts and their pids, from its log."""
    trainers_after: tuple[str, list[int]] | None
    """The same for the resubmitted run: ``taken over`` with the same pids, or ``started``."""

    @property
    def workers_kept(self) -> bool:
        """Every host is the same node with the same raylet process after the restart."""
        return (self.node_ids_before == self.node_ids_after
                and self.raylets_before == self.raylets_after)

    @property
    def trainers_kept(self) -> bool:
        """The resubmitted run took over the first run's resident training processes."""
        return (self.trainers_before is not None and self.trainers_after is not None
                and self.trainers_after == ("taken over", self.trainers_before[1]))

    @property
    def steps_lost(self) -> list[int]:
        seen = set(self.steps_first_run) | set(self.steps_resubmitted)
        return [s for s in range(1, self.steps + 1) if s not in seen]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "workers_kept": self.workers_kept,
                "trainers_kept": self.trainers_kept, "steps_lost": self.steps_lost}


def _raylet(cluster: RestartableHead, name: str) -> int:
    psutil = psutil_module()
    host = next(h for h in cluster.hosts if h.name == name)
    for pid in cluster.host_processes(host):
        try:
            if psutil.Process(pid).name() == "raylet":
                return pid
        except psutil.Error:
            continue
    return -1


def host_nodes(cluster: RestartableHead) -> tuple[dict[str, str], dict[str, int]]:
    """Each live host's Ray node id and raylet pid, by host name."""
    names = {h.name for h in cluster.hosts}
    ids = {str(n["name"]): str(n["node_id"]) for n in cluster.nodes()
           if n["alive"] and n["name"] in names}
    return dict(sorted(ids.items())), {name: _raylet(cluster, name) for name in sorted(names)}


def resident_hosts(log: Path) -> tuple[str, list[int]] | None:
    """The last ``resident hosts started|taken over: pids ...`` line of a driver's log."""
    found = re.findall(rf"^{RESIDENT_HOSTS} (started|taken over): pids ([\d,]+)$",
                       log.read_text(errors="replace") if log.exists() else "", re.M)
    if not found:
        return None
    how, pids = found[-1]
    return how, [int(p) for p in pids.split(",")]


def step_records(path: Path) -> list[dict[str, Any]]:
    """The step records a driver's ``--metrics-out`` file holds so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def driver_process_env(cluster: LocalSlices) -> dict[str, str]:
    """The environment of a separate driver process of ``cluster``: this one's, less its
    own Ray and TPU settings, plus the cluster's address and token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TPU_"))}
    env.update(cluster.driver_env(), RAY_ADDRESS=cluster.address)
    return env


def start_driver(cluster: LocalSlices, args: list[str], metrics: Path, log: Path
                 ) -> subprocess.Popen[bytes]:
    """The job's driver, on the head (marked as one of the head's processes)."""
    env = driver_process_env(cluster)
    env["RAYTPU_SIM_NODE"] = "head"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "raytpu.workloads.launcher", *args,
             "--metrics-out", str(metrics), "--no-progress"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def rehearse_head_failover(
    *, gcs_ft: bool = True, tpu: str = "v4-16", steps: int = 10, checkpoint_every: int = 3,
    kill_at_step: int = 5, scratch: Path | None = None, tls: bool = False,
    resident: bool = True,
) -> HeadFailoverReport:
    """Train on one simulated slice, kill the head after ``kill_at_step``, restart it,
    resubmit the run; return what happened to the hosts and the steps. ``tls``: the GCS
    reaches Redis at a ``rediss://`` address through :func:`tls_front`. ``resident``: the
    launcher's ``--resident`` hosts, which the resubmitted run takes over (else Ray Train's
    workers, which die with the driver)."""
    if not 0 < checkpoint_every <= kill_at_step < steps:
        raise ValueError(f"need 0 < checkpoint_every ({checkpoint_every}) <= kill_at_step "
                         f"({kill_at_step}) < steps ({steps})")
    root = scratch or Path(tempfile.mkdtemp(prefix="rtpu-hf-"))
    train = ["--tpu", tpu, "--steps", str(steps), "--checkpoint-every", str(checkpoint_every),
             "--storage-path", str(root / "ckpt"), "--run-name", "head-failover",
             *(["--resident"] if resident else [])]
    # As a stack's job gets it (its runtime env): without GCS FT the resubmitted run's
    # controller waits longer than Ray Train's default 60 s for the restarted hosts.
    wait_env = {WORKER_GROUP_START_TIMEOUT_ENV: RUNTIME_ENV_VARS[WORKER_GROUP_START_TIMEOUT_ENV]}
    with gcs_store(root, gcs_ft, tls=tls) as gcs, RestartableHead(
            slice_shape(tpu), scratch=root / "c", connect_driver=False, gcs_redis=gcs,
            extra_env=wait_env,
    ) as cluster:
        ids_before, raylets_before = host_nodes(cluster)
        first, again = root / "metrics-1.jsonl", root / "metrics-2.jsonl"
        # The hosts hold after step K once its checkpoints are registered (the launcher
        # says so), so the steps the resubmitted run redoes do not depend on timing.
        log = root / "driver-1.log"
        driver = start_driver(cluster, [*train, "--fail-host-at-step", str(kill_at_step)],
                              first, log)
        deadline = time.monotonic() + DRIVER_TIMEOUT_S
        while f"{HOLDING} {kill_at_step} " not in (log.read_text() if log.exists() else ""):
            if driver.poll() is not None or time.monotonic() > deadline:
                raise LocalClusterError(f"the first run did not reach step {kill_at_step}; "
                                        f"see {log}")
            time.sleep(0.1)
        killed_at = time.time()
        cluster.kill_head()
        if driver.poll() is None:  # not attached to the head's raylet: dies with it
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        started = time.monotonic()
        cluster.restart_head()
        # Resubmitted once the head is back, as a submitter does (it talks to the head only):
        # the run's controller waits for its slice's placement group, so the hosts
        # reconnecting (without GCS FT: being restarted) overlap the driver's start.
        driver = start_driver(cluster, train, again, root / "driver-2.log")
        if gcs is None:
            _restart_hosts(cluster)
        cluster.wait_for_hosts(len(cluster.hosts))
        head_restart_s = time.monotonic() - started
        if driver.wait(timeout=DRIVER_TIMEOUT_S) != 0:
            raise LocalClusterError(f"the resubmitted run failed; see {root / 'driver-2.log'}")
        # After the resumed run, not before it: the same nodes carried it to its end.
        ids_after, raylets_after = host_nodes(cluster)
    resumed = step_records(again)
    report = HeadFailoverReport(
        gcs_fault_tolerance=gcs_ft, steps=steps, kill_at_step=kill_at_step,
        node_ids_before=ids_before, node_ids_after=ids_after,
        raylets_before=raylets_before, raylets_after=raylets_after,
        steps_first_run=sorted({int(r["step"]) for r in step_records(first)}),
        steps_resubmitted=[int(r["step"]) for r in resumed],
        first_resumed_step=int(resumed[0]["step"]) if resumed else None,
        head_kill_to_first_resumed_step_s=(float(resumed[0]["time"]) - killed_at
                                           if resumed else None),
        head_restart_s=head_restart_s,
        trainers_before=resident_hosts(log), trainers_after=resident_hosts(root / "driver-2.log"),
    )
    if scratch is None:
        shutil.rmtree(root, ignore_errors=True)
    return report


@contextmanager
def gcs_store(root: Path, on: bool, *, tls: bool = False) -> Iterator[GcsRedis | None]:
    """A real Redis for the GCS (None: GCS fault tolerance off); ``tls``: reached through
    :func:`tls_front` at a ``rediss://`` address with its CA, as prod reaches Memorystore."""
    if not on:
        yield None
        return
    with redis_server(root) as (address, password):
        if not tls:
            yield GcsRedis(address=address, password=password)
            return
        with tls_front(address, root) as front:
            yield GcsRedis(address=front.address, password=password, ca_cert=front.ca_file)


def _restart_hosts(cluster: RestartableHead) -> None:
    """Without GCS FT: wait for each host's raylet to give up on the lost GCS (as a worker
    pod's container exits), then start it again (as the kubelet does)."""
    deadline = time.monotonic() + RAYLET_EXIT_TIMEOUT_S
    for host in cluster.hosts:
        while _raylet(cluster, host.name) != -1:
            if time.monotonic() > deadline:
                raise LocalClusterError(f"{host.name}'s raylet outlived its GCS by "
                                        f"{RAYLET_EXIT_TIMEOUT_S:.0f} s")
            time.sleep(0.2)
        cluster.kill_host(host)  # what is left of its node
        host.restarts += 1
        cluster.start_host(host)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raytpu.workloads.head_failover",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--no-gcs-ft", action="store_true", help="the head without Redis")
    parser.add_argument("--tls", action="store_true",
                        help="reach Redis through TLS (rediss:// and its CA), as Memorystore")
    parser.add_argument("--ray-train", action="store_true",
                        help="Ray Train's workers (they die with the driver), not --resident")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = rehearse_head_failover(gcs_ft=not args.no_gcs_ft, tls=args.tls,
                                    resident=not args.ray_train)
    out = report.to_dict()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"workers kept: {report.workers_kept}; trainers kept: {report.trainers_kept}; "
              f"steps lost: {report.steps_lost}; "
              f"head kill -> first resumed step: {report.head_kill_to_first_resumed_step_s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
