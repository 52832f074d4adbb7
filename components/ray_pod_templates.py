"""Pod templates of the Ray head and TPU worker groups: one Ray container hardened to the
restricted Pod Security Standard, its writable paths, and each TPU host's resources.

* Every TPU pod requests *all* chips of its VM (``google.com/tpu`` requests = limits = chips per
  VM); a smaller request makes Ray hide chips with ``TPU_VISIBLE_CHIPS`` (ray-torchxla.md §3.2)
  and the TPU webhook derives a wrong host count (ai-on-gke #578).
* TPU nodes carry ``google.com/tpu=present:NoSchedule``: workers tolerate it, the head does not
  (so it can never land on a TPU VM).
* The TPU webhook only mutates pods labelled ``app.kubernetes.io/name: kuberay``, which KubeRay
  sets unless a template overrides it -- templates here never set that label (ai-on-gke #308).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
from raytpu.components.k8s_objects import (
    EnvVar,
    PodSecurityContext,
    PodSpec,
    PodTemplateSpec,
    SecurityContext,
    Toleration,
    Volume,
    VolumeMount,
)
from raytpu.facts import versions
from raytpu.facts.catalog import TPU_RESOURCE
from raytpu.spec.pod_resources import ResourceRequirements

WEBHOOK_LABEL = "app.kubernetes.io/name"  # the TPU webhook's objectSelector; never override
TPU_TOLERATION: Toleration = {"key": TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}

# KubeRay / Ray port names and numbers (container port names are IANA_SVC_NAME, <= 15 chars).
HEAD_PORTS: tuple[tuple[str, int], ...] = (
    ("gcs-server", versions.Ports.RAY_GCS),
    ("dashboard", versions.Ports.RAY_DASHBOARD),
    ("client", versions.Ports.RAY_CLIENT),
    ("metrics", versions.Ports.RAY_METRICS),
)
WORKER_PORTS: tuple[tuple[str, int], ...] = (
    ("metrics", versions.Ports.RAY_METRICS),
    ("megascale", versions.Ports.MEGASCALE),  # multislice coordinator (TPU webhook default)
    ("tpu-metrics", versions.Ports.TPU_RUNTIME_METRICS),  # GKE reads TPU duty cycle/HBM here
)


# -- pod security: the "restricted" Pod Security Standard ---------------------------------
# (kubernetes.io/docs/concepts/security/pod-security-standards). TPU chips need no
# privileged container on GKE >= 1.28 ("About TPUs in GKE"; shared/ref/notes/gke-tpu.md
# §1.3), which every stack needs anyway (the KubeRay TPU webhook: 1.28; the add-on: 1.30).

# Where Ray and the trainer write, each an emptyDir so the root filesystem can be
# read-only: Ray's session dirs and logs (the volume name and path are KubeRay's own,
# so KubeRay mounts this same volume into the autoscaler sidecar instead of adding one),
# the rest of /tmp (torch_xla's compile cache, libtpu logs, tempfiles), and the caches
# and ~/.ray token file under HOME (HOME itself holds the image's Python).
WRITABLE_PATHS: tuple[tuple[str, str], ...] = (
    ("ray-logs", "/tmp/ray"),
    ("tmp", "/tmp"),
    ("home-cache", f"{versions.RAY_HOME}/.cache"),
    ("home-ray", f"{versions.RAY_HOME}/.ray"),
)
# Ray's object store lives in /dev/shm: KubeRay's own volume name; memory medium.
SHM_VOLUME = ("shared-mem", "/dev/shm")

# Everything else that writes under HOME is pointed into those volumes by its standard
# variable (HOME itself cannot be an emptyDir: it holds the image's Python): the XDG base
# directories (fsspec, matplotlib and most tools keep config and state there), and Python's
# user base, where `pip install --user` (a runtime environment's, say) installs.
WRITABLE_ENV: tuple[tuple[str, str], ...] = (
    ("XDG_CACHE_HOME", f"{versions.RAY_HOME}/.cache"),
    ("XDG_CONFIG_HOME", "/tmp/.config"),
    ("XDG_DATA_HOME", "/tmp/.local/share"),
    ("XDG_STATE_HOME", "/tmp/.local/state"),
    ("PYTHONUSERBASE", "/tmp/.local"),
)


def container_security_context(read_only_root: bool = True) -> SecurityContext:
    """The Ray containers' (and the autoscaler sidecar's) ``securityContext``: the
    restricted profile's container fields, set on each container because KubeRay copies a
    Ray container's context into the init containers it injects."""
    return {
        "runAsNonRoot": True,
        "runAsUser": versions.RAY_UID,
        "runAsGroup": versions.RAY_GID,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": read_only_root,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> PodSecurityContext:
    return {
        "runAsNonRoot": True,
        "runAsUser": versions.RAY_UID,
        "runAsGroup": versions.RAY_GID,
        "fsGroup": versions.RAY_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def writable_mounts() -> list[VolumeMount]:
    return [{"name": n, "mountPath": path} for n, path in WRITABLE_PATHS]


def pod_template(
    *,
    labels: Mapping[str, str],
    service_account: str,
    node_selector: Mapping[str, str] | None,
    container: str,
    image: pulumi.Input[str],
    env: Sequence[EnvVar],
    ports: Sequence[tuple[str, int]],
    resources: ResourceRequirements,
    tolerations: Sequence[Toleration] = (),
    automount_token: bool = False,
    read_only_root: bool = True,
) -> PodTemplateSpec:
    """The pod template of a Ray head or worker group: one Ray container, hardened to the
    restricted Pod Security Standard. ``automount_token``: only a pod that calls the
    Kubernetes API (the head with the autoscaler sidecar) gets a service-account token;
    Workload Identity does not need one (the GKE metadata server identifies the pod)."""
    memory = resources.get("limits", {}).get("memory") or resources.get("requests", {}).get(
        "memory")
    shm_name, shm_path = SHM_VOLUME
    # Sized as KubeRay sizes its own: the container's memory. tmpfs pages count against
    # that limit, so it bounds the object store (30% of it by default) without a smaller
    # /dev/shm ever pushing Ray's store onto disk.
    shm: Volume = {"name": shm_name, "emptyDir": {"medium": "Memory"}}
    if memory:
        shm["emptyDir"]["sizeLimit"] = memory
    volumes: list[Volume] = [{"name": n, "emptyDir": {}} for n, _ in WRITABLE_PATHS]
    volumes.append(shm)
    if read_only_root:  # the group's own env wins over these defaults
        given = {e["name"] for e in env}
        defaults: list[EnvVar] = [{"name": k, "value": v} for k, v in WRITABLE_ENV
                                  if k not in given]
        env = sorted([*env, *defaults], key=lambda e: e["name"])
    spec: PodSpec = {
        "serviceAccountName": service_account,
        "automountServiceAccountToken": automount_token,
        "securityContext": pod_security_context(),
        "containers": [{
            "name": container,
            "image": image,
            "env": list(env),
            "ports": [{"name": n, "containerPort": p} for n, p in ports],
            "resources": resources,
            "securityContext": container_security_context(read_only_root),
            "volumeMounts": [*writable_mounts(), {"name": shm_name, "mountPath": shm_path}],
        }],
        "volumes": volumes,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


