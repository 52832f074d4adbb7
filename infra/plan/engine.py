"""The offline plan: run the real Pulumi program in-process with mocked providers.

``pulumi.runtime.set_mocks`` replaces the engine and the providers, so no CLI, plugin
or cloud account is needed. A recording monitor captures every registration with the
options the mocks alone cannot see (protect, ignoreChanges, dependsOn, ...), under the URN
the engine would give it.

Two modes. ``preview=True`` (``raytpu plan``) is what ``pulumi preview`` sees before the
first ``up``: a provider returns only the inputs it was given, so every computed output
(cluster endpoint, CA certificate, service-account emails, ids, self links) and every
value derived from one is unknown, and applies on unknowns do not run. The default
(``preview=False``, the tests) gives computed outputs realistic fakes so that derived
values such as the kubeconfig are built and can be checked for their shape.

Mocks check this package's wiring and derived values; they do not check what GCP or the
API server would accept. That second layer is ``pulumi preview`` in CI.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytpu.config.file import default_stacks_dir as default_stacks_dir
from raytpu.config.file import load_stack_file as load_stack_file
from raytpu.config.job_rules import job_fits
from raytpu.config.stack import ConfigError, StackConfig

# The one stack-file loader (also used by `raytpu submit`); re-exported for callers here.
from raytpu.config.validate import stack_warnings
from raytpu.facts.urns import STACK_TYPE, qualified_type, resource_urn
from raytpu.plan.cost import cost_of
from raytpu.plan.mock_runtime import (
    InlineMockMonitor,
    declaration_index,
    inline_rpcs,
    paused_gc,
    without_source_positions,
)
from raytpu.plan.mocks import RecordingMocks
from raytpu.plan.values import plain as _plain
from raytpu.plan.values import presented, reveal

PROJECT = "raytpu"


class PlanError(Exception):
    """The plan could not be produced (missing stack file, duplicate resource, ...)."""


@dataclass
class PlannedResource:
    type: str
    name: str
    parent: str | None
    """The parent's name (None: the stack), for readable tests; ``parent_urn`` is exact."""
    custom: bool
    inputs: dict[str, Any]
    """Wire form: secrets carry Pulumi's secret signature, unknowns are ``UNKNOWN``."""
    options: dict[str, Any] = field(default_factory=dict)
    """``dependsOn`` and ``provider`` are URNs."""
    provider_version: str = ""
    """Provider plugin version the SDK pinned (not in the JSON: it changes with upgrades)."""
    urn: str = ""
    """The URN ``pulumi preview`` gives it (:func:`raytpu.facts.urns.resource_urn`)."""
    parent_urn: str | None = None

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        """``raytpu plan --json``'s resource: secrets masked, unknown inputs ``null`` and
        listed (``inputs.<path>``) in ``unknown``."""
        unknown: list[str] = []
        inputs = presented(self.inputs, "inputs", unknown, show_secrets)
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent_urn,
            "inputs": inputs,
            "options": self.options,
            "unknown": sorted(unknown),
        }


@dataclass
class PlanResult:
    stack: str
    config: StackConfig
    resources: list[PlannedResource]
    raw_outputs: dict[str, Any]
    """The stack's outputs in wire form (secret signatures, ``UNKNOWN``)."""
    preview: bool = False
    """Computed values unknown, as before a first ``pulumi up`` (see the module doc)."""
    program_warnings: list[str] = field(default_factory=list)
    """What the program sent to ``pulumi.log.warn`` (shown once, with the config's)."""

    @property
    def outputs(self) -> dict[str, Any]:
        """The stack's outputs, secrets unwrapped (unknowns stay ``UNKNOWN``)."""
        revealed: dict[str, Any] = reveal(self.raw_outputs)
        return revealed

    @property
    def warnings(self) -> list[str]:
        """The config's warnings, then the program's own, each once (the program also
        sends the config's to ``pulumi.log.warn``, for ``pulumi up``)."""
        return list(dict.fromkeys([*stack_warnings(self.config), *self.program_warnings]))

    def by_type(self, type_: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_]

    def get(self, type_: str, name: str) -> PlannedResource:
        for r in self.resources:
            if r.type == type_ and r.name == name:
                return r
        raise KeyError(f"{type_} {name!r} is not in the plan")

    def to_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        """``raytpu plan --json`` (docs/plan.md)."""
        unknown: list[str] = []
        outputs = presented(self.raw_outputs, "outputs", unknown, show_secrets)
        return {
            "stack": self.stack,
            "resources": [r.to_dict(show_secrets) for r in self.resources],
            "outputs": outputs,
            "unknown": sorted(unknown),
            "warnings": self.warnings,
            "cost": cost_of(self.config),
            "jobs": job_fits(self.config),
        }

    def to_json(self, show_secrets: bool = False) -> str:
        return json.dumps(self.to_dict(show_secrets), indent=2, sort_keys=False)


def _name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _make_monitor(mocks: RecordingMocks, records: list[PlannedResource],
                  declared: dict[str, int]) -> Any:
    """``declared``: each record's URN -> its declaration index (where the SDK gave one)."""
    from pulumi import get_project, get_stack

    real_urns: dict[str, str] = {}  # the mocks' URN -> the engine's

    class RecordingMonitor(InlineMockMonitor):
        """Captures each registration with its options; refuses duplicate URNs."""

        def RegisterResource(self, request: Any) -> Any:
            urn = self.make_urn(request.parent, request.type, request.name)
            if urn in self.resources:
                raise PlanError(f"duplicate resource URN {urn} (two resources share a name)")
            response = super().RegisterResource(request)
            # None: the stack's root resource (registered once per process, so it may not
            # be in this run's map).
            parent_urn = None
            if request.parent and qualified_type(request.parent) != STACK_TYPE:
                parent_urn = real_urns.get(request.parent, request.parent)
            real_urns[urn] = resource_urn(get_stack(), get_project(), request.type,
                                          request.name, parent_urn)
            if request.type == STACK_TYPE:
                return response
            parent = _name_of(request.parent) if parent_urn else None
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
            deps = [real_urns.get(d, d) for d in request.dependencies if d != request.parent]
            if deps:
                options["dependsOn"] = sorted(set(deps))
            if request.provider:  # "<provider urn>::<id>"
                provider = request.provider.rsplit("::", 1)[0]
                options["provider"] = real_urns.get(provider, provider)
            inputs = mocks.inputs.get((request.type, request.name), {})
            index = declaration_index(request)
            if index is not None:
                declared[real_urns[urn]] = index
            records.append(
                PlannedResource(
                    type=request.type,
                    name=request.name,
                    parent=parent,
                    custom=bool(request.custom),
                    inputs=inputs,  # plain already (RecordingMocks.new_resource)
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


class _WarningLog(logging.Handler):
    """The mock engine's log (``pulumi.log.*``): warnings kept for the plan to show once,
    wrapped, instead of the root logger printing them to stderr as they come."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.warnings: list[str] = []
        # Not registered (never shared). At WARNING, the SDK's debug and info lines (several
        # per resource) are dropped before a LogRecord is made: that cost grew with the fleet.
        self.logger = logging.Logger("raytpu.plan.program", logging.WARNING)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.warnings.append(record.getMessage())
        else:  # an error the program logs without raising: never hidden
            print(f"error: {record.getMessage()}", file=sys.stderr)


def _as_pulumi_config(raw: dict[str, Any]) -> dict[str, str]:
    """Pulumi hands programs config as strings; objects and lists as JSON."""
    out = {}
    for key, value in raw.items():
        if isinstance(value, dict) and "secure" in value:
            value = "mock-secret"  # secrets cannot be decrypted without the CLI
        out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def run_program(
    stack: str, raw: dict[str, Any], program: Callable[[], None] | None = None,
    *, preview: bool = False,
) -> PlanResult:
    """Validate ``raw`` (raises ConfigError before anything is declared), then run ``program``
    (default: the stack program, ``raytpu.program.stack.declare``) under recording mocks;
    ``preview``: computed values unknown (the module doc)."""
    import pulumi
    from google.protobuf import json_format
    from pulumi.runtime import rpc, settings
    from pulumi.runtime.sync_await import _ensure_event_loop
    from raytpu.program.load import validated_config

    cfg = validated_config(stack, raw)

    if program is None:
        from raytpu.program.stack import declare

        program = declare

    mocks = RecordingMocks(cfg.project, preview=preview)
    records: list[PlannedResource] = []
    declared: dict[str, int] = {}
    monitor = _make_monitor(mocks, records, declared)
    logged = _WarningLog()
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=preview,
                             monitor=monitor, logger=logged.logger)
    pulumi.runtime.set_all_config(_as_pulumi_config(raw))

    outputs: dict[str, Any] = {}
    root = settings.get_root_resource()

    async def _capture(exported: dict[str, Any]) -> None:
        # Serialized as the engine receives stack outputs: secrets keep their signature,
        # unknowns (preview) are the UNKNOWN sentinel instead of never-run applies.
        struct = await rpc.serialize_properties(exported, {})
        outputs.update(json_format.MessageToDict(struct))
        for key in exported:  # serialization drops None values
            outputs.setdefault(key, None)

    @pulumi.runtime.test
    def _run() -> Any:
        assert root is not None
        root.outputs.clear()  # type: ignore[attr-defined]
        program()
        return _capture(dict(root.outputs))  # type: ignore[attr-defined]

    try:
        # On the loop the SDK's ``pulumi.runtime.test`` runs (one per thread, kept across runs).
        with inline_rpcs(_ensure_event_loop()), without_source_positions(), paused_gc():
            _run()
    except (PlanError, ConfigError):
        raise
    except Exception as e:  # surface our errors raised inside the engine's threads
        cause: BaseException | None = e
        seen: set[int] = set()  # a chain can loop (an exception re-raised in its own context)
        while cause is not None and not isinstance(cause, PlanError | ConfigError):
            seen.add(id(cause))
            cause = cause.__cause__ or cause.__context__
            if cause is not None and id(cause) in seen:
                cause = None
        if cause is not None:
            raise cause from None
        raise
    if not records:
        raise PlanError("the program declared no resources (were the mocks installed?)")
    # Registered in the order their inputs resolved; listed in the order they were declared
    # (a parent is declared before its children). Without the SDK hook none is indexed and
    # the sort, being stable, changes nothing.
    records.sort(key=lambda r: declared.get(r.urn, len(declared)))
    return PlanResult(stack=stack, config=cfg, resources=records, raw_outputs=_plain(outputs),
                      preview=preview, program_warnings=logged.warnings)


def run_plan(stack: str, stacks_dir: Path | None = None, *, preview: bool = False
             ) -> PlanResult:
    return run_program(stack, load_stack_file(stack, stacks_dir), preview=preview)
