"""The operator layer: chart coordinates, install order, CRD handling, both modes.

What a mocked run can prove about the two traps (the rest needs a real `pulumi preview`):
1. first preview: the operator is a ``helm.v4.Chart`` (its CRDs become Pulumi resources the
   provider knows at preview), CRDs are not skipped, the RayCluster depends on that chart;
2. version bump: the operator chart's version input changes (same resource, so an update of
   the chart -- and with it of its CRD children -- not a replacement).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from pod_security import restricted_problems
from ray_support import CHART, RAYCLUSTER, SAMPLES, plan_ray
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config
from raytpu.facts import versions
from raytpu.plan.engine import PlanResult
from raytpu.spec.kuberay_operator import WEBHOOK_NAMESPACE, KubeRayOperatorArgs, chart_refs

NAMESPACE = "kubernetes:core/v1:Namespace"


def _charts(plan: PlanResult) -> dict[str, Any]:
    return {r.inputs["name"]: r for r in plan.by_type(CHART)}


def test_helm_mode_installs_the_three_pinned_charts(sample_plans: dict[str, PlanResult]) -> None:
    charts = _charts(sample_plans["v4-fixed"])
    assert list(charts) == ["cert-manager", "kuberay-operator", "kuberay-tpu-webhook"]
    cm, op, wh = (charts[k].inputs for k in charts)
    assert (cm["chart"], cm["version"], cm["repositoryOpts"]) == (
        "cert-manager", versions.CHARTS["cert-manager"].version,
        {"repo": "https://charts.jetstack.io"})
    assert cm["values"]["crds"]["enabled"] is True
    assert (op["chart"], op["version"], op["repositoryOpts"], op["namespace"]) == (
        "kuberay-operator", versions.KUBERAY_VERSION,
        {"repo": "https://ray-project.github.io/kuberay-helm/"}, "kuberay-system")
    assert op["values"]["image"]["tag"] == f"v{versions.KUBERAY_VERSION}"
    assert (wh["chart"], wh["version"], wh["namespace"]) == (
        "oci://us-docker.pkg.dev/ai-on-gke/kuberay-tpu-webhook-helm/kuberay-tpu-webhook",
        versions.CHARTS["kuberay-tpu-webhook"].version, WEBHOOK_NAMESPACE)
    assert "repositoryOpts" not in wh  # an OCI chart is a full reference


def test_no_chart_skips_its_crds_and_nothing_uses_an_opaque_release(
    sample_plans: dict[str, PlanResult],
) -> None:
    plan = sample_plans["v4-fixed"]
    assert all(c.inputs["skipCrds"] is False for c in plan.by_type(CHART))
    assert plan.by_type("kubernetes:helm.sh/v3:Release") == []  # CRDs invisible at preview


def test_install_order_cert_manager_then_operator_then_webhook_then_raycluster(
    sample_plans: dict[str, PlanResult],
) -> None:
    plan = sample_plans["v4-fixed"]
    by_name = {r.name: r for r in plan.resources}
    charts = {r.inputs["name"]: r.name for r in plan.by_type(CHART)}

    def deps(name: str) -> set[str]:  # dependsOn holds URNs; these names are unique here
        return {u.rsplit("::", 1)[-1] for u in by_name[name].options.get("dependsOn", [])}

    assert charts["cert-manager"] in deps(charts["kuberay-operator"])
    assert charts["kuberay-operator"] in deps(charts["kuberay-tpu-webhook"])
    (rc,) = plan.by_type(RAYCLUSTER)
    # CRDs (operator chart) known before the RayCluster; webhook serving before any Ray pod.
    assert {charts["kuberay-operator"], charts["kuberay-tpu-webhook"]} <= deps(rc.name)
    (k8s,) = plan.by_type("pulumi:providers:kubernetes")
    assert all(by_name[c].options.get("provider") == k8s.urn for c in charts.values())
    assert rc.options.get("provider") == k8s.urn


def test_namespaces_created_except_the_one_the_webhook_chart_owns(
    sample_plans: dict[str, PlanResult],
) -> None:
    plan = sample_plans["v4-fixed"]
    names = sorted(r.inputs["metadata"]["name"] for r in plan.by_type(NAMESPACE))
    assert names == ["cert-manager", "kuberay-system", "ray"]
    assert WEBHOOK_NAMESPACE not in names
    charts = _charts(plan)
    ns = {r.inputs["metadata"]["name"]: r.urn for r in plan.by_type(NAMESPACE)}
    assert ns["kuberay-system"] in charts["kuberay-operator"].options["dependsOn"]
    assert ns["cert-manager"] in charts["cert-manager"].options["dependsOn"]


def test_kuberay_version_bump_updates_the_operator_chart_in_place() -> None:
    raw = SAMPLES["v4-fixed"]
    old = plan_ray({**raw, "raytpu:kuberay": {"version": "1.6.2"}})
    new = plan_ray(raw)
    old_op, new_op = _charts(old)["kuberay-operator"], _charts(new)["kuberay-operator"]
    assert old_op.name == new_op.name  # same URN: an update, CRD children diffed with it
    assert (old_op.inputs["version"], new_op.inputs["version"]) == ("1.6.2", "1.7.0")
    assert (old_op.inputs["values"]["image"]["tag"], new_op.inputs["values"]["image"]["tag"]) == (
        "v1.6.2", "v1.7.0")
    assert old_op.inputs["skipCrds"] is new_op.inputs["skipCrds"] is False
    # Nothing else of the operator stack changes.
    assert _charts(old)["cert-manager"].inputs == _charts(new)["cert-manager"].inputs


def test_webhook_image_and_multihost_indexing_gate_agree(
    sample_plans: dict[str, PlanResult],
) -> None:
    """The published webhook image (v1.3.1-gke.2) predates ai-on-gke/kuberay-tpu-webhook #24:
    with KubeRay's RayMultiHostIndexing labels its required podAffinity matches no pod. Helm
    mode pins that image by digest and turns the gate off (KubeRay 1.7.0 defaults it on)."""
    charts = _charts(sample_plans["v4-fixed"])
    webhook = charts["kuberay-tpu-webhook"].inputs["values"]["tpuWebhook"]["image"]
    image = f"{webhook['repository']}:{webhook['tag']}"
    assert image == versions.TPU_WEBHOOK_IMAGE.reference
    assert "@sha256:" in image
    gates = charts["kuberay-operator"].inputs["values"]["featureGates"]
    (gate,) = [g for g in gates if g["name"] == "RayMultiHostIndexing"]
    assert gate["enabled"] is False
    assert versions.TPU_WEBHOOK_IMAGE.handles_multihost_indexing is False


def test_gate_on_only_with_a_webhook_image_that_handles_it() -> None:
    raw = SAMPLES["v4-fixed"]
    fixed = "us-docker.pkg.dev/acme/tpu-webhook/tpu-webhook:v1.3.5"
    plan = plan_ray({**raw, "raytpu:kuberay": {"webhookImage": fixed, "multiHostIndexing": True}})
    charts = _charts(plan)
    assert charts["kuberay-operator"].inputs["values"]["featureGates"] == [
        {"name": "RayMultiHostIndexing", "enabled": True}]
    assert charts["kuberay-tpu-webhook"].inputs["values"]["tpuWebhook"]["image"] == {
        "repository": "us-docker.pkg.dev/acme/tpu-webhook/tpu-webhook", "tag": "v1.3.5"}
    with pytest.raises(ConfigError) as e:
        parse_stack_config("dev", {**raw, "raytpu:kuberay": {"multiHostIndexing": True}})
    (problem,) = e.value.problems
    assert problem.startswith("raytpu:kuberay.multiHostIndexing: true needs "
                              "raytpu:kuberay.webhookImage")
    with pytest.raises(ValueError, match=r"predates kuberay-tpu-webhook/v1\.3\.2"):
        KubeRayOperatorArgs(multi_host_indexing=True)
    with pytest.raises(ConfigError) as e:
        parse_stack_config("dev", {**raw, "raytpu:kuberay": {"webhookImage": "repo@sha256:ab"}})
    assert e.value.problems == ["raytpu:kuberay.webhookImage: 'repo@sha256:ab' needs a tag "
                                "(<repository>:<tag>[@sha256:...]): the webhook chart renders "
                                "'<repository>:<tag>'"]
    with pytest.raises(ConfigError) as e:
        parse_stack_config("dev", {**raw, "raytpu:kuberay": {"mode": "gke-addon",
                                                             "multiHostIndexing": False}})
    assert e.value.problems[0].startswith("raytpu:kuberay.multiHostIndexing: false applies to "
                                          "raytpu:kuberay.mode 'helm' only")


def test_gke_addon_mode_installs_no_charts_and_waits_for_the_addons_crd(
    sample_plans: dict[str, PlanResult],
) -> None:
    plan = sample_plans["v5p-addon"]
    assert plan.by_type(CHART) == []
    assert [r.inputs["metadata"]["name"] for r in plan.by_type(NAMESPACE)] == ["ray"]
    (job,) = plan.by_type("kubernetes:batch/v1:Job")
    # The RayCluster (and so its pods) is declared only once the Job has seen the CRD.
    (rc,) = plan.by_type(RAYCLUSTER)
    assert job.urn in rc.options["dependsOn"]
    container = job.inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["python", "-c"]
    assert "customresourcedefinitions/" in container["command"][2]
    assert "rayclusters.ray.io" in container["command"][2]
    assert container["image"] == versions.RAY_IMAGE  # public, pinned; has python
    # Its service account may read that one CRD, nothing else.
    (role,) = plan.by_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert role.inputs["rules"] == [{"apiGroups": ["apiextensions.k8s.io"],
                                     "resources": ["customresourcedefinitions"],
                                     "resourceNames": ["rayclusters.ray.io"], "verbs": ["get"]}]
    (binding,) = plan.by_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    (sa,) = [r for r in plan.by_type("kubernetes:core/v1:ServiceAccount")
             if r.parent == job.parent]
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount",
                                           "name": sa.inputs["metadata"]["name"],
                                           "namespace": "default"}]
    assert job.inputs["spec"]["template"]["spec"]["serviceAccountName"] == (
        sa.inputs["metadata"]["name"])
    assert {binding.urn, role.urn, sa.urn} <= set(job.options["dependsOn"])
    assert restricted_problems(job.inputs["spec"]["template"]["spec"]) == []
    assert plan.outputs["kuberay_mode"] == "gke-addon"
    assert plan.outputs["kuberay_charts"] == []
    assert chart_refs(KubeRayOperatorArgs(mode="gke-addon")) == []


def test_operator_component_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode: 'operator' is not valid; valid: helm, gke-addon"):
        KubeRayOperatorArgs(mode="operator")  # type: ignore[arg-type]


def test_ray_namespace_shared_with_the_operator_layer_is_not_declared_twice() -> None:
    raw = SAMPLES["v4-fixed"]
    for shared in ("kuberay-system", WEBHOOK_NAMESPACE):
        plan = plan_ray({**raw, "raytpu:ray": {"namespace": shared}})
        names = [r.inputs["metadata"]["name"] for r in plan.by_type(NAMESPACE)]
        assert names.count(shared) == (1 if shared == "kuberay-system" else 0)
        (rc,) = plan.by_type(RAYCLUSTER)
        assert rc.inputs["metadata"]["namespace"] == shared


@pytest.mark.parametrize("namespace", [WEBHOOK_NAMESPACE, "cert-manager"])
def test_operator_namespace_must_be_its_own(namespace: str) -> None:
    with pytest.raises(ValueError, match=f"namespace: '{namespace}' belongs to another chart"):
        KubeRayOperatorArgs(namespace=namespace)


def test_addon_wait_objects_are_valid_kubernetes(sample_plans: dict[str, PlanResult]) -> None:
    import kubernetes_validate

    plan = sample_plans["v5p-addon"]
    for r in plan.resources:
        if r.parent == "kuberay" and r.custom:
            obj = {k: v for k, v in r.inputs.items() if v is not None}
            kubernetes_validate.validate(obj, "1.33", strict=True)


class _Response(io.BytesIO):
    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _run_wait_script(monkeypatch: pytest.MonkeyPatch, answers: list[Any]) -> list[str]:
    """Run the Job's script with the API server replaced by ``answers`` (dicts or errors)."""
    import builtins
    import ssl
    import time
    import urllib.error
    import urllib.request

    from raytpu.components.kuberay_operator import _WAIT_SCRIPT

    urls: list[str] = []
    real_open = builtins.open

    def urlopen(req: urllib.request.Request, **_: Any) -> _Response:
        urls.append(req.full_url)
        assert req.get_header("Authorization") == "Bearer tok"
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return _Response(json.dumps(answer).encode())

    def fake_open(path: str, *a: Any, **k: Any) -> Any:
        if path.endswith("serviceaccount/token"):
            return io.StringIO("tok")
        return real_open(path, *a, **k)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(ssl, "create_default_context", lambda **_: None)
    monkeypatch.setattr(time, "sleep", lambda _: None)
    monkeypatch.setattr(builtins, "open", fake_open)
    exec(compile(_WAIT_SCRIPT, "wait-for-addon", "exec"), {})
    return urls


def test_addon_wait_script_polls_until_the_crd_is_established(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import urllib.error

    not_found = urllib.error.HTTPError("u", 404, "Not Found", None, None)  # type: ignore[arg-type]
    pending = {"status": {"conditions": [{"type": "Established", "status": "False"}]}}
    ready = {"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                       {"type": "Established", "status": "True"}]}}
    urls = _run_wait_script(monkeypatch, [not_found, not_found, pending, ready])
    assert len(urls) == 4
    assert urls[0] == ("https://kubernetes.default.svc/apis/apiextensions.k8s.io/v1/"
                       "customresourcedefinitions/rayclusters.ray.io")


def test_addon_wait_script_fails_after_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    import urllib.error

    clock = iter(range(0, 10**6, 600))
    monkeypatch.setattr(time, "time", lambda: next(clock))
    not_found = urllib.error.HTTPError("u", 404, "Not Found", None, None)  # type: ignore[arg-type]
    with pytest.raises(SystemExit, match="did not appear"):
        _run_wait_script(monkeypatch, [not_found] * 10)
