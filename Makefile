# qinglong -- `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)
PYTEST_ARGS ?=
TEST_WORKERS ?= 6

.DEFAULT_GOAL := help
.PHONY: help install demo demo-cluster demo-standalone test test-long fuzz test-fast test-unit test-faults soak bench bench-standalone bench-finish bench-dashboard bench-dispatch lint typecheck clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 20

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "qinglong needs Python 3.11 or newer (set PYTHON=python3.11)"; exit 1; }
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## Create .venv and install qinglong with its dev tools

demo: demo-cluster ## Run the demo: 3 replicas and 2 workers on an embedded PostgreSQL 18 (~75 s)

demo-cluster: $(STAMP) ## Cluster demo: embedded PostgreSQL 18, 21 triggers, 3 replicas and 2 workers, one of each killed
	PYTHONPATH=$(CURDIR) $(BIN)/python scripts/demo_cluster.py

demo-standalone: $(STAMP) ## Standalone demo: SQLite, 1 s and 5 s triggers, ~20 s, then a summary
	PYTHONPATH=$(CURDIR) $(BIN)/python scripts/demo_standalone.py

test: $(STAMP) ## Run the whole test suite (lint and types included) on TEST_WORKERS=6 workers (the timed tests on three of them, first); prints the slowest tests; QL_CPU_PROFILE=FILE writes each test's CPU seconds, worker and times to FILE
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 -m "not long" $(PYTEST_ARGS)

test-long: $(STAMP) ## The real-scale runs make test leaves out (marked long): e.g. a webhook receiver down for a full minute
	$(BIN)/python -m pytest --durations=10 -m long $(PYTEST_ARGS)

fuzz: $(STAMP) ## The API fuzzed from its OpenAPI document at length, on SQLite and PostgreSQL (FUZZ_EXAMPLES=150 per route and mode, FUZZ_SEED=23); prints the case count
	$(BIN)/python -m pytest -m long -rP tests/e2e/test_api_fuzz.py $(PYTEST_ARGS)

test-fast: $(STAMP) ## The inner loop (~1 min): domain, SQLite stores, scheduler, executor, CLI
	$(BIN)/python -m pytest -m "not slow" tests/unit tests/scheduler tests/execution \
		tests/e2e/test_cli_errors.py tests/e2e/test_cli_basics.py $(PYTEST_ARGS)
	$(BIN)/python -m pytest tests/contract -k sqlite $(PYTEST_ARGS)

test-unit: $(STAMP) ## Only the pure unit tests
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

test-faults: $(STAMP) ## Only the fault tests and the one-minute soak (PostgreSQL, root)
	$(BIN)/python -m pytest --durations=25 tests/faults $(PYTEST_ARGS)

soak: $(STAMP) ## The long chaos soak: 4 replicas, 2 workers, 25 triggers, 10 minutes, then ql audit (root); SOAK_ARGS="--seed N ..."
	PYTHONPATH=$(CURDIR) $(BIN)/python scripts/soak.py $(SOAK_ARGS)

bench: $(STAMP) ## Admission benchmark (issue 7: ceiling, burst, steady, scale, idle, peers; BENCH_ARGS="..."), then bench-standalone and bench-finish; prints their tables (~80 min)
	@$(BIN)/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("apscheduler") != "4.0.0a6" or m.version("procrastinate") != "3.10.0")' 2>/dev/null || \
		$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	$(BIN)/python -m benchmarks.admission $(BENCH_ARGS)
	@status=0; \
		$(BIN)/python -m benchmarks.standalone $(STANDALONE_ARGS) || status=1; \
		$(BIN)/python -m benchmarks.finish $(FINISH_ARGS) || status=1; \
		exit $$status

bench-standalone: $(STAMP) ## Standalone burst: ql serve on SQLite at its defaults, 10,000 occurrences due at one instant, admitted and executed, 3 runs, prints a table; STANDALONE_ARGS="..."
	$(BIN)/python -m benchmarks.standalone $(STANDALONE_ARGS)

bench-finish: $(STAMP) ## Burst to finished: own PostgreSQL 18, 1 replica + 2 workers at their defaults run 10,000 Runs due at one instant, and the spawn-only ceiling; 3 runs, prints a table; FINISH_ARGS="..."
	$(BIN)/python -m benchmarks.finish $(FINISH_ARGS)

bench-dashboard: $(STAMP) ## Dashboard benchmark: 1,000 triggers (60 Runs each) in headless chromium on SQLite, then PostgreSQL; pages drawn, the summary route, the old request per trigger; 5 runs, prints tables (~10 min); DASHBOARD_ARGS="..."
	$(BIN)/python -m benchmarks.dashboard --database sqlite $(DASHBOARD_ARGS)
	$(BIN)/python -m benchmarks.dashboard --database postgresql $(DASHBOARD_ARGS)

bench-dispatch: $(STAMP) ## Worker dispatch benchmark: own PostgreSQL 18, 1 replica + 2 workers, 3 x 60 s, prints a table (~8 min); BENCH_ARGS="..."
	$(BIN)/python -m benchmarks.dispatch --seconds 60 --runs 3 $(BENCH_ARGS)

lint: $(STAMP) ## ruff, mypy --strict on src/, and the import contracts (lint-imports)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

typecheck: $(STAMP) ## mypy --strict on src/
	$(BIN)/mypy

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
