"""The trainer's Ray metrics: what the sink exports, and the names GMP stores them under.

No Ray cluster: the exporter runs on a stand-in of ``ray.util.metrics`` (to see every
call), on the real ``ray.util.metrics`` objects (their tag validation), and the exported
names are read from Ray's own Prometheus recorder.
"""

from __future__ import annotations

from typing import Any

import pytest
from raytpu.facts.catalog import slice_shape
from raytpu.facts.ray_metrics import (
    CHECKPOINT_STEP,
    MFU,
    RESTARTS,
    STEP,
    STEP_TIME,
    TAG_KEYS,
    TOKENS_PER_S,
    TRAINER_METRICS,
)
from raytpu.spec.training import ModelConfig
from raytpu.workloads.metrics import (
    MetricsSink,
    MfuBasis,
    RayMetricsExporter,
    step_record,
)

TAGS = {"run": "r1", "tpu": "v4-16"}


class _Metric:
    def __init__(self, log: list[tuple[Any, ...]], kind: str, name: str, description: str = "",
                 tag_keys: tuple[str, ...] = ()) -> None:
        self.kind, self.name, self.tag_keys, self.log = kind, name, tag_keys, log
        self.tags: dict[str, str] = {}
        log.append(("new", kind, name, tag_keys))

    def set_default_tags(self, tags: dict[str, str]) -> _Metric:
        self.tags = tags
        return self

    def set(self, value: float) -> None:
        self.log.append(("set", self.name, value, dict(self.tags)))

    def inc(self, value: float = 1.0) -> None:
        self.log.append(("inc", self.name, value, dict(self.tags)))


class FakeRayMetrics:
    """Stands in for the ``ray.util.metrics`` module, logging every call."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def Gauge(self, name: str, **kw: Any) -> _Metric:
        return _Metric(self.log, "gauge", name, **kw)

    def Counter(self, name: str, **kw: Any) -> _Metric:
        return _Metric(self.log, "counter", name, **kw)

    def calls(self, op: str) -> list[tuple[Any, ...]]:
        return [c for c in self.log if c[0] == op]


def _rec(step: int, step_time_s: float) -> dict[str, Any]:
    basis = MfuBasis.for_run(ModelConfig(), slice_shape("v4-16"), 1, simulated=True)
    return step_record(step=step, loss=1.0, tokens=2048, step_time_s=step_time_s, lr=1e-3,
                       attempt=1, basis=basis)


def test_sink_exports_latest_step_checkpoint_and_restarts() -> None:
    fake = FakeRayMetrics()
    sink = MetricsSink(exporter=RayMetricsExporter(TAGS, fake))
    created = {(kind, name) for _, kind, name, keys in fake.calls("new") if keys == TAG_KEYS}
    assert created == {(m.kind, m.name) for m in TRAINER_METRICS}

    assert sink.begin_attempt() == (1, True)
    assert fake.calls("inc") == []  # the first attempt is no restart
    sink.push([_rec(2, 0.5), _rec(1, 0.25)])  # out of order: the gauges take step 2
    sets = {name: value for _, name, value, tags in fake.calls("set")}
    assert sets[STEP.name] == 2
    assert sets[STEP_TIME.name] == 0.5
    assert sets[TOKENS_PER_S.name] == 2048 / 0.5
    assert sets[MFU.name] == pytest.approx(_rec(2, 0.5)["mfu"])
    assert all(tags == TAGS for *_, tags in fake.calls("set"))

    sink.checkpointed(2)
    assert fake.calls("set")[-1][1:3] == (CHECKPOINT_STEP.name, 2.0)
    assert sink.begin_attempt() == (2, False)  # the worker group restarted
    assert [c[1:3] for c in fake.calls("inc")] == [(RESTARTS.name, 1.0)]


def test_sink_without_exporter_exports_nothing() -> None:
    sink = MetricsSink()
    sink.begin_attempt()
    sink.push([_rec(1, 0.5)])
    sink.checkpointed(1)  # no error, nothing to export to


def test_exporter_on_real_ray_metrics_objects_validates_tags() -> None:
    pytest.importorskip("ray")
    exporter = RayMetricsExporter(TAGS)  # real ray.util.metrics, no cluster needed
    exporter.steps([_rec(3, 0.5)])
    exporter.checkpoint(3)
    exporter.restart()
    for name, metric in exporter._metrics.items():
        assert metric.info["name"] == name
        assert metric.info["default_tags"] == TAGS
        assert not metric._discard_metric  # a name Ray would drop silently
    with pytest.raises(ValueError, match="tags"):
        RayMetricsExporter({"run": "r1"})


def test_exported_names_are_what_rays_recorder_serves() -> None:
    recorder_mod = pytest.importorskip("ray._private.telemetry.open_telemetry_metric_recorder")
    prometheus_client = pytest.importorskip("prometheus_client")
    recorder = recorder_mod.OpenTelemetryMetricRecorder()
    for spec in TRAINER_METRICS:
        register = (recorder.register_gauge_metric if spec.kind == "gauge"
                    else recorder.register_counter_metric)
        register(spec.name, spec.description)
        recorder.set_metric_value(spec.name, dict(TAGS), 1.0)
    text = prometheus_client.generate_latest().decode()
    for spec in TRAINER_METRICS:
        assert f"# TYPE {spec.prometheus_name} {spec.kind}" in text, spec
    assert TOKENS_PER_S.gmp_type == (
        "prometheus.googleapis.com/ray_raytpu_train_tokens_per_second/gauge")
    assert RESTARTS.gmp_type == "prometheus.googleapis.com/ray_raytpu_train_restarts_total/counter"
