"""The few API calls the rehearsal makes, over plain HTTPS: discovery, server-side apply,
get and list. Server-side apply is a PATCH of the whole object (``application/apply-patch+
yaml``), as ``kubectl apply --server-side`` sends it, so the API server's own validation,
defaulting and admission decide, and its message is what the report shows."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import requests

FIELD_MANAGER = "raytpu-rehearse"


def loopback_session(ca_cert: str, token: str | None = None) -> requests.Session:
    """A session that trusts only the rehearsal's CA. ``trust_env`` off: requests lets
    ``$REQUESTS_CA_BUNDLE`` override a session's ``verify`` (and proxies would catch
    loopback), so the environment must not reach these calls."""
    import requests

    session = requests.Session()
    session.trust_env = False
    session.verify = ca_cert
    if token:
        session.headers["Authorization"] = f"Bearer {token}"
    return session


class ApiError(Exception):
    """The API server refused a request: ``status`` and its own ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Resource:
    plural: str
    namespaced: bool


@dataclass
class Api:
    server: str
    session: requests.Session
    _kinds: dict[tuple[str, str], Resource] = field(default_factory=dict)

    @staticmethod
    def connect(server: str, ca_cert: str, token: str) -> Api:
        return Api(server, loopback_session(ca_cert, token))

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.session.request(method, f"{self.server}{path}", timeout=30, **kwargs)
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise ApiError(response.status_code, message)
        return response.json() if response.content else None

    def resource(self, api_version: str, kind: str) -> Resource:
        """The plural name and scope of a kind (discovery, cached; re-read once on a miss,
        since a CRD applied a moment ago adds kinds)."""
        key = (api_version, kind)
        if key not in self._kinds:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                listing = self._request("GET", base)
            except ApiError as e:
                raise ApiError(404, f"the server does not serve {api_version} "
                                    f"({e.message})") from None
            for r in listing.get("resources", []):
                if "/" not in r["name"]:
                    self._kinds[(api_version, r["kind"])] = Resource(r["name"], r["namespaced"])
            if key not in self._kinds:
                raise ApiError(404, f"no kind {kind} in {api_version}")
        return self._kinds[key]

    def path(self, api_version: str, kind: str, namespace: str | None,
             name: str | None = None) -> str:
        res = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if res.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        return f"{base}/{res.plural}" + (f"/{name}" if name else "")

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        result: dict[str, Any] = self._request(
            "PATCH", path, params={"fieldManager": FIELD_MANAGER, "force": "true"},
            data=json.dumps(obj), headers={"Content-Type": "application/apply-patch+yaml"})
        return result

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self._request(
            "GET", self.path(api_version, kind, namespace, name))
        return result

    def list_items(self, api_version: str, kind: str, namespace: str | None = None,
             **params: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._request(
            "GET", self.path(api_version, kind, namespace), params=params)["items"]
        return items

    def delete(self, api_version: str, kind: str, name: str,
               namespace: str | None = None) -> None:
        self._request("DELETE", self.path(api_version, kind, namespace, name))

    def create(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """POST ``obj``; ``dry_run``: authorized and admitted, never stored."""
        meta = obj["metadata"]
        result: dict[str, Any] = self._request(
            "POST", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace")),
            json=obj, params={"dryRun": "All"} if dry_run else None)
        return result

    def merge_patch(self, api_version: str, kind: str, name: str, patch: dict[str, Any],
                    namespace: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = self._request(
            "PATCH", self.path(api_version, kind, namespace, name), data=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
            params={"dryRun": "All"} if dry_run else None)
        return result

    def wait_established(self, crd_names: list[str], timeout: float = 30.0) -> None:
        """Until every CRD is Established (its kinds are served)."""
        deadline = time.monotonic() + timeout
        for name in crd_names:
            while True:
                crd = self.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
                conditions = (crd.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True"
                       for c in conditions):
                    break
                if time.monotonic() > deadline:
                    raise ApiError(504, f"CRD {name} not Established after {timeout:.0f} s")
                time.sleep(0.1)
        self._kinds.clear()
