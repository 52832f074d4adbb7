"""KWOK's configuration for a rehearsal: the lifecycle stages of fake nodes and pods.

KWOK v0.8.0 exits "no stages found" without a ``--config``; these are the project's own
stages (KWOK documents the Stage API in ``site/content/en/docs/user/stages-configuration.md``):
a fake node turns Ready at once and keeps its capacity; a bound pod runs at once (its init
containers shown completed); a Job's pod then succeeds; a pod being deleted goes away. Nodes
heartbeat through their Leases (KWOK's ``--node-lease-duration-seconds``), so no status
heartbeat stage is needed within a rehearsal.
"""

from __future__ import annotations

from typing import Any

import yaml

KWOK_STAGE_API = "kwok.x-k8s.io/v1alpha1"

_NODE_READY = """\
{{ $now := Now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $now | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
- address: {{ NodeIP | Quote }}
  type: InternalIP
- address: {{ .metadata.name | Quote }}
  type: Hostname
capacity:
{{ YAML .status.capacity 1 }}
allocatable:
{{ YAML .status.allocatable 1 }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: fake
  kubeProxyVersion: fake
phase: Running
"""

_POD_RUNNING = """\
{{ $now := Now }}
conditions:
- {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
{{ $m := .metadata }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) $m.uid $m.name $m.namespace
          | Quote }}
phase: Running
startTime: {{ $now | Quote }}
"""

_POD_SUCCEEDED = """\
{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  started: false
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
conditions:
- type: Ready
  status: "False"
  reason: PodCompleted
  lastTransitionTime: {{ $now | Quote }}
- type: ContainersReady
  status: "False"
  reason: PodCompleted
  lastTransitionTime: {{ $now | Quote }}
phase: Succeeded
"""


def _stage(name: str, kind: str, expressions: list[dict[str, Any]],
           next_: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": KWOK_STAGE_API, "kind": "Stage", "metadata": {"name": name},
            "spec": {"resourceRef": {"apiGroup": "v1", "kind": kind},
                     "selector": {"matchExpressions": expressions}, "next": next_}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


STAGES: tuple[dict[str, Any], ...] = (
    _stage("node-initialize", "Node",
           [_expr('.status.conditions.[] | select( .type == "Ready" ) | .status', "NotIn",
                  "True")],
           {"statusTemplate": _NODE_READY}),
    _stage("pod-running", "Pod",
           [_expr(".metadata.deletionTimestamp", "DoesNotExist"),
            _expr(".spec.nodeName", "Exists"),
            _expr(".status.phase", "NotIn", "Running", "Succeeded", "Failed")],
           {"statusTemplate": _POD_RUNNING}),
    # Job pods (the add-on's CRD wait, a RayJob's submitter) finish; Ray's own keep running.
    _stage("pod-complete", "Pod",
           [_expr(".metadata.deletionTimestamp", "DoesNotExist"),
            _expr(".status.phase", "In", "Running"),
            _expr('.metadata.ownerReferences.[].kind', "In", "Job")],
           {"statusTemplate": _POD_SUCCEEDED}),
    _stage("pod-delete", "Pod",
           [_expr(".metadata.deletionTimestamp", "Exists")],
           {"finalizers": {"empty": True}, "delete": True}),
)
STAGE_NAMES = tuple(s["metadata"]["name"] for s in STAGES)


def config_yaml() -> str:
    """The ``--config`` file: the stages, one YAML document each."""
    return yaml.safe_dump_all(STAGES, sort_keys=False)
