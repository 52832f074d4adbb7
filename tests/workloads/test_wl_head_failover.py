"""The Ray head is killed mid-run on a simulated 2-host v4-16 slice, with and without GCS
fault tolerance on a real Redis server (:mod:`raytpu.workloads.head_failover`; that the dev
extra brings the server is checked without Ray, in test_wl_redis_binary.py).

With it, the hosts are the same Ray nodes with the same raylet processes after the new head
comes up, and the resubmitted run resumes from its last checkpoint with no step lost, on
the same ``--resident`` training processes. Without it, the hosts' nodes are new ones (new
ids, new raylets) and so are the training processes: what GCS FT saves. Ray Train's own
workers (no ``--resident``) die with the driver even with GCS FT.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("ray.train")
pytest.importorskip("torch_xla")

from raytpu.workloads.head_failover import rehearse_head_failover
from raytpu.workloads.processes import marked

pytestmark = pytest.mark.slow

STEPS, EVERY, KILL_AT = 8, 3, 5


@pytest.mark.parametrize(("gcs_ft", "resident"), [(True, True), (False, True), (True, False)],
                         ids=["gcs-ft", "no-gcs-ft", "gcs-ft-ray-train"])
def test_head_kill(gcs_ft: bool, resident: bool) -> None:
    # A short scratch path: Ray's unix sockets live under it (108-byte limit).
    scratch = Path(tempfile.mkdtemp(prefix="rtpu-hf-"))
    try:
        r = rehearse_head_failover(gcs_ft=gcs_ft, steps=STEPS, checkpoint_every=EVERY,
                                   kill_at_step=KILL_AT, scratch=scratch, resident=resident)
        # Nothing the rehearsal started is left (the cluster's nodes carry its scratch).
        assert not marked({"RAY_TMPDIR": str(scratch / "c" / "ray")})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert set(r.node_ids_before) == {"sim-v4-16-s0-w0", "sim-v4-16-s0-w1"}
    assert all(pid > 0 for pid in r.raylets_before.values())
    assert set(r.node_ids_after) == set(r.node_ids_before)
    # The first run got at least to the kill; the resubmitted one resumed from the last
    # checkpoint before it (step 3: it starts at 4) and finished.
    assert max(r.steps_first_run) >= KILL_AT
    assert r.first_resumed_step == EVERY + 1
    assert r.steps_resubmitted == list(range(EVERY + 1, STEPS + 1))
    assert r.steps_lost == []
    assert r.head_kill_to_first_resumed_step_s is not None
    if not resident:
        assert r.trainers_before is None and r.trainers_after is None
        assert not r.trainers_kept
    if gcs_ft:
        assert r.node_ids_after == r.node_ids_before
        assert r.raylets_after == r.raylets_before
        assert r.workers_kept
        if resident:  # the resubmitted run trained in the first run's processes
            assert r.trainers_before is not None and r.trainers_before[0] == "started"
            assert r.trainers_after == ("taken over", r.trainers_before[1])
            assert r.trainers_kept
    else:
        # New training processes on new nodes.
        assert r.trainers_before is not None and r.trainers_after is not None
        assert r.trainers_after[0] == "started"
        assert not set(r.trainers_after[1]) & set(r.trainers_before[1])
        # Every host is a new node: new id, new raylet.
        assert not set(r.node_ids_after.values()) & set(r.node_ids_before.values())
        assert not set(r.raylets_after.values()) & set(r.raylets_before.values())
        assert not r.workers_kept
