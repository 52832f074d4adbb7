"""Kueue in the rehearsal: the controller the stack installs, as a process beside the control
plane, with the Configuration the stack writes into Kueue's chart values (the same string,
read from the plan) and only what running outside a cluster needs changed:

* leader election off (one process);
* internal cert management off, and the webhook server on loopback with the rehearsal's
  serving certificate; the API server reaches it by URL (:func:`webhook_configurations`),
  as envtest reaches webhooks without a Service;
* metrics and health on free loopback ports; the visibility API off (it needs the
  aggregation layer).

Its webhooks are the ones the chart registers for the kinds the stack uses (Kueue's own
kinds and the integrations the Configuration enables; paths from the ``+kubebuilder:webhook``
markers of sigs.k8s.io/kueue v0.19.2), so the stack's ClusterQueues, flavors and team
RayJobs meet Kueue's real defaulting and validation, and ``waitForPodsReady`` runs as the
stack sets it unless a test shortens it.
"""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from raytpu.facts import versions
from raytpu.plan.values import reveal
from raytpu.rehearse.api import loopback_session
from raytpu.rehearse.control_plane import ControlPlane, ControlPlaneError, free_port

if TYPE_CHECKING:
    from raytpu.plan.engine import PlannedResource
    from raytpu.rehearse.build import Cache

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"
# Kueue v0.19.2 reads its metrics certificate from this fixed path when internal cert
# management is off (cmd/kueue/main.go); nothing else may be configured.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
HOOK_PREFIX = "rehearsal-kueue"


@dataclass(frozen=True)
class Hook:
    """One of Kueue's admission webhooks: its path, kind and operations."""

    name: str
    path: str
    group: str
    version: str
    resources: tuple[str, ...]
    operations: tuple[str, ...]
    job: bool
    """A job integration's hook: the chart keeps it out of kube-system and Kueue's namespace."""


_CREATE, _CREATE_UPDATE = ("CREATE",), ("CREATE", "UPDATE")
_KQ = ("kueue.x-k8s.io", "v1beta2")
CORE_MUTATING = (
    Hook("mresourceflavor.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor", *_KQ,
         ("resourceflavors",), _CREATE, False),
    Hook("mworkload.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-workload", *_KQ, ("workloads",),
         _CREATE, False),
    Hook("mclusterqueue.kb.io", "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue", *_KQ,
         ("clusterqueues",), _CREATE, False),
)
CORE_VALIDATING = (
    Hook("vresourceflavor.kb.io", "/validate-kueue-x-k8s-io-v1beta2-resourceflavor", *_KQ,
         ("resourceflavors",), _CREATE_UPDATE, False),
    Hook("vworkload.kb.io", "/validate-kueue-x-k8s-io-v1beta2-workload", *_KQ,
         ("workloads", "workloads/status"), _CREATE_UPDATE, False),
    Hook("vcohort.kb.io", "/validate-kueue-x-k8s-io-v1beta2-cohort", *_KQ, ("cohorts",),
         _CREATE_UPDATE, False),
    Hook("vclusterqueue.kb.io", "/validate-kueue-x-k8s-io-v1beta2-clusterqueue", *_KQ,
         ("clusterqueues",), _CREATE_UPDATE, False),
)
# By integration (``integrations.frameworks``): (mutating, validating).
FRAMEWORK_HOOKS = {
    "ray.io/rayjob": (
        Hook("mrayjob.kb.io", "/mutate-ray-io-v1-rayjob", "ray.io", "v1", ("rayjobs",),
             _CREATE, True),
        Hook("vrayjob.kb.io", "/validate-ray-io-v1-rayjob", "ray.io", "v1", ("rayjobs",),
             _CREATE_UPDATE, True)),
    "ray.io/raycluster": (
        Hook("mraycluster.kb.io", "/mutate-ray-io-v1-raycluster", "ray.io", "v1",
             ("rayclusters",), _CREATE, True),
        Hook("vraycluster.kb.io", "/validate-ray-io-v1-raycluster", "ray.io", "v1",
             ("rayclusters",), _CREATE_UPDATE, True)),
}


def internal_crds(cache: Cache, have: set[str]) -> list[dict[str, Any]]:
    """Kueue's CRDs that ``../shared/ref/kueue`` lacks (Workload, MultiKueue*,
    ProvisioningRequestConfig): Kueue will not start without them, and the stack's chart
    installs them with the rest. Read from the pinned module the build downloaded, so they
    are the release's own; the kinds the stack declares still come from the reference."""
    component = next(c for c in versions.REHEARSAL_COMPONENTS if c.name == "kueue")
    folder = cache.module_dir(component) / "config" / "components" / "crd" / "bases"
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise ControlPlaneError(f"no Kueue CRDs in {folder}: run `raytpu rehearse --build` "
                                "again (the module cache was removed)")
    out = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition" \
                    and doc["metadata"]["name"] not in have:
                out.append(doc)
    return out


def stack_manager_config(resources: list[PlannedResource]) -> dict[str, Any] | None:
    """The Configuration the stack gives Kueue's chart (None: the stack installs no Kueue)."""
    for r in resources:
        if r.type != CHART_TYPE:
            continue
        inputs = reveal(r.inputs)
        if "kueue" not in str(inputs.get("chart", "")).rsplit("/", 1)[-1]:
            continue
        text = ((inputs.get("values") or {}).get("managerConfig") or {}).get(
            "controllerManagerConfigYaml")
        if not text:
            raise ControlPlaneError(f"the stack's Kueue chart {r.name!r} has no "
                                    "managerConfig.controllerManagerConfigYaml")
        config: dict[str, Any] = yaml.safe_load(text)
        return config
    return None


@dataclass(frozen=True)
class KueueRun:
    """How the rehearsal runs Kueue: its Configuration (as given to ``--config``) and ports."""

    config: dict[str, Any]
    webhook_port: int
    health_port: int

    @property
    def frameworks(self) -> list[str]:
        return list((self.config.get("integrations") or {}).get("frameworks") or [])


def run_config(stack_config: dict[str, Any], cert_dir: Path,
               pods_ready_timeout: str | None = None) -> KueueRun:
    """The stack's Configuration with the out-of-cluster changes (module docstring);
    ``pods_ready_timeout`` shortens ``waitForPodsReady.timeout`` (the eviction test)."""
    config = {k: v for k, v in stack_config.items()}
    webhook_port, health_port = free_port(), free_port()
    config["leaderElection"] = {"leaderElect": False}
    config["internalCertManagement"] = {"enable": False}
    config["webhook"] = {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)}
    config["metrics"] = {**(config.get("metrics") or {}),
                         "bindAddress": f"127.0.0.1:{free_port()}"}
    config["health"] = {**(config.get("health") or {}),
                        "healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    if pods_ready_timeout is not None:
        if "waitForPodsReady" not in config:
            raise ControlPlaneError("pods_ready_timeout: the stack's Kueue Configuration has "
                                    "no waitForPodsReady to shorten")
        config["waitForPodsReady"] = {**config["waitForPodsReady"],
                                      "timeout": pods_ready_timeout}
    return KueueRun(config, webhook_port, health_port)


def _hook(hook: Hook, port: int, ca_bundle: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": hook.name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "failurePolicy": "Fail", "timeoutSeconds": 10,
        "clientConfig": {"url": f"https://127.0.0.1:{port}{hook.path}", "caBundle": ca_bundle},
        "rules": [{"apiGroups": [hook.group], "apiVersions": [hook.version],
                   "operations": list(hook.operations), "resources": list(hook.resources)}],
    }
    if hook.job:
        out["namespaceSelector"] = {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": ["kube-system", versions.KUEUE_NAMESPACE]}]}
    return out


def webhook_configurations(run: KueueRun, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's Mutating and ValidatingWebhookConfiguration, by URL with the rehearsal's CA."""
    unknown = [f for f in run.frameworks if f not in FRAMEWORK_HOOKS]
    if unknown:
        raise ControlPlaneError(f"integrations.frameworks: the rehearsal knows Kueue's "
                                f"webhooks for {', '.join(FRAMEWORK_HOOKS)}, not "
                                f"{', '.join(unknown)}")
    mutating = list(CORE_MUTATING) + [FRAMEWORK_HOOKS[f][0] for f in run.frameworks]
    validating = list(CORE_VALIDATING) + [FRAMEWORK_HOOKS[f][1] for f in run.frameworks]
    ca = base64.b64encode(ca_pem).decode()
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
         "metadata": {"name": f"{HOOK_PREFIX}-{suffix}"},
         "webhooks": [_hook(h, run.webhook_port, ca) for h in hooks]}
        for kind, suffix, hooks in (("MutatingWebhookConfiguration", "mutating", mutating),
                                    ("ValidatingWebhookConfiguration", "validating",
                                     validating))
    ]


def ensure_metrics_certs(cert: Path, key: Path) -> None:
    """Kueue's metrics certificate at its fixed path. Never scraped here, so any valid pair
    does; one written by an earlier run is kept (concurrent runs share it)."""
    if (METRICS_CERT_DIR / "tls.crt").is_file() and (METRICS_CERT_DIR / "tls.key").is_file():
        return
    try:
        METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        for src, name in ((cert, "tls.crt"), (key, "tls.key")):
            tmp = METRICS_CERT_DIR / f".{name}.{datetime.datetime.now().timestamp()}"
            tmp.write_bytes(src.read_bytes())
            tmp.chmod(0o600)
            tmp.replace(METRICS_CERT_DIR / name)
    except OSError as e:
        raise ControlPlaneError(
            f"Kueue {versions.KUEUE_VERSION} reads its metrics certificate from "
            f"{METRICS_CERT_DIR}/tls.crt and tls.key when run outside a cluster, and that "
            f"folder cannot be written ({e}); create it once: sudo mkdir -p "
            f"{METRICS_CERT_DIR} && sudo openssl req -x509 -newkey rsa:2048 -nodes -days 3650 "
            f"-subj /CN=kueue-metrics -keyout {METRICS_CERT_DIR}/tls.key -out "
            f"{METRICS_CERT_DIR}/tls.crt && sudo chmod 644 {METRICS_CERT_DIR}/tls.*") from None


def start_kueue(cp: ControlPlane, cache: Cache, stack_config: dict[str, Any],
                pods_ready_timeout: str | None = None) -> tuple[KueueRun, float]:
    """Kueue out of cluster, as the admin (its chart's RBAC is not what is tested), ready
    when its webhook server serves; returns the run and its seconds to ready."""
    certs = cp.folder / "kueue-certs"
    certs.mkdir()
    (certs / "tls.crt").write_bytes(cp.pki.serving_cert.read_bytes())
    (certs / "tls.key").write_bytes(cp.pki.serving_key.read_bytes())
    (certs / "tls.key").chmod(0o600)
    ensure_metrics_certs(cp.pki.serving_cert, cp.pki.serving_key)
    run = run_config(stack_config, certs, pods_ready_timeout)
    path = cp.folder / "kueue.yaml"
    path.write_text(yaml.safe_dump(run.config, sort_keys=False))
    process = cp.start("kueue", [
        str(cache.binary("kueue")), f"--config={path}", f"--kubeconfig={cp.kubeconfig()}",
        "--feature-gates=VisibilityOnDemand=false"])
    session = loopback_session(str(cp.pki.ca_cert))
    try:
        seconds = cp.wait_until(process, lambda: session.get(
            f"http://127.0.0.1:{run.health_port}/readyz", timeout=2).status_code == 200,
            timeout=90)
    finally:
        session.close()
    return run, seconds
