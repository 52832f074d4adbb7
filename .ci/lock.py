"""Write constraints.txt: the exact versions of everything ``raytpu[dev,workloads]`` pulls in,
as installed in the running environment (the one the tests passed in).

pyproject.toml states the compatible ranges; constraints.txt is the one set CI installs
(``.ci/run``) and ``pulumi up`` installs (``deploy/requirements.txt``). After changing a
dependency: install it, run the tests, then ``python .ci/lock.py``.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# The exact set CI tests (.ci/run) and `pulumi up` installs (deploy/requirements.txt):
# every package raytpu[dev,workloads] needs, at the version the tests passed with.
# pyproject.toml holds the compatible ranges. Regenerate with: python .ci/lock.py
"""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str, extras: frozenset[str]) -> dict[str, str]:
    """Installed version of every distribution ``root[extras]`` requires, transitively."""
    found: dict[str, frozenset[str]] = {}
    todo = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        key = canonical(name)
        if key in found and wanted <= found[key]:
            continue
        found[key] = found.get(key, frozenset()) | wanted
        for line in requires(name) or []:
            req = Requirement(line)
            if req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in (*found[key], "")
            ):
                todo.append((req.name, frozenset(req.extras)))
    del found[canonical(root)]
    pins = {}
    for key in sorted(found):
        try:
            pins[key] = version(key)
        except PackageNotFoundError:
            sys.exit(f"{key} is required but not installed: install raytpu[dev,workloads] first")
    return pins


def main() -> None:
    pins = closure("raytpu", frozenset({"dev", "workloads"}))
    text = HEADER + "".join(f"{name}=={v}\n" for name, v in pins.items())
    (ROOT / "constraints.txt").write_text(text)
    print(f"constraints.txt: {len(pins)} packages")


if __name__ == "__main__":
    main()
