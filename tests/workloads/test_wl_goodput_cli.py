"""`raytpu goodput PATH`: a run folder's events (memory:// here, as gs:// on a cluster)
reported as text and as JSON, and a folder without events refused."""

from __future__ import annotations

import json
import math
from typing import Any

from raytpu.cli.app import app
from raytpu.workloads.goodput_log import GoodputLog
from test_wl_goodput import _host_kill_run
from typer.testing import CliRunner


def _write(run: str, events: list[dict[str, Any]]) -> None:
    log = GoodputLog(run, "test", flush_s=3600)
    for e in events:
        log.record(e["event"], **{k: v for k, v in e.items() if k != "event"})
    log.flush()


def test_the_goodput_command_reports_a_run_folder() -> None:
    run = "memory://goodput-cli/run-b"
    _write(run, _host_kill_run().events)
    result = CliRunner().invoke(app, ["goodput", run, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["goodput_time"] == 8.0 and out["badput_time"]["restart"] == 5.5
    assert out["incidents"][0]["kind"] == "host" and out["incidents"][0]["seconds"] == 12.5
    text = CliRunner().invoke(app, ["goodput", run])
    assert text.exit_code == 0
    assert "restart" in text.stdout and "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION" in text.stdout
    assert "host        after step 6: 12.5s, 2 steps lost" in text.stdout
    # Young/Daly from the measured save (0.5 s) and median step (1 s), MTBF a day.
    interval = out["checkpoint_interval"]
    assert interval["source"] == "measured" and interval["configured_steps"] == 4
    assert interval["young_daly_steps"] == round(math.sqrt(2 * 0.5 * 86_400))
    assert f"Young/Daly: {interval['young_daly_steps']}" in text.stdout
    short = json.loads(CliRunner().invoke(app, ["goodput", run, "--json", "--mtbf-hours",
                                                "1"]).stdout)
    assert short["checkpoint_interval"]["young_daly_steps"] == round(math.sqrt(2 * 0.5 * 3600))
    bad = CliRunner().invoke(app, ["goodput", run, "--mtbf-hours", "0"])
    assert bad.exit_code == 2 and "--mtbf-hours: 0.0 must be a positive" in bad.stderr


def test_the_goodput_command_refuses_a_folder_without_events() -> None:
    result = CliRunner().invoke(app, ["goodput", "memory://goodput-cli/nothing"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: goodput memory://goodput-cli/nothing: ")
