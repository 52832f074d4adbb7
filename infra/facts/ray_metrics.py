"""The metrics the trainer publishes through ``ray.util.metrics``, by name.

A fact shared by the trainer (which records them) and the monitoring component (whose
dashboard and alerts query them), so it lives here and neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# -- the trainer's metrics as Ray exports them (scraped through GMP) ---------------------


@dataclass(frozen=True)
class RayMetric:
    """One metric the trainer publishes through ``ray.util.metrics``."""

    name: str
    """The name given to ``ray.util.metrics``."""
    kind: Literal["gauge", "counter"]
    description: str
    record_field: str | None = None
    """The step-record field it carries (None: set by its own event)."""

    @property
    def prometheus_name(self) -> str:
        """The name on the node's metrics port: Ray's recorder prefixes its namespace
        ``ray_`` (``ray/_private/telemetry/open_telemetry_metric_recorder.py``,
        ``NAMESPACE = "ray"``; unit "1" adds no suffix) and a Prometheus counter is exposed
        with ``_total`` (``ray.util.metrics.Counter`` docstring, Ray >= 2.10)."""
        return f"ray_{self.name}" + ("_total" if self.kind == "counter" else "")

    @property
    def gmp_type(self) -> str:
        """The Cloud Monitoring metric type GMP stores it as."""
        return f"prometheus.googleapis.com/{self.prometheus_name}/{self.kind}"


TAG_KEYS = ("run", "tpu")
TOKENS_PER_S = RayMetric("raytpu_train_tokens_per_second", "gauge",
                         "Training throughput of the whole run (all slices)", "tokens_per_s")
STEP_TIME = RayMetric("raytpu_train_step_time_seconds", "gauge", "Time of the last step",
                      "step_time_s")
MFU = RayMetric("raytpu_train_mfu", "gauge",
                "Model FLOPs utilization against the slices' peak bf16 (catalog)", "mfu")
STEP = RayMetric("raytpu_train_step", "gauge", "Last step done", "step")
CHECKPOINT_STEP = RayMetric("raytpu_train_checkpoint_step", "gauge",
                            "Step of the last checkpoint saved")
RESTARTS = RayMetric("raytpu_train_restarts", "counter",
                     "Worker-group restarts (attempts after the first) of this run")
TRAINER_METRICS = (TOKENS_PER_S, STEP_TIME, MFU, STEP, CHECKPOINT_STEP, RESTARTS)
