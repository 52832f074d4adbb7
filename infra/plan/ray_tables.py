"""The Ray tables of ``raytpu plan``: the operator stack and the RayCluster worker groups.

Read from the *recorded plan* (what the program declared, as the provider would receive it),
not from the config, so the table shows what would actually be applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytpu.components.ray_resources import RAYCLUSTER_TYPE, RAYJOB_TYPE
from raytpu.config.team_rules import job_slices, nominal_slices
from raytpu.facts.catalog import ACCELERATOR_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE
from raytpu.facts.gcs_ft_env import KUBERAY_RECONNECT_TIMEOUT_S, RECONNECT_ENV
from raytpu.plan.engine import PlannedResource, PlanResult
from raytpu.plan.tables import PlanTable
from raytpu.plan.values import shown

if TYPE_CHECKING:
    from raytpu.config.stack import StackConfig

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"


OPERATOR_TYPE = "raytpu:kuberay:KubeRayOperator"


def charts_under(result: PlanResult, component_type: str) -> list[PlannedResource]:
    """The Helm charts declared inside a component of ``component_type`` (by URN: other
    modules, Kueue for one, declare charts of their own)."""
    return [c for c in result.by_type(CHART_TYPE) if _inside(c, component_type)]


def _inside(r: PlannedResource, component_type: str) -> bool:
    """Whether ``r``'s URN puts it under a component of ``component_type``."""
    return f"::{component_type}$" in r.urn or f"${component_type}$" in r.urn


def operator_table(result: PlanResult) -> PlanTable | None:
    charts = charts_under(result, OPERATOR_TYPE)
    rows = [[shown(c.inputs.get("name", c.name)), shown(c.inputs.get("chart", "")),
             shown(c.inputs.get("version", "")), shown(c.inputs.get("namespace", "")),
             "skipped" if c.inputs.get("skipCrds") else "managed"] for c in charts]
    notes = []
    for c in charts:
        values = c.inputs.get("values") or {}
        image = (values.get("tpuWebhook") or {}).get("image")
        if image:
            notes.append(f"TPU webhook image {image.get('repository')}:{image.get('tag')}")
        for gate in values.get("featureGates") or []:
            notes.append(f"{gate.get('name')}: {'on' if gate.get('enabled') else 'off'}")
    if result.config.kuberay.mode == "gke-addon":
        rows.append(["kuberay-operator + kuberay-tpu-webhook", "GKE add-on", "GKE-managed",
                     "(outside the cluster)", "GKE"])
        for job in result.by_type("kubernetes:batch/v1:Job"):
            meta = job.inputs.get("metadata", {})
            if _inside(job, OPERATOR_TYPE):
                notes.append(f"Job {meta.get('namespace')}/{meta.get('name')} waits for the "
                             "add-on's RayCluster CRD before the RayCluster is declared")
    if not rows:
        return None
    return PlanTable("KubeRay operator", ["component", "chart", "version", "namespace", "CRDs"],
                     rows, notes)


def _container(template: dict[str, Any]) -> dict[str, Any]:
    containers = template.get("spec", {}).get("containers") or [{}]
    return dict(containers[0])


def split_notes(cfg: StackConfig, rc: PlannedResource) -> list[str]:
    """Why a worker group's ``maxReplicas`` is less than its pools: the slices the teams'
    nominal quotas and the ``raytpu:jobs`` clusters hold (the pool split of
    :func:`raytpu.config.team_rules.shared_max_slices`)."""
    nominal, jobs = nominal_slices(cfg), job_slices(cfg)
    planned = {w.get("groupName"): w.get("maxReplicas")
               for w in rc.inputs.get("spec", {}).get("workerGroupSpecs", [])}
    out = []
    for s in cfg.slices:
        held = {"the teams' nominal quotas": nominal.get(s.name, 0),
                "the raytpu:jobs clusters": jobs.get(s.name, 0)}
        if s.name in planned and any(held.values()):
            by = " and ".join(f"{who} {n}" for who, n in held.items() if n)
            out.append(f"{s.name}: maxReplicas {shown(planned[s.name])} of its "
                       f"{s.max_slices} pools; {by} hold the rest (Kueue cannot count this "
                       "cluster's slices, so the pools are split)")
    return out


def raycluster_table(rc: PlannedResource, cfg: StackConfig | None = None) -> PlanTable:
    """``cfg``: the stack's, for the stack's own RayCluster (its pool split notes)."""
    spec = rc.inputs.get("spec", {})
    meta = rc.inputs.get("metadata", {})
    autoscaling = "autoscaling v2" if spec.get("enableInTreeAutoscaling") else "fixed size"
    head = spec.get("headGroupSpec", {})
    head_res = _container(head.get("template", {})).get("resources", {}).get("requests", {})
    rows = [["head", "1", "-", "-", "-",
             f"CPU {head_res.get('cpu', '?')}, {head_res.get('memory', '?')}"]]
    for w in spec.get("workerGroupSpecs", []):
        template = w.get("template", {})
        selector = template.get("spec", {}).get("nodeSelector", {})
        limits = _container(template).get("resources", {}).get("limits", {})
        rows.append([
            shown(w.get("groupName")),
            f"{w.get('minReplicas', 0)}/{w.get('replicas', 0)}/{w.get('maxReplicas', '?')}",
            shown(w.get("numOfHosts", 1)),
            shown(limits.get(TPU_RESOURCE, "-")),
            shown(selector.get(TOPOLOGY_LABEL, "-")),
            shown(selector.get(ACCELERATOR_LABEL, "-")),
        ])
    title = (f"RayCluster {meta.get('namespace', '')}/{meta.get('name', rc.name)} "
             f"(Ray {spec.get('rayVersion', '?')}, {autoscaling})")
    return PlanTable(title, ["group", "slices min/count/max", "hosts per slice",
                             "chips per host", "topology", "accelerator"], rows,
                     split_notes(cfg, rc) if cfg is not None else [])


def _ft_row(what: str, spec: dict[str, Any]) -> list[str]:
    ft = spec.get("gcsFaultToleranceOptions")
    if ft is None:
        return [what, "off", "-", "-", "-", "-"]
    ref = ((ft.get("redisPassword") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    address = shown(ft.get("redisAddress", "?"))
    workers = [e.get("value") for w in spec.get("workerGroupSpecs", [])
               for e in _container(w.get("template", {})).get("env", [])
               if e.get("name") == RECONNECT_ENV]
    return [what, "on (Redis)", address,
            f"Secret {ref.get('name')}/{ref.get('key')}" if ref else "none",
            "yes" if address.startswith("rediss://") or address.startswith("(") else "no",
            f"{workers[0]} s" if workers else f"{KUBERAY_RECONNECT_TIMEOUT_S} s (KubeRay)"]


def gcs_ft_table(result: PlanResult) -> PlanTable | None:
    """GCS fault tolerance of every RayCluster and RayJob cluster: whether a head restart
    keeps the workers, where the GCS is kept and where its password comes from."""
    rows = [_ft_row(f"RayCluster {rc.inputs.get('metadata', {}).get('name', rc.name)}",
                    rc.inputs.get("spec", {})) for rc in result.by_type(RAYCLUSTER_TYPE)]
    rows += [_ft_row(f"RayJob {j.inputs.get('metadata', {}).get('name', j.name)}",
                     j.inputs.get("spec", {}).get("rayClusterSpec") or {})
             for j in result.by_type(RAYJOB_TYPE)]
    if not rows:
        return None
    return PlanTable("GCS fault tolerance (head restart keeps the workers)",
                     ["cluster", "GCS FT", "redis address", "password", "TLS",
                      "worker reconnect"], rows,
                     notes=["off: a lost head pod restarts every worker of every slice"])


def ray_tables(result: PlanResult) -> list[PlanTable]:
    op = operator_table(result)
    ft = gcs_ft_table(result)
    return (([op] if op else []) + [raycluster_table(rc, result.config)
                                    for rc in result.by_type(RAYCLUSTER_TYPE)]
            + ([ft] if ft else []))
