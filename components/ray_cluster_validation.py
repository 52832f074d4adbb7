"""Every reason a :class:`~raytpu.spec.ray_cluster.TpuRayClusterArgs` cannot make
a working RayCluster, checked before anything is registered.

Names: the RayCluster within KubeRay 1.7.0's 53 characters (its services, up to
``<cluster>-serve-svc``), pod host names ``<group>-<replica>-<worker>`` within 63, and the
worker pod name prefix ``<cluster>-<group>`` within the 50 characters KubeRay's ``PodName``
keeps (a longer one is cut, and kuberay #2923 broke TPU_WORKER_HOSTNAMES that way); see
:mod:`raytpu.facts.names`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import get_args

from raytpu.components.ray_gcs_ft import ft_problems
from raytpu.components.ray_pod_templates import WEBHOOK_LABEL
from raytpu.facts import versions
from raytpu.facts.names import (
    DNS_LABEL,
    POD_NAME_PREFIX_MAX_LEN,
    RAYCLUSTER_NAME_MAX_LEN,
    SLICE_GROUP_LABEL,
)
from raytpu.facts.problems import Path, Problem, Ref
from raytpu.facts.versions import version_tuple
from raytpu.spec.ray_cluster import AuthMode, TpuRayClusterArgs

MAX_NAME = 63  # DNS label: service names, host names, label values

# Kubernetes qualified names (label keys) and label values (apimachinery validation).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        rf"{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
# Resources the package sets itself (KubeRay maps CPU/memory/GPU to ray start flags).
OWN_RAY_RESOURCES = frozenset({"cpu", "gpu", "tpu", "memory"})
_QUANTITY = re.compile(r"^(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")


def _digits(n: int) -> int:
    return len(str(max(n, 0)))


def _problem(path: Path, *parts: str | Ref, item: str | None = None) -> Problem:
    # Bare field paths (``worker_groups[0].name``): the composed program's words.
    return Problem("", path, parts, item)


def args_problems(args: TpuRayClusterArgs) -> list[Problem]:
    """Every reason ``args`` cannot make a working RayCluster, one sentence each, naming
    the Args fields (``str()``) or, rendered with a key map, the stack's keys."""
    problems: list[Problem] = []
    c = args.cluster_name
    if not DNS_LABEL.match(c):
        problems.append(_problem(("cluster_name",), f"{c!r} must be a DNS label "
                                 "(lowercase letters, digits, '-', starting with a letter)"))
    for field, value in (("namespace", args.namespace), ("service_account", args.service_account)):
        if not DNS_LABEL.match(value) or len(value) > MAX_NAME:
            problems.append(_problem((field,), f"{value!r} must be a DNS label of at most "
                                     f"{MAX_NAME} characters"))
    if len(c) > RAYCLUSTER_NAME_MAX_LEN:
        # KubeRay refuses it (and its services, '<cluster>-headless' and longer, need room).
        problems.append(_problem(("cluster_name",), f"{c!r} ({len(c)} characters) is longer "
                                 f"than KubeRay's RayCluster name limit of "
                                 f"{RAYCLUSTER_NAME_MAX_LEN} ('{c}-serve-svc' must fit "
                                 f"{MAX_NAME})"))
    if not args.worker_groups:
        problems.append(_problem(("worker_groups", 0), "at least one worker group is required"))
    seen: set[str] = set()
    for i, s in enumerate(args.worker_groups):
        group: Path = ("worker_groups", i)
        name: Path = (*group, "name")
        g = s.name
        if not DNS_LABEL.match(g):
            problems.append(_problem(name, f"{g!r} must be a DNS label"))
        if g in seen or g == "head":
            problems.append(_problem(name, f"{g!r} is already used; group names must be unique "
                                     "(and not 'head')"))
        seen.add(g)
        prefix = len(c) + 1 + len(g)
        if prefix > POD_NAME_PREFIX_MAX_LEN:
            problems.append(_problem(
                name, f"{g!r} with ", Ref(("cluster_name",)), f" {c!r} makes a worker pod "
                f"name prefix '{c}-{g}' of {prefix} characters, which KubeRay cuts to "
                f"{POD_NAME_PREFIX_MAX_LEN} ('<prefix>-worker-xxxxx' must fit {MAX_NAME}); keep "
                f"len(cluster name) + len(group name) <= {POD_NAME_PREFIX_MAX_LEN - 1}"))
        host = len(g) + 2 + _digits(s.max_slices - 1) + _digits(s.shape.hosts - 1)
        if host > MAX_NAME:
            problems.append(_problem(name, f"{g!r} makes TPU host names of {host} characters "
                                     f"('{g}-<replica>-<worker>'); at most {MAX_NAME}"))
        if not 0 <= s.min_slices <= s.initial_slices <= s.max_slices or s.max_slices < 1:
            problems.append(_problem(group, f"slices min {s.min_slices} <= initial "
                                     f"{s.initial_slices} <= max {s.max_slices} (max >= 1) does "
                                     "not hold"))
        if args.tpu_pools is not None:
            selector = s.shape.node_selector
            if not any(all(labels.get(lk) == lv for lk, lv in selector.items())
                       for labels in args.tpu_pools.values()):
                pools = ", ".join(f"{n} {dict(lb)}" for n, lb in args.tpu_pools.items()) or "none"
                problems.append(_problem(group, f"no TPU node pool has the labels {selector} "
                                         f"that group {g!r} selects; pools: {pools}"))
        problems += ray_labels_problems((*group, "labels"), s.labels)
        problems += ray_resources_problems((*group, "ray_resources"), s.ray_resources)
    problems += ray_labels_problems(("head_labels",), args.head_labels)
    problems += ray_resources_problems(("head_ray_resources",), args.head_ray_resources)
    if WEBHOOK_LABEL in args.labels:
        problems.append(_problem(("labels",), f"must not set {WEBHOOK_LABEL!r}: the KubeRay TPU "
                                 "webhook only mutates pods whose value KubeRay sets ('kuberay')"))
    if args.dashboard_internal_lb and not args.access_cidrs:
        problems.append(_problem(("access_cidrs",), "required with the dashboard internal load "
                                 "balancer (otherwise every address in the VPC can reach the Ray "
                                 "dashboard and client)"))
    if args.auth not in get_args(AuthMode):
        problems.append(_problem(("auth",), f"{args.auth!r} is not an auth mode; "
                                 f"valid: {', '.join(get_args(AuthMode))}"))
    elif args.auth == "token" and (version_tuple(args.ray_version)
                                   < version_tuple(versions.MIN_RAY_VERSION_FOR_TOKEN_AUTH)):
        problems.append(_problem(("auth",), "'token' needs Ray >= "
                                 f"{versions.MIN_RAY_VERSION_FOR_TOKEN_AUTH}, rayVersion is "
                                 f"{args.ray_version}; upgrade Ray or set 'disabled'"))
    problems += ft_problems(args)
    tag = image_ray_version(args.image) if isinstance(args.image, str) else None
    if tag is not None and tag != args.ray_version:
        problems.append(_problem(("image",), f"{args.image!r} carries Ray {tag} but rayVersion "
                                 f"is {args.ray_version}; they must agree"))
    return problems


# Upstream Ray images, whose tag starts with the Ray version (rayproject/ray:2.60.0-py311).
# Our own trainer image is tagged with the package version; its Dockerfile pins Ray.
_RAY_IMAGES = ("rayproject/ray", "rayproject/ray-ml")


def image_ray_version(image: str) -> str | None:
    """The Ray version of an upstream Ray image (``rayproject/ray:2.60.0-py311`` -> 2.60.0);
    None for other images or tags without a version."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag or "@" in image:
        return None
    if not any(name == r or name.endswith("/" + r) for r in _RAY_IMAGES):
        return None
    m = re.match(r"^(\d+\.\d+\.\d+)(?:[-_.].*)?$", tag)
    return m.group(1) if m else None


def image_is_pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


def ray_labels_problems(path: Path, labels: Mapping[str, str]) -> list[Problem]:
    """Problems of Ray node labels a group declares (KubeRay ``validateRayGroupLabels``:
    Kubernetes label syntax; and what would break Ray or the TPU webhook)."""
    problems = []
    for name, value in labels.items():
        if not _LABEL_KEY.match(name) or len(name) > 316:
            problems.append(_problem(path, "not a Kubernetes label key", item=name))
        elif name.startswith("ray.io/"):
            problems.append(_problem(path, "'ray.io/' labels are Ray's own (a user label "
                                     "overrides Ray's TPU labels, e.g. ray.io/tpu-worker-id)",
                                     item=name))
        elif name in (WEBHOOK_LABEL, SLICE_GROUP_LABEL):
            problems.append(_problem(path, "set by raytpu (the TPU webhook and the autoscaler's "
                                     "capacity requests select by it)", item=name))
        if not isinstance(value, str) or not _LABEL_VALUE.match(value):
            problems.append(_problem(path, f"{value!r} is not a Kubernetes label value "
                                     "(at most 63 letters, digits, '-', '_', '.')", item=name))
    return problems


def ray_resources_problems(path: Path, resources: Mapping[str, str]) -> list[Problem]:
    """Problems of extra Ray logical resources a group declares."""
    problems = []
    for name, value in resources.items():
        if name.lower() in OWN_RAY_RESOURCES or re.match(r"^TPU-.*-head$", name):
            problems.append(_problem(path, "set by raytpu from the slice shape; valid: your own "
                                     "resource names", item=name))
        if not isinstance(value, str) or not _QUANTITY.match(value):
            problems.append(_problem(path, f"{value!r} is not a quantity (e.g. 1, 0.5, 100)",
                                     item=name))
    return problems
