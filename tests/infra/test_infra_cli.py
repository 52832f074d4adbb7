"""`raytpu plan` as a user runs it: a fresh process, JSON on stdout, exit 2 on bad config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from infra_support import BASE_CONFIG, REPO


def raytpu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raytpu", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )


def test_plan_json_prints_one_object() -> None:
    proc = raytpu("plan", "--stack", "dev", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # exactly one JSON document
    assert isinstance(doc, dict)
    assert {"stack", "resources", "outputs"} <= set(doc)
    assert doc["stack"] == "dev"
    assert any(r["type"] == "gcp:container/nodePool:NodePool" for r in doc["resources"])
    assert doc["outputs"]["node_pools"] == {"v5e-4": ["v5e-4"]}


def test_bad_slice_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = dict(BASE_CONFIG)
    config["raytpu:slices"] = [{"name": "ok", "tpu": "v4-16"}, {"name": "bad", "tpu": "v4-12"}]
    (tmp_path / "Pulumi.broken.yaml").write_text(yaml.safe_dump({"config": config}))
    proc = raytpu("plan", "--stack", "broken", "--json", "--stacks-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "raytpu:slices[1].tpu: 'v4-12'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
