"""What a person reads from every command, at 80, 100 and 200 columns: help texts whole
(no rich markup eating ``[secret]``, no cut option help), tables whole, warnings once."""

from __future__ import annotations

import re

import pytest
from raytpu.cli.app import app
from typer.main import get_command
from typer.testing import CliRunner

WIDTHS = (80, 100, 200)


def squash(text: str) -> str:
    """Whitespace-normalized, box-drawing characters removed (text wrapped in a panel)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _commands() -> dict[str, object]:
    group = get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(_commands()))
def test_help_keeps_every_word(name: str, width: int) -> None:
    command = _commands()[name]
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": str(width),
                                                             "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output, result.output
    assert max(len(line) for line in result.output.splitlines()) <= width
    text = squash(result.output)
    for param in command.params:  # type: ignore[attr-defined]
        if getattr(param, "help", None):
            assert squash(param.help) in text, (param.name, param.help, result.output)
    doc = (command.help or "").split("\n\n")[0]  # type: ignore[attr-defined]
    assert squash(doc) in text


def test_plan_help_shows_the_secret_placeholder() -> None:
    result = CliRunner().invoke(app, ["plan", "--help"], env={"COLUMNS": "100"})
    assert "instead of [secret]" in squash(result.output)


@pytest.mark.parametrize("width", WIDTHS)
def test_command_list_keeps_each_first_sentence_whole(width: int) -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0
    commands = result.output.split("Commands:", 1)[1]
    assert "..." not in commands and "…" not in commands, result.output
    text = squash(result.output)
    for name, command in _commands().items():
        first = (command.help or "").split(". ")[0]  # type: ignore[attr-defined]
        assert f"{name} {squash(first)}" in text, (name, result.output)


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_warnings_are_printed_once_and_wrapped(width: int) -> None:
    import os
    import subprocess
    import sys

    from infra_support import REPO, STACKS_DIR
    from raytpu.plan.engine import run_plan

    warnings = run_plan("prod", STACKS_DIR, preview=True).warnings
    assert len(warnings) >= 2 and all(len(w) > width for w in warnings)
    proc = subprocess.run([sys.executable, "-m", "raytpu", "plan", "--stack", "prod"],
                          cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
                          env={**os.environ, "COLUMNS": str(width), "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # not also on stderr through pulumi.log.warn
    assert max(len(line) for line in proc.stdout.splitlines()) <= width
    out = squash(proc.stdout)
    for w in warnings:
        assert out.count(squash(w)) == 1, w


def _assert_table_whole(text: str, tables: list[object], width: int) -> None:
    from test_plan_render import assert_whole

    assert "…" not in text, text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width, text
    for table in tables:
        for row in table.rows:  # type: ignore[attr-defined]
            for cell in row:
                assert_whole(text, cell, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_cost_prints_every_amount_whole(width: int) -> None:
    from infra_support import STACKS_DIR
    from raytpu.config.validate import parse_stack_config
    from raytpu.operations.cost import cost_table
    from raytpu.plan.cost import cost_of
    from raytpu.plan.engine import load_stack_file

    result = CliRunner().invoke(app, ["cost", "--stack", "prod"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    table = cost_table(cost_of(parse_stack_config("prod", load_stack_file("prod", STACKS_DIR))))
    assert any("$14,016.00" in row for row in table.rows)  # v5e-16 a month at count
    _assert_table_whole(result.output, [table], width)


@pytest.mark.parametrize("width", WIDTHS)
def test_catalog_prints_machine_types_and_labels_whole(width: int) -> None:
    from raytpu.operations.catalog import catalog_table

    result = CliRunner().invoke(app, ["catalog"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    table = catalog_table()
    # v5e-8 on one 8-chip VM or two 4-chip VMs: the two machine types stay distinct.
    assert {r[4] for r in table.rows if r[0] == "v5litepod-8"} == {
        "ct5lp-hightpu-8t", "ct5lp-hightpu-4t"}
    _assert_table_whole(result.output, [table], width)


@pytest.mark.parametrize("width", WIDTHS)
def test_status_tables_are_whole(width: int) -> None:
    import io

    from infra_support import STACKS_DIR
    from raytpu.config.validate import parse_stack_config
    from raytpu.operations.status import fleet_status
    from raytpu.operations.status_render import render_status, status_tables
    from raytpu.plan.engine import load_stack_file
    from rich.console import Console

    class Empty:  # a cluster with no TPU nodes, no Ray pods, no Kueue objects yet
        def nodes(self) -> list[object]:
            return []

        def ray_pods(self, namespace: str, cluster: str) -> list[object]:
            return []

        def ray_cluster(self, namespace: str, name: str) -> None:
            return None

        def workloads(self, namespace: str) -> list[dict[str, object]]:
            return []

        def cluster_queues(self) -> list[dict[str, object]]:
            return []

        def kuberay_pods(self, namespace: str) -> list[object]:
            return []

        def ray_clusters(self, namespace: str) -> list[dict[str, object]]:
            return []

        def events(self, namespace: str) -> list[object]:
            return []

    view = fleet_status(parse_stack_config("prod", load_stack_file("prod", STACKS_DIR)),
                        Empty())
    out = io.StringIO()
    render_status(view, "a test", Console(file=out, width=width, color_system=None))
    tables = status_tables(view)
    assert [t.title for t in tables] == ["slice groups", "teams"]
    _assert_table_whole(out.getvalue(), tables, width)
