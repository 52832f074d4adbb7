"""The providers of the offline plan: ``pulumi.runtime.Mocks`` that answer as a provider would.

``preview=True`` (``raytpu plan``): a provider returns only the inputs it was given, so every
computed output is unknown, including values it computes inside an input object. Otherwise
(the tests) computed outputs get realistic fakes (:func:`_fake_outputs`) so that derived
values such as the kubeconfig are built and can be checked for their shape.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from pulumi.runtime import Mocks
from pulumi.runtime.rpc import UNKNOWN
from raytpu.plan.values import plain as _plain

FAKE_PROJECT_NUMBER = "123456789012"
# A syntactically valid PEM body; kubeconfigs must carry base64 of a certificate.
_FAKE_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\nMIIBmocked0ffline0plan0certificate\n-----END CERTIFICATE-----\n"
).decode()


def _fake_outputs(typ: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
    """What the provider would compute on create, faked well enough for derived values."""
    out = dict(inputs)
    res_name = inputs.get("name", name)
    if typ.startswith("gcp:"):
        out.setdefault("name", res_name)
        out.setdefault("project", project)
        out.setdefault("selfLink", f"https://www.googleapis.com/mock/{project}/{res_name}")
    if typ == "gcp:container/cluster:Cluster":
        out.update(
            endpoint="10.0.0.2" if inputs.get("privateClusterConfig") else "34.0.0.2",
            masterAuth={"clusterCaCertificate": _FAKE_CA},
            masterVersion=inputs.get("minMasterVersion") or "1.34.1-gke.1000000",
            id=f"projects/{project}/locations/{inputs.get('location')}/clusters/{res_name}",
        )
        # GKE always assigns a DNS endpoint (``<uid>.<region>.gke.goog``).
        dns = {**(inputs.get("controlPlaneEndpointsConfig") or {}).get("dnsEndpointConfig", {}),
               "endpoint": f"gke-0123456789abcdef-{project}.{inputs.get('location')}.gke.goog"}
        out["controlPlaneEndpointsConfig"] = {
            **(inputs.get("controlPlaneEndpointsConfig") or {}), "dnsEndpointConfig": dns,
        }
    elif typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId')}@{project}.iam.gserviceaccount.com"
        out.update(email=email, member=f"serviceAccount:{email}",
                   uniqueId="100000000000000000000")
    elif typ == "gcp:storage/bucket:Bucket":
        out.update(url=f"gs://{res_name}")
    elif typ == "gcp:artifactregistry/repository:Repository":
        out.update(registryUri=f"{inputs.get('location')}-docker.pkg.dev/{project}/"
                               f"{inputs.get('repositoryId')}")
    elif typ == "docker-build:index:Image":
        # A digest that changes with what is built (the engine's would come from BuildKit).
        digest = "sha256:" + hashlib.sha256(
            json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
        tags = inputs.get("tags") or []
        out.update(digest=digest, ref=f"{tags[0]}@{digest}" if tags else "")
    elif typ == "gcp:redis/instance:Instance":
        # In-transit encryption serves TLS on 6378; the host is in the peered range.
        tls = inputs.get("transitEncryptionMode") == "SERVER_AUTHENTICATION"
        out.update(host="10.3.0.3", port=6378 if tls else 6379,
                   authString="mock-auth-string" if inputs.get("authEnabled") else "",
                   serverCaCerts=[{"cert": _FAKE_CA}] if tls else [])
    elif typ == "kubernetes:helm.sh/v3:Release":
        out["status"] = {"status": "deployed", "namespace": inputs.get("namespace"),
                         "name": inputs.get("name", name)}
    return out


def _unknown_inside(inputs: dict[str, Any], computed: dict[str, Any],
                    nested: bool = False) -> dict[str, Any]:
    """``inputs`` plus UNKNOWN for every key the provider adds inside an input object
    (top-level keys it adds are left out: absent outputs of a preview are unknown)."""
    out = dict(inputs)
    for key, value in computed.items():
        if key not in inputs:
            if nested:
                out[key] = UNKNOWN
        elif isinstance(value, dict) and isinstance(inputs[key], dict):
            out[key] = _unknown_inside(inputs[key], value, nested=True)
    return out


class RecordingMocks(Mocks):
    """``pulumi.runtime.Mocks`` that answer invokes and, for a resource, return its inputs
    (``preview``: as a provider plans a create; its id and computed outputs unknown) or
    its inputs plus faked computed outputs."""

    def __init__(self, project: str, preview: bool = False) -> None:
        self.project = project
        self.preview = preview
        self.inputs: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
        plain = self.inputs[(args.typ, args.name)] = _plain(args.inputs)  # nobody mutates it
        if self.preview:
            # An empty id is an unknown one; computed outputs the inputs lack are unknown
            # too, and so is a value the provider computes inside an input object (the
            # cluster's dnsEndpointConfig.endpoint): the fakes below say which those are.
            computed = _fake_outputs(args.typ, args.name, args.inputs, self.project)
            state = _unknown_inside(plain, computed)
            # Nothing computed inside an input: the state is the inputs, as they came.
            return "", args.inputs if state == plain else state
        outputs = _fake_outputs(args.typ, args.name, args.inputs, self.project)
        return outputs.get("id") or f"{args.name}-id", outputs

    def call(self, args: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, args.args))
        if args.token == "gcp:organizations/getProject:getProject":
            return {"number": FAKE_PROJECT_NUMBER, "projectId": self.project}, []
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": self.project, "accessToken": "mock-token"}, []
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            v = "1.34.1-gke.1000000"
            return {
                "defaultClusterVersion": v,
                "latestMasterVersion": v,
                "latestNodeVersion": v,
                "validMasterVersions": [v],
                "validNodeVersions": [v],
                "releaseChannelDefaultVersion": {"RAPID": v, "REGULAR": v, "STABLE": v},
                "releaseChannelLatestVersion": {"RAPID": v, "REGULAR": v, "STABLE": v},
            }, []
        return {}, []

    def register_transform(self, transform: Any) -> None:  # pragma: no cover - unused
        pass

    def register_invoke_transform(self, transform: Any) -> None:  # pragma: no cover
        pass
