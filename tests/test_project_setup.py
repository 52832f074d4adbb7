"""The Pulumi project setup a fresh clone's first `pulumi up` relies on.

Pulumi's Python host (pulumi/pulumi sdk/python/toolchain/pip.go, cmd/pulumi-language-python)
creates ``runtime.options.virtualenv`` relative to the project root and runs
``pip install -r requirements.txt`` in the program's folder (``main``: a folder runs its
``__main__.py``); the program then runs from that folder.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml
from raytpu.facts import versions
from test_dependencies import constraints

ROOT = Path(__file__).resolve().parents[1]


def _project() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    return doc


def _program_dir() -> Path:
    main = ROOT / _project()["main"]
    assert main.is_dir(), f"Pulumi.yaml main: {main} is not a folder"
    return main


def test_runtime_installs_into_the_project_virtualenv() -> None:
    runtime = _project()["runtime"]
    assert runtime["name"] == "python"
    assert runtime["options"]["toolchain"] == "pip"
    assert runtime["options"]["virtualenv"] == ".venv"


def test_program_folder_requirements_install_this_package() -> None:
    program = _program_dir()
    assert (program / "__main__.py").is_file()
    lines = [ln.strip() for ln in (program / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    # pip runs in the program folder: the path must lead to this repository's pyproject.
    (spec,) = [ln for ln in lines if ln.startswith("-e ") or ln.startswith(".")]
    target = (program / spec.removeprefix("-e ").strip()).resolve()
    assert target == ROOT
    name = tomllib.loads((target / "pyproject.toml").read_text())["project"]["name"]
    assert name == "raytpu"


def test_program_entry_is_not_inside_the_package() -> None:
    # The package's own __main__ is the CLI; the stack program must be elsewhere.
    assert _program_dir().resolve() not in {ROOT / "infra", ROOT / "components",
                                            ROOT / "workloads"}
    assert "raytpu.program.stack" in (_program_dir() / "__main__.py").read_text()


def test_python_dash_m_raytpu_is_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-c",
         "import runpy, sys\n"
         "sys.argv = ['raytpu', '--help']\n"
         "try:\n"
         "    runpy.run_module('raytpu', run_name='__main__')\n"
         "except SystemExit as e:\n"
         "    assert e.code in (0, None), e.code\n"
         "assert 'raytpu.program.stack' not in sys.modules, 'the stack program was imported'\n"
         "print('OK')\n"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "plan" in proc.stdout and "submit" in proc.stdout
    assert proc.stdout.rstrip().endswith("OK")


def test_program_entry_runs_the_stack_program() -> None:
    from raytpu.plan.engine import load_stack_file, run_program

    raw = load_stack_file("dev", ROOT / "stacks")
    entry = str(_program_dir())
    via_entry = run_program("dev", raw, lambda: runpy.run_path(entry, run_name="__main__"))
    direct = run_program("dev", raw)
    assert sorted((r.type, r.name) for r in via_entry.resources) == sorted(
        (r.type, r.name) for r in direct.resources)


def _pulumi_action_steps() -> list[tuple[str, dict[str, Any]]]:
    steps = []
    for wf in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        doc = yaml.safe_load(wf.read_text())
        for job in doc["jobs"].values():
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("pulumi/actions@"):
                    steps.append((wf.name, step.get("with") or {}))
    return steps


def test_workflows_pin_the_pulumi_cli_of_the_pinned_sdk() -> None:
    steps = _pulumi_action_steps()
    assert {name for name, _ in steps} >= {"preview.yml", "deploy.yml"}
    for name, with_ in steps:
        assert str(with_.get("pulumi-version")) == versions.PULUMI_VERSION, name
    assert constraints()["pulumi"] == versions.PULUMI_VERSION


def test_installed_pulumi_sdk_is_the_pinned_one() -> None:
    from importlib.metadata import version

    assert version("pulumi") == versions.PULUMI_VERSION


def test_test_modules_have_unique_basenames() -> None:
    # pytest's default import mode puts each test folder on sys.path and imports its files
    # by basename, so two test_x.py in different folders fail collection of the whole run
    # (as tests/ray and tests/rehearse once did) even though each folder passes alone.
    seen: dict[str, Path] = {}
    files = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    for path in files:
        if path.name in ("conftest.py", "__init__.py") or ".venv" in path.parts:
            continue
        if not (path.name.startswith("test_") or (path.parent / "conftest.py").exists()):
            continue
        other = seen.setdefault(path.name, path)
        assert other == path, f"{path.relative_to(ROOT)} and {other.relative_to(ROOT)}: same name"
