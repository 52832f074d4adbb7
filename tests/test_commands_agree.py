"""Every command that reads a stack -- ``plan``, ``manifests``, ``cost``, ``status``,
``submit``, ``rehearse`` -- accepts and refuses exactly the same stacks with the same
lines. Each case of the bad-input table (``test_config_bad_input``) and each component-level
case below is refused by the one loading path (``raytpu.program.load.validated_config``),
and each command's wiring to it is proven once per kind of case (a top-level key, an entry
of a list, a nested object, a component's own check): through the real command line (the
typer app, in process) every command exits 2 with exactly the loading path's lines on
stderr and nothing on stdout. Component and config problems come in one report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from raytpu.cli.app import app
from raytpu.config.stack import ConfigError
from raytpu.program.load import validated_config
from test_config_bad_input import BASE, CASES, dotted, place
from typer.testing import CliRunner, Result

COMMANDS: dict[str, tuple[str, ...]] = {
    "plan": ("plan", "--json"),
    "manifests": ("manifests", "--out", "{tmp}/manifests"),
    "cost": ("cost", "--json"),
    "status": ("status", "--json", "--kubeconfig", "{tmp}/no-kubeconfig"),
    "submit": ("submit", "--dry-run"),
    # An empty cache: a refused stack must exit before anything is built.
    "rehearse": ("rehearse", "--cache-dir", "{tmp}/rehearse-cache"),
}

# Stacks only a component's Args refuse (the config models accept each value alone).
COMPONENT_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("system pool min above max",
     {"raytpu:cluster": {"systemPool": {"minNodes": 5, "maxNodes": 2}}},
     "raytpu:cluster.systemPool.maxNodes: 2 is below raytpu:cluster.systemPool.minNodes (5)"),
    ("system pool min 0", {"raytpu:cluster": {"systemPool": {"minNodes": 0}}},
     "raytpu:cluster.systemPool.minNodes: 0 is below 1"),
    ("ray cluster name too long", {"raytpu:ray": {"clusterName": "r" * 60}},
     "raytpu:ray.clusterName: "),
    ("overlapping ranges", {"raytpu:network": {"podsCidr": "10.0.0.0/14"}},
     "raytpu:network.subnetCidr: 10.0.0.0/20 overlaps raytpu:network.podsCidr 10.0.0.0/14"),
]

runner = CliRunner()


def _run(tmp_path: Path, raw: dict[str, Any],
         names: tuple[str, ...] = tuple(COMMANDS)) -> dict[str, Result]:
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": raw}))
    out = {}
    for name in names:
        args = COMMANDS[name]
        argv = [a.format(tmp=tmp_path) for a in args]
        out[name] = runner.invoke(app, [*argv, "--stack", "t", "--stacks-dir", str(tmp_path)])
    if "rehearse" in out and out["rehearse"].exit_code == 2:
        assert not (tmp_path / "rehearse-cache").exists()  # refused before any build
    return out


def _refused_alike(results: dict[str, Result]) -> str:
    for name, r in results.items():
        assert r.exit_code == 2, (name, r.exit_code, r.output, r.exception)
        assert r.stdout == "", (name, r.stdout)
        assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr, (name, r.stderr)
    texts = {name: r.stderr for name, r in results.items()}
    assert len(set(texts.values())) == 1, texts
    return texts["plan"]


def _loading_path_problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as e:
        validated_config("t", raw)
    return e.value.problems


@pytest.mark.parametrize(("path", "value", "suffix"), CASES)
def test_the_loading_path_refuses_each_bad_value(
    path: tuple[str | int, ...], value: Any, suffix: str
) -> None:
    # It names the very key the table refuses it at (the path plus its suffix).
    key = dotted(path) + suffix
    problems = _loading_path_problems(place(path, value))
    assert any(p.startswith(f"{key}:") for p in problems), (key, problems)


@pytest.mark.parametrize(("raw", "expected"), [pytest.param(r, e, id=i)
                                              for i, r, e in COMPONENT_CASES])
def test_the_loading_path_refuses_what_a_component_refuses(
    raw: dict[str, Any], expected: str
) -> None:
    problems = _loading_path_problems({**BASE, **raw})
    assert any(p.startswith(expected) for p in problems), problems


def _first_case(*path: str | int) -> Any:
    return next(pytest.param(*c.values, id=c.id) for c in CASES if c.values[0] == path)


# One case of each kind for the commands' wiring: a top-level key, a list entry's key, a
# nested object's key, and a stack only a component's Args refuse.
WIRING = [_first_case("gcp:project"), _first_case("raytpu:slices", 0, "count"),
          _first_case("raytpu:cluster", "systemPool", "minNodes")]


@pytest.mark.parametrize(("path", "value", "suffix"), WIRING)
def test_every_command_prints_the_loading_paths_lines_for_a_bad_value(
    tmp_path: Path, path: tuple[str | int, ...], value: Any, suffix: str
) -> None:
    raw = place(path, value)
    text = _refused_alike(_run(tmp_path, raw))
    assert text.splitlines() == [f"error: {p}" for p in _loading_path_problems(raw)]


def test_every_command_prints_the_loading_paths_lines_for_a_component_problem(
    tmp_path: Path
) -> None:
    _, raw, expected = COMPONENT_CASES[0]
    text = _refused_alike(_run(tmp_path, {**BASE, **raw}))
    assert text.splitlines() == [f"error: {p}" for p in _loading_path_problems({**BASE, **raw})]
    assert text.splitlines()[0].startswith(f"error: {expected}")


def test_config_and_component_problems_come_in_one_report(tmp_path: Path) -> None:
    # A key the models refuse, one only the system pool's Args refuse, one the config's
    # rules refuse and one only the RayCluster's Args refuse: one report, in that order.
    raw = {**BASE, "raytpu:cluster": {"releaseChannel": "NOPE",
                                      "systemPool": {"minNodes": 5, "maxNodes": 2}},
           "raytpu:kuberay": {"version": "latest"}, "raytpu:ray": {"clusterName": "r" * 50}}
    lines = _refused_alike(_run(tmp_path, raw)).splitlines()
    assert lines[:3] == [
        "error: raytpu:cluster.releaseChannel: 'NOPE' is not valid; valid: 'RAPID', "
        "'REGULAR', 'STABLE'",
        "error: raytpu:cluster.systemPool.maxNodes: 2 is below "
        "raytpu:cluster.systemPool.minNodes (5)",
        "error: raytpu:kuberay.version: 'latest' is not a version (e.g. 1.7.0, "
        "1.31.2-gke.1115000)",
    ]
    assert lines[3].startswith("error: raytpu:slices[0].name: 'train' with raytpu:ray.clusterName ")
    # ... and nothing that only follows from a refused value: the auth rule compares the bad
    # version, the head's fit reads the refused system pool.
    assert len(lines) == 4, lines


def test_a_refused_system_pool_is_not_checked_again_with_its_defaults(tmp_path: Path) -> None:
    raw = {**BASE, "raytpu:cluster": {"systemPool": {"machineType": "n2-standard-2",
                                                     "minNodes": 0}}}
    assert _refused_alike(_run(tmp_path, raw)).splitlines() == [
        "error: raytpu:cluster.systemPool.minNodes: 0 is below 1 (kube-system and the "
        "operators need a node)"]


def test_a_good_stack_is_accepted_by_every_command_that_reads_it_offline(tmp_path: Path) -> None:
    # Not rehearse: with a good stack it goes on to build and start the control plane
    # (tests/rehearse does that).
    results = _run(tmp_path, BASE, tuple(n for n in COMMANDS if n != "rehearse"))
    for name in ("plan", "manifests", "cost", "submit"):
        assert results[name].exit_code == 0, (name, results[name].output)
    # status reads the stack, then the cluster: the missing kubeconfig is a runtime failure.
    assert results["status"].exit_code == 1
    assert "cannot read the cluster" in results["status"].stderr
