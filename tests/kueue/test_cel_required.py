"""The Kueue CEL-rule tests cannot skip in CI: cel-python is a dev dependency, and where it
is missing with ``RAYTPU_REQUIRE_CRDS=1`` they fail instead of skipping."""

from __future__ import annotations

import sys
import tomllib

import kueue_support
import pytest
from _pytest.outcomes import Failed, Skipped
from kueue_support import REPO
from packaging.requirements import Requirement


def test_cel_python_is_in_the_dev_extra() -> None:
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["dev"]
    assert "cel-python" in {Requirement(d).name for d in dev}


@pytest.mark.parametrize("required, outcome", [("1", Failed), ("", Skipped)])
def test_missing_cel_python_fails_where_crds_are_required(
        monkeypatch: pytest.MonkeyPatch, required: str, outcome: type[BaseException]) -> None:
    monkeypatch.setitem(sys.modules, "celpy", None)  # `import celpy` raises ImportError
    monkeypatch.setenv("RAYTPU_REQUIRE_CRDS", required)
    with pytest.raises(outcome, match="cel-python is not installed"):
        kueue_support.require_cel()
