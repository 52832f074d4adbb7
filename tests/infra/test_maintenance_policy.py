"""The cluster's maintenance policy: GKE may upgrade (and so recreate) a multi-host TPU pool
only inside the recurring window and never inside an exclusion. Checked as GKE checks it
(at least 48 h in any 32 days, in windows of at least 4 h) before anything is declared."""

from __future__ import annotations

from typing import Any

import pytest
from infra_support import CLUSTER
from raytpu.components import MaintenanceExclusion, MaintenancePolicyArgs, MaintenanceWindow
from raytpu.config.stack import ConfigError
from raytpu.config.validate import parse_stack_config
from raytpu.plan.engine import PlanResult
from raytpu.plan.tables import tpu_slice_tables
from test_gcp_input_names import gcp_inputs_problems
from test_gke_cluster import plan_gke

SAT = "2026-01-03T02:00:00Z"


def window(hours: int, recurrence: str) -> MaintenanceWindow:
    return MaintenanceWindow(SAT, f"2026-01-03T{2 + hours:02d}:00:00Z", recurrence)


@pytest.mark.parametrize(("hours", "recurrence", "per_32_days"), [
    (6, "FREQ=WEEKLY;BYDAY=SA,SU", 48),       # exactly GKE's minimum
    (12, "FREQ=WEEKLY;BYDAY=SA", 48),
    (4, "FREQ=DAILY", 124),                   # 31 whole occurrences in any 32 days
    (4, "FREQ=WEEKLY;BYDAY=MO,TU,WE", 48),
])
def test_windows_gke_accepts(hours: int, recurrence: str, per_32_days: int) -> None:
    assert window(hours, recurrence).hours_per_32_days == per_32_days


def test_a_window_of_a_whole_day_is_accepted() -> None:
    """One occurrence lasts at most a day, and a day is allowed (a second more is not)."""
    day = MaintenanceWindow(SAT, "2026-01-04T02:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU")
    assert (day.hours, day.hours_per_32_days) == (24, 192)


@pytest.mark.parametrize(("start", "end", "recurrence", "message"), [
    # The common "Saturday 02:00-06:00" leaves 16 h in 32 days: GKE refuses it.
    (SAT, "2026-01-03T06:00:00Z", "FREQ=WEEKLY;BYDAY=SA",
     r"recurrence: 'FREQ=WEEKLY;BYDAY=SA' with 4 h windows leaves 16 h of maintenance in 32 "
     r"days; GKE requires at least 48 h"),
    (SAT, "2026-01-03T05:00:00Z", "FREQ=DAILY",
     r"end_time: '2026-01-03T05:00:00Z' makes a 3 h window: GKE counts only windows of at "
     r"least 4 h"),
    (SAT, "2026-01-05T02:00:00Z", "FREQ=DAILY", r"makes a 48 h window"),
    (SAT, "2026-01-03T01:00:00Z", "FREQ=DAILY", r"makes a -1 h window"),
    ("2026-01-03 02:00", "2026-01-03T08:00:00Z", "FREQ=DAILY",
     r"start_time: '2026-01-03 02:00' is not an RFC 3339 time in UTC"),
    (SAT, "2026-01-03T08:00:00+01:00", "FREQ=DAILY",
     r"end_time: .* is not an RFC 3339 time in UTC"),
    (SAT, "2026-01-03T08:00:00Z", "FREQ=MONTHLY;BYMONTHDAY=1",
     r"recurrence: 'FREQ=MONTHLY;BYMONTHDAY=1' is not FREQ=DAILY or FREQ=WEEKLY;BYDAY="),
    (SAT, "2026-01-03T08:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SA", r"names a day twice"),
    (SAT, "2026-01-04T02:00:01Z", "FREQ=DAILY", r"makes a 24.0003 h window"),
    # RRULE parts beyond the two forms change which days qualify (every 7th day, one hour
    # of each): counted as if every listed day did, they would pass GKE's 48 h unchecked.
    (SAT, "2026-01-03T08:00:00Z", "FREQ=DAILY;INTERVAL=7",
     r"recurrence: 'FREQ=DAILY;INTERVAL=7' is not FREQ=DAILY or FREQ=WEEKLY;BYDAY="),
    (SAT, "2026-01-03T08:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=2",
     r"recurrence: 'FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=2' is not FREQ=DAILY"),
])
def test_windows_gke_refuses_are_refused(start: str, end: str, recurrence: str,
                                         message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MaintenanceWindow(start, end, recurrence)


@pytest.mark.parametrize(("kw", "message"), [
    ({"name": " "}, r"MaintenanceExclusion.name: required"),
    ({"end_time": "2026-01-01T00:00:00Z"},
     r"end_time: '2026-01-01T00:00:00Z' is not after MaintenanceExclusion.start_time"),
    # An exclusion of no length: GKE refuses an end that is not after the start.
    ({"end_time": "2026-02-01T00:00:00Z"},
     r"end_time: '2026-02-01T00:00:00Z' is not after MaintenanceExclusion.start_time"),
    ({"scope": "NO_NODE_UPGRADES"}, r"scope: 'NO_NODE_UPGRADES' is not valid; valid: "
     r"NO_UPGRADES, NO_MINOR_UPGRADES, NO_MINOR_OR_NODE_UPGRADES"),
])
def test_bad_exclusions_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MaintenanceExclusion(**{"name": "run", "start_time": "2026-02-01T00:00:00Z", **kw})


def test_exclusions_are_named_once_and_at_most_twenty() -> None:
    run = MaintenanceExclusion("run", "2026-02-01T00:00:00Z")
    weekend = window(6, "FREQ=WEEKLY;BYDAY=SA,SU")  # exclusions need a window beside them
    with pytest.raises(ValueError, match=r"exclusions\[1\]\.name: 'run' is named twice"):
        MaintenancePolicyArgs(window=weekend, exclusions=(run, run))
    many = tuple(MaintenanceExclusion(f"e{i}", "2026-02-01T00:00:00Z") for i in range(21))
    with pytest.raises(ValueError, match=r"21 exclusions; GKE keeps at most 20"):
        MaintenancePolicyArgs(window=weekend, exclusions=many)
    assert len(MaintenancePolicyArgs(window=weekend, exclusions=many[:20]).exclusions) == 20
    # An exclusion ending a second after it starts is one.
    assert MaintenanceExclusion("s", "2026-02-01T00:00:00Z", "2026-02-01T00:00:01Z").end_time


def test_the_cluster_gets_the_window_and_exclusions() -> None:
    policy = MaintenancePolicyArgs(
        window=window(6, "FREQ=WEEKLY;BYDAY=SA,SU"),
        exclusions=(MaintenanceExclusion("q1-run", "2026-02-01T00:00:00Z",
                                         "2026-02-20T00:00:00Z"),
                    MaintenanceExclusion("hold-nodes", "2026-03-01T00:00:00Z")))
    plan: PlanResult = plan_gke(maintenance=policy)
    inputs = plan.get(CLUSTER, "gke").inputs
    assert inputs["maintenancePolicy"] == {
        "recurringWindow": {"startTime": SAT, "endTime": "2026-01-03T08:00:00Z",
                            "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"},
        "maintenanceExclusions": [
            {"exclusionName": "q1-run", "startTime": "2026-02-01T00:00:00Z",
             "endTime": "2026-02-20T00:00:00Z",
             "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"}},
            # No end: until the minor version's end of support, which GKE takes instead of
            # an end time.
            {"exclusionName": "hold-nodes", "startTime": "2026-03-01T00:00:00Z",
             "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES",
                                  "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}},
        ],
    }
    # Every key is one of pulumi-gcp's (no shipped stack declares an exclusion).
    assert gcp_inputs_problems([(r.type, r.name, r.inputs) for r in plan.resources]) == []


def test_no_policy_leaves_gke_its_defaults() -> None:
    assert "maintenancePolicy" not in plan_gke().get(CLUSTER, "gke").inputs


def test_stack_key_paths_name_the_bad_value() -> None:
    raw = {"gcp:project": "acme-ml", "raytpu:zone": "us-west4-a",
           "raytpu:slices": [{"name": "train", "tpu": "v5litepod-16"}],
           "raytpu:cluster": {"maintenance": {
               "window": {"startTime": SAT, "endTime": "2026-01-03T06:00:00Z",
                          "recurrence": "FREQ=WEEKLY;BYDAY=SA"},
               "exclusions": [{"name": "run", "startTime": "2026-02-01T00:00:00Z",
                               "scope": "NONE"}]}}}
    with pytest.raises(ConfigError) as err:
        parse_stack_config("dev", raw)
    text = str(err.value)
    assert "raytpu:cluster.maintenance.window.recurrence: 'FREQ=WEEKLY;BYDAY=SA' with 4 h" in text
    assert "raytpu:cluster.maintenance.exclusions[0].scope: 'NONE' is not valid" in text


def test_the_plan_says_when_multi_host_slices_may_be_recreated(
        stack_plans: dict[str, PlanResult]) -> None:
    def note(stack: str) -> str:
        (table,) = tpu_slice_tables(stack_plans[stack])
        return next(n for n in table.notes if n.startswith("GKE upgrades"))

    assert "only SA,SU from 02:00 UTC for 6 h." in note("prod")
    assert "at any time (no raytpu:cluster.maintenance.window)." in note("staging")
    # The window bounds GKE's upgrades, not what stops a slice without one.
    for stack in ("prod", "staging"):
        assert note(stack).endswith(
            "Not bounded by the window or exclusions: Compute Engine host maintenance (TPU "
            "VMs do not live-migrate), node auto-repair and critical security patches")


def test_exclusions_without_a_window_are_refused() -> None:
    # The provider's ExactlyOneOf on the window blocks would fail `pulumi preview` on a
    # maintenancePolicy holding exclusions only; refused here, naming the key.
    run = MaintenanceExclusion("run", "2026-02-01T00:00:00Z")
    with pytest.raises(ValueError, match=r"MaintenancePolicyArgs\.window: required with "
                       r"exclusions"):
        MaintenancePolicyArgs(exclusions=(run,))
    raw = {"gcp:project": "acme-ml", "raytpu:zone": "us-west4-a",
           "raytpu:slices": [{"name": "train", "tpu": "v5litepod-16"}],
           "raytpu:cluster": {"maintenance": {
               "exclusions": [{"name": "run", "startTime": "2026-02-01T00:00:00Z"}]}}}
    with pytest.raises(ConfigError, match=r"raytpu:cluster\.maintenance\.window: required "
                       r"with exclusions"):
        parse_stack_config("dev", raw)


@pytest.mark.parametrize(("end", "message"), [
    (None, r"end_time: required for scope NO_UPGRADES: GKE limits it to 30 days"),
    ("2026-03-04T00:00:00Z", r"end_time: '2026-03-04T00:00:00Z' makes a 31-day NO_UPGRADES "
     r"exclusion; GKE limits it to 30 days"),
])
def test_no_upgrades_exclusions_are_bounded(end: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MaintenanceExclusion("freeze", "2026-02-01T00:00:00Z", end, scope="NO_UPGRADES")
    # 30 days is accepted, and the end is emitted as such, without UNTIL_END_OF_SUPPORT.
    freeze = MaintenanceExclusion("freeze", "2026-02-01T00:00:00Z", "2026-03-03T00:00:00Z",
                                  scope="NO_UPGRADES")
    policy = MaintenancePolicyArgs(window=window(6, "FREQ=WEEKLY;BYDAY=SA,SU"),
                                   exclusions=(freeze,))
    (emitted,) = plan_gke(maintenance=policy).get(CLUSTER, "gke").inputs[
        "maintenancePolicy"]["maintenanceExclusions"]
    assert emitted["exclusionOptions"] == {"scope": "NO_UPGRADES"}
    assert emitted["endTime"] == "2026-03-03T00:00:00Z"


def _slice_note(slices: list[dict[str, Any]]) -> list[str]:
    cfg = parse_stack_config("dev", {"gcp:project": "acme-ml", "raytpu:zone": "us-west4-a",
                                     "raytpu:slices": slices})
    (table,) = tpu_slice_tables(PlanResult("dev", cfg, [], {}))
    return [n for n in table.notes if n.startswith("GKE upgrades")]


def test_the_note_comes_with_any_multi_host_group() -> None:
    """One multi-host group beside single-host ones is enough for an upgrade to recreate a
    slice under its job; single-host groups alone get no note."""
    multi = {"name": "train", "tpu": "v5litepod-16"}  # 4 hosts
    single = {"name": "serve", "tpu": "v5litepod-4"}  # 1 host
    (note,) = _slice_note([single, multi])
    assert note.startswith("GKE upgrades node pools, recreating a multi-host slice under its "
                           "job, at any time (no raytpu:cluster.maintenance.window)")
    assert _slice_note([single]) == []
