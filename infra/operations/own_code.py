"""A user's own command for ``raytpu submit ... -- CMD`` and ``raytpu run --local ... -- CMD``:
its inputs checked before anything is contacted, its working directory packaged as Ray's
runtime environment, and the launcher entrypoint that runs it on every TPU host through the
bundled trainer's path (``python -m raytpu.workloads.launcher <slice shape> -- CMD``).

The working directory is zipped here exactly as Ray zips it (Ray's own packaging, with its
``.gitignore``/``.rayignore`` handling), so the size checked is the size Ray would upload;
``.git``, virtual environments and ``__pycache__`` are never uploaded.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from raytpu.spec.scaling import COMMAND_ENV_VARS
from raytpu.spec.train_options import BadFlags

# Never uploaded, wherever they sit in the working directory (gitignore syntax); a folder
# holding pyvenv.cfg (a virtual environment of any name) is excluded by its path too.
ALWAYS_EXCLUDED = (".git", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache")
_QUIET = logging.getLogger("raytpu.packaging")  # Ray's packaging logs each package at INFO
_QUIET.setLevel(logging.WARNING)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# pip options a requirements file may carry to Ray's pip runtime env; file references (-r, -c,
# -e PATH) would name paths that exist only on this machine.
_PIP_OPTIONS = ("--index-url", "--extra-index-url", "--find-links", "-f", "-i",
                "--trusted-host", "--pre", "--no-binary", "--only-binary")


@dataclass(frozen=True)
class Package:
    """The working directory as Ray uploads it."""

    path: Path
    zip_path: Path
    bytes: int
    limit: int
    excludes: tuple[str, ...]

    @property
    def name(self) -> str:
        """Content-addressed, as Ray names packages (``_ray_pkg_<sha1>.zip``)."""
        from ray._private.runtime_env.packaging import get_uri_for_package

        return get_uri_for_package(self.zip_path).rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Command:
    """A validated own-code submission's inputs."""

    argv: tuple[str, ...]
    package: Package
    env: dict[str, str]
    requirements: tuple[str, ...] = ()


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def upload_limit() -> int:
    """Ray's limit on a runtime-environment package (``GCS_STORAGE_MAX_SIZE``, its gRPC
    message limit: 512 MiB unless ``RAY_max_grpc_message_size`` says otherwise)."""
    from ray._private.runtime_env.packaging import GCS_STORAGE_MAX_SIZE

    return int(GCS_STORAGE_MAX_SIZE)


def _excludes(root: Path) -> list[str]:
    found = list(ALWAYS_EXCLUDED)
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in ALWAYS_EXCLUDED]
        if "pyvenv.cfg" in files and Path(here) != root:
            found.append("/" + Path(here).relative_to(root).as_posix() + "/")
            dirs[:] = []
    return found


def folder_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a working directory (cheap: before any packaging)."""
    key = f"--working-dir: {str(path)!r}"
    if not path.exists():
        return f"{key} does not exist"
    if not path.is_dir():
        return f"{key} is not a folder"
    try:
        next(path.iterdir(), None)
    except OSError as e:
        return f"{key} cannot be read: {e.strerror}"
    return None


def package(path: Path, *, limit: int | None = None) -> Package:
    """Zip ``path`` as Ray would; BadFlags naming the size, the limit and what to exclude
    when it is too big, or when the folder is missing or unreadable."""
    key = f"--working-dir: {str(path)!r}"
    problem = folder_problem(path)
    if problem:
        raise BadFlags([problem])
    from ray._private.runtime_env.packaging import create_package

    root = path.resolve()
    excludes = _excludes(root)
    scratch = Path(tempfile.mkdtemp(prefix="raytpu-pkg-"))
    atexit.register(shutil.rmtree, scratch, True)
    zip_path = scratch / "working_dir.zip"
    try:
        create_package(str(root), zip_path, include_gitignore=True, excludes=excludes,
                       logger=_QUIET)
    except OSError as e:
        raise BadFlags([f"{key}: cannot be read: {e}"]) from None
    size = zip_path.stat().st_size
    most = upload_limit() if limit is None else limit
    if size >= most:
        raise BadFlags([f"{key} is {_mib(size)} zipped, over Ray's {_mib(most)} limit for a "
                        f"working directory; largest: {_largest(zip_path)}. Exclude what the "
                        "job does not need with a .rayignore (or .gitignore) in it, or read "
                        "big data from gs:// instead (.git and virtual environments are never "
                        "uploaded)"])
    return Package(path=root, zip_path=zip_path, bytes=size, limit=most,
                   excludes=tuple(excludes))


def _largest(zip_path: Path, top: int = 3) -> str:
    sizes: dict[str, int] = {}
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            head, sep, _ = info.filename.partition("/")
            name = head + ("/" if sep else "")
            sizes[name] = sizes.get(name, 0) + info.compress_size
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} ({_mib(n)})" for name, n in biggest)


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``--env K=V`` values; BadFlags naming each malformed one."""
    env: dict[str, str] = {}
    problems = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.match(name):
            problems.append(f"--env: {pair!r} is not NAME=VALUE (NAME: letters, digits, _)")
        else:
            env[name] = value
    if problems:
        raise BadFlags(problems)
    return env


def read_requirements(path: Path) -> list[str]:
    """The lines of a pip requirements file, each checked; BadFlags naming the line."""
    from packaging.requirements import InvalidRequirement, Requirement

    key = f"--requirements: {str(path)!r}"
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadFlags([f"{key} cannot be read: {e}"]) from None
    lines, problems = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            if line.split("=", 1)[0].split()[0] not in _PIP_OPTIONS:
                problems.append(f"{key} line {number}: {line!r}: only index options may be "
                                "given here; name packages, not files (-r, -c, -e)")
            else:
                lines.append(line)
            continue
        try:
            Requirement(line)
        except InvalidRequirement as e:
            problems.append(f"{key} line {number}: {line!r} does not parse: {e}")
        else:
            lines.append(line)
    if problems:
        raise BadFlags(problems)
    return lines


def command(argv: list[str] | None, *, working_dir: Path | None, env: list[str],
            requirements: Path | None) -> Command:
    """Every own-code input checked (all problems at once, bad ones before the slow
    packaging). Raises BadFlags."""
    problems: list[str] = []
    if not argv:
        problems.append("--: no command after `--` (e.g. -- python train.py --steps 100)")
    if working_dir is None:
        problems.append("--working-dir: required with a command (the folder it runs in, "
                        "uploaded with the job)")
    elif folder_problem(working_dir):
        problems.append(str(folder_problem(working_dir)))
    values: dict[str, str] = {}
    reqs: list[str] = []
    for check in (lambda: values.update(parse_env(env)),
                  lambda: reqs.extend(read_requirements(requirements) if requirements else [])):
        try:
            check()
        except BadFlags as e:
            problems += e.problems
    if problems:
        raise BadFlags(problems)
    assert argv and working_dir is not None
    return Command(argv=tuple(argv), package=package(working_dir), env=values,
                   requirements=tuple(reqs))


def runtime_env(cmd: Command, *, base_env: dict[str, str],
                working_dir: str | None = None) -> dict[str, object]:
    """Ray's runtime environment of the job: the working directory (a local folder, which
    the Job Submission client uploads, or ``working_dir``: a URI already holding it), the
    environment (``base_env``, then ``--env``) and the requirements."""
    env: dict[str, object] = {
        "working_dir": working_dir or str(cmd.package.path),
        "env_vars": {**base_env, **COMMAND_ENV_VARS, **cmd.env},
    }
    if working_dir is None:
        env["excludes"] = list(cmd.package.excludes)
    if cmd.requirements:
        env["pip"] = list(cmd.requirements)
    return env


def upload(cmd: Command, uri: str) -> None:
    """Copy the packaged working directory to ``uri`` (gs://) with this user's Google
    credentials. Raises OSError with what failed."""
    import fsspec

    with cmd.package.zip_path.open("rb") as src, fsspec.open(uri, "wb") as dst:
        shutil.copyfileobj(src, dst)
