"""``raytpu rehearse``: build the local control plane, and bring a stack up on it."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from raytpu.cli.options import StacksDirOpt

if TYPE_CHECKING:
    from raytpu.facts.versions import GoComponent
    from raytpu.rehearse.build import Cache

CacheOpt = Annotated[Path | None, typer.Option(
    "--cache-dir", help="Where the built binaries live (default $RAYTPU_REHEARSE_CACHE, else "
    "$XDG_CACHE_HOME/raytpu/rehearse)")]


class _Progress:
    """One line per component on stderr: its index, version and time; on a terminal the
    line counts the seconds while Go builds."""

    def __init__(self) -> None:
        self._tty = sys.stderr.isatty()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._started = 0.0

    def __call__(self, event: str, c: GoComponent, i: int, n: int) -> None:
        label = f"[{i}/{n}] {c.name} {c.version}"
        if event == "cached":
            print(f"{label}: cached", file=sys.stderr)
        elif event == "start":
            self._started = time.monotonic()
            if self._tty:
                self._stop.clear()
                self._ticker = threading.Thread(target=self._tick, args=(label,), daemon=True)
                self._ticker.start()
            else:
                print(f"{label}: building ...", file=sys.stderr, flush=True)
        elif event == "done":
            self.stop()
            print(f"\r{label}: built in {time.monotonic() - self._started:.0f} s\033[K"
                  if self._tty else f"{label}: built in "
                  f"{time.monotonic() - self._started:.0f} s", file=sys.stderr, flush=True)

    def _tick(self, label: str) -> None:
        while not self._stop.wait(1.0):
            print(f"\r{label}: building ... {time.monotonic() - self._started:.0f} s\033[K",
                  end="", file=sys.stderr, flush=True)

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None


def _build(cache: Cache) -> None:
    from raytpu.rehearse.build import BuildError, build

    progress = _Progress()
    try:
        built = build(cache, progress)
    except BuildError as e:
        progress.stop()
        print(file=sys.stderr)
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(1) from None
    fresh = [b for b in built if not b.cached]
    total = sum(b.seconds for b in fresh)
    print(f"rehearsal binaries in {cache.root}: "
          + (f"{len(fresh)} built in {total:.0f} s" if fresh else "all cached"), file=sys.stderr)


def rehearse_command(
    stack: Annotated[str | None, typer.Option(
        "--stack", "-s", help="Bring this stack up on the local control plane")] = None,
    build: Annotated[bool, typer.Option(
        "--build", help="Build the control plane's binaries (a no-op when cached)")] = False,
    stacks_dir: StacksDirOpt = None,
    cache_dir: CacheOpt = None,
) -> None:
    """Rehearse a stack on a real local control plane (etcd, kube-apiserver, scheduler, KWOK,
    KubeRay), each built from its Go module at a pinned version."""
    from raytpu.rehearse.build import Cache

    cache = Cache.default(cache_dir)
    if not build and stack is None:
        print("error: give --build, --stack NAME or both", file=sys.stderr)
        raise typer.Exit(2)
    if build or stack is not None:
        _build(cache)
    if stack is not None:
        print("error: `raytpu rehearse --stack` is not finished: the control plane and the "
              "stack's objects land next (issue 29, step 2); `--build` works", file=sys.stderr)
        raise typer.Exit(1)
