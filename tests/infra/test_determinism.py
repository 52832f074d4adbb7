"""Identical runs give identical bytes: the plan tree, ``plan --json`` and ``manifests``.

Each run is a separate interpreter with its own ``PYTHONHASHSEED`` (set iteration order,
object addresses, thread timing all differ between them), so an order that depends on any
of those shows up as a difference here. Before the plan's RPCs ran inline
(:mod:`raytpu.plan.mock_runtime`) the resources of ``prod`` came out in a
different order nearly every run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from raytpu.operations.manifests import file_name
from raytpu.plan.engine import PlanResult

REPO = Path(__file__).resolve().parents[2]
STACKS = ("prod", "dev")

# One interpreter per seed runs every command on every stack, in-process (the CLI's own
# entry point), and writes what each prints or writes under OUT/<stack>/.
_RUN = """
import contextlib, io, sys
from pathlib import Path
from raytpu.cli.app import app
out = Path(sys.argv[1])
for stack in sys.argv[2:]:
    d = out / stack
    d.mkdir(parents=True)
    for name, args in (("plan.txt", ["plan", "--stack", stack, "--no-policies"]),
                       ("plan.json", ["plan", "--stack", stack, "--json"]),
                       ("manifests.txt", ["manifests", "--stack", stack,
                                          "--out", str(d / "manifests")])):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                app(args, standalone_mode=False)
            except SystemExit as e:
                assert not e.code, (args, e.code)
        (d / name).write_text(buf.getvalue().replace(str(d), "OUT"))
"""


def _run(out: Path, seed: str) -> dict[str, bytes]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "NO_COLOR": "1", "COLUMNS": "120"}
    env.pop("FORCE_COLOR", None)
    subprocess.run([sys.executable, "-c", _RUN, str(out), *STACKS], cwd=REPO, env=env,
                   check=True, timeout=600)
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def test_plan_json_tree_and_manifests_are_byte_identical_across_runs(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", "1")
    second = _run(tmp_path / "b", "2")
    assert sorted(first) == sorted(second)
    differ = [name for name in first if first[name] != second[name]]
    assert differ == []
    # The runs did produce the outputs compared (a tree, resources, the team Roles).
    assert b"stack prod" in first["prod/plan.txt"] and b'"resources": [' in first["prod/plan.json"]
    assert {"prod/manifests/role-vision-raytpu-team-member.yaml",
            "prod/manifests/role-speech-raytpu-team-member.yaml"} <= set(first)


_CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ClusterQueue",
                   "ResourceFlavor", "WorkloadPriorityClass"}


def test_every_namespaced_object_file_names_its_namespace() -> None:
    """Per object of the shipped stacks: its file name is a function of its kind, namespace
    and name alone, and carries the namespace unless the kind is cluster-scoped."""
    from raytpu.plan.engine import run_plan
    from raytpu.plan.objects import objects

    for stack in ("dev", "staging", "prod"):
        names = []
        for obj in objects(run_plan(stack, REPO / "stacks")):
            meta = obj["metadata"]
            name, kind = file_name(obj), obj["kind"].lower()
            if obj["kind"] in _CLUSTER_SCOPED:
                assert "namespace" not in meta and name == f"{kind}-{meta['name']}.yaml"
            else:
                assert name == f"{kind}-{meta['namespace']}-{meta['name']}.yaml"
            names.append(name)
        assert len(names) == len(set(names)), stack


def test_the_same_object_in_two_namespaces_gets_two_files() -> None:
    role = yaml.safe_load("{kind: Role, metadata: {name: team-member, namespace: vision}}")
    other = {**role, "metadata": {**role["metadata"], "namespace": "speech"}}
    assert file_name(role) == "role-vision-team-member.yaml"
    assert file_name(other) == "role-speech-team-member.yaml"
    assert file_name({"kind": "ClusterQueue", "metadata": {"name": "Vision_1"}}) == (
        "clusterqueue-vision-1.yaml")


def test_each_resource_comes_after_its_parent_and_what_it_depends_on(
    stack_previews: dict[str, PlanResult],
) -> None:
    """The order README "Reading the plan" documents: registration order, in which a
    resource follows its parent, its provider and everything it depends on."""
    for stack, result in stack_previews.items():
        seen: set[str] = set()
        for r in result.resources:
            before = [r.parent_urn, r.options.get("provider"), *r.options.get("dependsOn", [])]
            missing = [u for u in before if u and u not in seen]
            assert missing == [], (stack, r.urn)
            seen.add(r.urn)


def test_manifests_are_computed_then_written_as_they_are(
    stack_previews: dict[str, PlanResult], tmp_path: Path,
) -> None:
    from raytpu.operations.manifests import manifest_files, write_plan_manifests

    files = manifest_files(stack_previews["prod"])
    assert list(files)[-1] == "helm-releases.txt" and len(files) > 30
    written = write_plan_manifests(stack_previews["prod"], tmp_path)
    assert [p.name for p in written] == list(files)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == files
