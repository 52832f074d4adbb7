"""The ``cluster`` tier, issue 47: ``raytpu status`` says why, on the rehearsal's real API
server, scheduler, KubeRay 1.x and Kueue v0.19.2. One kept ``prod`` rehearsal (every pool at
its ``autoscaling.max``) serves every case: each test injects one fault the way a user or a
controller would make it, reads ``raytpu status --stack prod`` (text and ``--json``) on the
rehearsal's kubeconfig until the reason shows, and undoes what it did. The tests run in file
order (pytest's default); each waits for its own state, never a fixed time.
Needs ``raytpu rehearse --build``; skips without it (conftest).

NOT YET RUN: pytest does not collect this file (its name). Written while the rehearsal's
binaries were still being built; run it with ``pytest tests/rehearse/unverified_why_cases.py``
on a built cache, and once every case has passed, rename it ``test_why.py`` (CI runs the
cluster tier with RAYTPU_REQUIRE_CLUSTER=1: a test that was never seen to pass must not be
there)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from raytpu.cli.app import app
from raytpu.plan.engine import run_plan
from raytpu.rehearse.api import Api
from raytpu.rehearse.build import Cache
from raytpu.rehearse.control_plane import stop_kept
from raytpu.rehearse.report import render
from raytpu.rehearse.run import rehearse
from raytpu.rehearse.slice_affinity import HOOK_NAME
from typer.testing import CliRunner

# Generous: the rehearsal shares 2 cores with other work; a case settles in seconds alone.
TIMEOUT = 300.0
KUEUE = "kueue.x-k8s.io/v1beta2"
VISION, SPEECH = "Group:ml-vision@example.com", "User:speech-lead@example.com"
# A digest no registry serves: images are never pulled here.
IMAGE = "registry.rehearsal.invalid/raytpu-trainer@sha256:" + "0" * 64


@dataclass(frozen=True)
class Kept:
    api: Api
    kubeconfig: str
    members: dict[str, str]


@pytest.fixture(scope="module")
def live(built_cache: Cache, ref_dir: Path) -> Iterator[Kept]:
    r = rehearse(run_plan("prod", preview=True), built_cache, crds=ref_dir, keep=True,
                 at_max=True)
    assert r.kubeconfig is not None
    folder = Path(r.kubeconfig).parent
    try:
        assert r.ok, render(r)
        kc = yaml.safe_load(Path(r.kubeconfig).read_text())
        api = Api.connect(kc["clusters"][0]["cluster"]["server"],
                          kc["clusters"][0]["cluster"]["certificate-authority"],
                          kc["users"][0]["user"]["token"])
        yield Kept(api, r.kubeconfig, r.member_kubeconfigs)
    finally:
        stop_kept(folder)


# -- reading what a user reads ------------------------------------------------------------


def _flat(text: str) -> str:
    """Text without whitespace: the console wraps long reasons where it likes."""
    return "".join(text.split())


def _status(kc: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["status", "--stack", "prod", "--kubeconfig", kc, *args])
    return result.exit_code, result.stdout


def _until(kc: str, args: tuple[str, ...], found: Callable[[dict[str, Any]], Any],
           timeout: float = TIMEOUT) -> tuple[dict[str, Any], Any]:
    """``raytpu status ... --json`` read again until ``found(doc)`` is truthy: (doc, value)."""
    deadline = time.monotonic() + timeout
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        code, out = _status(kc, *args, "--json")
        if code == 0:
            doc = json.loads(out)
            value = found(doc)
            if value:
                return doc, value
        time.sleep(1)
    raise AssertionError(f"status {' '.join(args)} never showed it: {json.dumps(doc)[:4000]}")


def _job_why(kc: str, job: str, starts: str) -> dict[str, Any]:
    """``--job JOB --json`` once its ``why.reason`` starts with ``starts``."""
    def found(doc: dict[str, Any]) -> Any:
        why = doc.get("why") or {}
        return why if str(why.get("reason", "")).startswith(starts) else None

    return _until(kc, ("--job", job), found)[1]  # type: ignore[no-any-return]


def _text_has(kc: str, args: tuple[str, ...], *words: str) -> str:
    code, out = _status(kc, *args)
    assert code == 0, out
    print(f"$ raytpu status --stack prod {' '.join(args)}\n{out}")  # seen with pytest -s
    for w in words:
        assert _flat(w) in _flat(out), (w, out)
    return out


def _pending_why(group: str, starts: str) -> Callable[[dict[str, Any]], Any]:
    def found(doc: dict[str, Any]) -> Any:
        for p in doc.get("pending_pods") or []:
            why = p.get("why") or {}
            if p.get("group") == group and str(why.get("reason", "")).startswith(starts):
                return p
        return None
    return found


# -- changing the cluster as a user or a controller would ----------------------------------


def _submit(kc: str, team: str, slices: int, run_name: str) -> None:
    result = CliRunner().invoke(app, [
        "submit", "--stack", "prod", "--team", team, "--slices", str(slices),
        "--run-name", run_name, "--image", IMAGE, "--kubeconfig", kc])
    assert result.exit_code == 0, result.output


def _workloads(api: Api, ns: str) -> list[dict[str, Any]]:
    return api.list_items(KUEUE, "Workload", ns)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c["type"] == kind), {})


def _wait(what: str, ok: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ok()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"never: {what}")


def _admitted(api: Api, ns: str, job: str) -> None:
    def ok() -> bool:
        return any(_condition(w, "Admitted").get("status") == "True"
                   and any(o["name"] == job for o in w["metadata"].get("ownerReferences", []))
                   for w in _workloads(api, ns))
    _wait(f"{ns}/{job} admitted", ok)


def _delete_jobs(api: Api, ns: str) -> None:
    """Every RayJob of ``ns`` deleted, and their Workloads gone (the quota is free again)."""
    for j in api.list_items("ray.io/v1", "RayJob", ns):
        api.delete("ray.io/v1", "RayJob", j["metadata"]["name"], ns)
    _wait(f"no Workload left in {ns}", lambda: not _workloads(api, ns))


def _delete_pods(api: Api, pods: list[dict[str, Any]]) -> None:
    for p in pods:  # at once, as a node's loss would (a 404 for one already gone is fine)
        meta = p["metadata"]
        api.session.delete(f"{api.server}/api/v1/namespaces/{meta['namespace']}/pods/"
                           f"{meta['name']}", json={"gracePeriodSeconds": 0}, timeout=30)


def _pods(api: Api, group: str, cluster: str = "raytpu", ns: str = "ray"
          ) -> list[dict[str, Any]]:
    return [p for p in api.list_items("v1", "Pod", ns)
            if p["metadata"].get("labels", {}).get("ray.io/cluster") == cluster
            and p["metadata"]["labels"].get("ray.io/group") == group]


def _running(api: Api, group: str, n: int) -> bool:
    pods = _pods(api, group)
    return len(pods) == n and all(
        (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp") for p in pods)


def _shared(api: Api) -> dict[str, Any]:
    return api.get("ray.io/v1", "RayCluster", "raytpu", "ray")


def _set_group(api: Api, group: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The shared RayCluster's worker group ``group`` changed by ``change`` (as `kubectl
    edit` would); returns the group as it was."""
    spec = _shared(api)["spec"]
    groups = copy.deepcopy(spec["workerGroupSpecs"])
    (mine,) = [g for g in groups if g["groupName"] == group]
    before = copy.deepcopy(mine)
    change(mine)
    api.merge_patch("ray.io/v1", "RayCluster", "raytpu", {"spec": {"workerGroupSpecs": groups}},
                    "ray")
    return before


def _restore_group(api: Api, before: dict[str, Any]) -> None:
    _set_group(api, before["groupName"], lambda g: (g.clear(), g.update(before)))


# -- Kueue ----------------------------------------------------------------------------------


def test_over_quota_the_second_speech_job_waits_with_kueues_words(live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    try:
        _submit(live.members[SPEECH], "speech", 2, "speech-a")
        _admitted(api, "speech", "speech-a")
        # speech: 2 slices nominal, 1 borrowable, the 2 held: 2 more do not fit.
        _submit(live.members[SPEECH], "speech", 2, "speech-b")
        why = _job_why(kc, "speech-b", "over quota: ")
        assert why["source"] == "kueue" and why["object"].startswith("Workload speech/")
        assert "insufficient unused quota for google.com/tpu" in why["reason"], why
        assert "ClusterQueue speech: 32 in use, nominal 32 chips, borrowing limit 16" \
            in why["fix"], why
        print(_status(kc, "--job", "speech-b", "--json")[1])
        _text_has(kc, ("--job", "speech-b"), "): queued", f"why: {why['reason']}",
                  "fix: wait for the team's running jobs")
        doc, job = _until(kc, (), lambda d: next(
            (j for t in d["teams"] for j in t["jobs"] if j["name"] == "speech-b"), None))
        assert job["state"] == "queued" and job["why"] == why
        assert doc["why"]["source"] == "kueue"
    finally:
        _delete_jobs(api, "speech")


def test_a_cluster_queue_inactive_through_a_missing_flavor_is_the_jobs_reason(
        live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    cq = api.get(KUEUE, "ClusterQueue", "speech")
    groups = copy.deepcopy(cq["spec"]["resourceGroups"])
    broken = copy.deepcopy(groups)
    tpu = [f for g in broken for f in g["flavors"]
           if any(r["name"] == "google.com/tpu" for r in f["resources"])]
    assert tpu
    for f in tpu:
        f["name"] = "v5e-16-gone"  # a flavor no ResourceFlavor has
    try:
        api.merge_patch(KUEUE, "ClusterQueue", "speech", {"spec": {"resourceGroups": broken}})
        _submit(live.members[SPEECH], "speech", 1, "speech-inactive")
        why = _job_why(kc, "speech-inactive", "ClusterQueue speech is inactive (FlavorNotFound)")
        assert why["source"] == "kueue" and why["object"] == "ClusterQueue speech"
        assert "v5e-16-gone" in why["reason"], why
        assert why["fix"].startswith("create the ResourceFlavor(s) it names")
        _text_has(kc, ("--job", "speech-inactive"), "): queued", f"why: {why['reason']}",
                  "fix: create the ResourceFlavor(s) it names")
    finally:
        api.merge_patch(KUEUE, "ClusterQueue", "speech", {"spec": {"resourceGroups": groups}})
        _delete_jobs(api, "speech")


def test_an_admission_check_that_never_turns_ready_holds_the_reserved_job(
        live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    # An external controller (a capacity check) that marks its AdmissionCheck Active but
    # never sets a Workload's check Ready: the test plays that controller.
    api.create({"apiVersion": KUEUE, "kind": "AdmissionCheck",
                "metadata": {"name": "capacity"},
                "spec": {"controllerName": "example.com/capacity"}})
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.session.patch(
        f"{api.server}{api.path(KUEUE, 'AdmissionCheck', None, 'capacity')}/status",
        data=json.dumps({"status": {"conditions": [{
            "type": "Active", "status": "True", "reason": "Active", "message": "serving",
            "lastTransitionTime": now, "observedGeneration": 1}]}}),
        headers={"Content-Type": "application/merge-patch+json"}, timeout=30
    ).raise_for_status()
    try:
        api.merge_patch(KUEUE, "ClusterQueue", "vision", {"spec": {"admissionChecksStrategy": {
            "admissionChecks": [{"name": "capacity"}]}}})
        _wait("ClusterQueue vision active with its check", lambda: _condition(
            api.get(KUEUE, "ClusterQueue", "vision"), "Active").get("status") == "True")
        _submit(live.members[VISION], "vision", 1, "vision-checked")
        why = _job_why(kc, "vision-checked", "quota reserved; admission check capacity is "
                       "Pending")
        assert why["source"] == "kueue" and why["object"].startswith("Workload vision/")
        assert why["fix"].startswith("the controller of capacity has not marked it Ready")
        _text_has(kc, ("--job", "vision-checked"), "): quota reserved",
                  f"why: {why['reason']}", "fix: the controller of capacity")
    finally:
        _delete_jobs(api, "vision")
        api.merge_patch(KUEUE, "ClusterQueue", "vision",
                        {"spec": {"admissionChecksStrategy": None}})
        api.delete(KUEUE, "AdmissionCheck", "capacity")


# -- the scheduler and the autoscaler --------------------------------------------------------


def test_the_elastic_group_at_its_max_while_vision_borrows_speechs_quota(live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    before = None
    try:
        # vision: 2 slices of its own, 2 borrowed from speech's idle quota.
        _submit(live.members[VISION], "vision", 2, "vision-own")
        _admitted(api, "vision", "vision-own")
        _submit(live.members[VISION], "vision", 2, "vision-borrowed")
        _admitted(api, "vision", "vision-borrowed")
        # The shared RayCluster asks for two more slices: 1 + 4 + 2 > the 6 pools.
        before = _set_group(api, "v5e-16", lambda g: g.update(replicas=3, maxReplicas=3))
        doc, pod = _until(kc, (), _pending_why("v5e-16", "too few google.com/tpu: "))
        why = pod["why"]
        assert why["source"] == "scheduler" and why["object"].startswith("Pod ray/raytpu-")
        assert "group v5e-16 is at its autoscaling.max (6 slices), all taken" in why["reason"]
        assert "Insufficient google.com/tpu" in why["reason"], why
        assert why["fix"].startswith("raise raytpu:slices[v5e-16].autoscaling.max")
        (vision,) = [t for t in doc["teams"] if t["name"] == "vision"]
        assert vision["cluster_queue"]["tpu_chips"] == {"used": 64, "nominal": 32}
        _text_has(kc, (), "is at its autoscaling.max (6 slices), all taken",
                  "fix: raise raytpu:slices[v5e-16].autoscaling.max", "vision", "64 / 32")
    finally:
        _delete_jobs(api, "vision")
        if before is not None:
            # KubeRay leaves an autoscaled group's extra pods to the Ray autoscaler (none
            # runs here): the group's pods are recreated at its size.
            _restore_group(api, before)
            _delete_pods(api, _pods(api, "v5e-16"))
            _wait("v5e-16 back to 1 slice Running", lambda: _running(api, "v5e-16", 4))


# -- the shared RayCluster's fixed eval group ------------------------------------------------


def _eval_restored(api: Api, before: dict[str, Any]) -> None:
    """The eval group as it was, its 2 hosts recreated and Running."""
    _restore_group(api, before)
    _delete_pods(api, [p for p in _pods(api, "v5e-8-eval")
                       if (p.get("status") or {}).get("phase") != "Running"
                       or p["spec"].get("hostNetwork")])
    _wait("eval group back to 2 Running hosts", lambda: _running(api, "v5e-8-eval", 2))


def test_a_pod_security_refusal_of_the_pods_kuberay_creates(live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    _wait("eval group Running", lambda: _running(api, "v5e-8-eval", 2))
    # hostNetwork: a common TPU tuning that the namespace's `restricted` level refuses.
    before = _set_group(api, "v5e-8-eval",
                        lambda g: g["template"]["spec"].update(hostNetwork=True))
    try:
        _delete_pods(api, _pods(api, "v5e-8-eval"))

        def refused(doc: dict[str, Any]) -> Any:
            why = doc["ray_cluster"].get("why") or {}
            return why if why.get("source") == "kuberay" else None

        _, why = _until(kc, (), refused)
        assert why["object"] == "RayCluster ray/raytpu"
        assert why["reason"].startswith("KubeRay cannot create pods ("), why
        assert "of group v5e-8-eval): FailedToCreateWorkerPod: " in why["reason"], why
        assert 'violates PodSecurity "restricted:latest"' in why["reason"], why
        assert "hostNetwork=true" in why["reason"], why
        assert why["fix"].startswith("the namespace's Pod Security level refuses the pod")
        _text_has(kc, (), "KubeRay cannot create pods", "violates PodSecurity",
                  "fix: the namespace's Pod Security level refuses the pod")
    finally:
        _eval_restored(api, before)


def test_a_worker_group_whose_selector_matches_no_pool(live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    before = _set_group(api, "v5e-8-eval", lambda g: g["template"]["spec"].setdefault(
        "nodeSelector", {}).update({"cloud.google.com/gke-nodepool": "v5e-8-evl-0"}))
    try:
        _delete_pods(api, _pods(api, "v5e-8-eval"))
        _, pod = _until(kc, (), _pending_why("v5e-8-eval",
                                             "no node matches its node selector ("))
        why = pod["why"]
        assert why["source"] == "scheduler" and why["object"].startswith("Pod ray/raytpu-")
        assert "cloud.google.com/gke-nodepool=v5e-8-evl-0" in why["reason"], why
        assert why["fix"].startswith("the selector names no node pool of the cluster")
        _text_has(kc, (), "no node matches its node selector (",
                  "cloud.google.com/gke-nodepool=v5e-8-evl-0",
                  "fix: the selector names no node pool of the cluster")
    finally:
        _eval_restored(api, before)


def test_too_few_tpus_a_second_eval_slice_on_its_one_pool(live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    before = _set_group(api, "v5e-8-eval", lambda g: g.update(replicas=2, maxReplicas=2))
    try:
        _, pod = _until(kc, (), _pending_why("v5e-8-eval", "too few google.com/tpu: "))
        why = pod["why"]
        assert why["source"] == "scheduler"
        assert "group v5e-8-eval's 1 slice(s) are taken" in why["reason"], why
        assert "Insufficient google.com/tpu" in why["reason"], why
        assert why["fix"] == ("wait for a slice to free, or raise the group's count in "
                              "raytpu:slices")
        _text_has(kc, (), "too few google.com/tpu: group v5e-8-eval's 1 slice(s) are taken",
                  "fix: wait for a slice to free")
    finally:
        _eval_restored(api, before)


# -- the TPU webhook (last: it leaves the slice-affinity hook off) ---------------------------


def test_a_slice_split_across_pools_when_the_webhook_is_off(live: Kept) -> None:
    kc, api = live.kubeconfig, live.api
    api.delete("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", HOOK_NAME)
    # Room for the slice's 4 hosts only on 2 nodes of each of 2 pools.
    nodes = [n for n in api.list_items("v1", "Node")
             if n["metadata"]["labels"].get("cloud.google.com/gke-nodepool", "")
             .startswith("v5e-16-")]
    keep = {p: sorted(n["metadata"]["name"] for n in nodes
                      if n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] == p)[:2]
            for p in ("v5e-16-4", "v5e-16-5")}
    free = {n for names in keep.values() for n in names}
    for n in nodes:
        if n["metadata"]["name"] not in free:
            api.merge_patch("v1", "Node", n["metadata"]["name"], {"spec": {"unschedulable": True}})
    _set_group(api, "v5e-16", lambda g: g.update(replicas=1))
    _delete_pods(api, _pods(api, "v5e-16"))

    split = "broken slice: its 4 hosts sit on different node pools: v5e-16-4 (2), v5e-16-5 (2)"

    def broken(doc: dict[str, Any]) -> Any:  # once all 4 hosts are bound
        (g,) = [g for g in doc["groups"] if g["name"] == "v5e-16"]
        return next((r["why"] for r in g["ray_slices"]
                     if (r.get("why") or {}).get("reason") == split), None)

    doc, why = _until(kc, (), broken)
    assert why["source"] == "tpu-webhook"
    assert why["object"].startswith("RayCluster ray/raytpu group v5e-16 slice #")
    assert why["fix"].startswith("a multi-host slice is one pool")
    assert doc["healthy"] is False
    _text_has(kc, (), "): degraded", split, "fix: a multi-host slice is one pool")
