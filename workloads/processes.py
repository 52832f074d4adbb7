"""OS process utilities for local clusters: process groups, marked processes, signals.

A simulated Ray node is a process group (its own session) plus stray processes that
Ray starts in groups of their own; those carry a marker variable in their environment.
These functions find, signal and wait for both, and never touch this process's group.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import time
from typing import Any


class ProcessError(RuntimeError):
    """A process survived being killed, or a signal would hit this process's own group."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def psutil_module() -> Any:
    """Ray vendors psutil (ray/thirdparty_files) and puts it on sys.path when imported."""
    import ray  # noqa: F401

    return importlib.import_module("psutil")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    psutil = psutil_module()
    out = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def marked(marks: dict[str, str]) -> list[int]:
    """Live processes whose environment carries every ``marks`` item."""
    psutil = psutil_module()

    out = []
    for proc in psutil.process_iter(["status"]):
        if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            env = proc.environ()
        except psutil.Error:
            continue
        if all(env.get(k) == v for k, v in marks.items()):
            out.append(proc.pid)
    return out


def kill_pids(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def wait_pids_gone(pids: list[int], timeout_s: float) -> None:
    psutil = psutil_module()

    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                continue
        if not alive:
            return
        if time.monotonic() > deadline:
            raise ProcessError(f"processes {alive} survived SIGKILL")
        time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def kill_group(pgid: int, sig: signal.Signals) -> None:
    if pgid == os.getpgid(0):
        raise ProcessError("refusing to signal this process's own group")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_group_gone(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            left = group_members(pgid)
            raise ProcessError(f"processes {left} of group {pgid} survived SIGKILL")
        time.sleep(0.05)

