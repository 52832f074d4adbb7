"""Inputs of :class:`~raytpu.components.TeamAccess`: a team's namespace, members and Google
service account, and the RBAC subject each member becomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from raytpu.facts.names import DNS_LABEL
from raytpu.facts.problems import args_error
from raytpu.spec.inputs import Input

RBAC_GROUP = "rbac.authorization.k8s.io"
_SUBJECT_KINDS = {"user": "User", "serviceAccount": "User", "group": "Group"}


def rbac_subject(member: str) -> dict[str, str]:
    """An IAM member (``group:ml@example.com``) as the RBAC subject GKE matches it with."""
    kind, _, email = member.partition(":")
    if kind not in _SUBJECT_KINDS or "@" not in email:
        raise ValueError(f"members: {member!r} is not user:, group: or serviceAccount:EMAIL")
    return {"kind": _SUBJECT_KINDS[kind], "name": email, "apiGroup": RBAC_GROUP}


@dataclass(frozen=True)
class TeamAccessArgs:
    """Inputs of :class:`TeamAccess`."""

    team: str
    """The team's name (labels)."""
    namespace: str
    """The team's namespace, created here (DNS label)."""
    members: Sequence[str]
    """Who may submit, in IAM member syntax (``group:...``, ``user:...``,
    ``serviceAccount:...``)."""
    service_account: str
    """The Kubernetes service account the team's Ray pods run as."""
    gsa_email: Input[str]
    """The team's Google service account (Workload Identity) the KSA acts as."""
    pod_security_level: str | None = None
    """Pod Security Standard the namespace enforces; default the Ray pods' level."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels of every object."""

    def __post_init__(self) -> None:
        for what, value in (("namespace", self.namespace),
                            ("service_account", self.service_account)):
            if not DNS_LABEL.match(value) or len(value) > 63:
                raise args_error(self, what, f"{value!r} is not a DNS label")
        if not self.members:
            raise args_error(self, "members", "at least one member")
        for member in self.members:
            rbac_subject(member)
