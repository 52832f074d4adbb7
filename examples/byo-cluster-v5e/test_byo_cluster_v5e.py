"""The byo-cluster-v5e program under mocks: two v5e-16 slices on the existing cluster,
KubeRay and one RayCluster whose worker group is the two slices; no network, no cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
CONFIG = {
    "gcp:project": "acme-ml",
    "byo-cluster-v5e:clusterName": "platform",
    "byo-cluster-v5e:location": "us-west4",
    "byo-cluster-v5e:zone": "us-west4-a",
    "byo-cluster-v5e:nodeServiceAccount": "tpu-nodes@acme-ml.iam.gserviceaccount.com",
}


def test_two_v5e_slices_kuberay_and_a_raycluster_on_the_existing_cluster(example: Any) -> None:
    rec = example(HERE, CONFIG)
    types = {t for t, _, _ in rec.resources}
    assert "gcp:container/cluster:Cluster" not in types
    assert not any(t.startswith("gcp:compute/") for t in types)
    assert ("gcp:container/getCluster:getCluster",
            {"name": "platform", "location": "us-west4", "project": "acme-ml"}) in rec.invokes

    pools = rec.of_type("gcp:container/nodePool:NodePool")
    assert sorted(p["name"] for p in pools) == ["v5e-0", "v5e-1"]
    for p in pools:
        assert p["cluster"] == "projects/acme-ml/locations/us-west4/clusters/platform"
        assert p["nodeLocations"] == ["us-west4-a"]
        assert p["nodeCount"] == 4  # 16 chips / 4 chips per ct5lp-hightpu-4t host
        assert p["nodeConfig"]["machineType"] == "ct5lp-hightpu-4t"
        assert p["nodeConfig"]["serviceAccount"] == "tpu-nodes@acme-ml.iam.gserviceaccount.com"
        assert p["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}

    (provider,) = rec.of_type("pulumi:providers:kubernetes")
    kubeconfig = yaml.safe_load(provider["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://10.0.0.2"

    (rc,) = rec.of_type("kubernetes:ray.io/v1:RayCluster")
    (group,) = rc["spec"]["workerGroupSpecs"]
    assert (group["numOfHosts"], group["replicas"], group["maxReplicas"]) == (4, 2, 2)
    container = group["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["google.com/tpu"] == "4"
    selector = group["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/gke-tpu-topology"] == "4x4"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RAYTPU_CHECKPOINT_URI"] == "gs://acme-ml-ray-checkpoints/runs"
    assert rec.names("kubernetes:helm.sh/v4:Chart") or rec.names("kubernetes:helm.sh/v3:Release")
