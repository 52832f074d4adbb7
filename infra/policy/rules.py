"""The guardrails: CrossGuard rules every stack that uses these components is held to.

One list, :data:`POLICIES`, of ``pulumi_policy`` policies. Two consumers call them exactly as
the policy SDK's analyzer does (``policy.validate(args, report_violation)`` with
``ResourceValidationArgs`` / ``StackValidationArgs`` built from the resource's type token and
its wire-format, camelCase inputs wrapped in the SDK's unknown-value proxy):

* the policy pack in ``policies/`` (``pulumi preview --policy-pack policies``), which a
  platform team publishes for every stack of its organisation, whatever program composes
  the components;
* ``raytpu plan`` (:mod:`raytpu.plan.policies`), on the mocked plan, without a Pulumi CLI.

Security rules are mandatory, reliability rules advisory, cost rules take their thresholds
from config. Props are read through ``Mapping``/``Sequence`` (the SDK hands proxies, not
dicts); a value unknown during preview raises the SDK's ``UnknownValueError``, which the
analyzer reports as "can't run during preview" rather than a violation.

The rules live by concern in :mod:`raytpu.policy.security`, :mod:`raytpu.policy.reliability`
and :mod:`raytpu.policy.cost`, reading resources through :mod:`raytpu.policy.props`.

Nothing here builds a ``PolicyPack``: its constructor starts a gRPC server and blocks.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from raytpu.facts.versions import IAP_SOURCE_RANGE
from raytpu.policy import cost, reliability, security

PACK_NAME = "raytpu-guardrails"


# -- the pack ---------------------------------------------------------------------------

M, A = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY

POLICIES: list[ResourceValidationPolicy | StackValidationPolicy] = [
    ResourceValidationPolicy(
        "no-world-open-firewall", "No ingress firewall rule open to 0.0.0.0/0 (IAP's "
        f"{IAP_SOURCE_RANGE} is the way in for SSH).", security.firewall, M),
    ResourceValidationPolicy(
        "gke-cluster-hardened", "GKE clusters have private nodes, Workload Identity and "
        "shielded nodes, and no node pool turns private nodes or Workload Identity off.",
        security.gke_cluster, M),
    ResourceValidationPolicy(
        "no-public-ray-load-balancer", "No external LoadBalancer Service in front of Ray "
        "pods.", security.public_lb, M),
    ResourceValidationPolicy(
        "ray-token-auth", "RayClusters run with Ray token authentication "
        "(spec.authOptions.mode: token).", security.ray_auth, M),
    ResourceValidationPolicy(
        "no-default-node-service-account", "GKE nodes do not run as the Compute Engine "
        "default service account.", security.node_service_account, M),
    StackValidationPolicy(
        "dataplane-v2-for-network-policies", "A stack that declares NetworkPolicies runs "
        "them on a cluster that enforces them (GKE Dataplane V2).", security.dataplane_v2, M),
    ResourceValidationPolicy(
        "production-deletion-protection", "Clusters of production stacks keep deletion "
        "protection.", reliability.deletion_protection, A, reliability.PRODUCTION_SCHEMA),
    ResourceValidationPolicy(
        "checkpoint-bucket-versioning", "Checkpoint buckets keep object versions.",
        reliability.bucket_versioning, A, reliability.BUCKET_SCHEMA),
    ResourceValidationPolicy(
        "ray-images-by-digest", "Ray pod images are pinned by digest, not a moving tag.",
        reliability.image_digest, A),
    ResourceValidationPolicy(
        "gcs-fault-tolerance-for-elastic-tpu", "A Ray cluster with elastic TPU worker groups "
        "keeps its GCS in Redis (gcsFaultToleranceOptions), so a head restart keeps the "
        "slices.", reliability.gcs_fault_tolerance, A),
    ResourceValidationPolicy(
        "tpu-slice-pool-shape", "Every multi-host TPU pool is COMPACT (Ironwood: a workload "
        "policy) with a topology and "
        "as many nodes as the slice has hosts.", reliability.tpu_placement, A),
    StackValidationPolicy(
        "max-tpu-chips", "A stack's TPU node pools hold at most maxChips chips at their "
        "autoscaling maximum.", cost.max_chips, M, cost.CHIPS_SCHEMA),
    ResourceValidationPolicy(
        "spot-tpu-in-dev", "TPU node pools of the stacks named in spotStacks use Spot VMs.",
        cost.spot, M, cost.SPOT_SCHEMA),
    ResourceValidationPolicy(
        "tpu-pool-cost-labels", "Every TPU node pool carries the cost labels in "
        "requiredLabels.", cost.cost_labels, A, cost.LABELS_SCHEMA),
]


def policy(name: str) -> ResourceValidationPolicy | StackValidationPolicy:
    for p in POLICIES:
        if p.name == name:
            return p
    raise KeyError(name)
