"""The ``cluster`` tier: each shipped stack brought up on the real control plane (etcd,
kube-apiserver, KCM, scheduler, KWOK, KubeRay 1.5.0) by ``raytpu.rehearse.run``, and the
ways it must fail. Needs ``raytpu rehearse --build``; skips without it (conftest)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raytpu.cli.app import app
from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.plan.engine import run_plan
from raytpu.rehearse.api import Api
from raytpu.rehearse.build import Cache
from raytpu.rehearse.control_plane import running, stop_kept
from raytpu.rehearse.report import render, to_dict
from raytpu.rehearse.run import Rehearsal, rehearse
from raytpu.rehearse.slice_affinity import HOOK_NAME, REPLICA_LABEL
from typer.testing import CliRunner

Edit = Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]
RESTRICTED = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def run(built_cache: Cache, ref_dir: Path) -> Callable[..., Rehearsal]:
    def _run(stack: str, edit: Edit | None = None, **kwargs: Any) -> Rehearsal:
        return rehearse(run_plan(stack, preview=True), built_cache, crds=ref_dir, edit=edit,
                        **kwargs)
    return _run


def _cluster(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (cluster,) = [o for o in objs if o["kind"] == "RayCluster"]
    return cluster


def _group(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (group,) = [g for g in _cluster(objs)["spec"]["workerGroupSpecs"]
                if g["groupName"] == name]
    return group


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_stack_comes_up_every_object_admitted_every_ray_pod_on_its_own_pool(
        run: Callable[..., Rehearsal], stack: str) -> None:
    r = run(stack)
    assert [o for o in r.objects if not o.admitted] == []
    assert r.missing_pods == []
    assert r.pods and all(p.node is not None and p.phase == "Running" for p in r.pods), \
        render(r)
    plan_objs = {o.name for o in r.objects}
    assert "raytpu" in plan_objs
    by_group = {p.group for p in r.pods}
    for pod in r.pods:
        # The head on the system pool, each worker group on a pool of its own name.
        if pod.group == "headgroup":
            assert pod.pool == "system"
        else:
            assert pod.pool is not None and pod.pool.startswith(pod.group), pod
    assert all(s.bound and s.hosts == s.expected_hosts for s in r.slices)
    assert r.ok and r.settled
    if stack == "staging":
        assert by_group == {"headgroup", "v4-16"}
        assert [(s.group, s.hosts) for s in r.slices] == [("v4-16", 2)]
    doc = to_dict(r)
    assert doc["versions"]["ray-operator"] == "1.5.0"
    assert doc["versions"]["kuberay-stacks"] == "1.7.0"
    assert any("1.5.0" in c for c in doc["caveats"])
    assert {"kind", "namespace", "name", "admitted", "message"} == set(doc["objects"][0])
    assert {"namespace", "name", "group", "node", "pool", "phase", "reason"} == \
        set(doc["pods"][0])


def test_pod_security_admission_enforces_the_ray_namespace_on_kuberays_pods(
        run: Callable[..., Rehearsal]) -> None:
    def privileged_workers(objs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        (ns,) = [o for o in objs if o["kind"] == "Namespace" and o["metadata"]["name"] == "ray"]
        assert ns["metadata"]["labels"][RESTRICTED] == "restricted"
        container = _group(objs, "v5e-4")["template"]["spec"]["containers"][0]
        container["securityContext"] = {**container.get("securityContext", {}),
                                        "privileged": True, "allowPrivilegeEscalation": True}

    r = run("dev", privileged_workers, settle_timeout=15)
    assert all(o.admitted for o in r.objects)  # the RayCluster itself is fine
    assert {p.group for p in r.pods} == {"headgroup"}  # PSA refused the worker pod
    (missing,) = r.missing_pods
    assert "violates PodSecurity" in missing and "restricted" in missing, missing
    assert not r.ok


def test_failures_are_named_head_too_big_no_pool_matches_missing_pool_refused_object(
        run: Callable[..., Rehearsal]) -> None:
    def break_it(objs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        head = _cluster(objs)["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        head["resources"] = {"requests": {"cpu": "64", "memory": "8Gi"},
                             "limits": {"cpu": "64", "memory": "8Gi"}}
        selector = _group(objs, "v5e-8-eval")["template"]["spec"]["nodeSelector"]
        selector["cloud.google.com/gke-tpu-topology"] = "8x8"
        nodes[:] = [n for n in nodes
                    if n["metadata"]["labels"][NODEPOOL_LABEL] != "v5e-16-0"]
        (ns,) = [o for o in objs if o["kind"] == "Namespace"
                 and o["metadata"]["name"] == "kueue-system"]
        ns["metadata"].setdefault("labels", {})["not a label key!"] = "x"

    r = run("prod", break_it, settle_timeout=20)
    assert not r.ok
    refused = [o for o in r.objects if not o.admitted]
    assert [(o.kind, o.name) for o in refused] == [("Namespace", "kueue-system")]
    assert "not a label key!" in refused[0].message
    pods = {p.group: p for p in r.pods}
    assert pods["headgroup"].node is None and "Insufficient cpu" in pods["headgroup"].reason
    for group in ("v5e-8-eval", "v5e-16"):  # no pool matches / the pool has no nodes
        stuck = [p for p in r.pods if p.group == group]
        assert stuck and all(p.node is None for p in stuck)
        assert all("didn't match Pod's node affinity/selector" in p.reason for p in stuck)
    text = render(r)
    assert f"{pods['headgroup'].name} [headgroup]: PENDING" in text
    assert text.splitlines()[-1].startswith("FAILED: prod:")


def test_at_max_every_slice_of_a_group_sits_on_a_pool_of_its_own(
        run: Callable[..., Rehearsal]) -> None:
    pools: set[str] = set()

    def every_slice(objs: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        # As many replicas as v5e-16 has pools (more than the shared cluster's own share).
        pools.update(n["metadata"]["labels"][NODEPOOL_LABEL] for n in nodes
                     if n["metadata"]["labels"][NODEPOOL_LABEL].startswith("v5e-16-"))
        group = _group(objs, "v5e-16")
        group["replicas"] = group["maxReplicas"] = len(pools)

    r = run("prod", every_slice, at_max=True)
    slices = [s for s in r.slices if s.group == "v5e-16"]
    assert len(pools) == 6 and len(slices) == 6, render(r)
    assert all(s.bound and s.hosts == 4 for s in slices), render(r)
    assert {s.pool for s in slices} == pools  # six replicas, six pools, none shared
    assert r.ok


def test_kept_rehearsal_answers_on_its_kubeconfig_until_stopped(
        run: Callable[..., Rehearsal]) -> None:
    import yaml

    r = run("dev", keep=True)
    assert r.kubeconfig is not None
    folder = Path(r.kubeconfig).parent
    try:
        kc = yaml.safe_load(Path(r.kubeconfig).read_text())
        api = Api.connect(kc["clusters"][0]["cluster"]["server"],
                          kc["clusters"][0]["cluster"]["certificate-authority"],
                          kc["users"][0]["user"]["token"])
        names = {n["metadata"]["name"] for n in api.list_items("v1", "Namespace")}
        assert "ray" in names
        # The slice-affinity hook outlives the command with the kept cluster: a worker pod
        # of a 2-host group created now still gets its replica and pool affinity.
        hooks = api.list_items("admissionregistration.k8s.io/v1",
                               "MutatingWebhookConfiguration")
        assert [h for h in hooks if h["metadata"]["name"] == HOOK_NAME]
        (rc,) = api.list_items("ray.io/v1", "RayCluster", "ray")
        spec = copy.deepcopy(rc["spec"])
        worker = spec["workerGroupSpecs"][0]
        worker.update(numOfHosts=2, replicas=0, minReplicas=0)
        api.create({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                    "metadata": {"name": "probe", "namespace": "ray"}, "spec": spec})
        labels = {"ray.io/node-type": "worker", "ray.io/cluster": "probe",
                  "ray.io/group": worker["groupName"]}
        pod = api.create({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "probe-worker", "namespace": "ray",
                                       "labels": labels},
                          "spec": worker["template"]["spec"]}, dry_run=True)
        assert pod["metadata"]["labels"][REPLICA_LABEL] == f"ray.probe.{worker['groupName']}.0"
        assert pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnored"
                                                      "DuringExecution"]
    finally:
        pids = [int(p) for p in (folder / "pids").read_text().split()]
        result = CliRunner().invoke(app, ["rehearse", "--stop", r.kubeconfig])
        assert result.exit_code == 0, result.output
        if folder.exists():  # the command failed: still leave nothing running
            stop_kept(folder)
    assert not folder.exists()
    assert not [pid for pid in pids if running(pid)]


def test_unkept_rehearsal_leaves_nothing_behind(run: Callable[..., Rehearsal]) -> None:
    r = run("dev")
    assert r.folder and not Path(r.folder).exists()
    assert len(r.pids) == 7  # etcd, apiserver, KCM, scheduler, KWOK, slice hook, ray-operator
    assert not [pid for pid in r.pids if running(pid)]


def test_cli_json_is_one_object_and_exit_0(built_cache: Cache, ref_dir: Path) -> None:
    result = CliRunner().invoke(app, ["rehearse", "--stack", "staging", "--json",
                                      "--crds", str(ref_dir), "--cache-dir",
                                      str(built_cache.root)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert {"ok", "versions", "caveats", "seconds", "objects", "pods", "slices"} <= set(doc)
