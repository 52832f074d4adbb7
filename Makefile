# The short loop and the tiers (tests/conftest.py sets each test's tier). Needs the dev
# install of the README's test command: .venv with '.[dev,workloads]'.
PY := .venv/bin/python

.PHONY: check test plan-tier process-tier cluster-tier

# Before every push: the unit tier, ruff and mypy (about a minute on 2 cores).
check:
	.venv/bin/ruff check .
	.venv/bin/mypy -p raytpu
	$(PY) -m pytest -q -m unit tests

# Everything, as CI runs it (the README's test command).
test:
	$(PY) -m pytest

plan-tier:
	$(PY) -m pytest -q -m plan tests

process-tier:
	$(PY) -m pytest -q -m process tests

cluster-tier:
	$(PY) -m pytest -q -m cluster tests
