"""The two-teams program under mocks: one set of pools, one RayCluster per team in its own
namespace with its own identity, the cluster taken from the owning stack's outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SA = "tpu-nodes@acme-ml.iam.gserviceaccount.com"
CONFIG = {
    "gcp:project": "acme-ml",
    "two-teams:clusterStack": "acme/raytpu/prod",
    "two-teams:zone": "us-west4-a",
    "two-teams:teams": ["team-a", "team-b"],
}
OWNER = {
    "cluster_name": "raytpu-prod", "cluster_location": "us-west4",
    "kubeconfig": "apiVersion: v1\nkind: Config\n", "node_service_account": SA,
}


def test_two_teams_share_one_set_of_pools(example: Any) -> None:
    rec = example(HERE, CONFIG, stack_outputs=OWNER)
    assert "gcp:container/cluster:Cluster" not in {t for t, _, _ in rec.resources}
    assert not [i for i in rec.invokes if i[0] == "gcp:container/getCluster:getCluster"]
    (ref,) = rec.of_type("pulumi:pulumi:StackReference")
    assert ref["name"] == "acme/raytpu/prod"
    (provider,) = rec.of_type("pulumi:providers:kubernetes")
    assert provider["kubeconfig"] == OWNER["kubeconfig"]

    pools = rec.of_type("gcp:container/nodePool:NodePool")
    assert sorted(p["name"] for p in pools) == ["v5e-0", "v5e-1"]
    assert {p["cluster"] for p in pools} == {
        "projects/acme-ml/locations/us-west4/clusters/raytpu-prod"}

    clusters = rec.of_type("kubernetes:ray.io/v1:RayCluster")
    assert sorted(rc["metadata"]["namespace"] for rc in clusters) == ["team-a", "team-b"]
    selectors = []
    for rc in clusters:
        (group,) = rc["spec"]["workerGroupSpecs"]
        assert (group["numOfHosts"], group["replicas"]) == (4, 1)
        selectors.append(group["template"]["spec"]["nodeSelector"])
    assert selectors[0] == selectors[1]  # the same pools serve both teams

    # Each team's pods act as the team's own service account, bound to the team's KSA only.
    members = sorted(b["member"] for b in rec.of_type("gcp:serviceaccount/iAMMember:IAMMember"))
    assert members == ["serviceAccount:acme-ml.svc.id.goog[team-a/ray-workload]",
                       "serviceAccount:acme-ml.svc.id.goog[team-b/ray-workload]"]
    buckets = sorted(b["name"] for b in rec.of_type("gcp:storage/bucket:Bucket"))
    assert buckets == ["acme-ml-team-a-checkpoints", "acme-ml-team-b-checkpoints"]
