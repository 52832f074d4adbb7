"""Inputs of :class:`~raytpu.components.Kueue`: the chart's version, the integrations it
manages and the controller's settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from raytpu.facts import versions

RAY_FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster")

DEFAULT_MANAGER_RESOURCES: Mapping[str, Any] = {
    # The chart's own default (values.yaml controllerManager.manager.resources), pinned.
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "2", "memory": "512Mi"},
}


@dataclass(frozen=True)
class KueueArgs:
    """How Kueue is installed (defaults: the pinned release, Ray integrations only)."""

    version: str = versions.KUEUE_VERSION
    """Chart version = controller image tag (without the ``v``)."""
    namespace: str = versions.KUEUE_NAMESPACE
    """Created here; the chart's objects live in it."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Where the controller runs (the stack: its system pool). TPU nodes are tainted anyway."""
    pods_ready_timeout: str = "30m"
    """``waitForPodsReady.timeout``: admission to all pods Ready (Go duration)."""
    requeue_backoff_max_seconds: int = 1800
    """Longest wait before a workload evicted for pod readiness is queued again."""
    frameworks: Sequence[str] = RAY_FRAMEWORKS
    """``integrations.frameworks``: the job kinds Kueue manages."""
    manager_resources: Mapping[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_MANAGER_RESOURCES))
    """Container resources of the controller."""

    def __post_init__(self) -> None:
        if not self.frameworks:
            raise ValueError("frameworks: at least one Kueue integration")
        if self.requeue_backoff_max_seconds < 1:
            raise ValueError("requeue_backoff_max_seconds: must be >= 1")
