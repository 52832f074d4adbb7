"""FleetMonitoring: the dashboard built from data, the slice-availability alert, and the
cluster's metric collection, as the stack program declares them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from infra_support import CLUSTER, STACKS_DIR, raw_config, refused_alone
from raytpu.components.monitoring import (
    SLICE_AVAILABLE,
    TPU_DUTY_CYCLE,
    TPU_MEMORY_USED,
    FleetMonitoring,
    LabelMappingArgs,
)
from raytpu.config.stack import ConfigError
from raytpu.facts.ray_metrics import MFU, TOKENS_PER_S
from raytpu.plan.engine import PlanResult, load_stack_file, run_program
from raytpu.spec.monitoring import FleetMonitoringArgs, MonitoredSliceGroup

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"
NODE_POOL = "gcp:container/nodePool:NodePool"

ELASTIC_AND_FIXED = [
    {"name": "pod16", "tpu": "v5litepod-16", "count": 2, "autoscaling": {"min": 1, "max": 3}},
    {"name": "zero", "tpu": "v5litepod-16", "autoscaling": {"min": 0, "max": 2}},
    {"name": "fixed", "tpu": "v5litepod-8", "machineType": "ct5lp-hightpu-4t", "count": 2},
    {"name": "single", "tpu": "v5litepod-4"},
]


def plan(**overrides: Any) -> PlanResult:
    return run_program("test", raw_config(**overrides))


def dashboard(p: PlanResult) -> dict[str, Any]:
    (d,) = p.by_type(DASHBOARD)
    doc: dict[str, Any] = json.loads(d.inputs["dashboardJson"])
    return doc


def charts(p: PlanResult) -> dict[str, dict[str, Any]]:
    return {w["title"]: w["xyChart"] for w in dashboard(p)["gridLayout"]["widgets"]}


def filters(chart: dict[str, Any]) -> list[str]:
    return [d["timeSeriesQuery"]["timeSeriesFilter"]["filter"] for d in chart["dataSets"]]


def test_dashboard_has_per_group_availability_tpu_and_trainer_charts() -> None:
    p = plan(raytpu_slices=ELASTIC_AND_FIXED)
    c = charts(p)
    pools = {r.inputs["name"] for r in p.by_type(NODE_POOL)}
    for group, expected, most in (("pod16", 1, 3), ("fixed", 2, 2)):
        chart = c[f"{group}: available slices (of {most})"]
        (f,) = filters(chart)
        assert f'metric.type="{SLICE_AVAILABLE}"' in f and 'cluster_name"="raytpu-test"' in f
        # The pool regex matches exactly this group's GKE node pools.
        (regex,) = re.findall(r'full_match\("([^"]+)"\)', f)
        assert {n for n in pools if re.fullmatch(regex, n)} == {
            f"{group}-{i}" for i in range(most)}
        assert chart["thresholds"] == [{"label": "expected", "value": expected}]
    assert "zero: available slices (of 2)" in c and "thresholds" not in c[
        "zero: available slices (of 2)"]
    assert not any(t.startswith("single: available") for t in c)  # no multi-host metric
    for group in ("pod16", "zero", "fixed", "single"):
        duty = filters(c[f"{group}: TPU duty cycle"])[0]
        assert TPU_DUTY_CYCLE in duty
        assert f'starts_with("raytpu-{group}-worker-")' in duty  # KubeRay worker pod names
        assert any(TPU_MEMORY_USED in f for f in filters(c[f"{group}: TPU HBM"]))
    assert TOKENS_PER_S.gmp_type in filters(c["trainer: tokens/s"])[0]
    assert MFU.gmp_type in filters(c["trainer: MFU"])[0]
    assert 'starts_with("raytpu-head-")' in filters(c["Ray head memory"])[0]


def test_alert_watches_groups_that_must_have_slices_for_the_configured_time() -> None:
    channels = ["projects/acme-ml/notificationChannels/123"]
    p = plan(raytpu_slices=ELASTIC_AND_FIXED,
             raytpu_monitoring={"alertAfter": "15m", "notificationChannels": channels})
    (alert,) = p.by_type(ALERT)
    conds = alert.inputs["conditions"]
    assert [c["displayName"].split(":")[0] for c in conds] == ["pod16", "fixed"]
    for c, expected in zip(conds, (1, 2), strict=True):
        q = c["conditionPrometheusQueryLanguage"]
        assert q["duration"] == "900s"
        assert q["query"].endswith(f"< {expected}")
        assert "or vector(0)" in q["query"]  # missing series count as no slice
        assert 'cluster_name="raytpu-test"' in q["query"]
    assert alert.inputs["notificationChannels"] == channels
    assert alert.inputs["combiner"] == "OR"


def test_single_host_only_stack_declares_a_dashboard_but_no_alert() -> None:
    p = run_program("dev", load_stack_file("dev", STACKS_DIR))
    assert len(p.by_type(DASHBOARD)) == 1
    assert p.by_type(ALERT) == []
    assert p.outputs["monitoring_alert_policy"] is None


def test_cluster_sends_system_metrics_and_runs_managed_prometheus() -> None:
    (cluster,) = plan().by_type(CLUSTER)
    mc = cluster.inputs["monitoringConfig"]
    assert mc["managedPrometheus"] == {"enabled": True}
    assert "SYSTEM_COMPONENTS" in mc["enableComponents"]  # TPU + node pool metrics
    assert cluster.inputs["costManagementConfig"] == {"enabled": True}


def test_bad_monitoring_config_is_a_config_error_before_declaring() -> None:
    with pytest.raises(ConfigError) as e:
        plan(raytpu_monitoring={"alertAfter": "soon"})
    assert e.value.problems == [
        "raytpu:monitoring.alertAfter: 'soon' is not a duration like 10m, 600s or 1h"]


def test_component_refuses_bad_args() -> None:
    group = MonitoredSliceGroup("g", multi_host=True, expected_slices=1, max_slices=1)
    base: dict[str, Any] = {
        "project": "p", "stack": "s", "cluster_name": "c", "location": "us-west4-a",
        "ray_cluster_name": "r", "ray_namespace": "ray", "slice_groups": (group,)}
    errors = refused_alone(
        lambda: FleetMonitoring("m", FleetMonitoringArgs(**base, alert_after_seconds=90)),
        lambda: FleetMonitoring("m", FleetMonitoringArgs(**{**base, "slice_groups": (
            MonitoredSliceGroup("g", True, expected_slices=3, max_slices=2),)})),
        lambda: FleetMonitoring("m", base),  # type: ignore[arg-type]
        lambda: LabelMappingArgs(from_="x", to="cluster"),
    )
    assert "alert_after_seconds: 90" in str(errors[0])
    assert "expected 3 is outside 0..2" in str(errors[1])
    assert "reserves" in str(errors[3])
