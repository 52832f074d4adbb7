"""docs/configuration.md is generated from the config models and the Args they name: the page
is what the parser accepts, and every key says what it means."""

from __future__ import annotations

from pathlib import Path

from raytpu.config.reference import PAGE, render, sections

ROOT = Path(__file__).resolve().parents[1]


def test_the_configuration_page_is_the_generated_one() -> None:
    page = (ROOT / PAGE).read_text()
    assert page == render(), (
        f"{PAGE} is stale: run `.venv/bin/python -m raytpu.config.reference > {PAGE}`")


def test_every_key_says_what_it_means() -> None:
    bare = [f"{s.path or 'top level'}: {k.name}" for s in sections() for k in s.keys
            if not k.meaning or k.meaning.startswith(("(", "See "))]
    assert bare == []


def test_the_page_covers_every_stack_key_and_nested_object() -> None:
    paths = {s.path for s in sections()}
    assert {"raytpu:slices[]", "raytpu:slices[].autoscaling", "raytpu:cluster.systemPool",
            "raytpu:cluster.maintenance.exclusions[]", "raytpu:network.existing",
            "raytpu:ray.gcsFaultTolerance.memorystore", "raytpu:teams[]", "raytpu:jobs[].train",
            "raytpu:cost"} <= paths
    top = {k.name for s in sections() if s.path == "" for k in s.keys}
    assert {"gcp:project", "raytpu:zone", "raytpu:slices", "raytpu:jobs"} <= top
    assert "stack" not in top  # the stack's name is the file's, not a key


def test_a_key_shows_its_type_default_and_bounds() -> None:
    slices = next(s for s in sections() if s.path == "raytpu:slices[]")
    count = next(k for k in slices.keys if k.name == "count")
    assert (count.type, count.default) == ("integer", "`1`")
    assert count.meaning.endswith("(>= 0)")  # 0: an elastic group starting empty
    cluster = next(s for s in sections() if s.path == "raytpu:cluster")
    channel = next(k for k in cluster.keys if k.name == "releaseChannel")
    assert channel.type == "one of `RAPID`, `REGULAR`, `STABLE`" and channel.default == "`REGULAR`"
    # A key whose meaning is its component Args field's docstring (the section's `args`).
    assert "dnsEndpoint" in {k.name for k in cluster.keys}
