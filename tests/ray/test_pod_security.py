"""Ray pods meet the "restricted" Pod Security Standard, as KubeRay 1.7.0 creates them.

KubeRay adds containers to the templates (ray-operator/controllers/ray/common/pod.go at
v1.7.0): the autoscaler sidecar on the head, whose securityContext and extra volumeMounts
come only from ``spec.autoscalerOptions`` (``BuildAutoscalerContainer`` +
``mergeAutoscalerOverrides``), and the ``wait-gcs-ready`` init container on workers, which
copies the Ray container's securityContext and volumeMounts. :func:`kuberay_pod` applies
those additions so the check covers the pod the API server admits.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from pod_security import restricted_problems
from ray_support import RAYCLUSTER, REPO, SAMPLES, plan_ray, raw_stack, stack_files
from raytpu.facts import versions
from raytpu.plan.engine import PlanResult

NAMESPACE = "kubernetes:core/v1:Namespace"


def kuberay_pod(spec: dict[str, Any], group: str | None) -> dict[str, Any]:
    """The PodSpec KubeRay creates for the head (``group`` None) or a worker group."""
    if group is None:
        pod = copy.deepcopy(spec["headGroupSpec"]["template"]["spec"])
        if spec.get("enableInTreeAutoscaling"):
            options = spec.get("autoscalerOptions") or {}
            pod["containers"].append({
                "name": "autoscaler", "image": options.get("image", pod["containers"][0]["image"]),
                "securityContext": options.get("securityContext"),
                "volumeMounts": [{"name": "ray-logs", "mountPath": "/tmp/ray"},
                                 *options.get("volumeMounts", [])],
            })
        return pod
    (w,) = [w for w in spec["workerGroupSpecs"] if w["groupName"] == group]
    pod = copy.deepcopy(w["template"]["spec"])
    ray = pod["containers"][0]
    pod.setdefault("initContainers", []).append({
        "name": "wait-gcs-ready", "image": ray["image"],
        "securityContext": ray.get("securityContext"), "volumeMounts": ray.get("volumeMounts"),
    })
    return pod


def _plans() -> dict[str, PlanResult]:
    plans = {f"stack:{s}": plan_ray(raw_stack(s), stack=s) for s in stack_files()}
    plans |= {f"sample:{n}": plan_ray(raw) for n, raw in SAMPLES.items()}
    return plans


@pytest.fixture(scope="module")
def plans() -> dict[str, PlanResult]:
    return _plans()


def _spec(plan: PlanResult) -> dict[str, Any]:
    (rc,) = plan.by_type(RAYCLUSTER)
    return rc.inputs["spec"]


def test_every_ray_pod_passes_restricted(plans: dict[str, PlanResult]) -> None:
    assert {k for k in plans if k.startswith("stack:")} == {"stack:dev", "stack:prod",
                                                          "stack:staging"}
    for name, plan in plans.items():
        spec = _spec(plan)
        groups = [None, *(w["groupName"] for w in spec["workerGroupSpecs"])]
        for g in groups:
            pod = kuberay_pod(spec, g)
            assert restricted_problems(pod) == [], (name, g)


def test_unhardened_template_fails_restricted(plans: dict[str, PlanResult]) -> None:
    """The checker catches what the templates had before (no security context at all), and
    the autoscaler sidecar when autoscalerOptions gives it none."""
    spec = _spec(plans["stack:prod"])
    bare = copy.deepcopy(spec)
    pod = bare["headGroupSpec"]["template"]["spec"]
    pod.pop("securityContext")
    pod["containers"][0].pop("securityContext")
    problems = " ".join(restricted_problems(kuberay_pod(bare, None)))
    for control in ("privilege escalation", "running as non-root", "seccomp", "capabilities"):
        assert control in problems
    sidecar_only = copy.deepcopy(spec)
    sidecar_only["autoscalerOptions"].pop("securityContext")
    assert all("autoscaler" in p for p in restricted_problems(kuberay_pod(sidecar_only, None)))
    assert restricted_problems(kuberay_pod(sidecar_only, None))


@pytest.mark.parametrize("mutate, control", [
    (lambda p: p["containers"][0]["securityContext"].update(privileged=True), "privileged"),
    (lambda p: p.update(hostNetwork=True), "host namespaces"),
    (lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/dev"}}), "hostPath"),
    (lambda p: p["containers"][0]["securityContext"].update(runAsUser=0), "non-root user"),
    (lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
     "capabilities"),
    (lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}), "seccomp"),
])
def test_checker_catches_each_control(plans: dict[str, PlanResult], mutate: Any,
                                      control: str) -> None:
    pod = kuberay_pod(_spec(plans["stack:staging"]), "v4-16")
    mutate(pod)
    assert any(control in p for p in restricted_problems(pod))


def test_token_only_where_the_pod_calls_the_api(plans: dict[str, PlanResult]) -> None:
    for name, plan in plans.items():
        spec = _spec(plan)
        head = spec["headGroupSpec"]["template"]["spec"]
        # The head runs the autoscaler sidecar (it reads and patches the RayCluster) only
        # when elastic; workers never call the API (Workload Identity needs no token).
        elastic = bool(spec.get("enableInTreeAutoscaling"))
        assert head["automountServiceAccountToken"] is elastic, name
        for w in spec["workerGroupSpecs"]:
            assert w["template"]["spec"]["automountServiceAccountToken"] is False, name


def test_writable_paths_are_empty_dirs_and_root_is_read_only(
        plans: dict[str, PlanResult]) -> None:
    spec = _spec(plans["stack:prod"])
    for template in [spec["headGroupSpec"]["template"],
                     *(w["template"] for w in spec["workerGroupSpecs"])]:
        pod = template["spec"]
        (ray,) = pod["containers"]
        assert ray["securityContext"]["readOnlyRootFilesystem"] is True
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in ray["volumeMounts"]}
        for path in ("/tmp/ray", "/tmp", "/dev/shm", f"{versions.RAY_HOME}/.cache",
                     f"{versions.RAY_HOME}/.ray"):
            assert "emptyDir" in volumes[mounts[path]], path
        # KubeRay's own names: it then reuses these volumes instead of adding its own.
        assert mounts["/tmp/ray"] == "ray-logs" and mounts["/dev/shm"] == "shared-mem"
        shm = volumes["shared-mem"]["emptyDir"]
        assert shm == {"medium": "Memory", "sizeLimit": ray["resources"]["limits"]["memory"]}
    sidecar = spec["autoscalerOptions"]
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in sidecar["volumeMounts"]} == {
        "/tmp", f"{versions.RAY_HOME}/.cache", f"{versions.RAY_HOME}/.ray"}


def test_runs_as_the_user_the_image_defines(plans: dict[str, PlanResult]) -> None:
    dockerfile = (REPO / "workloads" / "Dockerfile").read_text()
    base = re.search(r"^FROM (\S+)", dockerfile, re.M)
    assert base is not None and base.group(1) == versions.RAY_IMAGE
    assert not re.search(r"^USER ", dockerfile, re.M)  # keeps rayproject/ray's uid 1000
    head = _spec(plans["stack:dev"])["headGroupSpec"]["template"]["spec"]
    assert head["securityContext"]["runAsUser"] == versions.RAY_UID == 1000
    assert head["containers"][0]["securityContext"]["runAsGroup"] == versions.RAY_GID


def test_ray_namespace_enforces_restricted(plans: dict[str, PlanResult]) -> None:
    (ns,) = [r for r in plans["stack:dev"].by_type(NAMESPACE)
             if r.inputs["metadata"]["name"] == "ray"]
    labels = ns.inputs["metadata"]["labels"]
    assert versions.POD_SECURITY_LEVEL == "restricted"
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


# What writes where on a TPU host (read from each tool's source), as a path with $VARS and
# the default a tool uses when the variable is unset. gcsfs writes nothing in a pod: its only
# write is the browser-auth token cache ~/.gcs_tokens (gcsfs/credentials.py _save_tokens,
# called from _connect_browser only; a failure there is a warning), and on GKE it
# authenticates through the metadata server (google_default).
WRITERS = [
    ("Ray session dirs and logs", "/tmp/ray/session_latest/logs"),
    ("Ray runtime_env (pip, conda, working_dir)", "/tmp/ray/session_latest/runtime_resources"),
    ("Ray token file (authentication_token_setup.py)", "$HOME/.ray/auth_token"),
    ("pip install --user (a runtime env's)", "$PYTHONUSERBASE/lib/python3.11/site-packages"),
    ("pip cache", "$XDG_CACHE_HOME/pip"),
    ("torch hub / torch_xla caches", "$XDG_CACHE_HOME/torch"),
    ("torch inductor (tempfile.gettempdir())", "/tmp/torchinductor_ray"),
    ("libtpu logs (TPU_LOG_DIR default)", "/tmp/tpu_logs"),
    ("fsspec/gcsfs config, matplotlib, credential caches (XDG config)", "$XDG_CONFIG_HOME/x"),
    ("XDG data and state", "$XDG_DATA_HOME/x"),
    ("XDG state", "$XDG_STATE_HOME/x"),
]
DEFAULTS = {"HOME": versions.RAY_HOME, "XDG_CACHE_HOME": "$HOME/.cache",
            "XDG_CONFIG_HOME": "$HOME/.config", "XDG_DATA_HOME": "$HOME/.local/share",
            "XDG_STATE_HOME": "$HOME/.local/state", "PYTHONUSERBASE": "$HOME/.local"}


def _resolve(path: str, env: dict[str, str]) -> str:
    while "$" in path:
        path = re.sub(r"\$(\w+)", lambda m: env.get(m[1], DEFAULTS[m[1]]), path)
    return path


@pytest.mark.parametrize("who, path", WRITERS, ids=[w for w, _ in WRITERS])
def test_every_path_a_tpu_worker_writes_is_on_a_writable_volume(
        plans: dict[str, PlanResult], who: str, path: str) -> None:
    spec = _spec(plans["stack:prod"])
    for w in spec["workerGroupSpecs"]:
        (ray,) = w["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in ray["env"]}
        mounts = [m["mountPath"] for m in ray["volumeMounts"]]
        resolved = _resolve(path, env)
        assert any(resolved == m or resolved.startswith(m + "/") for m in mounts), (
            who, resolved, w["groupName"])
