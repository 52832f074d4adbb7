"""Goodput: which share of a run's wall time trained steps that count, and where the rest went.

Pure accounting (no torch, no ray, no I/O) over an event log, plus :class:`GoodputLog`, the
writer and reader of that log in the run folder (through fsspec, like the checkpoints).

The event log is JSON lines, one object per event: ``{"event": KIND, "t": <unix seconds at
the event's end>, ...}``. Events with a duration carry ``seconds`` (the interval is
``[t - seconds, t]``). The kinds:

- ``job_start`` / ``job_end``: the driver began / finished the run.
- ``group_start`` (``attempt``): a worker group's process started (before its imports).
- ``imports_done`` (``attempt``): the framework is imported, the model built.
- ``first_step`` (``attempt``, ``step``, ``seconds``): the attempt's first step, compile
  included.
- ``step`` (``step``, ``seconds``, ``attempt``): one training step done.
- ``checkpoint_save`` / ``checkpoint_restore`` (``step``, ``bytes``, ``seconds``; a save
  may say ``every``: the configured steps between saves).
- ``failure`` (``incident``: host | head | preemption | other; ``step``: the last step the
  driver saw): the failure was detected.
- ``resume`` (``attempt``, ``step``: the first step the attempt trains).
- ``steps_recomputed`` (``first``, ``last``): steps an attempt trains again.

The wall time (from the first ``job_start`` to the last ``job_end``, or the last event of
a running job; time between a ``job_end`` and a later ``job_start`` is no one's) is cut
into disjoint slices, each given exactly one kind, so productive plus badput is the wall
time by construction:

- a step's interval is productive if it is that step's last execution, ``lost`` if the
  step was trained again later; the part of an attempt's first step beyond the run's
  median step time is ``startup`` (its compile);
- checkpoint save and restore intervals are ``checkpoint_save`` and ``restore`` (they
  win over anything they overlap);
- the rest (gaps) by phase: from a job or group start to the attempt's first step
  ``startup``; from the last step before a failure to the next group start ``restart``;
  between steps, and after the last one, ``idle``.

An incident costs its ``lost`` steps (those trained between the previous incident and
it, done again later) and the ``restart``, ``startup`` and ``restore`` time from it to
the next attempt's first step.

Names follow Google's ``ml-goodput-measurement`` (``goodput_time``, ``badput_time``,
``total_elapsed_time``, ``max_productive_step``, ``disruption_count``); each badput kind
maps onto its ``BadputType`` in :data:`GOOGLE_BADPUT_TYPE`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# -- the event log's vocabulary ----------------------------------------------------------

JOB_START = "job_start"
JOB_END = "job_end"
GROUP_START = "group_start"
IMPORTS_DONE = "imports_done"
FIRST_STEP = "first_step"
STEP = "step"
CHECKPOINT_SAVE = "checkpoint_save"
CHECKPOINT_RESTORE = "checkpoint_restore"
FAILURE = "failure"
RESUME = "resume"
STEPS_RECOMPUTED = "steps_recomputed"
EVENT_KINDS = (JOB_START, JOB_END, GROUP_START, IMPORTS_DONE, FIRST_STEP, STEP,
               CHECKPOINT_SAVE, CHECKPOINT_RESTORE, FAILURE, RESUME, STEPS_RECOMPUTED)

INCIDENT_KINDS = ("host", "head", "preemption", "other")

PRODUCTIVE = "productive"
BADPUT_KINDS = ("startup", "checkpoint_save", "restore", "restart", "lost", "idle")
GOOGLE_BADPUT_TYPE: dict[str, str] = {
    "startup": "PROGRAM_STARTUP",
    "checkpoint_save": "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME",
    "restore": "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
    "restart": "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION",
    "lost": "WASTED_PROGRESS_FROM_DISRUPTION",
    "idle": "OTHER",
}
"""Each badput kind as ``ml_goodput_measurement``'s ``BadputType`` member, so a dashboard
of this package's numbers and one of Google's library can be read side by side."""

TOLERANCE = 0.02  # productive + badput must be the wall time within this share


class GoodputError(ValueError):
    """An event log that cannot be accounted (no events, an unknown kind, a bad field)."""


def _number(event: Mapping[str, Any], key: str) -> float:
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GoodputError(f"goodput event {dict(event)!r}: {key}={value!r} is not a number")
    return float(value)


def check_event(event: Mapping[str, Any]) -> None:
    """Raise :class:`GoodputError` naming the field if ``event`` is not a valid event."""
    kind = event.get("event")
    if kind not in EVENT_KINDS:
        raise GoodputError(f"goodput event {dict(event)!r}: event={kind!r} is not one of "
                           f"{', '.join(EVENT_KINDS)}")
    _number(event, "t")
    if kind in (STEP, FIRST_STEP, CHECKPOINT_SAVE, CHECKPOINT_RESTORE):
        if _number(event, "seconds") < 0:
            raise GoodputError(f"goodput event {dict(event)!r}: seconds is negative")
        _number(event, "step")
    if kind == FAILURE and event.get("incident", "other") not in INCIDENT_KINDS:
        raise GoodputError(f"goodput event {dict(event)!r}: incident={event.get('incident')!r}"
                           f" is not one of {', '.join(INCIDENT_KINDS)}")


# -- the accounting ----------------------------------------------------------------------


@dataclass(frozen=True)
class Incident:
    """One failure: what kind, the last step seen before it, and what it cost."""

    kind: str
    t: float
    step: int | None
    seconds: float
    lost_steps: int
    implied: bool = False  # no failure was recorded: a restart showed it
    by_kind: dict[str, float] = field(default_factory=dict)  # its seconds by badput kind

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "t": self.t, "step": self.step,
                "seconds": round(self.seconds, 3), "lost_steps": self.lost_steps,
                "implied": self.implied,
                "by_kind": {k: round(v, 3) for k, v in self.by_kind.items()}}


@dataclass(frozen=True)
class Goodput:
    """A run's goodput: productive time, badput by kind, incidents."""

    total_elapsed_time: float
    goodput_time: float
    badput_time: dict[str, float]
    max_productive_step: int
    productive_steps: int
    recomputed_steps: int
    incidents: tuple[Incident, ...] = ()
    checkpoint_saves: int = 0
    checkpoint_save_s: float = 0.0  # mean seconds per save
    checkpoint_bytes: int = 0  # of the last save
    checkpoint_every: int = 0  # the configured steps between saves, else their spacing
    median_step_s: float = 0.0
    running: bool = False  # no job_end yet: goodput so far

    @property
    def goodput(self) -> float:
        """Productive share of the wall time (0 for an empty run)."""
        return self.goodput_time / self.total_elapsed_time if self.total_elapsed_time else 0.0

    @property
    def disruption_count(self) -> int:
        return len(self.incidents)

    @property
    def accounted_time(self) -> float:
        return self.goodput_time + sum(self.badput_time.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "goodput": round(self.goodput, 4),
            "total_elapsed_time": round(self.total_elapsed_time, 3),
            "goodput_time": round(self.goodput_time, 3),
            "badput_time": {k: round(v, 3) for k, v in self.badput_time.items()},
            "badput_type": dict(GOOGLE_BADPUT_TYPE),
            "max_productive_step": self.max_productive_step,
            "productive_steps": self.productive_steps,
            "recomputed_steps": self.recomputed_steps,
            "disruption_count": self.disruption_count,
            "incidents": [i.to_dict() for i in self.incidents],
            "checkpoint_saves": self.checkpoint_saves,
            "checkpoint_save_s": round(self.checkpoint_save_s, 3),
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_every": self.checkpoint_every,
            "median_step_s": round(self.median_step_s, 4),
            "running": self.running,
        }


@dataclass(frozen=True)
class _Span:
    start: float
    end: float
    kind: str  # productive, or a badput kind
    priority: int
    incident: int | None = None  # index into the failures, for lost steps


_SAVE_PRIORITY = 3  # a save or restore wins over a step it overlaps (its time is not a step's)
_STEP_PRIORITY = 2
_STARTUP_PRIORITY = 1


def _phases(events: list[dict[str, Any]], steps: list[dict[str, Any]]
            ) -> tuple[list[float], list[tuple[str, int | None]]]:
    """Where the gap kind changes: (times, (kind, incident) from each time on)."""
    step_ends = sorted(_number(s, "t") for s in steps)
    marks: list[tuple[float, int, str, int | None]] = []  # (t, order, kind, incident)
    failure_index = 0
    seen_step_since_start = True
    incident: int | None = None
    for e in events:
        t = _number(e, "t")
        kind = e["event"]
        if kind in (JOB_START, GROUP_START):
            marks.append((t, 0, "startup", incident))
            seen_step_since_start = False
        elif kind == FAILURE:
            # Recovery began at the end of the last step before the detection.
            i = bisect.bisect_right(step_ends, t)
            begin = step_ends[i - 1] if i else t
            prior = [m for m in marks if m[0] <= t]
            if prior and prior[-1][0] > begin:
                begin = prior[-1][0]
            marks.append((begin, 1, "restart", failure_index))
            incident = failure_index
            failure_index += 1
        elif kind in (STEP, FIRST_STEP) and not seen_step_since_start:
            seen_step_since_start = True
            marks.append((t, 2, "idle", None))
            incident = None
        elif kind == JOB_END:
            marks.append((t, 3, "idle", None))
    marks.sort(key=lambda m: (m[0], m[1]))
    return [m[0] for m in marks], [(m[2], m[3]) for m in marks]


_Piece = tuple[float, float, str, int | None]


def _covered(spans: list[_Span], lo: float, hi: float, marks: list[float]) -> list[_Piece]:
    """[lo, hi] cut where spans begin or end and at ``marks``: (start, end, kind or '',
    incident) pieces, each piece the highest-priority span over it ('' where none is)."""
    cuts = sorted({lo, hi, *(min(max(s.start, lo), hi) for s in spans),
                   *(min(max(s.end, lo), hi) for s in spans),
                   *(m for m in marks if lo < m < hi)})
    starts = sorted(spans, key=lambda s: s.start)
    pieces: list[_Piece] = []
    active: list[_Span] = []
    nxt = 0
    for a, b in itertools.pairwise(cuts):
        if b <= a:
            continue
        while nxt < len(starts) and starts[nxt].start <= a:
            active.append(starts[nxt])
            nxt += 1
        active = [s for s in active if s.end > a]
        over = [s for s in active if s.start <= a and s.end >= b]
        if over:
            top = max(over, key=lambda s: s.priority)
            pieces.append((a, b, top.kind, top.incident))
        else:
            pieces.append((a, b, "", None))
    return pieces


def _spacing(steps: list[int]) -> int:
    """The usual number of steps between saves (the first save's step if there is one)."""
    unique = sorted(set(steps))
    gaps = [b - a for a, b in itertools.pairwise(unique)]
    if gaps:
        return int(statistics.median_low(gaps))
    return unique[0] if unique else 0


def _order(e: Mapping[str, Any]) -> tuple[float, int]:
    return _number(e, "t"), EVENT_KINDS.index(e["event"])


def _implied_failures(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``log`` plus the failures its starts imply: a new worker group with no failure
    recorded since the last one (``other``: Ray restarted it for a reason no one named),
    and a ``job_start`` while the previous job never ended (``head``: its driver, which
    runs on the head, was lost). Both go just before the start that shows them."""
    out: list[dict[str, Any]] = []
    open_job = failed = False
    groups = 0
    last_step: int | None = None
    for e in log:
        kind, t = e["event"], _number(e, "t")
        if kind == JOB_START:
            if open_job and not failed:
                out.append({"event": FAILURE, "t": t, "incident": "head", "step": last_step,
                            "implied": True})
                failed = True
            if not open_job:
                groups = 0
            open_job = True
        elif kind == JOB_END:
            open_job = False
        elif kind == FAILURE:
            failed = True
        elif kind == GROUP_START:
            if groups and not failed:
                out.append({"event": FAILURE, "t": t, "incident": "other", "step": last_step,
                            "implied": True})
            groups += 1
            failed = False
        elif kind == STEP:
            last_step = int(_number(e, "step"))
        out.append(e)
    return out


def compute(events: Iterable[Mapping[str, Any]], *, now: float | None = None) -> Goodput:
    """The goodput of an event log (any order; several writers' logs merged)."""
    log = [dict(e) for e in events]
    for e in log:
        check_event(e)
    if not log:
        raise GoodputError("no goodput events: the run recorded nothing yet")
    log.sort(key=_order)
    log = _implied_failures(log)
    failures = [e for e in log if e["event"] == FAILURE]
    failure_ts = [_number(f, "t") for f in failures]
    steps = [e for e in log if e["event"] == STEP]
    firsts = {(int(e.get("attempt", 0)), int(_number(e, "step"))) for e in log
              if e["event"] == FIRST_STEP}
    # The run's typical step time, first steps (compile) left out.
    ordinary = [_number(s, "seconds") for s in steps
                if (int(s.get("attempt", 0)), int(_number(s, "step"))) not in firsts]
    median = statistics.median(ordinary) if ordinary else 0.0

    # Each step number's last execution counts; the earlier ones were lost.
    last_run: dict[int, int] = {}
    for i, s in enumerate(steps):
        last_run[int(_number(s, "step"))] = i
    spans: list[_Span] = []
    recomputed = 0
    for i, s in enumerate(steps):
        end = _number(s, "t")
        start = end - _number(s, "seconds")
        number = int(_number(s, "step"))
        lost = last_run[number] != i
        recomputed += lost
        nxt = bisect.bisect_left(failure_ts, end)
        incident = nxt if lost and nxt < len(failures) else None
        kind = "lost" if lost else PRODUCTIVE
        if (int(s.get("attempt", 0)), number) in firsts and ordinary:
            compile_end = max(start, end - median)
            spans.append(_Span(start, compile_end, "startup", _STARTUP_PRIORITY))
            start = compile_end
        spans.append(_Span(start, end, kind, _STEP_PRIORITY, incident))
    saves = [e for e in log if e["event"] == CHECKPOINT_SAVE]
    for e in saves:
        spans.append(_Span(_number(e, "t") - _number(e, "seconds"), _number(e, "t"),
                           "checkpoint_save", _SAVE_PRIORITY))
    for e in log:
        if e["event"] == CHECKPOINT_RESTORE:
            spans.append(_Span(_number(e, "t") - _number(e, "seconds"), _number(e, "t"),
                               "restore", _SAVE_PRIORITY))

    # The wall time: every job's span, from its start to its end (or the last event).
    windows: list[tuple[float, float]] = []
    begin: float | None = None
    last_t = max(_number(e, "t") for e in log)
    for e in log:
        t = _number(e, "t")
        if e["event"] == JOB_START and begin is None:
            begin = t
        elif e["event"] == JOB_END and begin is not None:
            windows.append((begin, t))
            begin = None
    running = begin is not None or not windows
    if begin is None and not windows:
        begin = min(min(_number(e, "t") for e in log), min((s.start for s in spans),
                                                             default=last_t))
    if begin is not None:
        windows.append((begin, max(last_t, now or last_t)))

    phase_ts, phase_kinds = _phases(log, steps)
    badput = dict.fromkeys(BADPUT_KINDS, 0.0)
    productive = 0.0
    cost: list[dict[str, float]] = [{} for _ in failures]
    # Restart/startup/restore after a failure are its cost until the next productive step.
    for lo, hi in windows:
        for a, b, kind, incident in _covered(spans, lo, hi, phase_ts):
            if not kind:
                i = bisect.bisect_right(phase_ts, (a + b) / 2) - 1
                kind, incident = phase_kinds[i] if i >= 0 else ("startup", None)
            elif kind in ("startup", "restore"):
                i = bisect.bisect_right(phase_ts, (a + b) / 2) - 1
                incident = phase_kinds[i][1] if i >= 0 else None
            if kind == PRODUCTIVE:
                productive += b - a
            else:
                badput[kind] += b - a
                if incident is not None and kind != "idle":
                    cost[incident][kind] = cost[incident].get(kind, 0.0) + b - a
    lost_by_incident = [0] * len(failures)
    for i, s in enumerate(steps):
        if last_run[int(_number(s, "step"))] != i:
            k = bisect.bisect_left(failure_ts, _number(s, "t"))
            if k < len(failures):
                lost_by_incident[k] += 1
    incidents = tuple(
        Incident(kind=str(f.get("incident", "other")), t=_number(f, "t"),
                 step=int(f["step"]) if f.get("step") is not None else None,
                 seconds=sum(cost[k].values()), lost_steps=lost_by_incident[k],
                 implied=bool(f.get("implied")), by_kind=cost[k])
        for k, f in enumerate(failures))
    counted = [int(_number(steps[i], "step")) for i in last_run.values()]
    return Goodput(
        total_elapsed_time=sum(hi - lo for lo, hi in windows),
        goodput_time=productive,
        badput_time=badput,
        max_productive_step=max(counted, default=0),
        productive_steps=len(counted),
        recomputed_steps=recomputed,
        incidents=incidents,
        checkpoint_saves=len(saves),
        checkpoint_save_s=(sum(_number(e, "seconds") for e in saves) / len(saves)
                           if saves else 0.0),
        checkpoint_bytes=int(saves[-1].get("bytes", 0)) if saves else 0,
        checkpoint_every=(int(saves[-1]["every"]) if saves and "every" in saves[-1]
                          else _spacing([int(_number(e, "step")) for e in saves])),
        median_step_s=median,
        running=running,
    )
