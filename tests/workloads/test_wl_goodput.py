"""Goodput accounting on synthetic event logs: every second of the wall time gets one kind,
the incidents get their cost, and the log round-trips through fsspec."""

from __future__ import annotations

import math
from typing import Any

import fsspec
import pytest
from raytpu.workloads.goodput import (
    BADPUT_KINDS,
    GOOGLE_BADPUT_TYPE,
    TOLERANCE,
    GoodputError,
    compute,
)
from raytpu.workloads.goodput_log import GoodputLog, read_events


class Timeline:
    """Writes events as a run would, with a clock the test moves."""

    def __init__(self) -> None:
        self.t = 1_000_000.0
        self.events: list[dict[str, Any]] = []
        self.attempt = 1

    def mark(self, event: str, **fields: Any) -> None:
        self.events.append({"event": event, "t": self.t, **fields})

    def wait(self, seconds: float) -> None:
        self.t += seconds

    def step(self, n: int, seconds: float = 1.0, *, first: bool = False) -> None:
        self.t += seconds
        self.mark("step", step=n, seconds=seconds, attempt=self.attempt)
        if first:
            self.mark("first_step", step=n, seconds=seconds, attempt=self.attempt)

    def timed(self, event: str, step: int, seconds: float, size: int = 1000) -> None:
        self.t += seconds
        self.mark(event, step=step, seconds=seconds, bytes=size)


def _near(a: float, b: float) -> bool:
    return math.isclose(a, b, abs_tol=1e-6)


def _clean_run() -> Timeline:
    tl = Timeline()
    tl.mark("job_start")
    tl.wait(1)
    tl.mark("group_start", attempt=1)
    tl.wait(2)
    tl.mark("imports_done", attempt=1)
    tl.step(1, 4, first=True)  # 3 s of compile beyond the median 1 s step
    for n in range(2, 11):
        tl.step(n)
        if n in (5, 10):
            tl.timed("checkpoint_save", n, 0.5)
    tl.wait(0.25)
    tl.mark("job_end")
    return tl


def test_a_clean_run_splits_into_startup_steps_saves_and_idle() -> None:
    g = compute(_clean_run().events)
    assert _near(g.total_elapsed_time, 17.25)
    assert _near(g.goodput_time, 10.0)
    assert {k: round(v, 6) for k, v in g.badput_time.items()} == {
        "startup": 6.0, "checkpoint_save": 1.0, "restore": 0.0, "restart": 0.0,
        "lost": 0.0, "idle": 0.25}
    assert g.max_productive_step == 10 and g.recomputed_steps == 0
    assert g.incidents == () and not g.running
    assert _near(g.goodput, 10 / 17.25)
    assert g.checkpoint_saves == 2 and _near(g.checkpoint_save_s, 0.5)


def _host_kill_run() -> Timeline:
    tl = Timeline()
    tl.mark("job_start")
    tl.mark("group_start", attempt=1)
    tl.wait(2)
    tl.mark("imports_done", attempt=1)
    tl.step(1, 3, first=True)
    for n in range(2, 7):
        tl.step(n)
        if n == 4:
            tl.timed("checkpoint_save", 4, 0.5)
    tl.wait(1.5)  # the host dies after step 6; the driver notices 1.5 s later
    tl.mark("failure", incident="host", step=6)
    tl.wait(4)
    tl.attempt = 2
    tl.mark("group_start", attempt=2)
    tl.wait(2)
    tl.mark("imports_done", attempt=2)
    tl.timed("checkpoint_restore", 4, 1.0)
    tl.mark("resume", attempt=2, step=5)
    tl.mark("steps_recomputed", first=5, last=6)
    tl.step(5, 3, first=True)
    for n in range(6, 9):
        tl.step(n)
    tl.mark("job_end")
    return tl


def test_a_host_kill_costs_its_lost_steps_restart_startup_and_restore() -> None:
    g = compute(_host_kill_run().events)
    b = {k: round(v, 6) for k, v in g.badput_time.items()}
    assert b == {"startup": 8.0, "checkpoint_save": 0.5, "restore": 1.0, "restart": 5.5,
                 "lost": 2.0, "idle": 0.0}
    assert _near(g.goodput_time, 8.0)  # steps 1-4 of attempt 1, 5-8 of attempt 2
    assert g.recomputed_steps == 2 and g.max_productive_step == 8
    (incident,) = g.incidents
    assert incident.kind == "host" and incident.step == 6 and incident.lost_steps == 2
    # lost 2 + restart 5.5 + imports 2 + compile 2 + restore 1
    assert _near(incident.seconds, 12.5)
    assert {k: round(v, 6) for k, v in incident.by_kind.items()} == {
        "lost": 2.0, "restart": 5.5, "startup": 4.0, "restore": 1.0}
    assert _near(g.accounted_time, g.total_elapsed_time)


def test_two_incidents_each_get_their_own_cost() -> None:
    tl = _host_kill_run()
    tl.events.pop()  # no job_end yet: the head goes next
    tl.wait(0.5)
    tl.mark("failure", incident="head", step=8)
    tl.wait(10)
    tl.attempt = 3
    tl.mark("group_start", attempt=3)
    tl.timed("checkpoint_restore", 8, 2.0)
    tl.step(9, 1.0, first=True)
    tl.step(10)
    tl.mark("job_end")
    g = compute(tl.events)
    host, head = g.incidents
    assert _near(host.seconds, 12.5)
    # 0.5 s to detection + 10 s back + 2 s restore; its first step is no slower than the median
    assert head.kind == "head" and _near(head.seconds, 12.5) and head.lost_steps == 0
    assert g.disruption_count == 2
    assert abs(g.accounted_time - g.total_elapsed_time) <= TOLERANCE * g.total_elapsed_time


def test_a_save_overlapping_a_step_window_is_counted_once() -> None:
    tl = Timeline()
    tl.mark("job_start")
    tl.step(1, 1.0)
    tl.step(2, 1.0)
    tl.timed("checkpoint_save", 2, 0.5)
    # The next step's timing window began before the save (as a logger's window does).
    tl.wait(1.0)
    tl.mark("step", step=3, seconds=1.5, attempt=1)
    tl.mark("job_end")
    g = compute(tl.events)
    assert _near(g.total_elapsed_time, 3.5)
    assert _near(g.badput_time["checkpoint_save"], 0.5) and _near(g.goodput_time, 3.0)


def test_a_running_job_is_accounted_to_its_last_event() -> None:
    tl = _clean_run()
    tl.events.pop()  # no job_end
    g = compute(tl.events)
    assert g.running and _near(g.total_elapsed_time, 17.0)  # step 10's save ended at 17
    assert _near(compute(tl.events, now=tl.t + 3).total_elapsed_time, 20.25)


def test_the_kinds_follow_googles_badput_types() -> None:
    assert set(GOOGLE_BADPUT_TYPE) == set(BADPUT_KINDS)
    assert GOOGLE_BADPUT_TYPE["lost"] == "WASTED_PROGRESS_FROM_DISRUPTION"
    d = compute(_clean_run().events).to_dict()
    assert {"goodput_time", "badput_time", "total_elapsed_time", "max_productive_step",
            "disruption_count"} <= set(d)


@pytest.mark.parametrize(("event", "needle"), [
    ({"event": "stepp", "t": 1.0}, "event='stepp'"),
    ({"event": "step", "t": 1.0, "step": 1}, "seconds=None"),
    ({"event": "step", "t": "x", "step": 1, "seconds": 1}, "t='x'"),
    ({"event": "failure", "t": 1.0, "incident": "meteor"}, "incident='meteor'"),
])
def test_a_bad_event_is_refused_naming_the_field(event: dict[str, Any], needle: str) -> None:
    with pytest.raises(GoodputError, match=needle.replace("(", r"\(")):
        compute([event])


def test_no_events_is_an_error() -> None:
    with pytest.raises(GoodputError, match="no goodput events"):
        compute([])


def test_the_log_round_trips_through_fsspec_from_several_writers() -> None:
    run = "memory://goodput-test/run-a"
    driver = GoodputLog(run, "driver", flush_s=3600)
    host = GoodputLog(run, "host0", flush_s=0)  # flushes on every event
    tl = _host_kill_run()
    for e in tl.events:
        log = driver if e["event"] in ("job_start", "failure", "job_end") else host
        fields = {k: v for k, v in e.items() if k not in ("event", "t")}
        log.record(e["event"], t=e["t"], **fields)
    driver.flush()
    fs = fsspec.filesystem("memory")
    assert len(fs.find("/goodput-test/run-a/goodput")) > 2  # one object per flush
    assert compute(read_events(run)) == compute(tl.events)
    with pytest.raises(GoodputError, match="no goodput/ folder"):
        read_events("memory://goodput-test/none")


def test_a_restart_with_no_failure_recorded_is_an_incident_still() -> None:
    tl = _host_kill_run()
    tl.events = [e for e in tl.events if e["event"] != "failure"]
    g = compute(tl.events)
    (incident,) = g.incidents
    assert incident.kind == "other" and incident.implied and incident.step == 6
    assert _near(incident.seconds, 12.5)  # the same cost: it starts at the last step


def test_a_new_driver_while_the_job_is_open_is_a_head_loss() -> None:
    tl = _clean_run()
    tl.events.pop()  # the driver died: no job_end
    tl.wait(20)
    tl.mark("job_start")
    tl.attempt = 2
    tl.mark("group_start", attempt=2)
    tl.step(11, 1.0, first=True)
    tl.mark("job_end")
    g = compute(tl.events)
    (incident,) = g.incidents
    assert incident.kind == "head" and incident.step == 10
    assert _near(g.badput_time["restart"], 20.25)  # step 10 end (less its save) to the group
    assert _near(g.accounted_time, g.total_elapsed_time)

