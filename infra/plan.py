"""The offline plan: run the real Pulumi program in-process with mocked providers.

``pulumi.runtime.set_mocks`` replaces the engine and the providers, so no CLI, plugin
or cloud account is needed. A recording monitor captures every registration with the
options the mocks alone cannot see (protect, ignoreChanges, dependsOn, ...). Providers'
computed outputs (cluster endpoint, CA certificate, service-account emails) get
realistic fakes so that derived values such as the kubeconfig are well formed.

Mocks check this package's wiring and derived values; they do not check what GCP or the
API server would accept. That second layer is ``pulumi preview`` in CI.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi.runtime import Mocks

from .config import ConfigError, StackConfig, parse_stack_config
from .cost import cost_of

# The one stack-file loader (also used by `raytpu submit`); re-exported for callers here.
from .stack_file import default_stacks_dir as default_stacks_dir
from .stack_file import load_stack_file as load_stack_file
from .urns import resource_urn

PROJECT = "raytpu"
FAKE_PROJECT_NUMBER = "123456789012"
# A syntactically valid PEM body; kubeconfigs must carry base64 of a certificate.
_FAKE_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIBmocked0ffline0plan0certificate\n-----END CERTIFICATE-----\n"
).decode()


class PlanError(Exception):
    """The plan could not be produced (missing stack file, duplicate resource, ...)."""


@dataclass
class PlannedResource:
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    provider_version: str = ""
    """Provider plugin version the SDK pinned (not in the JSON: it changes with upgrades)."""
    urn: str = ""
    """The URN ``pulumi preview`` gives it (:func:`raytpu.urns.resource_urn`)."""
    parent_urn: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "inputs": self.inputs,
            "options": self.options,
        }


@dataclass
class PlanResult:
    stack: str
    config: StackConfig
    resources: list[PlannedResource]
    outputs: dict[str, Any]

    @property
    def warnings(self) -> list[str]:
        return self.config.warnings

    def by_type(self, type_: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_]

    def get(self, type_: str, name: str) -> PlannedResource:
        for r in self.resources:
            if r.type == type_ and r.name == name:
                return r
        raise KeyError(f"{type_} {name!r} is not in the plan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "resources": [r.to_dict() for r in self.resources],
            "outputs": self.outputs,
            "warnings": self.warnings,
            "cost": cost_of(self.config),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


def _plain(value: Any) -> Any:
    """Protobuf Structs turn every number into a float: give integers back."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


# ---------------------------------------------------------------------------------------
# Mocks


def _fake_outputs(typ: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
    """What the provider would compute on create, faked well enough for derived values."""
    out = dict(inputs)
    res_name = inputs.get("name", name)
    if typ.startswith("gcp:"):
        out.setdefault("name", res_name)
        out.setdefault("project", project)
        out.setdefault("selfLink", f"https://www.googleapis.com/mock/{project}/{res_name}")
    if typ == "gcp:container/cluster:Cluster":
        out.update(
            endpoint="10.0.0.2" if inputs.get("privateClusterConfig") else "34.0.0.2",
            masterAuth={"clusterCaCertificate": _FAKE_CA},
            masterVersion=inputs.get("minMasterVersion") or "1.34.1-gke.1000000",
            id=f"projects/{project}/locations/{inputs.get('location')}/clusters/{res_name}",
        )
        # GKE always assigns a DNS endpoint (``<uid>.<region>.gke.goog``).
        dns = {**(inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig", {}),
               "endpoint": f"gke-0123456789abcdef-{project}.{inputs.get('location')}.gke.goog"}
        out["controlPlaneEndpointsConfig"] = {
            **(inputs.get("controlPlaneEndpointsConfig") or {}), "dnsEndpointConfig": dns,
        }
    elif typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId')}@{project}.iam.gserviceaccount.com"
        out.update(email=email, member=f"serviceAccount:{email}",
                   uniqueId="100000000000000000000")
    elif typ == "gcp:storage/bucket:Bucket":
        out.update(url=f"gs://{res_name}")
    elif typ == "gcp:artifactregistry/repository:Repository":
        out.update(registryUri=f"{inputs.get('location')}-docker.pkg.dev/{project}/"
                               f"{inputs.get('repositoryId')}")
    elif typ == "kubernetes:helm.sh/v3:Release":
        out["status"] = {"status": "deployed", "namespace": inputs.get("namespace"),
                         "name": inputs.get("name", name)}
    return out


def _fake_existing_cluster(args: dict[str, Any], project: str) -> dict[str, Any]:
    """``gcp.container.getCluster`` of a cluster that exists outside the program."""
    name, location = args.get("name"), args.get("location")
    project = args.get("project") or project
    return {
        "id": f"projects/{project}/locations/{location}/clusters/{name}",
        "name": name, "location": location, "project": project,
        "endpoint": "10.0.0.3",
        "masterAuths": [{"clusterCaCertificate": _FAKE_CA}],
        "controlPlaneEndpointsConfigs": [{"dnsEndpointConfigs": [{
            "endpoint": f"gke-fedcba9876543210-{project}.{location}.gke.goog",
            "allowExternalTraffic": True,
        }]}],
        "workloadIdentityConfigs": [{"workloadPool": f"{project}.svc.id.goog"}],
    }


class RecordingMocks(Mocks):
    """``pulumi.runtime.Mocks`` that fake provider outputs and answer invokes."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        self.inputs[(args.typ, args.name)] = args.inputs
        outputs = _fake_outputs(args.typ, args.name, args.inputs, self.project)
        return outputs.get("id") or f"{args.name}-id", outputs

    def call(self, args: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, args.args))
        if args.token == "gcp:organizations/getProject:getProject":
            return {"number": FAKE_PROJECT_NUMBER, "projectId": self.project}, []
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": self.project, "accessToken": "mock-token"}, []
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            v = "1.34.1-gke.1000000"
            return {
                "defaultClusterVersion": v,
                "latestMasterVersion": v,
                "latestNodeVersion": v,
                "validMasterVersions": [v],
                "validNodeVersions": [v],
                "releaseChannelDefaultVersion": {"RAPID": v, "REGULAR": v, "STABLE": v},
                "releaseChannelLatestVersion": {"RAPID": v, "REGULAR": v, "STABLE": v},
            }, []
        if args.token == "gcp:container/getCluster:getCluster":
            return _fake_existing_cluster(dict(args.args), self.project), []
        return {}, []

    def register_transform(self, transform: Any) -> None:  # pragma: no cover - unused
        pass

    def register_invoke_transform(self, transform: Any) -> None:  # pragma: no cover
        pass


def _make_monitor(mocks: RecordingMocks, records: list[PlannedResource]) -> Any:
    from pulumi import get_project, get_stack
    from pulumi.runtime.mocks import MockMonitor

    real_urns: dict[str, str] = {}  # the mocks' URN -> the engine's

    class RecordingMonitor(MockMonitor):
        """Captures each registration with its options; refuses duplicate URNs."""

        def RegisterResource(self, request: Any) -> Any:
            urn = self.make_urn(request.parent, request.type, request.name)
            if urn in self.resources:
                raise PlanError(f"duplicate resource URN {urn} (two resources share a name)")
            response = super().RegisterResource(request)
            parent_urn = real_urns.get(request.parent) if request.parent else None
            real_urns[urn] = resource_urn(get_stack(), get_project(), request.type,
                                          request.name, parent_urn)
            if request.type == "pulumi:pulumi:Stack":
                return response
            parent = None
            if request.parent and not request.parent.split("::")[2].endswith("pulumi:pulumi:Stack"):
                parent = _name_of(request.parent)
            options: dict[str, Any] = {}
            if request.protect:
                options["protect"] = True
            if list(request.ignoreChanges):
                options["ignoreChanges"] = sorted(request.ignoreChanges)
            if list(request.replaceOnChanges):
                options["replaceOnChanges"] = sorted(request.replaceOnChanges)
            if request.deleteBeforeReplace:
                options["deleteBeforeReplace"] = True
            if list(request.additionalSecretOutputs):
                options["additionalSecretOutputs"] = sorted(request.additionalSecretOutputs)
            aliases = sorted(a.spec.type for a in request.aliases if a.spec.type)
            if aliases:
                options["aliasTypes"] = aliases
            deps = [_name_of(d) for d in request.dependencies if d != request.parent]
            if deps:
                options["dependsOn"] = sorted(set(deps))
            if request.provider:  # "<provider urn>::<id>"
                options["provider"] = _name_of(request.provider.rsplit("::", 1)[0])
            inputs = mocks.inputs.get((request.type, request.name), {})
            records.append(
                PlannedResource(
                    type=request.type,
                    name=request.name,
                    parent=parent,
                    custom=bool(request.custom),
                    inputs=_plain(inputs),
                    options=options,
                    provider_version=request.version,
                    urn=real_urns[urn],
                    parent_urn=parent_urn,
                )
            )
            return response

    return RecordingMonitor(mocks)


# ---------------------------------------------------------------------------------------
# Stack files and the run


def _as_pulumi_config(raw: dict[str, Any]) -> dict[str, str]:
    """Pulumi hands programs config as strings; objects and lists as JSON."""
    out = {}
    for key, value in raw.items():
        if isinstance(value, dict) and "secure" in value:
            value = "mock-secret"  # secrets cannot be decrypted without the CLI
        out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def run_program(
    stack: str, raw: dict[str, Any], program: Callable[[], None] | None = None
) -> PlanResult:
    """Validate ``raw`` (raises ConfigError before anything is declared), then run ``program``
    (default: the stack program, ``raytpu.program.declare``) under recording mocks."""
    import pulumi
    from pulumi.runtime import settings

    cfg = parse_stack_config(stack, raw)

    if program is None:
        from .program import declare

        program = declare

    mocks = RecordingMocks(cfg.project)
    records: list[PlannedResource] = []
    monitor = _make_monitor(mocks, records)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(_as_pulumi_config(raw))

    outputs: dict[str, Any] = {}
    root = settings.get_root_resource()

    @pulumi.runtime.test
    def _run() -> Any:
        assert root is not None
        root.outputs.clear()  # type: ignore[attr-defined]
        program()
        exported = dict(root.outputs)  # type: ignore[attr-defined]
        return pulumi.Output.from_input(exported).apply(outputs.update)

    try:
        _run()
    except (PlanError, ConfigError):
        raise
    except Exception as e:  # surface our errors raised inside the engine's threads
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, PlanError | ConfigError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise cause from None
        raise
    if not records:
        raise PlanError("the program declared no resources (were the mocks installed?)")
    return PlanResult(stack=stack, config=cfg, resources=records, outputs=_plain(outputs))


def run_plan(stack: str, stacks_dir: Path | None = None) -> PlanResult:
    return run_program(stack, load_stack_file(stack, stacks_dir))
