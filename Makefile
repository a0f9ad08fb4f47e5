# Two commands on a fresh machine: `make run` (Lite runs the example ETL DAG)
# and `make test` (the whole suite). Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev run lite test test-fast lint bench proto helm rbac clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

dev: $(STAMP)

.tools/bin/helm: scripts/install-helm.sh
	bash scripts/install-helm.sh

helm: .tools/bin/helm

## Run the example ETL DAG once in Lite, on its embedded defaults (SQLite under ~/.leoflow).
run: $(STAMP)
	$(BIN)/leoflow --config examples/settings.yaml run examples/dags/etl.yaml

## Schedule the example folder until Ctrl-C, with the HTTP API on 127.0.0.1:8080.
lite: $(STAMP)
	$(BIN)/leoflow --config examples/settings.yaml lite --dags examples/dags

## The whole test suite: unit, integration (fake kube-apiserver, SQLite, embedded PostgreSQL), e2e, chart.
test: $(STAMP) .tools/bin/helm
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check leoflow tests benchmarks scripts
	$(BIN)/ruff format --check leoflow tests benchmarks scripts
	$(BIN)/mypy leoflow tests/fakekube
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

proto: $(STAMP)
	bash scripts/gen_proto.sh

rbac: $(STAMP)
	$(BIN)/python scripts/rbac_cover.py generate
	bash scripts/rbac-covers-executor.sh

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache build *.egg-info
