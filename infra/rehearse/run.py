"""One rehearsal of a stack: its plan's objects applied to a real control plane with fake
nodes like its pools, KubeRay reconciling its RayClusters, the scheduler placing the pods.

The steps, in order: the plan (preview: nothing invented for values only ``up`` knows),
which refuses bad config before any process starts; the control plane; the CRDs the stack
installs, until Established; the fake nodes, until KWOK has them Ready; the KubeRay operator
as the stack configures it; the stack's objects, server-side, in the plan's order; then a
bounded wait until every Ray pod is bound or the scheduler has said why not. The result is
data (:class:`Rehearsal`); :mod:`raytpu.rehearse.report` presents it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytpu.facts import versions
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.plan.values import reveal
from raytpu.rehearse.access import AccessOutcome, Member, check_access, team_members
from raytpu.rehearse.api import Api, ApiError, loopback_session
from raytpu.rehearse.control_plane import ControlPlane, control_plane, free_port
from raytpu.rehearse.kueue import (
    internal_crds,
    stack_manager_config,
    start_kueue,
    webhook_configurations,
)
from raytpu.rehearse.kwok_stages import config_yaml
from raytpu.rehearse.nodes import FakePool, caveats, fake_nodes
from raytpu.rehearse.objects import (
    Declared,
    Placeholder,
    crd_folder,
    stack_crds,
    stack_objects,
)
from raytpu.rehearse.observe import (
    PodOutcome,
    SliceOutcome,
    expected_pods,
    missing_pods,
    pod_outcome,
    slices_of,
    wait_settled,
)
from raytpu.rehearse.queues import QueueOutcome, declared_queues, read_queues
from raytpu.rehearse.slice_affinity import webhook_configuration

if TYPE_CHECKING:
    from raytpu.rehearse.build import Cache

SETTLE_TIMEOUT_S = 60.0
CHART_TYPE = "kubernetes:helm.sh/v4:Chart"
FIXED_CAVEATS = (
    "no kubelet: containers never run and images are not pulled; KWOK marks bound pods Running",
    "no TPU webhook (not obtainable as a Go module): its one rule placement needs, a "
    "slice's hosts on one pool, is emulated (raytpu.rehearse.slice_affinity); no "
    "TPU_WORKER_* env or hostnames",
    "no kube-proxy, DNS or CNI: NetworkPolicies are validated and stored, not enforced",
    "nothing of GCP: no node pools, Workload Identity, GKE admission or the managed Ray add-on",
)
KUEUE_CAVEAT = ("Kueue runs out of cluster with the stack's Configuration (leader election "
                "and internal cert management off, webhooks by URL, visibility API off); its "
                "chart's own objects (Deployment, RBAC, Service) are not applied; the Kueue "
                "CRDs ../shared/ref lacks (Workload, MultiKueue, ProvisioningRequestConfig) "
                "come from the pinned module")


@dataclass(frozen=True)
class ObjectOutcome:
    kind: str
    namespace: str | None
    name: str
    admitted: bool
    message: str


@dataclass
class Rehearsal:
    stack: str
    versions: dict[str, str]
    caveats: list[str]
    seconds: float
    objects: list[ObjectOutcome]
    pods: list[PodOutcome]
    slices: list[SliceOutcome]
    placeholders: list[Placeholder]
    pools: list[FakePool]
    crds: list[str]
    queues: list[QueueOutcome] = field(default_factory=list)
    """The teams' queues as Kueue reports them (empty: the stack has no teams)."""
    access: list[AccessOutcome] = field(default_factory=list)
    """Each team member's requests, as the API server's RBAC answered them."""
    missing_pods: list[str] = field(default_factory=list)
    """What the RayClusters should have but KubeRay did not create (with its event)."""
    timings: dict[str, float] = field(default_factory=dict)
    settled: bool = True
    kubeconfig: str | None = None
    folder: str = ""
    """Where the run kept its files: removed on return unless kept."""
    pids: list[int] = field(default_factory=list)
    """The processes it started: stopped on return unless kept."""
    member_kubeconfigs: dict[str, str] = field(default_factory=dict)
    """With ``keep``: a kubeconfig per team member subject (``Group:ml-vision@...``)."""

    @property
    def ok(self) -> bool:
        return (all(o.admitted for o in self.objects) and not self.missing_pods
                and all(p.node is not None for p in self.pods)
                and all(s.bound for s in self.slices) and all(q.active for q in self.queues)
                and all(a.as_expected for a in self.access))


def rehearsal_versions(operator: bool = True, kueue: bool = True) -> dict[str, str]:
    """What ran, by component (the stacks' own KubeRay pin beside the one rehearsed)."""
    out = {c.name: c.version.removeprefix("v") for c in versions.REHEARSAL_COMPONENTS}
    out["kuberay-stacks"] = versions.KUBERAY_VERSION
    if not operator:
        out.pop("ray-operator")
    if not kueue:
        out.pop("kueue")
    return out


def _operator_gates(result_resources: list[Any]) -> tuple[list[str], list[str]]:
    """``--feature-gates`` as the stack's KubeRay chart sets them, and caveats."""
    for r in result_resources:
        if r.type != CHART_TYPE:
            continue
        inputs = reveal(r.inputs)
        if "kuberay-operator" not in str(inputs.get("chart", "")) + str(r.name):
            continue
        gates = [f"{g['name']}={str(bool(g['enabled'])).lower()}"
                 for g in (inputs.get("values") or {}).get("featureGates") or []]
        return gates, []
    return [], ["the stack runs GKE's Ray Operator add-on: the rehearsal runs KubeRay "
                f"{versions.REHEARSAL_KUBERAY_VERSION} with its default feature gates in its "
                "place"]


def start_operator(cp: ControlPlane, cache: Cache, gates: list[str]) -> float:
    """ray-operator out of cluster, as the admin (its chart's RBAC is not what is tested)."""
    probe = free_port()
    session = loopback_session(str(cp.pki.ca_cert))
    argv = [str(cache.binary("ray-operator")), f"--kubeconfig={cp.kubeconfig()}",
            "--enable-leader-election=false", f"--metrics-addr=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{probe}", "--log-stdout-encoder=json"]
    if gates:
        argv.append(f"--feature-gates={','.join(gates)}")
    process = cp.start("ray-operator", argv)
    return cp.wait_until(process, lambda: session.get(
        f"http://127.0.0.1:{probe}/readyz", timeout=2).status_code == 200)


def start_slice_affinity(cp: ControlPlane) -> tuple[float, int]:
    """The slice-affinity hook as a control-plane process (kept with it by ``--keep``);
    its seconds to ready and its port."""
    port = free_port()
    session = loopback_session(str(cp.pki.ca_cert))
    process = cp.start("slice-affinity", [
        sys.executable, "-m", "raytpu.rehearse.slice_affinity",
        f"--kubeconfig={cp.kubeconfig()}", f"--port={port}",
        f"--cert={cp.pki.serving_cert}", f"--key={cp.pki.serving_key}"])
    return cp.wait_until(process, lambda: session.get(
        f"https://127.0.0.1:{port}/healthz", timeout=2).text == "ok"), port


@dataclass(frozen=True)
class Live:
    """The running rehearsal, for ``then``: the control plane, an admin client, and a
    kubeconfig per team member subject."""

    control_plane: ControlPlane
    api: Api
    member_kubeconfigs: dict[str, str]


def _member_kubeconfigs(cp: ControlPlane, members: list[Member]) -> dict[str, str]:
    return {m.subject: str(cp.kubeconfig(m.identity, f"member-{i}"))
            for i, m in enumerate(members)}


def _access(cp: ControlPlane, members: list[Member],
            objs: list[dict[str, Any]]) -> list[AccessOutcome]:
    queues = dict(declared_queues(objs))
    return check_access(cp.server, str(cp.pki.ca_cert), members, queues)


def _apply_all(api: Api, objs: list[dict[str, Any]]) -> list[ObjectOutcome]:
    outcomes = []
    for obj in objs:
        meta = obj["metadata"]
        try:
            api.apply(obj)
            admitted, message = True, ""
        except ApiError as e:
            admitted, message = False, e.message
        outcomes.append(ObjectOutcome(obj["kind"], meta.get("namespace"), meta["name"],
                                      admitted, message))
    return outcomes


def _wait_nodes_ready(api: Api, names: list[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        for node in api.list_items("v1", "Node"):
            if any(c["type"] == "Ready" and c["status"] == "True"
                   for c in (node.get("status") or {}).get("conditions") or []):
                pending.discard(node["metadata"]["name"])
        if not pending:
            return
        if time.monotonic() > deadline:
            raise ApiError(504, f"KWOK did not make nodes Ready in {timeout:.0f} s: "
                                f"{', '.join(sorted(pending))}")
        time.sleep(0.1)



def rehearse(result: Declared, cache: Cache, *, crds: Path | None = None,
             keep: bool = False, at_max: bool = False, operator: bool = True,
             settle_timeout: float = SETTLE_TIMEOUT_S,
             edit: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None] | None = None,
             pods_ready_timeout: str | None = None,
             then: Callable[[Live], None] | None = None,
             ) -> Rehearsal:
    """Bring what ``result`` declares (a preview plan: ``run_plan(..., preview=True)``) up
    and report. ``edit(objects, nodes)`` may change what is applied (the tests' failing
    cases: a head too big, a selector no pool matches); ``pods_ready_timeout`` shortens
    Kueue's ``waitForPodsReady.timeout`` (a Go duration: the eviction test). ``then(live)``
    runs once the stack has settled, with everything still up (the tests submit team jobs
    there); what it started is settled and reported too."""
    started = time.monotonic()
    stack = result.stack
    objs, placeholders = stack_objects(result)
    crd_objs = stack_crds(objs, crd_folder(crds))
    pools, nodes = fake_nodes(result, at_max=at_max)
    gates, gate_caveats = _operator_gates(result.resources)
    kueue_config = stack_manager_config(result.resources)
    if kueue_config is not None:
        crd_objs += internal_crds(cache, {c["metadata"]["name"] for c in crd_objs})
    if edit is not None:
        edit(objs, nodes)
    timings: dict[str, float] = {}
    notes = [f"KubeRay operator {versions.REHEARSAL_KUBERAY_VERSION} (the stacks pin "
             f"{versions.KUBERAY_VERSION}; the Go module proxy refuses its download), with "
             f"{versions.KUBERAY_VERSION}'s CRDs: see README 'Rehearse a stack locally' for "
             "what it lacks", *gate_caveats, *FIXED_CAVEATS, *caveats(pools)]
    if kueue_config is not None:
        notes.append(KUEUE_CAVEAT)
    if not operator:
        notes[0] = "no KubeRay operator: RayClusters are admitted but make no pods"
    if placeholders:
        notes.append(f"{len(placeholders)} value(s) known only after `pulumi up` are "
                     "placeholders (see placeholders)")
    members = team_members(objs)
    with control_plane(cache, keep=keep, kwok_config=config_yaml(), timings=timings,
                       identities=[m.identity for m in members]) as cp:
        api = Api.connect(cp.server, str(cp.pki.ca_cert), cp.admin.token)
        t = time.monotonic()
        for crd in crd_objs:
            api.apply(crd)
        api.wait_established([c["metadata"]["name"] for c in crd_objs])
        timings["crds"] = time.monotonic() - t
        t = time.monotonic()
        for node in nodes:
            api.create(node)
        _wait_nodes_ready(api, [n["metadata"]["name"] for n in nodes])
        timings["nodes"] = time.monotonic() - t
        if operator:
            timings["ray-operator"] = start_operator(cp, cache, gates)
        if kueue_config is not None:
            kueue, timings["kueue"] = start_kueue(cp, cache, kueue_config, pods_ready_timeout)
            for hook in webhook_configurations(kueue, cp.pki.ca_cert.read_bytes()):
                api.apply(hook)
        timings["slice-affinity"], port = start_slice_affinity(cp)
        api.apply(webhook_configuration(port, cp.pki.ca_cert.read_bytes()))
        t = time.monotonic()
        outcomes = _apply_all(api, objs)
        timings["apply"] = time.monotonic() - t
        expected = expected_pods(
            [obj for obj, o in zip(objs, outcomes, strict=True) if o.admitted]
        ) if operator else []
        raw, settled, timings["settle"] = wait_settled(api, expected, settle_timeout)
        access = _access(cp, members, objs) if kueue_config is not None else []
        if then is not None:
            then(Live(cp, api, _member_kubeconfigs(cp, members)))
            # What the team jobs added: every RayCluster as it is now.
            expected = expected_pods(api.list_items("ray.io/v1", "RayCluster"))
            raw, settled, timings["settle-after"] = wait_settled(api, expected,
                                                                 settle_timeout)
        cp.check_running()
        queues = (read_queues(api, declared_queues(objs))
                  if kueue_config is not None else [])
        pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][NODEPOOL_LABEL] for n in nodes}
        pods = [pod_outcome(p, pool_of) for p in raw]
        labels = {p["metadata"]["name"]: p["metadata"].get("labels", {}) for p in raw}
        rehearsal = Rehearsal(
            stack, rehearsal_versions(operator, kueue_config is not None), notes, 0.0,
            outcomes, pods, slices_of(expected, pods, labels), placeholders, pools,
            [c["metadata"]["name"] for c in crd_objs], queues, access,
            missing_pods(api, expected, pods, labels),
            timings, settled, str(cp.kubeconfig()) if keep else None, str(cp.folder),
            [p.popen.pid for p in cp.processes],
            _member_kubeconfigs(cp, members) if keep else {})
        t = time.monotonic()
    timings["teardown"] = time.monotonic() - t
    rehearsal.seconds = time.monotonic() - started
    return rehearsal
