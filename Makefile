# Quipu: `make run` starts the service on the embedded default; `make test` runs everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Both targets install the versions pinned in requirements/lock.txt (pip constraints, compiled
# from pyproject.toml's ranges by `make lock`), so a clone installs tomorrow what it installed
# today. PIP_CONSTRAINT reaches the isolated build of the editable install too (setuptools).
# `make test-latest` empties LOCK to try the newest versions the ranges allow.
LOCK   ?= requirements/lock.txt
PIP    := $(if $(LOCK),PIP_CONSTRAINT=$(abspath $(LOCK))) $(BIN)/python -m pip install --quiet
HASH   := $(shell cat pyproject.toml $(LOCK) Makefile | sha256sum | cut -c1-12)
STAMP  := $(VENV)/.installed-$(HASH)
# `make run` needs only the runtime dependencies (no test tools, no optional extras).
RUN_STAMP := $(VENV)/.runtime-$(HASH)

.PHONY: run test test-latest lock lint typecheck unit bench clean mutate docs-screenshots

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) pip setuptools wheel
	$(PIP) -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

$(RUN_STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) pip setuptools wheel
	$(PIP) -e .
	rm -f $(VENV)/.runtime-*
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/quipu serve

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

# The suite runs on SQLite, the throwaway PostgreSQL and a three-node Citus cluster (built from
# source the first time, 4-7 min on 2 cores, needs root and apt: docs/scale-out.md, "Testing"),
# which is built and started while the venv is made and lint and mypy run. The console's browser
# tests need Debian's Chromium: installed first when missing (docs/testing-browser.md).
# pytest runs in TEST_WORKERS processes (pytest-xdist), whole files to a process so each file's
# servers and browser start once; `make test TEST_WORKERS=0` runs it in this process.
TEST_WORKERS ?= 2
test:
	bash scripts/ensure-chromium.sh
	bash scripts/with-citus.sh --meanwhile '$(MAKE) --no-print-directory lint typecheck VENV=$(VENV) LOCK=$(LOCK)' \
		env TESTDB_PYTHON=$(BIN)/python QUIPU_LOCK=$(LOCK) bash scripts/leaves-clean.sh \
		bash scripts/with-testdb.sh $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

# The whole suite against the newest releases pyproject.toml's ranges allow, in its own venv
# (docs/development.md): how an upstream change is found on purpose, not by a failed landing.
test-latest:
	$(MAKE) --no-print-directory test VENV=.venv-latest LOCK=

# The console screenshots of docs/console.md, refreshed on purpose (make test writes its own
# to a temporary folder and leaves the checkout clean).
docs-screenshots: $(STAMP)
	bash scripts/ensure-chromium.sh
	QUIPU_SCREENSHOTS=$(CURDIR)/docs/console $(BIN)/pytest -q tests/console -k 'not postgres'

# Re-resolve requirements/lock.txt to the newest versions the ranges allow; commit the result
# after `make test` passes on it.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml requirements/tools.in --all-extras --upgrade \
		--python-version 3.11 --universal --custom-compile-command 'make lock' -o $(LOCK)

clean:
	rm -rf $(VENV) .venv-latest .mypy_cache .ruff_cache .pytest_cache

# Mutation runs over the safety-critical modules (hold checks, erase, scope resolution, secret
# and injection screens), each against its own tests: slow, so not in `make test`.
# `make mutate MUTATE_ONLY=holds` runs one (scripts/mutate.sh lists them).
mutate: $(STAMP)
	$(PIP) -e '.[dev,mutate]'
	MUTATE_ONLY=$(MUTATE_ONLY) PYTHON=$(BIN)/python bash scripts/mutate.sh
