"""Runs an example's ``__main__.py`` the way ``pulumi up`` would, under mocks: every
resource registration and invoke is recorded, nothing reaches GCP or Kubernetes.

In CI these tests run from a venv where raytpu is installed from its wheel
(``RAYTPU_EXPECT_WHEEL=1``): what ships is what is tested.
"""

from __future__ import annotations

import json
import os
import runpy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pytest

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the engine marks a secret value
CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="  # base64 of a PEM header: enough for a mock


def _plain(value: Any) -> Any:
    """``value`` with secrets unwrapped."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return _plain(value["value"])
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@dataclass
class Recorded:
    resources: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    invokes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stack_outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, typ: str) -> list[dict[str, Any]]:
        return [inputs for t, _, inputs in self.resources if t == typ]

    def names(self, typ: str) -> list[str]:
        return [name for t, name, _ in self.resources if t == typ]


class ExampleMocks(pulumi.runtime.Mocks):
    """Answers what a real engine would: a cluster lookup, another stack's outputs, and a
    few computed properties the examples read."""

    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.recorded.resources.append((args.typ, args.name, _plain(dict(args.inputs))))
        outputs = dict(args.inputs)
        if args.typ == "pulumi:pulumi:StackReference":
            outputs["outputs"] = self.recorded.stack_outputs
        elif args.typ == "gcp:serviceaccount/account:Account":
            email = f"{args.inputs['accountId']}@{args.inputs['project']}.iam.gserviceaccount.com"
            outputs.update(email=email, member=f"serviceAccount:{email}")
        elif args.typ == "gcp:storage/bucket:Bucket":
            outputs["url"] = f"gs://{args.inputs['name']}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        self.recorded.invokes.append((args.token, dict(args.args)))
        if args.token == "gcp:container/getCluster:getCluster":
            return {"endpoint": "10.0.0.2", "masterAuths": [{"clusterCaCertificate": CA}],
                    "name": args.args["name"], "location": args.args["location"]}, []
        return {}, []


def run_example(directory: Path, config: dict[str, Any],
                stack_outputs: dict[str, Any] | None = None) -> Recorded:
    """Run ``directory/__main__.py`` under mocks with ``config`` (``<project>:<key>`` keys)."""
    import yaml

    project = yaml.safe_load((directory / "Pulumi.yaml").read_text())["name"]
    recorded = Recorded(stack_outputs=stack_outputs or {})
    pulumi.runtime.set_mocks(ExampleMocks(recorded), project=project, stack="test",
                             preview=False)
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v)
                                   for k, v in config.items()})

    @pulumi.runtime.test
    def program() -> None:
        runpy.run_path(str(directory / "__main__.py"), run_name="__main__")

    program()
    return recorded


@pytest.fixture
def example() -> Callable[..., Recorded]:
    return run_example


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("RAYTPU_EXPECT_WHEEL") == "1":
        import raytpu

        where = Path(raytpu.__file__).resolve()
        assert "site-packages" in where.parts, f"raytpu comes from {where}, not the wheel"
