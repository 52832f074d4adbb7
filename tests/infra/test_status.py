"""`raytpu status` on Kubernetes objects shaped as the API returns them.

Nodes and pods are built from the plan's own node pools and RayCluster manifest (labels
GKE and KubeRay add, status blocks) and deserialized by the official client's
``ApiClient().deserialize`` into ``V1NodeList`` / ``V1PodList``; the ClusterQueue is
checked against the Kueue v1beta2 CRD (``../shared/ref/kueue``) before use. One slice is
partly failed: a NotReady node and a Pending pod.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from infra_support import NODE_POOL, REPO, raw_config
from raytpu.config.stack import StackConfig
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.operations.status import StatusError, fleet_status
from raytpu.plan.engine import PlanResult, run_program
from raytpu.plan.objects import to_manifest

kubernetes = pytest.importorskip("kubernetes")

RAYCLUSTER = "kubernetes:ray.io/v1:RayCluster"
SLICES = [
    {"name": "pod16", "tpu": "v5litepod-16", "count": 2},           # 2 slices x 4 hosts
    # 1 single-host slice for the shared RayCluster, 1 more for team-a's quota
    {"name": "single", "tpu": "v5litepod-4", "autoscaling": {"min": 1, "max": 2}},
]
TEAMS = [{"name": "team-a", "members": ["group:a@example.com"], "quota": {"single": 1}}]
BROKEN_POOL, BROKEN_REPLICA = "pod16-1", "1"


def _deserialize(kind: str, items: list[dict[str, Any]]) -> list[Any]:
    doc = {"apiVersion": "v1", "kind": f"{kind}List", "metadata": {"resourceVersion": "42"},
           "items": items}
    result = kubernetes.client.ApiClient().deserialize(json.dumps(doc), f"V1{kind}List",
                                                       "application/json")
    assert type(result).__name__ == f"V1{kind}List"
    return list(result.items)


def _nodes(plan: PlanResult, cfg: StackConfig) -> list[dict[str, Any]]:
    """The nodes GKE would run for the plan's TPU pools; one of BROKEN_POOL is NotReady."""
    selectors = {p: s.shape.node_selector for s in cfg.slices
                 for p in ([f"{s.name}-{i}" for i in range(s.max_slices)]
                           if s.shape.multi_host else [s.name])}
    out = []
    for pool in plan.by_type(NODE_POOL):
        name = pool.inputs["name"]
        if name not in selectors:
            continue
        count = pool.inputs.get("nodeCount", pool.inputs.get("initialNodeCount", 0))
        for i in range(count):
            ready = not (name == BROKEN_POOL and i == count - 1)
            out.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"gke-raytpu-test-{name}-{i:04d}",
                             "labels": {NODEPOOL_LABEL: name, **selectors[name],
                                        "kubernetes.io/os": "linux"}},
                "spec": {"taints": [{"key": "google.com/tpu", "value": "present",
                                     "effect": "NoSchedule"}]},
                "status": {"conditions": [{
                    "type": "Ready", "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastHeartbeatTime": "2026-12-03T08:00:00Z",
                    "lastTransitionTime": "2026-12-03T07:00:00Z"}]},
            })
    return out


def _pods(rc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods KubeRay makes from the RayCluster manifest: its labels, the templates' spec;
    the last host of BROKEN_REPLICA in pod16 stays Pending."""
    cluster, ns = rc["metadata"]["name"], rc["metadata"]["namespace"]

    def pod(name: str, template: dict[str, Any], labels: dict[str, str],
            phase: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {**(template["metadata"].get("labels") or {}),
                                    "app.kubernetes.io/name": "kuberay",
                                    "app.kubernetes.io/created-by": "kuberay-operator",
                                    "ray.io/cluster": cluster, "ray.io/is-ray-node": "yes",
                                    **labels}},
            "spec": copy.deepcopy(template["spec"]),
            "status": {"phase": phase, "startTime": "2026-12-03T07:05:00Z"},
        }

    spec = rc["spec"]
    out = [pod(f"{cluster}-head-abcde", spec["headGroupSpec"]["template"],
               {"ray.io/node-type": "head", "ray.io/group": "headgroup"}, "Running")]
    for w in spec["workerGroupSpecs"]:
        hosts = w.get("numOfHosts", 1)
        for r in range(w["replicas"]):
            for h in range(hosts):
                broken = (w["groupName"], str(r), h) == ("pod16", BROKEN_REPLICA, hosts - 1)
                out.append(pod(
                    f"{cluster}-{w['groupName']}-worker-{r}{h}xyz", w["template"],
                    {"ray.io/node-type": "worker", "ray.io/group": w["groupName"],
                     "ray.io/worker-group-replica-index": str(r),
                     "ray.io/replica-host-index": str(h)},
                    "Pending" if broken else "Running"))
    return out


def _cluster_queue() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": "team-a"},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}},
                 "resourceGroups": [{"coveredResources": ["google.com/tpu"], "flavors": [{
                     "name": "pod16", "resources": [{"name": "google.com/tpu",
                                                     "nominalQuota": 16}]}]}]},
        "status": {"admittedWorkloads": 1, "pendingWorkloads": 1, "reservingWorkloads": 1,
                   "flavorsUsage": [{"name": "pod16", "resources": [
                       {"name": "google.com/tpu", "total": "16", "borrowed": "0"}]}]},
    }


def _workloads() -> list[dict[str, Any]]:
    def w(name: str, **conds: str) -> dict[str, Any]:
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": name, "namespace": "team-a"},
                "status": {"conditions": [{"type": t, "status": s} for t, s in conds.items()]}}
    return [w("running", QuotaReserved="True", Admitted="True"),
            w("waiting", QuotaReserved="False"),
            w("done", Admitted="True", Finished="True")]


class FakeReader:
    def __init__(self, nodes: list[Any], pods: list[Any], rc: dict[str, Any] | None) -> None:
        self._nodes, self._pods, self._rc = nodes, pods, rc

    def nodes(self) -> list[Any]:
        return self._nodes

    def ray_pods(self, namespace: str, cluster: str) -> list[Any]:
        return [p for p in self._pods if p.metadata.namespace == namespace
                and p.metadata.labels.get("ray.io/cluster") == cluster]

    def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._rc

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return _workloads() if namespace == "team-a" else []

    def kuberay_pods(self, namespace: str) -> list[Any]:
        return [p for p in self._pods if p.metadata.namespace == namespace]

    def ray_clusters(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def events(self, namespace: str) -> list[Any]:
        return []

    def cluster_queues(self) -> list[dict[str, Any]]:
        other = {**_cluster_queue(), "metadata": {"name": "team-b-queue"}}
        other["spec"] = {**other["spec"], "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": "team-b"}}}
        return [other, _cluster_queue()]


def _kueue_crd_validator() -> jsonschema.Draft202012Validator:
    folder = Path(os.environ.get("RAYTPU_KUEUE_CRDS") or REPO / ".." / "shared" / "ref" / "kueue")
    path = folder / "kueue.x-k8s.io_clusterqueues.yaml"
    if not path.is_file():
        message = (f"Kueue CRD {path} missing: set RAYTPU_KUEUE_CRDS to a folder with the "
                   "v0.19.2 CRDs (kubernetes-sigs/kueue config/components/crd/bases)")
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    crd = yaml.safe_load(path.read_text())
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    return jsonschema.Draft202012Validator(v["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="module")
def world() -> tuple[StackConfig, FakeReader]:
    plan = run_program("test", raw_config(raytpu_slices=SLICES, raytpu_teams=TEAMS))
    (rc_res,) = plan.by_type(RAYCLUSTER)
    rc = to_manifest(rc_res)
    ready = sum(1 for p in _pods(rc) if p["status"]["phase"] == "Running") - 1
    rc["status"] = {"state": "ready", "readyWorkerReplicas": ready,
                    "desiredWorkerReplicas": 9, "conditions": [
                        {"type": "RayClusterProvisioned", "status": "False",
                         "reason": "RayClusterPodsProvisioning", "message": "",
                         "lastTransitionTime": "2026-12-03T07:05:00Z"},
                        {"type": "HeadPodReady", "status": "True",
                         "reason": "HeadPodRunningAndReady", "message": "",
                         "lastTransitionTime": "2026-12-03T07:06:00Z"}]}
    nodes = _deserialize("Node", _nodes(plan, plan.config))
    pods = _deserialize("Pod", _pods(rc))
    return plan.config, FakeReader(nodes, pods, rc)


def test_cluster_queue_fixture_is_what_kueue_serves() -> None:
    errors = list(_kueue_crd_validator().iter_errors(_cluster_queue()))
    assert errors == []


def test_partly_failed_slice_is_degraded_and_located(world: Any) -> None:
    cfg, reader = world
    view = fleet_status(cfg, reader)
    groups = {g["name"]: g for g in view["groups"]}
    pod16 = groups["pod16"]
    assert [(p["name"], p["ready"], p["nodes"], p["expected"]) for p in pod16["node_pools"]] == [
        ("pod16-0", 4, 4, 4), ("pod16-1", 3, 4, 4)]
    assert pod16["slices"] == {"min": 2, "count": 2, "max": 2, "expected": 2, "nodes_ready": 1,
                               "ray_running": 1}
    assert [(r["replica"], r["running"], r["pods"]) for r in pod16["ray_slices"]] == [
        ("0", 4, 4), ("1", 3, 4)]
    assert pod16["healthy"] is False
    single = groups["single"]
    assert single["node_pools"] == [{"name": "single", "nodes": 1, "ready": 1, "expected": 1}]
    assert single["healthy"] is True
    assert view["healthy"] is False
    rc = view["ray_cluster"]
    assert (rc["state"], rc["ready_workers"], rc["desired_workers"]) == ("ready", 8, 9)
    assert rc["conditions"]["RayClusterProvisioned"] == "False"


def test_team_workloads_and_quota(world: Any) -> None:
    cfg, reader = world
    (team,) = fleet_status(cfg, reader)["teams"]
    assert team["workloads"] == {"admitted": 1, "pending": 1}  # the finished one is gone
    assert team["cluster_queue"]["tpu_chips"] == {"used": 16, "nominal": 16}


def test_cluster_queue_found_by_name_or_namespace_selector() -> None:
    from raytpu.config.stack import TeamConfig
    from raytpu.operations.status import queue_of

    def team(name: str) -> TeamConfig:
        return TeamConfig(name=name, members=["user:x@example.com"], quota={"pod16": 1})

    queues = FakeReader([], [], None).cluster_queues()
    assert queue_of(team("team-a"), queues)["metadata"]["name"] == "team-a"  # type: ignore[index]
    assert queue_of(team("team-b"), queues)["metadata"]["name"] == "team-b-queue"  # type: ignore[index]
    assert queue_of(team("team-c"), queues) is None


def test_missing_raycluster_is_unhealthy(world: Any) -> None:
    cfg, reader = world
    view = fleet_status(cfg, FakeReader(reader._nodes, reader._pods, None))
    assert view["ray_cluster"] is None and view["healthy"] is False


def test_unreachable_api_is_a_status_error() -> None:
    from raytpu.operations.status import KubeReader

    conf = kubernetes.client.Configuration()
    conf.host = "https://127.0.0.1:9"  # discard port: nothing listens
    conf.retries = 0
    reader = KubeReader(kubernetes.client.ApiClient(conf))
    with pytest.raises(StatusError, match="reading nodes"):
        reader.nodes()


def test_cli_without_a_cluster_exits_1_with_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
    }))
    proc = subprocess.run(
        [sys.executable, "-m", "raytpu", "status", "--stack", "dev", "--json",
         "--kubeconfig", str(kubeconfig)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot read the cluster of stack 'dev' (raytpu-dev)")
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    empty = subprocess.run(
        [sys.executable, "-m", "raytpu", "status", "--stack", "dev"], cwd=REPO,
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"})
    assert empty.returncode == 1 and "no usable kubeconfig" in empty.stderr
    assert "Traceback" not in empty.stderr
    # It says what to do, in its one line: the flag, or the gcloud call for this stack.
    (line,) = empty.stderr.splitlines()
    assert line.endswith("; pass --kubeconfig FILE, or fetch credentials with `gcloud "
                         "container clusters get-credentials raytpu-dev --location us-west4-a "
                         "--project raytpu-dev --dns-endpoint`"), line


def test_plan_does_not_import_the_kubernetes_client() -> None:
    code = ("import sys; from raytpu.cli.app import app; "
            "print('kubernetes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_text_view_names_the_broken_pool_and_slice(world: Any, capsys: Any) -> None:
    from raytpu.operations.status_render import render_status

    cfg, reader = world
    render_status(fleet_status(cfg, reader), "a test")
    out = capsys.readouterr().out
    assert "pod16-1 3/4" in out and "#1 3/4" in out and "degraded" in out, out
    assert "team-a" in out and "16 / 16" in out


def test_kubeconfig_comes_from_the_stack_output_when_pulumi_is_there(tmp_path: Path) -> None:
    kubeconfig = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "s",
        "clusters": [{"name": "s", "cluster": {"server": "https://127.0.0.1:9"}}],
        "contexts": [{"name": "s", "context": {"cluster": "s", "user": "s"}}],
        "users": [{"name": "s", "user": {"token": "t"}}],
    })
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pulumi"
    # Answers only the exact call raytpu makes; anything else fails.
    fake.write_text("#!/bin/sh\n"
                    '[ "$*" = "stack output kubeconfig --show-secrets --stack dev" ] || exit 3\n'
                    f"cat <<'EOF'\n{kubeconfig}EOF\n")
    fake.chmod(0o755)
    proc = subprocess.run(
        [sys.executable, "-m", "raytpu", "status", "--stack", "dev"], cwd=REPO,
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "none"),
             "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert proc.returncode == 1
    # The stack's kubeconfig was loaded (no "no usable kubeconfig"): its server is refused.
    assert "reading nodes" in proc.stderr and "Traceback" not in proc.stderr


def test_raycluster_status_fixture_is_what_kuberay_writes(world: Any) -> None:
    folder = Path(os.environ.get("RAYTPU_KUBERAY_CRDS") or REPO / ".." / "shared" / "ref" /
                  "kuberay")
    path = folder / "ray.io_rayclusters.yaml"
    if not path.is_file():
        if os.environ.get("RAYTPU_REQUIRE_CRDS") == "1":
            pytest.fail(f"KubeRay CRD {path} missing (set RAYTPU_KUBERAY_CRDS)")
        pytest.skip(f"KubeRay CRD {path} missing (set RAYTPU_KUBERAY_CRDS)")
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    status_schema = v1["schema"]["openAPIV3Schema"]["properties"]["status"]
    _, reader = world
    rc_status = reader.ray_cluster("ray", "raytpu")["status"]
    assert set(rc_status) <= set(status_schema["properties"])
    assert list(jsonschema.Draft202012Validator(status_schema).iter_errors(rc_status)) == []


def test_ready_nodes_with_ray_pods_not_running_are_degraded(world: Any) -> None:
    # Every node of the single-host group is Ready but its Ray worker is still Pending
    # (image pull, a failed init container): the slice is not up for Ray.
    cfg, reader = world
    pods = copy.deepcopy(reader._pods)
    for p in pods:
        if p.metadata.labels.get("ray.io/group") == "single":
            p.status.phase = "Pending"
    single = {g["name"]: g for g in fleet_status(
        cfg, FakeReader(reader._nodes, pods, reader._rc))["groups"]}["single"]
    assert single["slices"]["nodes_ready"] == 1 and single["slices"]["ray_running"] == 0
    assert single["healthy"] is False


def test_a_workload_that_only_reserved_quota_is_pending_not_admitted(world: Any) -> None:
    # Kueue v1beta2: QuotaReserved=True while admission checks run; Admitted=True only once
    # they pass (kueue apis/kueue/v1beta2 workload_types.go WorkloadQuotaReserved/Admitted).
    cfg, reader = world

    class Reserved(FakeReader):
        def workloads(self, namespace: str) -> list[dict[str, Any]]:
            reserved = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                        "metadata": {"name": "checking", "namespace": namespace},
                        "status": {"conditions": [
                            {"type": "QuotaReserved", "status": "True"},
                            {"type": "Admitted", "status": "False"}]}}
            return [*super().workloads(namespace), reserved]

    (team,) = fleet_status(cfg, Reserved(reader._nodes, reader._pods, reader._rc))["teams"]
    assert team["workloads"] == {"admitted": 1, "pending": 2}


def test_the_view_is_a_pure_function_of_the_stack_and_one_snapshot(world: Any) -> None:
    """Computation apart from access: read_snapshot makes every read once, status_view needs
    nothing else (no reader), leaves the snapshot as it found it and gives the same view."""
    from raytpu.operations.status import read_snapshot, status_view

    cfg, reader = world
    calls: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(reader, name)

    snapshot = read_snapshot(cfg, Counting())
    assert sorted(calls) == ["cluster_queues", "events", "events", "kuberay_pods", "nodes",
                             "ray_cluster", "ray_clusters", "ray_pods", "workloads"]
    before = copy.deepcopy(snapshot)
    view = status_view(cfg, snapshot)
    assert snapshot == before
    assert view == status_view(cfg, before) == fleet_status(cfg, reader)
    assert json.loads(json.dumps(view)) == view  # --json prints the view model as it is
    assert not view["healthy"] and view["teams"][0]["workloads"]["admitted"] >= 0


def test_status_and_the_rehearsal_count_chips_in_use_alike() -> None:
    """One count for ``raytpu status`` and the rehearsal's ``queues[]``: the TPU totals of
    every flavor, other resources left out, an unreadable quantity read as 0 (the
    rehearsal's own copy crashed on it)."""
    from raytpu.operations.status import chips_in_use
    from raytpu.rehearse.queues import read_queues

    cq = {"metadata": {"name": "cq-speech"}, "status": {
        "conditions": [{"type": "Active", "status": "True"}],
        "admittedWorkloads": 2, "pendingWorkloads": 1,
        "flavorsUsage": [
            {"name": "v5e-16", "resources": [{"name": "google.com/tpu", "total": "16"},
                                             {"name": "cpu", "total": "96"}]},
            {"name": "v4-16", "resources": [{"name": "google.com/tpu", "total": "8"},
                                            {"name": "google.com/tpu", "total": "n/a"}]},
        ]}}

    class Api:
        def get(self, api_version: str, kind: str, name: str) -> dict[str, Any]:
            assert (kind, name) == ("ClusterQueue", "cq-speech")
            return cq

    assert chips_in_use(cq) == 24
    [queue] = read_queues(Api(), [("speech", "cq-speech")])  # type: ignore[arg-type]
    assert (queue.active, queue.admitted, queue.pending, queue.chips_in_use) == (True, 2, 1, 24)


def test_why_each_pending_pod_and_queued_job_waits(world: Any, capsys: Any) -> None:
    """The reasons reach the view, its JSON, the text and ``--job``: a Ray worker the
    scheduler refuses (a taint), a team job over quota, Kueue's reason shown first."""
    import typer
    from raytpu.cli.fleet import _one_job
    from raytpu.operations.status_render import render_status

    cfg, reader = world
    pods = copy.deepcopy(reader._pods)
    (stuck,) = [p for p in pods if p.status.phase == "Pending"]
    stuck.status.conditions = [kubernetes.client.V1PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable",
        message="0/9 nodes are available: 9 node(s) had untolerated taint "
                "{cloud.google.com/impaired: true}. preemption: 0/9 nodes are available")]
    over = ("couldn't assign flavors to pod set pod16: insufficient unused quota for "
            "google.com/tpu in flavor f, 16 more needed")

    class Queued(FakeReader):
        def workloads(self, namespace: str) -> list[dict[str, Any]]:
            out = super().workloads(namespace)
            for w in out:
                if w["metadata"]["name"] == "waiting":
                    w["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1",
                                                         "kind": "RayJob", "name": "train-1",
                                                         "uid": "u"}]
                    w["status"]["conditions"][0].update(reason="Pending", message=over)
            return out

    view = fleet_status(cfg, Queued(reader._nodes, pods, reader._rc))
    (pending,) = view["pending_pods"]
    assert pending["pod"] == f"{stuck.metadata.namespace}/{stuck.metadata.name}"
    assert pending["group"] == "pod16" and pending["why"]["source"] == "scheduler"
    assert pending["why"]["reason"].startswith(
        "a taint not tolerated {cloud.google.com/impaired: true}")
    jobs = {j["name"]: j for j in view["teams"][0]["jobs"]}
    assert set(jobs) == {"running", "train-1"}  # the finished one is gone
    assert jobs["running"]["why"] is None and jobs["running"]["state"] == "admitted"
    assert jobs["train-1"]["state"] == "queued"
    assert jobs["train-1"]["why"]["reason"] == f"over quota: {over}"
    assert view["why"] == jobs["train-1"]["why"]  # Kueue before the scheduler
    assert json.loads(json.dumps(view)) == view

    render_status(view, "a test")
    out = capsys.readouterr().out
    assert "why: over quota: couldn't assign flavors" in out.replace("\n", " ")
    assert "to act on:" in out and f"pod {pending['pod']}: a taint not tolerated" in out
    assert "fix: add a toleration for {cloud.google.com/impaired: true}" in out
    _one_job(view, "train-1", True)
    one = json.loads(capsys.readouterr().out)
    assert (one["team"], one["name"], one["why"]["source"]) == ("team-a", "train-1", "kueue")
    with pytest.raises(typer.Exit) as exit_:
        _one_job(view, "nope", False)
    assert exit_.value.exit_code == 1
    assert "--job: no unfinished job 'nope' in the teams' namespaces (team-a)" in \
        capsys.readouterr().err


def test_cli_job_flag_prints_one_jobs_why_and_exits_1_for_an_unknown_job(
        world: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """``raytpu status --job NAME [--json]`` through the CLI, the cluster read by the fake."""
    import raytpu.operations.kube as kube
    from raytpu.cli.app import app
    from typer.testing import CliRunner

    _, reader = world
    (tmp_path / "Pulumi.test.yaml").write_text(yaml.safe_dump({"config": raw_config(
        raytpu_slices=SLICES, raytpu_teams=TEAMS)}))
    gone = "ClusterQueue team-a is inactive"

    class Inactive(FakeReader):
        def workloads(self, namespace: str) -> list[dict[str, Any]]:
            out = super().workloads(namespace)
            for w in out:
                w["status"]["conditions"][0].update(reason="Inadmissible", message=gone)
            return out

        def cluster_queues(self) -> list[dict[str, Any]]:
            queues = super().cluster_queues()
            queues[1]["status"]["conditions"] = [{
                "type": "Active", "status": "False", "reason": "FlavorNotFound",
                "message": "Can't admit new workloads: references missing ResourceFlavor(s): "
                           "pod16.", "lastTransitionTime": "2026-12-03T07:00:00Z"}]
            return queues

    monkeypatch.setattr(kube, "connect", lambda *a: (None, "a test"))
    monkeypatch.setattr(kube, "KubeReader",
                        lambda _client: Inactive(reader._nodes, reader._pods, reader._rc))
    base = ["status", "--stack", "test", "--stacks-dir", str(tmp_path)]
    shown = CliRunner().invoke(app, [*base, "--job", "waiting", "--json"])
    assert shown.exit_code == 0, shown.output
    one = json.loads(shown.stdout)
    assert (one["name"], one["state"], one["why"]["object"]) == (
        "waiting", "queued", "ClusterQueue team-a")
    assert one["why"]["reason"].startswith("ClusterQueue team-a is inactive (FlavorNotFound)")
    text = CliRunner().invoke(app, [*base, "--job", "waiting"], env={"COLUMNS": "200"})
    assert text.exit_code == 0 and "job team-a/waiting (team team-a, workload waiting): " \
        "queued" in text.stdout
    assert "fix: create the ResourceFlavor(s) it names" in text.stdout
    unknown = CliRunner().invoke(app, [*base, "--job", "nope"])
    assert unknown.exit_code == 1
    assert "error: --job: no unfinished job 'nope'" in unknown.stderr
FT_CONFIG = {"gcsFaultTolerance": {"existingRedis": {"address": "10.1.2.3:6379",
                                                     "passwordSecret": "my-redis"}}}


def _ft_world(kuberay_has_ft_field: bool) -> tuple[StackConfig, FakeReader]:
    """A GCS fault-tolerant stack's RayCluster and pods as the operator leaves them: KubeRay
    1.7.0 keeps gcsFaultToleranceOptions, annotates the head and gives it the Redis address
    (common/pod.go configureGCSFaultTolerance); an operator whose CRD predates the field
    (< 1.3.0) prunes it and does neither."""
    plan = run_program("test", raw_config(raytpu_slices=[SLICES[1]], raytpu_ray=FT_CONFIG))
    (rc_res,) = plan.by_type(RAYCLUSTER)
    rc = to_manifest(rc_res)
    assert "gcsFaultToleranceOptions" in rc["spec"]
    if not kuberay_has_ft_field:
        del rc["spec"]["gcsFaultToleranceOptions"]  # what the API server's pruning does
    rc["status"] = {"state": "ready", "readyWorkerReplicas": 1, "desiredWorkerReplicas": 1}
    pods = _pods(rc)
    head = pods[0]
    head["metadata"]["annotations"] = {"ray.io/ft-enabled": str(kuberay_has_ft_field).lower()}
    if kuberay_has_ft_field:
        head["spec"]["containers"][0].setdefault("env", []).append(
            {"name": "RAY_REDIS_ADDRESS", "value": "10.1.2.3:6379"})
    nodes = _deserialize("Node", _nodes(plan, plan.config))
    return plan.config, FakeReader(nodes, _deserialize("Pod", pods), rc)


def test_status_says_when_gcs_fault_tolerance_is_not_what_runs(capsys: Any) -> None:
    from raytpu.operations.status_render import render_status

    cfg, reader = _ft_world(kuberay_has_ft_field=True)
    view = fleet_status(cfg, reader)
    assert view["gcs_fault_tolerance"] == {
        "ray_cluster_kept_options": True, "head_ft_annotation": True,
        "head_redis_address": True, "ok": True, "problems": []}
    assert view["healthy"]

    cfg, reader = _ft_world(kuberay_has_ft_field=False)
    view = fleet_status(cfg, reader)
    ft = view["gcs_fault_tolerance"]
    assert not ft["ok"] and not view["healthy"]
    assert ft["problems"] == [
        "the RayCluster has no spec.gcsFaultToleranceOptions: the operator's CRD pruned it "
        "(KubeRay older than 1.3.0?); GCS fault tolerance and resident hosts are off",
        "the head pod lacks ray.io/ft-enabled=true",
        "the head's Ray container has no RAY_REDIS_ADDRESS"]
    render_status(view, "test")
    out = " ".join(capsys.readouterr().out.split())
    assert "GCS fault tolerance: NOT on: the RayCluster has no spec.gcsFaultToleranceOptions" in out


def test_no_gcs_fault_tolerance_check_where_the_stack_has_none(world: Any) -> None:
    cfg, reader = world
    assert fleet_status(cfg, reader)["gcs_fault_tolerance"] is None


# Reads the reference data beside the checkout (../shared/ref): deselected by name where it is
# absent (-m "not ref", .github/workflows/preview.yml; docs/tests-in-ci.md).
pytestmark = pytest.mark.ref
