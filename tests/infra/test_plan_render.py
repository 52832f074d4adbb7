"""`raytpu plan` read by a person: every value whole at 80, 100 and 200 columns, children
under their real parents, plain text when piped, and a one-line summary at the end."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from infra_support import REPO, STACKS
from raytpu.plan import render as plan_render
from raytpu.plan.engine import PlanResult
from raytpu.plan.render import plan_tree, render_plan, summary_line
from raytpu.plan.tables import PlanTable
from rich.console import Console
from rich.tree import Tree

WIDTHS = (80, 100, 200)


def render(result: PlanResult, width: int) -> str:
    out = io.StringIO()
    render_plan(result, [], Console(file=out, width=width, color_system=None))
    return out.getvalue()


def squash(text: str) -> str:
    """The text without the line breaks and indents that wrapping and folding add."""
    return re.sub(r"\s+", "", text)


def assert_whole(text: str, value: str, width: int) -> None:
    """``value`` is printed uncut: on one line when a line can hold it (with its label),
    else folded over lines with nothing lost."""
    if len(value) <= width // 2:
        assert any(value in line for line in text.splitlines()), (value, width)
    else:
        assert squash(value) in squash(text), (value, width)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("stack", STACKS)
def test_every_value_is_whole(stack: str, width: int,
                              stack_previews: dict[str, PlanResult]) -> None:
    result = stack_previews[stack]
    text = render(result, width)
    assert "…" not in text and "..." not in squash(text).replace("..", "")
    too_long = [line for line in text.splitlines() if len(line.rstrip()) > width]
    assert not too_long, too_long
    tables = [t for source in plan_render.TABLE_SOURCES for t in source(result)]
    assert tables
    for table in tables:
        assert_whole(text, table.title, width)
        for row in table.rows:
            for cell in row:
                assert_whole(text, cell, width)
        for note in table.notes:
            assert squash(note) in squash(text)
    for r in result.resources:
        assert_whole(text, r.name, width)
        assert_whole(text, r.type, width)
    # The summary ends the output, whole.
    assert squash(text).endswith(squash(summary_line(result)))


def test_a_new_section_is_a_data_function(monkeypatch: pytest.MonkeyPatch,
                                          stack_previews: dict[str, PlanResult]) -> None:
    image = "us-docker.pkg.dev/acme/images/trainer@sha256:" + "0123456789abcdef" * 4
    extra = PlanTable("Image builds", ["image", "context", "digest pinned", "builder", "cache"],
                      [["trainer", "workloads/", image, "cloud-build-default-pool", "[none]"]],
                      notes=["built by [secret] runner"])
    monkeypatch.setattr(plan_render, "TABLE_SOURCES",
                        (*plan_render.TABLE_SOURCES, lambda _: [extra]))
    for width in WIDTHS:
        text = render(stack_previews["dev"], width)
        for cell in extra.rows[0]:
            assert_whole(text, cell, width)
        assert "built by [secret] runner" in text  # values are text, not rich markup
    # At 80 columns the table is too wide for a grid: one key/value block per row.
    narrow = render(stack_previews["dev"], 80).splitlines()
    assert "  image trainer" in narrow
    assert "    cache          [none]" in narrow


def test_table_rows_must_match_columns() -> None:
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        PlanTable("t", ["a", "b", "c"], [["1", "2"]])


def _parent_label(tree: Tree, label: str) -> str | None:
    """The label of the node holding the child whose label is ``label``."""
    for child in tree.children:
        if str(child.label) == label:
            return str(tree.label)
        found = _parent_label(child, label)
        if found is not None:
            return found
    return None


def test_tree_puts_children_under_their_real_parent(
        stack_previews: dict[str, PlanResult]) -> None:
    # The VPC component and the GKE cluster are both named after the cluster: by name, the
    # cluster's children landed under the network.
    tree = plan_tree(stack_previews["dev"])
    assert _parent_label(tree, "raytpu-dev gcp:container/cluster:Cluster") == \
        "raytpu-dev raytpu:gke:GkeCluster"
    assert _parent_label(tree, "raytpu-dev gcp:compute/network:Network") == \
        "raytpu-dev raytpu:network:Network"
    assert _parent_label(tree, "raytpu-dev-system gcp:container/nodePool:NodePool") == \
        "raytpu-dev raytpu:gke:GkeCluster"


def test_summary_counts_slices_chips_and_kinds(stack_previews: dict[str, PlanResult]) -> None:
    # prod: v5e-16 (16 chips) count 1, autoscaling 0..4; v5e-8-eval (8 chips) exactly 1.
    line = summary_line(stack_previews["prod"])
    assert line.startswith("Plan: 2 TPU slices, 24 chips at the configured count (autoscaling "
                           "1..7 slices, 8..104 chips), $21,343.37 (autoscaling $7,327.38 - ")
    # GCS fault tolerance's Memorystore has no sourced price: out of the total, said so.
    assert ") (not priced: gcs-redis) / month" in line
    prod = stack_previews["prod"]
    assert f" / month; + {len(prod.resources)} to create: " in line
    n_pools = len(prod.by_type("gcp:container/nodePool:NodePool"))
    assert f"{n_pools} NodePool" in line and "1 Cluster" in line and "1 RayCluster" in line
    assert "\n" not in line


def test_piped_plan_is_plain_and_fits_columns() -> None:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "raytpu", "plan", "--stack", "dev"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout  # no colour or cursor codes
    assert all(len(line.rstrip()) <= 80 for line in proc.stdout.splitlines())
    summary = proc.stdout[proc.stdout.rindex("Plan: "):]  # the summary ends the output
    assert " ".join(summary.split()).startswith(
        "Plan: 1 TPU slice, 4 chips at the configured count, $")
