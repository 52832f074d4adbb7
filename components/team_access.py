"""A team's place on the cluster: its Namespace, the Kubernetes service account its Ray pods
run as, and RBAC that lets its members run RayJobs there and nowhere else.

Who can do what (the Role, bound in the team's namespace only):

* ``ray.io`` ``rayjobs``, ``rayclusters``: create, get, list, watch, delete. No update or
  patch: a submitted job is changed by deleting and submitting again, so nobody edits
  ``spec.suspend`` or the queue label Kueue owns.
* ``pods``, ``pods/log``, ``events``: get, list, watch (read their jobs' pods and logs).
* ``kueue.x-k8s.io`` ``workloads``, ``localqueues``: get, list, watch (see why a job waits).

Nothing else: no Secrets (the Ray auth token KubeRay keeps there), no exec, no
port-forward, no pods of their own (KubeRay creates them under the team's service account),
no ServiceAccounts, Roles or NetworkPolicies; nothing outside the namespace.

Members are IAM principals; GKE authenticates them with their Google identity, so
``user:`` and ``serviceAccount:`` become RBAC ``User`` subjects (the email), ``group:``
a ``Group`` subject, which GKE resolves only with Google Groups for RBAC (the cluster's
``authenticatorGroupsConfig.securityGroup``, ``gke-security-groups@<domain>``, must
contain the group).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from raytpu.components._options import depends_on_of
from raytpu.components.k8s_objects import (
    Namespace,
    Role,
    RoleBinding,
    ServiceAccount,
    pod_security_labels,
)
from raytpu.spec.team_access import RBAC_GROUP, TeamAccessArgs, rbac_subject

ROLE_NAME = "raytpu-team-member"  # the Role and its RoleBinding, one per team namespace
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"

TEAM_ROLE_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": ["ray.io"], "resources": ["rayjobs", "rayclusters"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods", "pods/log", "events"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"],
     "verbs": ["get", "list", "watch"]},
)


class TeamAccess(pulumi.ComponentResource):
    """Namespace + Workload Identity KSA + Role/RoleBinding of one team."""

    namespace: Namespace
    service_account: ServiceAccount
    role: Role
    role_binding: RoleBinding

    def __init__(self, name: str, args: TeamAccessArgs,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("raytpu:team_access:TeamAccess", name, None, opts)
        inherited = depends_on_of(opts)
        labels = {"app.kubernetes.io/part-of": "raytpu", "raytpu.io/team": args.team,
                  **args.labels}
        self.namespace = Namespace(
            f"{name}-ns",
            metadata={"name": args.namespace,
                      "labels": {**labels, **pod_security_labels(args.pod_security_level)}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=inherited))
        ns = self.namespace.metadata_name
        child = pulumi.ResourceOptions(parent=self, depends_on=[*inherited, self.namespace])
        self.service_account = ServiceAccount(
            f"{name}-ksa",
            metadata={"name": args.service_account, "namespace": ns, "labels": labels,
                      "annotations": {GSA_ANNOTATION: args.gsa_email}},
            # Team Ray pods never call the Kubernetes API (the KSA has no RBAC grant).
            fields={"automountServiceAccountToken": False},
            opts=child)
        self.role = Role(f"{name}-role",
                         metadata={"name": ROLE_NAME, "namespace": ns, "labels": labels},
                         fields={"rules": [dict(r) for r in TEAM_ROLE_RULES]}, opts=child)
        self.role_binding = RoleBinding(
            f"{name}-members",
            metadata={"name": ROLE_NAME, "namespace": ns, "labels": labels},
            fields={"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": ROLE_NAME},
                    "subjects": [rbac_subject(m) for m in args.members]},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*inherited, self.role]))
        self.register_outputs({"namespace": args.namespace,
                               "serviceAccount": args.service_account})
