"""What the rehearsal computes before and after the control plane, without binaries: the
objects it applies, the slices it reports, and bad input refused before anything starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from raytpu.cli.app import app
from raytpu.plan.engine import run_plan
from raytpu.plan.values import join_path
from raytpu.rehearse.objects import (
    PLACEHOLDER,
    PLACEHOLDER_IMAGE,
    CrdsNotFound,
    crd_folder,
    stack_crds,
    stack_objects,
)
from raytpu.rehearse.observe import Expected, PodOutcome, slices_of
from typer.testing import CliRunner


def test_values_known_after_up_are_visible_placeholders_never_a_digest() -> None:
    objs, placeholders = stack_objects(run_plan("dev", preview=True))
    (cluster,) = [o for o in objs if o["kind"] == "RayCluster"]
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["image"] == PLACEHOLDER_IMAGE
    assert "@sha256:" not in json.dumps(cluster)
    assert {p.path for p in placeholders if p.kind == "RayCluster"} >= {
        "spec.headGroupSpec.template.spec.containers[0].image"}
    assert objs[0]["kind"] == "Namespace"


def test_a_secret_whose_value_is_known_after_up_keeps_its_keys() -> None:
    # Prod's GCS Redis auth string is Memorystore's output: only the value is a placeholder,
    # so the API server gets a map (a whole-map placeholder is refused: "expected map").
    objs, placeholders = stack_objects(run_plan("prod", preview=True))
    (secret,) = [o for o in objs if o["kind"] == "Secret"
                 and o["metadata"]["name"] == "raytpu-gcs-redis"]
    assert isinstance(secret["stringData"], dict)
    assert list(secret["stringData"].values()) == [PLACEHOLDER]
    assert [p.path for p in placeholders if p.kind == "Secret"] == [
        join_path("stringData", k) for k in secret["stringData"]]


def test_crds_follow_the_groups_the_stack_uses(ref_dir: Path) -> None:
    dev, _ = stack_objects(run_plan("dev", preview=True))
    prod, _ = stack_objects(run_plan("prod", preview=True))
    dev_groups = {c["spec"]["group"] for c in stack_crds(dev, ref_dir)}
    prod_groups = {c["spec"]["group"] for c in stack_crds(prod, ref_dir)}
    assert "kueue.x-k8s.io" not in dev_groups and "ray.io" in dev_groups
    assert {"ray.io", "kueue.x-k8s.io", "monitoring.googleapis.com"} <= prod_groups


def test_missing_crd_folder_says_how_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(CrdsNotFound, match=r"--crds DIR or \$RAYTPU_CRDS"):
        crd_folder(tmp_path / "nowhere")


def _pod(name: str, pool: str | None) -> PodOutcome:
    return PodOutcome("ray", name, "v5e-16", f"{pool}-host" if pool else None, pool,
                      "Running" if pool else "Pending", "")


def test_a_replica_whose_hosts_straddle_pools_is_not_bound() -> None:
    expected = [Expected("ray", "raytpu", {"headgroup": (1, 1), "v5e-16": (1, 4)})]
    pods = [_pod("a", "p0"), _pod("b", "p0"), _pod("c", "p1"), _pod("d", "p1")]
    labels = {p.name: {"ray.io/cluster": "raytpu"} for p in pods}
    slices = slices_of(expected, pods, labels)
    assert [(s.pool, s.hosts, s.bound) for s in slices] == [("p0", 2, False), ("p1", 2, False)]
    whole = [_pod(n, "p0") for n in "abcd"]
    (one,) = slices_of(expected, whole, labels)
    assert one.bound and one.pool == "p0" and one.hosts == one.expected_hosts == 4


def test_replica_labels_when_kuberay_sets_them() -> None:
    expected = [Expected("ray", "raytpu", {"v5e-16": (2, 2)})]
    pods = [_pod("a", "p0"), _pod("b", "p1"), _pod("c", "p1"), _pod("d", "p0")]
    replica = {"a": "r0", "b": "r0", "c": "r1", "d": "r1"}
    labels = {n: {"ray.io/cluster": "raytpu", "ray.io/worker-group-replica-name": r}
              for n, r in replica.items()}
    slices = slices_of(expected, pods, labels)
    assert [(s.replica, s.pool, s.bound) for s in slices] == [("r0", None, False),
                                                              ("r1", None, False)]


def test_bad_stack_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    empty = tmp_path / "cache"
    result = CliRunner().invoke(app, ["rehearse", "--stack", "nosuch", "--cache-dir",
                                      str(empty)])
    assert result.exit_code == 2
    assert "nosuch" in result.output
    assert not empty.exists()  # nothing built, nothing started


def test_bad_timeout_names_the_flag_and_value() -> None:
    result = CliRunner().invoke(app, ["rehearse", "--stack", "dev", "--timeout", "0"])
    assert result.exit_code == 2
    assert "--timeout: 0.0" in result.output


def test_neither_build_nor_stack_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["rehearse"])
    assert result.exit_code == 2


def test_stop_refuses_a_folder_that_is_not_a_kept_rehearsal(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["rehearse", "--stop", str(tmp_path)])
    assert result.exit_code == 2
    assert f"--stop: {tmp_path} is not a kept rehearsal" in result.output
    assert tmp_path.exists()


def test_slice_affinity_counts_pods_into_replicas_of_num_of_hosts() -> None:
    from raytpu.rehearse.slice_affinity import REPLICA_LABEL, SliceAffinity, replica_value

    hook = SliceAffinity(lambda ns, cluster, group: {"v5e-16": 4}.get(group, 1))

    def worker(group: str, affinity: dict[str, Any] | None = None) -> dict[str, Any]:
        labels = {"ray.io/cluster": "raytpu", "ray.io/group": group,
                  "ray.io/node-type": "worker"}
        return {"metadata": {"labels": labels},
                "spec": {} if affinity is None else {"affinity": affinity}}

    replicas = []
    for _ in range(8):
        (label, _, together, apart) = hook.patch("ray", worker("v5e-16"))
        replicas.append(label["value"])
        required = "requiredDuringSchedulingIgnoredDuringExecution"
        (term,) = together["value"][required]
        assert term["topologyKey"] == "cloud.google.com/gke-nodepool"
        assert term["labelSelector"]["matchExpressions"][0]["values"] == [label["value"]]
        (away,) = apart["value"][required]
        assert away["namespaceSelector"] == {}  # no other replica, from any namespace
        assert away["labelSelector"]["matchExpressions"][1] == {
            "key": REPLICA_LABEL, "operator": "NotIn", "values": [label["value"]]}
        assert label["path"] == f"/metadata/labels/{REPLICA_LABEL}"
    assert replicas == ["ray.raytpu.v5e-16.0"] * 4 + ["ray.raytpu.v5e-16.1"] * 4
    assert hook.patch("ray", worker("v5e-4")) == []  # single-host: nothing to keep together
    head = worker("headgroup")
    head["metadata"]["labels"]["ray.io/node-type"] = "head"
    assert hook.patch("ray", head) == []
    # A pod that already has node affinity keeps it; the pod affinity is added beside it.
    ops = hook.patch("ray", worker("v5e-16", {"nodeAffinity": {}}))
    assert [op["path"] for op in ops[1:]] == ["/spec/affinity/podAffinity",
                                              "/spec/affinity/podAntiAffinity"]
    assert len(replica_value("n" * 30, "c" * 30, "g" * 30, 7)) <= 63
