"""What every trainer loop shares, whichever framework runs it (no torch, no jax): the
launcher's :class:`Hooks`, the host's :class:`HostPlace` and the rehearsal's hold."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol


class Hooks(Protocol):
    """What the launcher provides to the loop."""

    def begin_attempt(self) -> tuple[int, bool]:
        """(attempt number, whether it is the first attempt of this invocation)."""
        ...

    def restore(self) -> dict[str, Any] | None:
        """The latest checkpoint's state (model, optim, step), or None to start fresh."""
        ...

    def save(self, step: int, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        """Collective: every host calls it; only the rank that saves passes ``state``."""
        ...

    def publish(self, records: list[dict[str, Any]]) -> None:
        """Step records from the reporting rank (fire and forget)."""
        ...

    def flush(self) -> None:
        """Wait until every published record has arrived."""
        ...

    def settle(self) -> None:
        """Wait until every saved checkpoint is registered (resumable), not just written."""
        ...

    def holding(self, step: int) -> None:
        """Rehearsal: tell the launcher every host now waits, after ``step``, to be killed."""
        ...

    def goodput(self, event: str, **fields: Any) -> None:
        """A goodput event (:mod:`raytpu.workloads.goodput`); the reporting rank's count."""
        ...


@dataclass
class RecordingHooks:
    """:class:`Hooks` with no launcher behind them, for a script that calls a trainer
    directly (``benchmarks/mfu.py``, the tests' subprocesses): one attempt, nothing to
    restore or checkpoint, the step records kept in ``records``, the goodput events in
    ``events``."""

    records: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def begin_attempt(self) -> tuple[int, bool]:
        return 1, True

    def restore(self) -> dict[str, Any] | None:
        return None

    def save(self, step: int, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        pass

    def publish(self, records: list[dict[str, Any]]) -> None:
        self.records.extend(records)

    def flush(self) -> None:
        pass

    def settle(self) -> None:
        pass

    def holding(self, step: int) -> None:
        pass

    def goodput(self, event: str, **fields: Any) -> None:
        self.events.append({"event": event, "t": fields.pop("t", time.time()), **fields})


@dataclass(frozen=True)
class HostPlace:
    """Where this process trains: its data shard and whether it reports metrics."""

    data_index: int
    num_hosts: int
    rank: int


def hold(timeout_s: float) -> None:
    """Rehearsal of a preemption: wait to be killed with the rest of this host."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.2)
    raise RuntimeError(f"held {timeout_s:.0f}s for the rehearsed host kill, which never came")


def state_bytes(state: Any) -> int:
    """The bytes of a checkpoint's arrays (torch tensors and numpy arrays have ``nbytes``)."""
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, list | tuple):
        return sum(state_bytes(v) for v in state)
    size = getattr(state, "nbytes", 0)
    return size if isinstance(size, int) else 0


def record_steps(hooks: Hooks, steps: list[int], *, attempt: int, per_step_s: float,
                 first: int | None = None) -> None:
    """Goodput ``step`` events for a window of steps that just ended together, each
    ``per_step_s`` long, back to back; ``first``: the attempt's first step (its compile)."""
    end = time.time()
    n = len(steps)
    for i, step in enumerate(steps):
        t = end - (n - 1 - i) * per_step_s
        hooks.goodput("step", t=t, step=step, seconds=per_step_s, attempt=attempt)
        if step == first:
            hooks.goodput("first_step", t=t, step=step, seconds=per_step_s, attempt=attempt)


def record_restore(hooks: Hooks, state: dict[str, Any] | None, *, attempt: int,
                   started: float) -> None:
    """The restore that began at ``started`` (``time.perf_counter()``) and the resume."""
    if state is None:
        return
    step = int(state["step"])
    hooks.goodput("checkpoint_restore", step=step, seconds=time.perf_counter() - started,
                  bytes=state_bytes(state))
    hooks.goodput("resume", attempt=attempt, step=step + 1)
