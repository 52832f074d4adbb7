"""What GKE's Ray Operator add-on (``raytpu:kuberay.mode: gke-addon``) leaves unverified.

GKE hosts the add-on's KubeRay and documents neither its version nor where it connects
from; the warnings here say what depends on that and how to check it after ``pulumi up``.
"""

from __future__ import annotations

from raytpu.config.stack import StackConfig
from raytpu.config.teams import team_namespace
from raytpu.facts import versions
from raytpu.facts.gcs_ft_env import FT_ENABLED_ANNOTATION, GCS_FT_MIN_KUBERAY, REDIS_ADDRESS_ENV


def addon_warnings(cfg: StackConfig) -> list[str]:
    if cfg.kuberay.mode != "gke-addon":
        return []
    ns = cfg.ray.namespace
    out = [
        # KubeRay v1.7.0 common/pod.go:635 copies the Ray container's securityContext into
        # wait-gcs-ready; pod.go:1024 takes autoscalerOptions.securityContext.
        f"raytpu:kuberay.mode: 'gke-addon': the Ray namespaces enforce Pod Security "
        f"'{versions.POD_SECURITY_LEVEL}', which the pods pass only if the add-on's KubeRay "
        "copies the Ray container's securityContext into the wait-gcs-ready init container "
        "and honours autoscalerOptions.securityContext (KubeRay 1.7.0 does; GKE does not "
        "document the add-on's version). After `pulumi up`: `kubectl -n "
        f"{ns} get events | grep -i 'violates PodSecurity'` must print nothing",
    ]
    if cfg.ray.gcs_fault_tolerance is not None:
        out.append(
            "raytpu:kuberay.mode: 'gke-addon': raytpu:ray.gcsFaultTolerance needs the "
            "add-on's RayCluster CRD to have gcsFaultToleranceOptions (KubeRay >= "
            f"{GCS_FT_MIN_KUBERAY}); an older one prunes the field without an error, and GCS "
            "fault tolerance and resident hosts are then off (GKE does not document the "
            "add-on's version). After `pulumi up`: `raytpu status` checks that the "
            "RayCluster kept gcsFaultToleranceOptions and that the head has "
            f"{REDIS_ADDRESS_ENV} and {FT_ENABLED_ANNOTATION}=true")
    if cfg.teams or cfg.jobs:
        where = ", ".join([*(team_namespace(t.name) for t in cfg.teams),
                           *([ns] if cfg.jobs else [])])
        out.append(
            "raytpu:kuberay.mode: 'gke-addon': KubeRay polls each running RayJob's head "
            f"dashboard ({versions.Ports.RAY_DASHBOARD}) to see it finish, and GKE does not "
            "document where its hosted operator connects from: the NetworkPolicies of "
            f"{where} admit the control-plane range "
            f"({cfg.cluster.master_ipv4_cidr_block}) and kube-system's konnectivity-agent "
            "pods, unverified. After `pulumi up`: a RayJob must reach Complete (`kubectl -n "
            "<namespace> get rayjob`); if one stays Running, `hubble observe --to-port "
            f"{versions.Ports.RAY_DASHBOARD} --verdict DROPPED` shows the source to admit")
    return out
