"""``raytpu rehearse``: build the local control plane, and bring a stack up on it."""

from __future__ import annotations

import json
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


def _fail(problems: list[str], code: int) -> typer.Exit:
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return typer.Exit(code)


def rehearse_command(
    stack: Annotated[str | None, typer.Option(
        "--stack", "-s", help="Bring this stack up on the local control plane")] = None,
    build: Annotated[bool, typer.Option(
        "--build", help="Build the control plane's binaries (a no-op when cached)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    keep: Annotated[bool, typer.Option(
        "--keep", help="Leave the control plane running and print its kubeconfig")] = False,
    at_max: Annotated[bool, typer.Option(
        "--at-max", help="Fake every node the pools can scale to, not their initial size")
    ] = False,
    crds: Annotated[Path | None, typer.Option(
        "--crds", help="Folder with kuberay/, kueue/, gmp/ CRD YAML (default $RAYTPU_CRDS, "
        "else ../shared/ref)")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait for the operator and scheduler to settle")] = 60.0,
    stop: Annotated[Path | None, typer.Option(
        "--stop", help="Stop a rehearsal left up by --keep (its folder or kubeconfig)")
    ] = None,
    stacks_dir: StacksDirOpt = None,
    cache_dir: CacheOpt = None,
) -> None:
    """Rehearse a stack on a real local control plane (etcd, the API server, scheduler, KWOK,
    KubeRay), each built from its Go module at a pinned version."""
    from raytpu.rehearse.build import Cache

    cache = Cache.default(cache_dir)
    if stop is not None:
        from raytpu.rehearse.control_plane import stop_kept

        folder = stop if stop.is_dir() else stop.parent
        if not (folder / "pids").is_file():
            raise _fail([f"--stop: {stop} is not a kept rehearsal (no pids file in {folder})"],
                        2)
        stop_kept(folder)
        print(f"stopped and removed {folder}", file=sys.stderr)
        return
    if not build and stack is None:
        raise _fail(["give --build, --stack NAME or both"], 2)
    if timeout <= 0:
        raise _fail([f"--timeout: {timeout} is not a positive number of seconds"], 2)
    result = None
    if stack is not None:  # bad config is refused before anything is built or started
        from raytpu.config.stack import ConfigError
        from raytpu.plan.engine import PlanError, run_plan
        from raytpu.rehearse.objects import CrdsNotFound, crd_folder

        try:
            result = run_plan(stack, stacks_dir, preview=True)
            crd_folder(crds)
        except ConfigError as e:
            raise _fail(e.problems, 2) from None
        except (PlanError, CrdsNotFound) as e:
            raise _fail([str(e)], 2) from None
    _build(cache)
    if result is None:
        return
    from raytpu.rehearse.api import ApiError
    from raytpu.rehearse.control_plane import ControlPlaneError
    from raytpu.rehearse.report import render, to_dict
    from raytpu.rehearse.run import rehearse

    try:
        rehearsal = rehearse(result, cache, crds=crds, keep=keep, at_max=at_max,
                             settle_timeout=timeout)
    except ControlPlaneError as e:
        raise _fail([f"the control plane did not come up: {e}"], 1) from None
    except ApiError as e:  # a CRD or fake node refused: the rehearsal itself is at fault
        raise _fail([f"the rehearsal's own setup was refused: {e.message}"], 1) from None
    if as_json:
        sys.stdout.write(json.dumps(to_dict(rehearsal), indent=2) + "\n")
    else:
        print(render(rehearsal))
    if not rehearsal.ok:
        raise typer.Exit(1)
