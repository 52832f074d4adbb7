"""``raytpu rehearse --build``: the control plane's binaries, built from their Go modules.

Each component of :data:`raytpu.facts.versions.REHEARSAL_COMPONENTS` is built at its pinned
version into ``<cache>/<component>-<version>/bin`` (one component at a time: a Kubernetes
link takes 2 GB on a 2-core machine), with the Go module and build caches under
``<cache>/go`` so a second build, or a newer pin of one component, reuses what it can. A
component is complete when its ``built.json`` stamp names its module and version and every
binary is there; a complete cache makes the build a no-op.

Nothing is written into the repository: binaries, module sources and the wrapper modules
live in the cache (``$RAYTPU_REHEARSE_CACHE``, else ``$XDG_CACHE_HOME/raytpu/rehearse``,
else ``~/.cache/raytpu/rehearse``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from raytpu.facts.versions import KUBERNETES_VERSION, REHEARSAL_COMPONENTS, GoComponent

CACHE_ENV = "RAYTPU_REHEARSE_CACHE"
MIN_GO = (1, 26)  # the pinned modules declare `go 1.26.0`
STAMP = "built.json"


class BuildError(Exception):
    """A component could not be built (one sentence, and where the log is)."""


@dataclass(frozen=True)
class Cache:
    """The rehearsal's cache folder: one sub-folder per component, Go's caches beside."""

    root: Path

    @staticmethod
    def default(override: Path | None = None) -> Cache:
        if override is not None:
            return Cache(override.expanduser().resolve())
        if os.environ.get(CACHE_ENV):
            return Cache(Path(os.environ[CACHE_ENV]).expanduser().resolve())
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Cache(Path(base).expanduser().resolve() / "raytpu" / "rehearse")

    def folder(self, component: GoComponent) -> Path:
        return self.root / f"{component.name}-{component.version.removeprefix('v')}"

    def binary(self, name: str) -> Path:
        """The path of one binary (``kube-apiserver``) of the pinned components."""
        for c in REHEARSAL_COMPONENTS:
            if name in c.binaries:
                return self.folder(c) / "bin" / name
        raise KeyError(name)

    def complete(self, component: GoComponent) -> bool:
        stamp = self.folder(component) / STAMP
        try:
            built = json.loads(stamp.read_text())
        except (OSError, ValueError):
            return False
        return (built.get("module"), built.get("version")) == (
            component.module, component.version) and all(
            os.access(self.folder(component) / "bin" / b, os.X_OK) for b in component.binaries)

    def module_dir(self, component: GoComponent) -> Path:
        """The pinned module's source in the cache's module cache (read, never copied into
        the repository)."""
        return self.root / "go" / "mod" / f"{component.module}@{component.version}"

    def missing(self) -> list[GoComponent]:
        return [c for c in REHEARSAL_COMPONENTS if not self.complete(c)]

    def go_env(self, component: GoComponent) -> dict[str, str]:
        go = self.root / "go"
        return {
            **os.environ,
            "GOPATH": str(go / "path"), "GOMODCACHE": str(go / "mod"),
            "GOCACHE": str(go / "build"), "GOBIN": str(self.folder(component) / "bin"),
            # No toolchain download, static binaries, no local paths in them; a module cache
            # that `rm -rf` can remove.
            "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-trimpath -modcacherw",
        }


@dataclass(frozen=True)
class Built:
    component: GoComponent
    seconds: float
    cached: bool


BuildEvent = Callable[[str, GoComponent, int, int], None]
"""Called with ("start" | "cached" | "done", component, its 1-based index, the count)."""


def go_version() -> tuple[int, ...]:
    """The installed Go's version, or a BuildError that says what is needed."""
    if shutil.which("go") is None:
        raise BuildError(f"`go` is not on PATH: install Go >= {'.'.join(map(str, MIN_GO))} "
                         "(the rehearsal builds its control plane from Go modules)")
    out = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True,
                         check=False).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    found = tuple(int(x) for x in m.groups()) if m else ()
    if found < MIN_GO:
        raise BuildError(f"Go {out or '?'} is too old: the pinned modules need Go >= "
                         f"{'.'.join(map(str, MIN_GO))}")
    return found


def build(cache: Cache, on_event: BuildEvent | None = None) -> list[Built]:
    """Build every component the cache lacks, one at a time; a no-op on a complete cache."""
    results = []
    todo = cache.missing()
    if todo:
        go_version()
    for i, c in enumerate(REHEARSAL_COMPONENTS, 1):
        n = len(REHEARSAL_COMPONENTS)
        if c not in todo:
            if on_event:
                on_event("cached", c, i, n)
            results.append(Built(c, 0.0, cached=True))
            continue
        if on_event:
            on_event("start", c, i, n)
        started = time.monotonic()
        _build_one(cache, c)
        seconds = time.monotonic() - started
        (cache.folder(c) / STAMP).write_text(json.dumps(
            {"module": c.module, "version": c.version, "binaries": list(c.binaries),
             "seconds": round(seconds, 1)}, indent=2) + "\n")
        results.append(Built(c, seconds, cached=False))
        if on_event:
            on_event("done", c, i, n)
    return results


def _build_one(cache: Cache, c: GoComponent) -> None:
    folder = cache.folder(c)
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    log = folder / "build.log"
    env = cache.go_env(c)
    with log.open("w") as out:
        def go(*args: str, cwd: Path = folder) -> str:
            out.write(f"$ go {' '.join(args)}\n")
            out.flush()
            done = subprocess.run(["go", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                  stderr=out, text=True, check=False)
            out.write(done.stdout)
            if done.returncode:
                out.flush()
                tail = "\n".join(log.read_text().splitlines()[-15:])
                raise BuildError(f"building {c.name} {c.version} failed (go {args[0]}, exit "
                                 f"{done.returncode}); log: {log}\n{tail}")
            return done.stdout

        if c.recipe == "install":
            for pkg in c.packages:
                go("install", f"{pkg}@{c.version}")
            return
        src = folder / "src"
        src.mkdir(exist_ok=True)
        for stale in ("go.mod", "go.sum"):
            (src / stale).unlink(missing_ok=True)
        go("mod", "init", f"raytpu.local/rehearse/{c.name}", cwd=src)
        go("mod", "edit", f"-require={c.module}@{c.version}", cwd=src)
        ldflags = "-s -w"
        if c.recipe == "kubernetes":
            _replace_staging_modules(go, src, c)
            ldflags += _kubernetes_version_ldflags()
        # A tools file keeps the requirement through `go mod tidy` (main packages cannot be
        # imported by code that is compiled, so it is behind a build tag).
        imports = "".join(f'\t_ "{p}"\n' for p in c.packages)
        (src / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n"
                                      f"{imports})\n")
        go("mod", "tidy", cwd=src)
        # One package: name the file (Go would call etcd's `server`, after its module path).
        target = folder / "bin" / c.binaries[0] if len(c.packages) == 1 else folder / "bin"
        go("build", "-o", f"{target}{'/' if target.name == 'bin' else ''}", "-ldflags",
           ldflags, *c.packages, cwd=src)


def _replace_staging_modules(go: Callable[..., str], src: Path, c: GoComponent) -> None:
    """k8s.io/kubernetes requires its staging modules at ``v0.0.0`` and maps them to its own
    folders; outside its repository each must be replaced by its published ``v0.X.Y``. Only
    those exactly at ``v0.0.0``: ``k8s.io/utils`` is a real pseudo-version."""
    info = json.loads(go("mod", "download", "-json", f"{c.module}@{c.version}", cwd=src))
    gomod = Path(info["GoMod"]).read_text()
    staging = staging_modules(gomod)
    if not staging:
        raise BuildError(f"{c.module}@{c.version}: no staging modules at v0.0.0 in its go.mod")
    published = "v0." + c.version.removeprefix("v").split(".", 1)[1]
    go("mod", "edit", *(f"-replace={m}={m}@{published}" for m in staging), cwd=src)
    # A dependency's `godebug` lines do not apply to the main module: copy Kubernetes' own.
    for line in re.findall(r"^godebug .*$", gomod, re.M):
        go("mod", "edit", f"-godebug={line.split(None, 1)[1]}", cwd=src)


def staging_modules(gomod: str) -> list[str]:
    """The ``k8s.io/`` requirements of a go.mod at exactly ``v0.0.0``."""
    return sorted(set(re.findall(r"^\s*(?:require\s+)?(k8s\.io/[\w.-]+) v0\.0\.0\s*$",
                                 gomod, re.M)))


def _kubernetes_version_ldflags() -> str:
    """What /version reports (KubeRay and Kueue read it); without these flags it is
    ``v0.0.0-master``."""
    x = "k8s.io/component-base/version"
    major, minor, _ = KUBERNETES_VERSION.split(".")
    return "".join(f" -X {x}.{k}={v}" for k, v in (
        ("gitVersion", f"v{KUBERNETES_VERSION}"), ("gitMajor", major), ("gitMinor", minor),
        ("gitTreeState", "clean")))


def reported_version(binary: Path) -> str:
    """What a binary says its version is: its ``--version`` output where it has one, else
    the module version Go recorded in it (``go version -m``)."""
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                          timeout=30, check=False)
    text = (done.stdout + done.stderr).strip()
    if done.returncode == 0 and text:
        return text.splitlines()[0]
    info = subprocess.run(["go", "version", "-m", str(binary)], capture_output=True,
                          text=True, timeout=30, check=True).stdout
    mods = re.findall(r"^\s*(?:mod|dep)\s+(\S+)\s+(\S+)", info, re.M)
    return " ".join(f"{m} {v}" for m, v in mods[:1])


def binaries(cache: Cache) -> Iterator[tuple[GoComponent, Path]]:
    for c in REHEARSAL_COMPONENTS:
        for b in c.binaries:
            yield c, cache.folder(c) / "bin" / b
