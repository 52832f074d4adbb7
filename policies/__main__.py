"""The raytpu policy pack: ``pulumi preview --policy-pack policies``.

The rules are :data:`raytpu.policy.rules.POLICIES`; building the ``PolicyPack`` starts the
analyzer's gRPC server for the Pulumi engine (and blocks), so it happens only here.
"""

from pulumi_policy import EnforcementLevel, PolicyPack
from raytpu.policy.rules import PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    policies=list(POLICIES),
    enforcement_level=EnforcementLevel.ADVISORY,  # for rules that do not set their own
    description="raytpu guardrails: security (mandatory), reliability (advisory), cost "
                "(configurable) for GKE + Cloud TPU + KubeRay stacks",
)
