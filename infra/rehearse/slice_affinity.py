"""The one effect of GKE's TPU webhook that placement depends on, as the rehearsal's own
mutating admission hook: each worker pod of a multi-host group is given a replica and a
required podAffinity that keeps that replica's pods on one node pool.

The webhook itself cannot be built here (``../shared/ref/notes/local-control-plane.md`` §6:
not obtainable as a Go module), and without its affinity the scheduler spreads the pods of
several slices over any pools that match their selector, which GKE does not do. The rule
emulated is the webhook's documented one for KubeRay without ``RayMultiHostIndexing``
(``raytpu.facts.versions``, the TPU webhook notes): pods are counted into replicas of
``numOfHosts`` in the order they are created, labelled ``replicaIndex`` (one value per
namespace, cluster, group and index), and required to share ``cloud.google.com/gke-nodepool``
with the pods of that label and no pool with another replica's pods (GKE's fact: one
multi-host pool is one slice). Nothing else of the webhook (``TPU_WORKER_*`` env,
hostnames) is emulated; the rehearsal says so.

The API server calls it at ``https://127.0.0.1:<port>`` with the control plane's CA, as
envtest does for webhooks without a Service; ``failurePolicy: Fail``, as the chart's. It runs
as one of the control plane's processes (``python -m raytpu.rehearse.slice_affinity``), so a
kept rehearsal (``--keep``) keeps placing slices after the command has ended.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import ssl
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from raytpu.facts.names import NODEPOOL_LABEL
from raytpu.rehearse.api import Api, ApiError

REPLICA_LABEL = "replicaIndex"
HOOK_NAME = "slice-affinity.rehearsal.raytpu.dev"
PATH = "/mutate-pods"

NumOfHosts = Callable[[str, str, str], int]
"""(namespace, RayCluster, group) -> the group's numOfHosts."""


def replica_value(namespace: str, cluster: str, group: str, index: int) -> str:
    """The replica's label value, unique across namespaces and clusters (a label value is at
    most 63 characters: a long one keeps the group and index and a hash of the rest)."""
    value = f"{namespace}.{cluster}.{group}.{index}"
    if len(value) <= 63:
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:12]
    return f"{group[:40].rstrip('-_.')}.{index}.{digest}"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class SliceAffinity:
    """The hook's state: which replica each created pod went to."""

    def __init__(self, num_of_hosts: NumOfHosts) -> None:
        self._num_of_hosts = num_of_hosts
        self._lock = threading.Lock()
        self._replicas: dict[tuple[str, str, str], list[int]] = {}

    def patch(self, namespace: str, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """The JSON patch for one pod being created (empty: not a multi-host worker)."""
        labels = pod.get("metadata", {}).get("labels") or {}
        cluster, group = labels.get("ray.io/cluster"), labels.get("ray.io/group")
        if labels.get("ray.io/node-type") != "worker" or not cluster or not group:
            return []
        hosts = self._num_of_hosts(namespace, cluster, group)
        if hosts <= 1:
            return []
        with self._lock:
            counts = self._replicas.setdefault((namespace, cluster, group), [])
            index = next((i for i, n in enumerate(counts) if n < hosts), len(counts))
            if index == len(counts):
                counts.append(0)
            counts[index] += 1
        replica = replica_value(namespace, cluster, group, index)
        together = {"labelSelector": {"matchExpressions": [
                        {"key": REPLICA_LABEL, "operator": "In", "values": [replica]}]},
                    "topologyKey": NODEPOOL_LABEL}
        # A multi-host pool is exactly one slice: no other replica, of any group or
        # namespace, may share it (else two replicas that each took part of a pool wait on
        # each other forever).
        apart = {"labelSelector": {"matchExpressions": [
                     {"key": REPLICA_LABEL, "operator": "Exists"},
                     {"key": REPLICA_LABEL, "operator": "NotIn", "values": [replica]}]},
                 "namespaceSelector": {}, "topologyKey": NODEPOOL_LABEL}
        ops: list[dict[str, Any]] = [
            {"op": "add", "path": f"/metadata/labels/{_escape(REPLICA_LABEL)}",
             "value": replica}]
        affinity = pod.get("spec", {}).get("affinity")
        if affinity is None:
            ops.append({"op": "add", "path": "/spec/affinity", "value": {}})
            affinity = {}
        for kind, term in (("podAffinity", together), ("podAntiAffinity", apart)):
            if kind not in affinity:
                ops.append({"op": "add", "path": f"/spec/affinity/{kind}",
                            "value": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
            elif affinity[kind].get("requiredDuringSchedulingIgnoredDuringExecution") is None:
                ops.append({"op": "add", "path": f"/spec/affinity/{kind}/"
                            "requiredDuringSchedulingIgnoredDuringExecution", "value": [term]})
            else:
                ops.append({"op": "add", "path": f"/spec/affinity/{kind}/"
                            "requiredDuringSchedulingIgnoredDuringExecution/-", "value": term})
        return ops

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        request = body["request"]
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        ops = self.patch(request.get("namespace", ""), request["object"])
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": response}


def num_of_hosts(api: Api, namespace: str, cluster: str, group: str) -> int:
    """A worker group's ``numOfHosts``, read from its RayCluster as it is now (those the
    stack declares and those KubeRay makes for RayJobs alike); 1 when it cannot be read."""
    try:
        rc = api.get("ray.io/v1", "RayCluster", cluster, namespace)
    except ApiError:
        return 1
    for g in rc.get("spec", {}).get("workerGroupSpecs") or []:
        if g.get("groupName") == group:
            return int(g.get("numOfHosts", 1) or 1)
    return 1


def hook_server(hook: SliceAffinity, cert: str, key: str, port: int = 0
                ) -> ThreadingHTTPServer:
    """The hook bound to loopback ``port`` (0: a free one), TLS with the given certificate;
    ``GET /healthz`` answers ``ok`` once it serves."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"ok" if ok else b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                answer = json.dumps(hook.review(json.loads(self.rfile.read(length)))).encode()
                status = 200
            except Exception as e:  # the API server shows this; failurePolicy refuses
                answer, status = str(e).encode(), 500
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    return server


def main(argv: Sequence[str] | None = None) -> None:
    """The hook as a process of the control plane: it reads RayClusters with the admin
    kubeconfig and serves until it is stopped with the control plane."""
    import yaml

    parser = argparse.ArgumentParser(prog="python -m raytpu.rehearse.slice_affinity")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    kc = yaml.safe_load(args.kubeconfig.read_text())
    cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
    api = Api.connect(cluster["server"], cluster["certificate-authority"], user["token"])
    hook = SliceAffinity(lambda ns, c, g: num_of_hosts(api, ns, c, g))
    hook_server(hook, args.cert, args.key, args.port).serve_forever()


def webhook_configuration(port: int, ca_pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": HOOK_NAME},
        "webhooks": [{
            "name": HOOK_NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 10,
            "clientConfig": {"url": f"https://127.0.0.1:{port}{PATH}",
                             "caBundle": base64.b64encode(ca_pem).decode()},
            "objectSelector": {"matchLabels": {"ray.io/node-type": "worker"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
        }],
    }


if __name__ == "__main__":
    main()
