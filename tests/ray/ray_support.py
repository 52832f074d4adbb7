"""Helpers for the Ray-layer tests: sample stacks, an offline Ray-only program, validators.

Validators (the point of these tests, so they are tested against bad input too):

* ``validate_crd``: the whole object against the KubeRay 1.7.0 CRD's ``openAPIV3Schema``,
  made *strict* (unknown fields rejected unless ``x-kubernetes-preserve-unknown-fields``):
  the API server would silently prune an unknown key -- e.g. a snake_case ``num_of_hosts`` --
  and the operator would fall back to the default, which is exactly the bug to catch.
* ``validate_pod``: each pod template, as a Pod, against the Kubernetes 1.33 schema (strict).
* ``semantic_problems``: the TPU rules no schema expresses.

The CRDs are read from ``../shared/ref/kuberay`` (relative to the repository root) or
``$RAYTPU_KUBERAY_CRDS``, once per session. Missing CRDs skip the schema tests with the way to
get them, or fail them when ``RAYTPU_REQUIRE_CRDS=1`` (set it in CI).
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from raytpu.config.stack import StackConfig
from raytpu.config.validate import parse_stack_config
from raytpu.facts.catalog import ACCELERATOR_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE, topology_chips
from raytpu.plan.engine import PlanResult, load_stack_file, run_program

REPO = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO / "stacks"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}
K8S_VERSION = "1.33"
GSA = "ray-ckpt@acme-ml.iam.gserviceaccount.com"
RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAYJOB = "kubernetes:ray.io/v1:RayJob"
CHART = "kubernetes:helm.sh/v4:Chart"

_BASE: dict[str, Any] = {"gcp:project": "acme-ml"}
# Built-in stacks covering every generation, single/multi-host, fixed/elastic and both modes;
# stacks/Pulumi.*.yaml are validated in addition (test_ray_stacks.py).
SAMPLES: dict[str, dict[str, Any]] = {
    "v4-fixed": {
        **_BASE, "raytpu:zone": "us-central2-b",
        "raytpu:slices": [{"name": "train", "tpu": "v4-16"}],
    },
    "v5e-elastic": {
        **_BASE, "raytpu:zone": "us-west4-a",
        "raytpu:slices": [
            {"name": "pod16", "tpu": "v5litepod-16", "autoscaling": {"min": 0, "max": 3}},
            {"name": "single8", "tpu": "v5litepod-8"},
        ],
        "raytpu:ray": {"idleTimeoutSeconds": 300, "imageTag": "0.1.0"},
    },
    "v6e-ilb": {
        **_BASE, "raytpu:zone": "us-east5-b",
        "raytpu:slices": [
            {"name": "v6-16", "tpu": "v6e-16", "count": 2},
            {"name": "v6-8", "tpu": "v6e-8", "machineType": "ct6e-standard-4t",
             "autoscaling": {"min": 1, "max": 4}},
        ],
        "raytpu:ray": {"dashboardInternalLb": True, "clusterName": "trillium"},
        "raytpu:network": {"rayAccessCidrs": ["10.128.0.0/16", "192.168.10.0/24"]},
    },
    "v5p-addon": {
        **_BASE, "raytpu:zone": "us-east5-a",
        "raytpu:slices": [{"name": "big", "tpu": "v5p-32", "autoscaling": {"min": 0, "max": 2}}],
        "raytpu:kuberay": {"mode": "gke-addon"},
    },
}

# The shared RayCluster's (minReplicas, replicas, maxReplicas) per slice group of the samples
# and the stack files, worked out from their config by hand: a fixed group is count..count;
# an elastic one starts with count (clamped into min..max) and may scale to its pools less
# the teams' nominal quotas and the raytpu:jobs clusters' slices.
REPLICAS: dict[str, tuple[int, int, int]] = {
    "train": (1, 1, 1),         # v4-fixed
    "pod16": (0, 1, 3),         # v5e-elastic: 0..3, count 1
    "single8": (1, 1, 1),
    "v6-16": (2, 2, 2),         # v6e-ilb: count 2
    "v6-8": (1, 1, 4),          # 1..4, count 1
    "big": (0, 1, 2),           # v5p-addon: 0..2
    "v5e-4": (1, 1, 1),         # dev
    "v4-16": (1, 1, 1),         # staging
    "v5e-16": (0, 1, 2),        # prod: 6 pools less the teams' 2 + 2
    "v5e-8-eval": (1, 1, 1),
}


def stack_files() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


# ---------------------------------------------------------------------------------------
# Running the Ray layer alone (the samples: faster than the whole program, and it isolates
# the Ray layer's own rules; the wiring is tested on the real program in test_ray_wiring.py)


def ray_program(cfg: StackConfig, **build_kwargs: Any) -> Callable[[], None]:
    """A stack program that declares only the Ray layer, with a throwaway provider."""
    from raytpu.program.ray_program import build_ray

    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="apiVersion: v1\nkind: Config\n",
                                enable_server_side_apply=True)
        outputs = build_ray(cfg, provider=provider, gsa_email=GSA, **build_kwargs)
        for key, value in outputs.items():
            pulumi.export(key, value)

    return program


def plan_ray(raw: Mapping[str, Any], stack: str = "dev", *, preview: bool = False,
             **build_kwargs: Any) -> PlanResult:
    cfg = parse_stack_config(stack, raw)
    return run_program(stack, dict(raw), ray_program(cfg, **build_kwargs), preview=preview)


def raw_stack(stack: str) -> dict[str, Any]:
    return load_stack_file(stack, STACKS_DIR)


# ---------------------------------------------------------------------------------------
# CRD schemas


def crd_dir() -> Path:
    return Path(os.environ.get("RAYTPU_KUBERAY_CRDS") or REPO / ".." / "shared" / "ref" / "kuberay")


def _missing_message(folder: Path, missing: Sequence[str]) -> str:
    files = " ".join(f"ray.io_{k}.yaml" for k in ("rayclusters", "rayjobs"))
    return (
        f"KubeRay 1.7.0 CRDs not found: {', '.join(missing)} missing in {folder.resolve()}. "
        "Get them with:  mkdir -p kuberay-crds && cd kuberay-crds && for f in " + files + "; "
        "do curl -LO https://raw.githubusercontent.com/ray-project/kuberay/v1.7.0/"
        "helm-chart/kuberay-operator/crds/$f; done  and run with "
        "RAYTPU_KUBERAY_CRDS=$PWD/kuberay-crds. Set RAYTPU_REQUIRE_CRDS=1 (CI) to fail "
        "instead of skipping."
    )


def strict_schema(schema: Any) -> Any:
    """Reject unknown fields where the API server would prune them."""
    if isinstance(schema, list):
        return [strict_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items()}
    if (
        out.get("type") == "object"
        and isinstance(out.get("properties"), dict)
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def require_crds() -> Path:
    """The CRD folder; skips the calling test with the way to get the CRDs when they are
    missing, or fails it when ``RAYTPU_REQUIRE_CRDS=1`` (CI: a skip must not pass silently)."""
    folder = crd_dir()
    missing = [f for f in CRD_FILES.values() if not (folder / f).is_file()]
    if missing:
        message = _missing_message(folder, missing)
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return folder


@functools.cache
def crd_validators(folder: Path) -> dict[str, Any]:
    """Strict validators per kind, parsed once per session (the files are 0.9-1.4 MB)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    validators = {}
    for kind, name in CRD_FILES.items():
        crd = yaml.load((folder / name).read_text(), Loader=loader)
        assert crd["spec"]["names"]["kind"] == kind
        (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schema = strict_schema(v1["schema"]["openAPIV3Schema"])
        schema["properties"].pop("status", None)  # status is the operator's, never ours
        schema["additionalProperties"] = False
        validators[kind] = jsonschema.Draft202012Validator(schema)
    return validators


def _path(error: jsonschema.ValidationError) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "<root>"


def crd_problems(obj: Mapping[str, Any]) -> list[str]:
    """Schema errors of a RayCluster/RayJob object (skips/fails without the CRDs)."""
    validator = crd_validators(require_crds().resolve())[obj["kind"]]
    return sorted(f"{_path(e)}: {e.message}" for e in validator.iter_errors(dict(obj)))


# ---------------------------------------------------------------------------------------
# Pod templates


def as_object(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded CustomResource's inputs as the API object {apiVersion, kind, metadata, spec}."""
    return {k: copy.deepcopy(inputs[k]) for k in ("apiVersion", "kind", "metadata", "spec")
            if k in inputs}


def pod_templates(obj: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, template) for every pod template of a RayCluster or RayJob."""
    spec = obj["spec"]
    prefix = ""
    if obj["kind"] == "RayJob":
        if "submitterPodTemplate" in spec:
            yield "submitterPodTemplate", spec["submitterPodTemplate"]
        if "rayClusterSpec" not in spec:
            return
        spec, prefix = spec["rayClusterSpec"], "rayClusterSpec."
    yield f"{prefix}headGroupSpec", spec["headGroupSpec"]["template"]
    for w in spec.get("workerGroupSpecs", []):
        yield f"{prefix}workerGroupSpecs[{w['groupName']}]", w["template"]


def validate_pod(where: str, template: Mapping[str, Any]) -> list[str]:
    meta = dict(template.get("metadata") or {})
    meta.setdefault("name", "probe")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec")}
    try:
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{where}: {'/'.join(map(str, e.path))}: {e.message}"]
    return []


# ---------------------------------------------------------------------------------------
# Semantic rules


_DNS = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _container(template: Mapping[str, Any]) -> dict[str, Any]:
    (container,) = template["spec"]["containers"]
    return dict(container)


def semantic_problems(
    obj: Mapping[str, Any], cfg: StackConfig, image: str | None = None
) -> list[str]:
    """The TPU rules for a RayCluster (or a RayJob's cluster) built from ``cfg``; ``image``:
    what every Ray container must run (default ``cfg.image``; the whole program's is the
    digest of the image it builds)."""
    image = image or cfg.image
    problems: list[str] = []
    spec = obj["spec"].get("rayClusterSpec", obj["spec"])
    name = obj["metadata"]["name"]
    if not _DNS.match(name) or len(f"{name}-headless") > 63:
        problems.append(f"metadata.name {name!r}: '<name>-headless' must be a DNS label")
    if spec.get("rayVersion") != cfg.ray.version:
        problems.append(f"rayVersion {spec.get('rayVersion')} != {cfg.ray.version}")
    head = spec["headGroupSpec"]["template"]
    templates = [("head", head)]
    head_c = _container(head)
    if TPU_RESOURCE in str(head_c.get("resources")) or head["spec"].get("tolerations"):
        problems.append("head: must not request TPUs or tolerate the TPU taint")
    if spec["headGroupSpec"].get("serviceType", "ClusterIP") != "ClusterIP":
        problems.append("head: the head service must stay ClusterIP")
    by_name = {s.name: s for s in cfg.slices}
    groups = spec.get("workerGroupSpecs", [])
    if sorted(w["groupName"] for w in groups) != sorted(by_name):
        problems.append(f"groups {[w['groupName'] for w in groups]} != slices {list(by_name)}")
    for w in groups:
        g = w["groupName"]
        s = by_name.get(g)
        if s is None:
            continue
        shape = s.shape
        t = w["template"]
        templates.append((g, t))
        c = _container(t)
        req, lim = c["resources"].get("requests", {}), c["resources"].get("limits", {})
        selector = t["spec"].get("nodeSelector", {})
        hosts = w.get("numOfHosts", 1)
        chips = int(lim.get(TPU_RESOURCE, 0))
        if str(req.get(TPU_RESOURCE)) != str(lim.get(TPU_RESOURCE)) or chips != shape.chips_per_vm:
            problems.append(f"{g}: google.com/tpu requests {req.get(TPU_RESOURCE)} / limits "
                            f"{lim.get(TPU_RESOURCE)} != chips per VM {shape.chips_per_vm}")
        topology = selector.get(TOPOLOGY_LABEL, "")
        if not topology or hosts * chips != topology_chips(topology):
            problems.append(f"{g}: numOfHosts {hosts} x chips {chips} != chips of topology "
                            f"{topology!r}")
        if selector != shape.node_selector or ACCELERATOR_LABEL not in selector:
            problems.append(f"{g}: nodeSelector {selector} != pool labels {shape.node_selector}")
        if {"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"} not in (
            t["spec"].get("tolerations") or []
        ):
            problems.append(f"{g}: no toleration for the google.com/tpu taint")
        want = REPLICAS.get(g)
        got = (w.get("minReplicas", 0), w.get("replicas", 0), w.get("maxReplicas"))
        if want is None:
            problems.append(f"{g}: no expected min/replicas/max in ray_support.REPLICAS")
        elif got != want:
            problems.append(f"{g}: min/replicas/max {got} != {want}")
        host = f"{g}-{s.max_slices - 1}-{hosts - 1}"
        pod = f"{name}-{g}-worker-xxxxx"
        if len(host) > 63 or len(pod) > 63 or not _DNS.match(g):
            problems.append(f"{g}: host name {host!r} or pod name {pod!r} exceeds 63 characters")
    for where, t in templates:
        labels = (t.get("metadata") or {}).get("labels") or {}
        if "app.kubernetes.io/name" in labels:
            problems.append(f"{where}: overrides app.kubernetes.io/name (TPU webhook selector)")
        if t["spec"].get("serviceAccountName") != cfg.ray.service_account:
            problems.append(f"{where}: serviceAccountName != {cfg.ray.service_account}")
        if _container(t).get("image") != image:
            problems.append(f"{where}: image != {image}")
    return problems
