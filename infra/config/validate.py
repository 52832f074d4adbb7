"""Parsing a stack's config map into :class:`~raytpu.config.stack.StackConfig`, with every
problem as one line naming the key path, the bad value and the valid choices, and the
warnings about what is legal but likely wrong. Nothing downstream ever sees raw config.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel
from raytpu.config.addon_rules import addon_warnings
from raytpu.config.capacity_rules import slice_capacity_problems, slice_capacity_warnings
from raytpu.config.gcs_ft import gcs_ft_problems
from raytpu.config.job_rules import job_problems
from raytpu.config.key_paths import Keys
from raytpu.config.node_fit import fit_problems, fit_warnings
from raytpu.config.stack import NAMESPACE, ConfigError, SliceGroupConfig, StackConfig
from raytpu.config.team_rules import team_problems
from raytpu.facts import versions
from raytpu.facts.catalog import GENERATIONS, CatalogError
from raytpu.facts.names import DNS_LABEL, K8S_NAME, PROJECT_ID, cidr_problem, cluster_name_problem
from raytpu.facts.problems import ArgsError
from raytpu.spec.memorystore import TIERS as MEMORYSTORE_TIERS


def stack_warnings(cfg: StackConfig) -> list[str]:
    """What is legal but likely wrong, one line per warning naming its key."""
    out = []
    for i, s in enumerate(cfg.slices):
        gen = s.shape.generation
        if cfg.zone not in gen.zones:
            out.append(
                f"raytpu:zone: TPU {gen.name} (raytpu:slices[{i}].tpu {s.tpu!r}) is not "
                f"documented in {cfg.zone!r}; documented zones: {', '.join(gen.zones)}"
            )
    if cfg.ray.auth == "token" and cfg.kuberay.mode == "gke-addon":
        r = cfg.ray
        out.append(
            "raytpu:ray.auth: 'token' is spec.authOptions, which KubeRay "
            f"{versions.MIN_KUBERAY_VERSION_FOR_AUTH_OPTIONS}+ honours; the GKE add-on's "
            "KubeRay version is GKE's, and an older one drops the field silently. After "
            f"`pulumi up`, `kubectl -n {r.namespace} get raycluster {r.cluster_name} "
            "-o jsonpath='{.spec.authOptions}'` must not be empty"
        )
    if "dataplane_v2" not in cfg.cluster.model_fields_set:
        out.append(
            "raytpu:cluster.dataplaneV2: unset, so true (GKE Dataplane V2, which enforces "
            "the NetworkPolicies). It is chosen when a cluster is created: a cluster this "
            "stack created without it is REPLACED by the next `pulumi up` (refused while "
            "deletionProtection is on). Set it to true to confirm, or false to keep such "
            "a cluster (its NetworkPolicies would not be enforced)"
        )
    elif not cfg.cluster.dataplane_v2:
        out.append(
            "raytpu:cluster.dataplaneV2: false: the cluster does not enforce NetworkPolicy, "
            "so Ray namespaces get none; switching it on replaces the cluster"
        )
    if cfg.cluster.security_group is None:
        out += [f"raytpu:teams[{t}].members[{m}]: {member!r} is a Google Group, and GKE "
                "matches RBAC Group subjects only with Google Groups for RBAC: set "
                "raytpu:cluster.securityGroup (gke-security-groups@<domain>, containing "
                "the group), or the group's members cannot submit"
                for t, team in enumerate(cfg.teams)
                for m, member in enumerate(team.members) if member.startswith("group:")]
    out += fit_warnings(cfg)
    out += addon_warnings(cfg)
    out += slice_capacity_warnings(cfg)
    return out


# ---------------------------------------------------------------------------------------
# Parsing and error reporting


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fields(model: type) -> dict[str, Any]:
    """A model's or a dataclass's fields by stack key, and their types."""
    if dataclasses.is_dataclass(model):
        hints = get_type_hints(model)
        return {to_camel(f.name): hints[f.name] for f in dataclasses.fields(model)}
    assert issubclass(model, BaseModel)
    return {(f.alias or n): f.annotation for n, f in model.model_fields.items() if n != "stack"}


def _model_at(loc: tuple[int | str, ...]) -> type | None:
    """The model (or dataclass) a location points into, to list its valid keys."""
    model: Any = StackConfig
    for part in loc:
        if isinstance(part, int):
            continue
        ann = _fields(model).get(str(part))
        while get_origin(ann) is not None:
            ann = next((a for a in get_args(ann) if a not in (type(None), Ellipsis)), None)
        if not (isinstance(ann, type) and (issubclass(ann, BaseModel)
                                           or dataclasses.is_dataclass(ann))):
            return None
        model = ann
    return model if isinstance(model, type) else None


def _keys_of(model: type) -> list[str]:
    return list(_fields(model))


def _format(err: Mapping[str, Any]) -> list[str]:
    loc = tuple(err["loc"])
    path = _path(loc)
    kind = err["type"]
    value = err.get("input")
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        parent = _model_at(loc[:-1])
        valid = f"; valid keys: {', '.join(_keys_of(parent))}" if parent else ""
        return [f"{path}: unknown key{valid}"]
    if kind in ("missing", "missing_argument"):
        return [f"{path}: required key is missing"]
    if kind == "value_error":  # our own validators and the Args': the message names the value
        error = err.get("ctx", {}).get("error", err["msg"])
        return Keys(path).lines(error) if isinstance(error, ArgsError) else [f"{path}: {error}"]
    if kind in ("dataclass_type", "dataclass_exact_type"):
        return [f"{path}: {value!r} is not valid: Input should be a mapping of keys"
                f"{_type_hint('dict_type', value)}"]
    return [_format_scalar(path, kind, value, err)]


def _format_scalar(path: str, kind: str, value: Any, err: Mapping[str, Any]) -> str:
    if kind == "literal_error":
        choices = err.get("ctx", {}).get("expected", "")
        return f"{path}: {value!r} is not valid; valid: {choices.replace(' or ', ', ')}"
    return f"{path}: {value!r} is not valid: {err['msg']}{_type_hint(kind, value)}"


def _not_json(value: Any, path: str) -> list[str]:
    """Values YAML reads that are no JSON type (an unquoted date): the stack is parsed as
    JSON (the components' dataclasses validate that way), so they are refused here."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _not_json(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _not_json(v, f"{path}[{i}]")]
    if value is None or isinstance(value, str | int | float | bool):
        return []
    return [f"{path}: {value!r} is not valid: YAML read it as a {type(value).__name__}: quote "
            "it for a string"]


def _yaml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "a mapping"


def _type_hint(kind: str, value: Any) -> str:
    """What to write instead, for a YAML scalar of the wrong type (the models are strict)."""
    if kind == "string_type" and isinstance(value, bool | int | float):
        return f"; YAML read it as {_yaml_kind(value)}: quote it for a string"
    if kind in ("int_type", "float_type") and isinstance(value, bool | str):
        return f"; YAML read it as {_yaml_kind(value)}: write a number, unquoted"
    if kind == "bool_type" and not isinstance(value, bool):
        return f"; YAML read it as {_yaml_kind(value)}: write true or false"
    return ""


def _slice_problems(i: int, s: SliceGroupConfig) -> list[str]:
    key = f"raytpu:slices[{i}]"
    problems: list[str] = []
    if not DNS_LABEL.match(s.name) or len(s.name) > 24:
        problems.append(
            f"{key}.name: {s.name!r} must be a DNS label (lowercase letters, digits, '-') "
            "of at most 24 characters"
        )
    try:
        s.shape  # noqa: B018 - resolving the shape is the check
    except CatalogError as e:
        problems.append(f"{key}.{e.field}: {e}")
    if s.autoscaling:
        if s.autoscaling.min > s.autoscaling.max:
            problems.append(
                f"{key}.autoscaling: min {s.autoscaling.min} is greater than max "
                f"{s.autoscaling.max}"
            )
        elif "count" in s.model_fields_set and not (
            s.autoscaling.min <= s.count <= s.autoscaling.max
        ):
            problems.append(
                f"{key}.count: {s.count} is outside autoscaling "
                f"[{s.autoscaling.min}, {s.autoscaling.max}]"
            )
    return problems


_VERSION = re.compile(r"^v?\d+(\.\d+)*(-[0-9A-Za-z.-]+)?$")


def _format_problems(cfg: StackConfig) -> list[str]:
    """Strings whose shape is fixed: versions and Kubernetes names."""
    problems: list[str] = []
    for key, value in (
        ("raytpu:cluster.minMasterVersion", cfg.cluster.min_master_version),
        ("raytpu:kuberay.version", cfg.kuberay.version),
        ("raytpu:kuberay.webhookVersion", cfg.kuberay.webhook_version),
        ("raytpu:kuberay.certManagerVersion", cfg.kuberay.cert_manager_version),
        ("raytpu:ray.version", cfg.ray.version),
    ):
        if value is not None and not _VERSION.match(value):
            problems.append(f"{key}: {value!r} is not a version (e.g. 1.7.0, 1.31.2-gke.1115000)")
    ns = cfg.kuberay.namespace
    if not K8S_NAME.match(ns) or len(ns) > 63:
        problems.append(
            f"raytpu:kuberay.namespace: {ns!r} is not a Kubernetes namespace name (lowercase "
            "letters, digits and '-', at most 63 characters)"
        )
    return problems


def _semantic_problems(cfg: StackConfig) -> list[str]:
    problems = _format_problems(cfg)
    if problems:  # version comparisons below would be meaningless
        return problems
    names: set[str] = set()
    for i, s in enumerate(cfg.slices):
        key = f"raytpu:slices[{i}]"
        problems += _slice_problems(i, s)
        if s.name in names:
            problems.append(
                f"{key}.name: {s.name!r} is used by another slice; names must be unique"
            )
        names.add(s.name)
        try:
            shape = s.shape
        except CatalogError:
            continue
        min_gke = shape.generation.min_gke_version
        if min_gke and cfg.cluster.min_master_version and versions.version_tuple(
            cfg.cluster.min_master_version
        ) < versions.version_tuple(min_gke):
            problems.append(
                f"raytpu:cluster.minMasterVersion: {cfg.cluster.min_master_version!r} is too "
                f"old for TPU {shape.generation.name} ({key}.tpu {s.tpu!r}); need >= {min_gke}"
            )

    if cfg.kuberay.mode == "gke-addon" and cfg.cluster.min_master_version and (
        versions.version_tuple(cfg.cluster.min_master_version)
        < versions.version_tuple(versions.MIN_GKE_FOR_RAY_ADDON)
    ):
        problems.append(
            f"raytpu:cluster.minMasterVersion: {cfg.cluster.min_master_version!r} is too old for "
            f"raytpu:kuberay.mode 'gke-addon'; need >= {versions.MIN_GKE_FOR_RAY_ADDON}"
        )
    if versions.version_tuple(cfg.ray.version) < versions.version_tuple(
        versions.MIN_RAY_VERSION_FOR_KUBERAY
    ):
        problems.append(
            f"raytpu:ray.version: {cfg.ray.version!r} is older than KubeRay "
            f"{cfg.kuberay.version} supports; need >= {versions.MIN_RAY_VERSION_FOR_KUBERAY}"
        )
    name_problem = cluster_name_problem(cfg.cluster.name)
    if name_problem:
        problems.append(f"raytpu:cluster.name: {name_problem}")
    if not PROJECT_ID.match(cfg.project):
        problems.append(
            f"gcp:project: {cfg.project!r} is not a GCP project ID (6-30 lowercase letters, "
            "digits and '-', starting with a letter, not ending with '-')"
        )
    if not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", cfg.zone):
        problems.append(f"raytpu:zone: {cfg.zone!r} is not a GCP zone (e.g. us-central2-b)")
    if not cfg.network.create and cfg.network.existing is None:
        problems.append(
            "raytpu:network.existing: required when raytpu:network.create is false "
            "(network, subnetwork, podsRangeName, servicesRangeName)"
        )
    cidrs = [
        ("raytpu:network.subnetCidr", cfg.network.subnet_cidr),
        ("raytpu:network.podsCidr", cfg.network.pods_cidr),
        ("raytpu:network.servicesCidr", cfg.network.services_cidr),
        ("raytpu:cluster.masterIpv4CidrBlock", cfg.cluster.master_ipv4_cidr_block),
    ]
    cidrs += [(f"raytpu:network.rayAccessCidrs[{i}]", c)
              for i, c in enumerate(cfg.network.ray_access_cidrs)]
    cidrs += [(f"raytpu:cluster.masterAuthorizedNetworks[{i}].cidrBlock", n.cidr_block)
              for i, n in enumerate(cfg.cluster.master_authorized_networks)]
    problems += [f"{key}: {p}" for key, cidr in cidrs if (p := cidr_problem(cidr))]
    problems += fit_problems(cfg)  # head/workers fit their nodes; Ray accepts the topologies
    problems += slice_capacity_problems(cfg)
    problems += team_problems(cfg)
    problems += job_problems(cfg)
    problems += gcs_ft_problems(cfg.ray.head_env, [s.env for s in cfg.slices],
                                cfg.ray.gcs_fault_tolerance)
    return problems


_CHANNEL = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")


def _monitoring_cost_problems(cfg: StackConfig) -> list[str]:
    """``raytpu:monitoring`` and ``raytpu:cost`` values no field type can check."""
    problems: list[str] = []
    m = cfg.monitoring
    try:
        seconds = m.alert_after_seconds
    except ValueError:
        problems.append(f"raytpu:monitoring.alertAfter: {m.alert_after!r} is not a duration "
                        "like 10m, 600s or 1h")
    else:
        # Cloud Monitoring: "only values that are a multiple of a minute" (conditions).
        if seconds % 60 or seconds == 0:
            problems.append(f"raytpu:monitoring.alertAfter: {m.alert_after!r} must be a whole, "
                            "non-zero number of minutes (Cloud Monitoring's rule)")
    for i, channel in enumerate(m.notification_channels):
        if not _CHANNEL.match(channel):
            problems.append(f"raytpu:monitoring.notificationChannels[{i}]: {channel!r} is not "
                            "projects/<project>/notificationChannels/<id>")
    for gen in cfg.cost.prices:
        if gen not in GENERATIONS:
            problems.append(f"raytpu:cost.prices.{gen}: unknown TPU generation; valid: "
                            f"{', '.join(GENERATIONS)}")
    for machine, price in cfg.cost.machines.items():
        if price < 0:
            problems.append(f"raytpu:cost.machines.{machine}: {price!r} is negative")
    for tier, price in cfg.cost.memorystore.items():
        if tier not in MEMORYSTORE_TIERS:
            problems.append(f"raytpu:cost.memorystore.{tier}: unknown Memorystore tier; "
                            f"valid: {', '.join(MEMORYSTORE_TIERS)}")
        elif price < 0:
            problems.append(f"raytpu:cost.memorystore.{tier}: {price!r} is negative")
    return problems


class StructureError(ConfigError):
    """Problems the models find; ``locs``: where (key paths, as the stack file writes them)."""

    def __init__(self, problems: list[str], locs: list[tuple[int | str, ...]]) -> None:
        super().__init__(problems)
        self.locs = locs


def structural_config(stack: str, raw: Mapping[str, Any]) -> StackConfig:
    """``raw`` parsed into the models (types, ranges, known keys). Raises
    :class:`StructureError` listing every problem a model finds, and the catalog's problems of
    the well-formed slices.

    Keys outside the ``raytpu`` namespace other than ``gcp:project`` belong to providers
    (``gcp:region``, ``kubernetes:...``) and are left to them.
    """
    ours = {k: v for k, v in raw.items() if k.startswith(f"{NAMESPACE}:") or k == "gcp:project"}
    problems = _not_json(ours, "")
    if problems:
        raise ConfigError(problems)
    try:
        return StackConfig.model_validate_json(json.dumps({"stack": stack, **ours}))
    except ValidationError as e:
        problems = [line for err in e.errors() for line in _format(err)]
        # Structural errors elsewhere must not hide catalog errors in well-formed slices.
        slices = ours.get(f"{NAMESPACE}:slices")
        for i, item in enumerate(slices if isinstance(slices, list) else []):
            with contextlib.suppress(ValidationError):  # already reported above
                problems += _slice_problems(i, SliceGroupConfig.model_validate_json(
                    json.dumps(item)))
        raise StructureError(problems, [tuple(err["loc"]) for err in e.errors()]) from None


def semantic_problems(cfg: StackConfig) -> list[str]:
    """What a parsed config's values get wrong that no field type can check."""
    return _semantic_problems(cfg) + _monitoring_cost_problems(cfg)


def parse_stack_config(stack: str, raw: Mapping[str, Any]) -> StackConfig:
    """Validate a stack's flat config map (:func:`structural_config`,
    :func:`semantic_problems`). Raises :class:`ConfigError` listing every problem.

    The config's own rules only: commands read stacks through
    :func:`raytpu.program.load.validated_config`, which adds the components' Args.
    """
    cfg = structural_config(stack, raw)
    problems = semantic_problems(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


def supported_generations() -> list[str]:
    return list(GENERATIONS)
