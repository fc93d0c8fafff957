# The two commands a fresh machine needs:
#   make demo   - install, build the local control plane, run kueue-tas beside Kueue on a demo topology
#   make test   - install, lint (format, style, types, import layers, dependencies, Dockerfile, Helm chart,
#                 the docs site), unit + property tests, then the e2e suite on a real local cluster (its
#                 image test builds the image first when build/ has none for this version)
#   make image  - the controller image from the Dockerfile (buildah; base made from Debian's
#                 packages once, cached in ~/.cache/kueue-tas/image) -> build/kueue-tas-<version>.oci.tar
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install lock lint docs test unit e2e image chaos chaos-smoke dst demo down bench bench-placement-vs-kueue bench-vs-kueue bench-quality clean

# The chaos campaign (e2e/chaos): RUNS runs from seed SEED on its own local cluster.
RUNS ?= 100
SEED ?= 1
CHAOS_ARGS ?=

# Installs are locked: every package at the version and hashes of requirements/dev.lock (the
# package's own ranges stay in pyproject.toml), built without build isolation so that setuptools
# is the locked one too. `make lock` moves the locks to today's releases within those ranges.
LOCKS := requirements/dev.lock requirements/runtime.lock requirements/build.lock

$(STAMP): pyproject.toml requirements/dev.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r requirements/build.lock
	$(PY) -m pip install -q --require-hashes -r requirements/dev.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	$(PY) -m pip check
	touch $(STAMP)

install: $(STAMP)

UV_VERSION ?= 0.13.9
UV := $(VENV)-lock/bin/uv
LOCK_ARGS := --generate-hashes --python-version 3.11 --no-header --annotation-style line --upgrade -q
lock:
	$(PYTHON) -m venv $(VENV)-lock
	$(VENV)-lock/bin/pip install -q uv==$(UV_VERSION)
	$(UV) pip compile pyproject.toml requirements/build.in --extra dev $(LOCK_ARGS) -o requirements/dev.lock
	$(UV) pip compile pyproject.toml $(LOCK_ARGS) -c requirements/dev.lock -o requirements/runtime.lock
	$(UV) pip compile requirements/build.in $(LOCK_ARGS) -c requirements/dev.lock -o requirements/build.lock
	sed -i 's/# via -c requirements\/dev.lock, /# via /' requirements/runtime.lock requirements/build.lock

# The last steps: charts/kueue-tas through `helm lint --strict` and Kubernetes' schemas (offline),
# default values and every option on; helm is built on first use (e2e/build.py); every overlay
# under manifests/ through `kustomize build`, with kubectl 1.32's kustomize (v5.5) and the newest
# (built on first use too); the locks through pip-audit against PyPI's advisories (skipped with a
# line saying so when PyPI's JSON API is unreachable, e2e/advisories.py); the docs site.
lint: $(STAMP)
	$(VENV)/bin/ruff format --check kueue_tas tests e2e benchmarks docs/hooks
	$(VENV)/bin/ruff check kueue_tas tests e2e benchmarks docs/hooks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/deptry .
	$(VENV)/bin/hadolint Dockerfile
	$(PY) -m e2e.chart_lint
	$(PY) -m e2e.kustomize
	$(PY) -m e2e.advisories
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The docs site (mkdocs.yml, docs/) into site/; --strict: a broken link or anchor, or a page
# missing from the nav, fails. `$(VENV)/bin/mkdocs serve` to browse it while writing.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

unit: $(STAMP)
	$(PY) -m pytest -q tests

e2e: $(STAMP)
	$(PY) -m pytest -q e2e/tests

# Installs buildah and mmdebstrap with apt-get when missing; the version is the git tag's.
image: $(STAMP)
	$(PY) -m e2e.image

# Runs on its own cluster (~/.cache/kueue-tas/chaos-run), started and stopped by the campaign.
chaos: $(STAMP)
	$(PY) -m e2e.chaos --runs $(RUNS) --seed $(SEED) $(CHAOS_ARGS)

# Three short runs (25 s of faults each, ~3 min with the cluster's start and stop): part of `make test`.
chaos-smoke: $(STAMP)
	$(PY) -m e2e.chaos --runs 3 --seed $(SEED) --duration 25 $(CHAOS_ARGS)

# Deterministic simulation (tests/dst): RUNS schedules from seed SEED, the profiles in turn unless
# PROFILE names one. Prints schedules/minute, the fault mix and, for a violation, the seed, the
# invariant, the history's tail and the command that replays it. Its smoke runs in `unit`.
PROFILE ?=
DST_ARGS ?=
dst: $(STAMP)
	PYTHONHASHSEED=0 $(PY) tests/dst/dst_sim.py --runs $(RUNS) --seed $(SEED) $(if $(PROFILE),--profile $(PROFILE)) $(DST_ARGS)

test: lint unit e2e chaos-smoke

demo: $(STAMP)
	$(PY) -m e2e.demo

down: $(STAMP)
	$(PY) -m e2e.cluster down

bench: $(STAMP)
	$(PY) benchmarks/placement.py

# Our engine against Kueue's own Go placement (benchmarks/kueue_go, built on first use) on the
# same scenario files, 1,000 / 10,000 / 50,000 nodes. On demand only: not part of `make test`.
PLACEMENT_VS_KUEUE_ARGS ?=
bench-placement-vs-kueue: $(STAMP)
	$(PY) benchmarks/placement_vs_kueue.py $(PLACEMENT_VS_KUEUE_ARGS)

# Kueue's built-in TAS vs kueue-tas end to end on the local cluster (brought up if needed),
# alternating pairs per trace shape; ~1 h for the defaults. On demand only: not part of `make test`.
VS_KUEUE_ARGS ?= --shapes uncontended,contended --pairs 3
bench-vs-kueue: $(STAMP)
	$(PY) -m e2e.cluster up
	$(PY) -m benchmarks.vs_kueue $(VS_KUEUE_ARGS)

# Placement quality (benchmarks/quality): a discrete-event simulator driving our own placement
# pipeline on seeded traces. The defaults: Kueue-exact placement on shapes A, B and C, 3 seeds,
# 300 h each (about 2 min of CPU; 52 min on the shared development machine); `--policy all`
# puts reservations and preemption beside it (far longer on C). On demand only: not in `make test`.
BENCH_QUALITY_ARGS ?=
bench-quality: $(STAMP)
	$(PY) -m benchmarks.quality $(BENCH_QUALITY_ARGS)

clean:
	rm -rf $(VENV) build site *.egg-info
