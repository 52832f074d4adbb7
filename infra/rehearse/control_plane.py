"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (Pod Security admission
and the default admission plugins on, RBAC), kube-controller-manager, kube-scheduler and
KWOK, each a process of the binaries :mod:`raytpu.rehearse.build` made.

Everything a run writes (keys, kubeconfigs, etcd's data, logs) is in its own folder; on
exit, on Ctrl-C or on any error every process is stopped and the folder removed, unless the
run is kept (``--keep``). Ports are picked free at start, so runs do not collide.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from raytpu.rehearse.api import loopback_session
from raytpu.rehearse.build import Cache
from raytpu.rehearse.pki import Pki, make_pki

READY_TIMEOUT_S = 60.0
# The controllers GKE runs too; the rest need a cloud or node IPAM, which a rehearsal lacks.
KCM_CONTROLLERS = "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.0.0.0/16"  # what KWOK gives fake pods as IPs; never routed


class ControlPlaneError(Exception):
    """A component did not start or become ready (the message ends with its log's tail)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def host_address() -> str:
    """The first IPv4 address of a non-loopback interface. The API server advertises it
    (the ``kubernetes`` Endpoints refuse a loopback address); nothing connects to it."""
    for _, name in socket.if_nameindex():
        if name == "lo":
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:  # SIOCGIFADDR: the interface's address, without sending anything
                packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
            return socket.inet_ntoa(packed[20:24])
    raise ControlPlaneError("no non-loopback IPv4 interface for kube-apiserver's "
                            "--advertise-address")


@dataclass(frozen=True)
class Identity:
    """A user of the API server, by bearer token (``--token-auth-file``)."""

    user: str
    groups: tuple[str, ...]
    token: str = field(default_factory=lambda: secrets.token_hex(16))


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class ControlPlane:
    """The running processes and how to reach the API server. Use :func:`control_plane`."""

    folder: Path
    server: str
    pki: Pki
    admin: Identity
    processes: list[Process] = field(default_factory=list)

    def kubeconfig(self, identity: Identity | None = None, name: str = "admin") -> Path:
        who = identity or self.admin
        path = self.folder / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "rehearsal",
            "clusters": [{"name": "rehearsal", "cluster": {
                "server": self.server, "certificate-authority": str(self.pki.ca_cert)}}],
            "users": [{"name": who.user, "user": {"token": who.token}}],
            "contexts": [{"name": "rehearsal", "context": {"cluster": "rehearsal",
                                                           "user": who.user}}],
        }))
        path.chmod(0o600)
        return path

    def start(self, name: str, argv: list[str]) -> Process:
        log = self.folder / "logs" / f"{name}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("wb") as out:
            popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.folder,
                                     start_new_session=True)
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def wait_until(self, process: Process, ready: Callable[[], bool],
                   timeout: float = READY_TIMEOUT_S) -> float:
        """Poll ``ready`` until it holds; fail at once if the process exits."""
        started = time.monotonic()
        last = "its readiness check never passed"
        while True:
            if process.popen.poll() is not None:
                raise ControlPlaneError(f"{process.name} exited with {process.popen.returncode}"
                                        f" (log {process.log}):\n{process.tail()}")
            try:
                if ready():
                    return time.monotonic() - started
            except Exception as e:  # not up yet: connection refused, 403 before RBAC, ...
                last = f"last check: {type(e).__name__}: {e}"
            if time.monotonic() - started > timeout:
                raise ControlPlaneError(f"{process.name} not ready after {timeout:.0f} s, "
                                        f"{last} (log {process.log}):\n{process.tail()}")
            time.sleep(0.1)

    def check_running(self) -> None:
        for p in self.processes:
            if p.popen.poll() is not None:
                raise ControlPlaneError(f"{p.name} exited with {p.popen.returncode} (log "
                                        f"{p.log}):\n{p.tail()}")

    def stop(self) -> None:
        """Stop every process, the last started first (SIGTERM, then SIGKILL after 5 s)."""
        for p in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for p in reversed(self.processes):
            try:
                p.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGKILL)
                p.popen.wait()
        self.processes.clear()


def _healthz(port: int) -> bool:
    """kube-scheduler's /healthz. It serves a certificate it made for itself at start, so
    there is no CA to check it against; only its answer is read."""
    import requests
    import urllib3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        with requests.Session() as s:
            s.trust_env = False
            return s.get(f"https://127.0.0.1:{port}/healthz", verify=False,
                         timeout=2).text == "ok"


def _tokens(path: Path, identities: list[Identity]) -> None:
    path.write_text("".join(f'{i.token},{i.user},{i.user},"{",".join(i.groups)}"\n'
                            for i in identities))
    path.chmod(0o600)


@contextlib.contextmanager
def control_plane(cache: Cache, *, keep: bool = False, kwok_config: str | None = None,
                  timings: dict[str, float] | None = None,
                  identities: Sequence[Identity] = ()) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and (given its stages)
    KWOK, ready; stopped and removed on exit unless ``keep``. ``timings`` gets each
    component's seconds to ready; ``identities`` are users the API server also knows (by
    token, with no rights beyond what RBAC grants them)."""
    folder = Path(tempfile.mkdtemp(prefix="raytpu-rehearse-"))
    times = timings if timings is not None else {}
    address = host_address()
    pki = make_pki(folder / "pki", address)
    admin = Identity("raytpu-rehearse-admin", ("system:masters",))
    scheduler = Identity("system:kube-scheduler", ())
    kcm = Identity("system:kube-controller-manager", ())
    api_port, etcd_port, peer_port = free_port(), free_port(), free_port()
    cp = ControlPlane(folder, f"https://127.0.0.1:{api_port}", pki, admin)
    _tokens(folder / "tokens.csv", [admin, scheduler, kcm, *identities])
    session = loopback_session(str(pki.ca_cert), admin.token)
    bin_ = cache.binary
    try:
        etcd = cp.start("etcd", [
            str(bin_("etcd")), "--data-dir", str(folder / "etcd"), "--name", "rehearsal",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"rehearsal=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level", "warn"])
        times["etcd"] = cp.wait_until(etcd, lambda: session.get(
            f"http://127.0.0.1:{etcd_port}/health", timeout=2).json()["health"] == "true")
        apiserver = cp.start("kube-apiserver", [
            str(bin_("kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={api_port}",
            f"--advertise-address={address}",
            f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={folder / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--allow-privileged=true", "--profiling=false", "-v=1"])
        times["kube-apiserver"] = cp.wait_until(apiserver, lambda: session.get(
            f"{cp.server}/readyz", timeout=2).text == "ok")
        kcm_kc = cp.kubeconfig(kcm, "kube-controller-manager")
        kcm_p = cp.start("kube-controller-manager", [
            str(bin_("kube-controller-manager")), f"--kubeconfig={kcm_kc}",
            f"--authentication-kubeconfig={kcm_kc}", f"--authorization-kubeconfig={kcm_kc}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            "--use-service-account-credentials=true", f"--controllers={KCM_CONTROLLERS}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}", "-v=1"])
        # Ready when it has made the `default` ServiceAccount (pods need it to be admitted).
        times["kube-controller-manager"] = cp.wait_until(kcm_p, lambda: session.get(
            f"{cp.server}/api/v1/namespaces/default/serviceaccounts/default",
            timeout=2).status_code == 200)
        sched_kc, sched_port = cp.kubeconfig(scheduler, "kube-scheduler"), free_port()
        sched = cp.start("kube-scheduler", [
            str(bin_("kube-scheduler")), f"--kubeconfig={sched_kc}",
            f"--authentication-kubeconfig={sched_kc}", f"--authorization-kubeconfig={sched_kc}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={sched_port}",
            "-v=1"])
        times["kube-scheduler"] = cp.wait_until(sched, lambda: _healthz(sched_port))
        if kwok_config is not None:
            config = folder / "kwok.yaml"
            config.write_text(kwok_config)
            kwok = cp.start("kwok", [
                str(bin_("kwok")), f"--kubeconfig={cp.kubeconfig()}", f"--config={config}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--cidr={POD_CIDR}", "--node-ip=10.0.0.1",
                f"--server-address=127.0.0.1:{free_port()}"])
            times["kwok"] = cp.wait_until(kwok, lambda: True)
        yield cp
    except BaseException:
        keep = False  # an error or Ctrl-C never leaves anything behind
        raise
    finally:
        session.close()
        if keep:
            (folder / "pids").write_text("".join(f"{p.popen.pid}\n" for p in cp.processes))
        else:
            cp.stop()
            shutil.rmtree(folder, ignore_errors=True)


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not: it has exited, unreaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop_kept(folder: Path, grace: float = 5.0) -> None:
    """Stop a kept rehearsal (its ``pids`` file: SIGTERM, SIGKILL after ``grace`` seconds)
    and remove its folder."""
    pids = [int(p) for p in (folder / "pids").read_text().split()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if running(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # ours (the same Python): reap it
            os.waitpid(pid, os.WNOHANG)
    shutil.rmtree(folder, ignore_errors=True)
