# Quipu: `make run` starts the service on the embedded default; `make test` runs everything.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml | sha256sum | cut -c1-12)
STAMP  := $(VENV)/.installed-$(HASH)
# `make run` needs only the runtime dependencies (no test tools, no optional extras).
RUN_STAMP := $(VENV)/.runtime-$(HASH)

.PHONY: run test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
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
	bash scripts/with-citus.sh --meanwhile '$(MAKE) --no-print-directory lint typecheck' \
		bash scripts/with-testdb.sh $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
