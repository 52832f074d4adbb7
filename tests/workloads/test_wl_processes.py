"""Process groups and marked processes: what local clusters stop and rehearse kills with."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip("ray")  # psutil comes vendored with Ray

from raytpu.workloads.processes import (
    ProcessError,
    group_alive,
    group_members,
    kill_group,
    marked,
    wait_group_gone,
)


def test_a_session_is_found_by_group_and_by_mark_and_killed_whole() -> None:
    mark = uuid.uuid4().hex
    # A leader and a child it spawns in the same group; both carry the mark.
    script = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    leader = subprocess.Popen(
        [sys.executable, "-c", script],
        env=dict(os.environ, RAYTPU_TEST_MARK=mark),
        start_new_session=True,
    )
    try:
        for _ in range(100):
            if len(group_members(leader.pid)) == 2:
                break
            time.sleep(0.05)
        members = group_members(leader.pid)
        assert leader.pid in members and len(members) == 2
        assert sorted(marked({"RAYTPU_TEST_MARK": mark})) == sorted(members)
        assert marked({"RAYTPU_TEST_MARK": mark, "OTHER": "x"}) == []
        kill_group(leader.pid, signal.SIGKILL)
        leader.wait(timeout=10)
        wait_group_gone(leader.pid, 10.0)
        assert not group_alive(leader.pid)
        assert marked({"RAYTPU_TEST_MARK": mark}) == []
    finally:
        leader.kill()


def test_never_signals_its_own_group() -> None:
    with pytest.raises(ProcessError, match="own group"):
        kill_group(os.getpgid(0), signal.SIGTERM)
