# The two commands a fresh machine needs:
#   make demo   - install, build the local control plane, run kueue-tas beside Kueue on a demo topology
#   make test   - install, lint (format, style, types, import layers, dependencies, Dockerfile),
#                 unit + property tests, then the e2e suite on a real local cluster
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install lint test unit e2e demo down bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff format --check kueue_tas tests e2e benchmarks
	$(VENV)/bin/ruff check kueue_tas tests e2e benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/deptry .
	$(VENV)/bin/hadolint Dockerfile

unit: $(STAMP)
	$(PY) -m pytest -q tests

e2e: $(STAMP)
	$(PY) -m pytest -q e2e/tests

test: lint unit e2e

demo: $(STAMP)
	$(PY) -m e2e.demo

down: $(STAMP)
	$(PY) -m e2e.cluster down

bench: $(STAMP)
	$(PY) benchmarks/placement.py

clean:
	rm -rf $(VENV) build *.egg-info
