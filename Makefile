# Two commands on a fresh machine: `make run` (Lite runs the example ETL DAG)
# and `make test` (the whole suite). Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev run lite test test-fast lint fmt bench proto helm rbac clean dbt-venv image image-dbt \
	dbt-example docs docs-build reference

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

dev: $(STAMP)

.tools/bin/helm: scripts/install-helm.sh
	bash scripts/install-helm.sh

helm: .tools/bin/helm

## dbt in its own venv, never Leoflow's: dbt pins protobuf<7, Leoflow's gRPC code wants
## newer. The dbt tests run .venv-dbt/bin/dbt. (dbt-core 1.12 fetches a parser wheel from
## outside PyPI at install time, so 1.11 it is.)
DBT_VENV := .venv-dbt
DBT_STAMP := $(DBT_VENV)/.installed
$(DBT_STAMP):
	$(PYTHON) -m venv $(DBT_VENV)
	$(DBT_VENV)/bin/pip install -q 'dbt-core==1.11.16' 'dbt-duckdb==1.11.1'
	touch $(DBT_STAMP)

dbt-venv: $(DBT_STAMP)

## Lite as a user installs it: `pip install .` into its own venv, no extras (no
## Kubernetes client, no PostgreSQL driver, no test tools). Reinstalled when the code changes.
RUN_VENV := .venv-run
RUN_STAMP := $(RUN_VENV)/.installed
$(RUN_STAMP): pyproject.toml $(shell find leoflow -type f -not -path '*/__pycache__/*')
	test -d $(RUN_VENV) || $(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/pip install -q .
	touch $(RUN_STAMP)

## Run the example ETL DAG once in Lite, on its embedded defaults (SQLite under ~/.leoflow).
run: $(RUN_STAMP)
	$(RUN_VENV)/bin/leoflow run examples/dags/etl.yaml

## The dbt example (examples/dbt): one run of a small DuckDB project, a task per model,
## seed and test, dbt found on PATH from its own venv (.venv-dbt).
dbt-example: $(RUN_STAMP) $(DBT_STAMP)
	PATH="$(CURDIR)/$(DBT_VENV)/bin:$$PATH" $(RUN_VENV)/bin/leoflow run examples/dbt/shop_dbt.yaml

## Schedule the example folder until Ctrl-C, with the HTTP API on 127.0.0.1:8080.
lite: $(RUN_STAMP)
	$(RUN_VENV)/bin/leoflow lite --dags examples/dags

## The whole test suite: unit, integration (fake kube-apiserver, SQLite, embedded PostgreSQL), e2e, chart.
test: $(STAMP) .tools/bin/helm $(DBT_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

## The loop to run while working: the unit tests not marked slow (no servers, browser,
## dbt or containers), on every core (pytest-xdist). CI runs `make test`.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto -m "not slow" tests/unit

lint: $(STAMP)
	$(BIN)/ruff check leoflow tests benchmarks scripts
	$(BIN)/ruff format --check leoflow tests benchmarks scripts
	$(BIN)/mypy leoflow tests benchmarks
	$(BIN)/lint-imports

## Format and apply ruff's safe fixes (what `make lint` then checks).
fmt: $(STAMP)
	$(BIN)/ruff format leoflow tests benchmarks scripts
	$(BIN)/ruff check --fix leoflow tests benchmarks scripts

## The container image (Dockerfile) with docker, podman or buildah, whichever is here
## (ENGINE= picks); prints its build time and size. PYTHON_IMAGE= is the base (a local
## one where no registry is reachable: scripts/container-engine.sh makes it). OFFLINE=1:
## the wheels of leoflow and its dependencies are made on this host (its Python must be
## the image's 3.11) into build/wheels and installed in the image with no package index.
IMAGE ?= localhost/leoflow:dev
DBT_IMAGE ?= localhost/leoflow-dbt:dev
PYTHON_IMAGE ?=
OFFLINE ?=
WHEELS := build/wheels
image:
	@if [ "$(OFFLINE)" = 1 ]; then \
	    rm -rf $(WHEELS) && mkdir -p $(WHEELS) \
	    && $(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if v == (3, 11) else f"OFFLINE=1 needs the image Python (3.11) on the host, not {v}: PYTHON=python3.11")' \
	    && $(PYTHON) -m pip wheel -q --wheel-dir $(WHEELS) '.[pro]' ; \
	else rm -rf $(WHEELS); fi
	bash scripts/build-image.sh $(IMAGE) Dockerfile . \
	    $(if $(PYTHON_IMAGE),--build-arg PYTHON_IMAGE=$(PYTHON_IMAGE)) \
	    $(if $(OFFLINE),--build-arg OFFLINE=$(OFFLINE))

## The dbt DAG image (examples/dbt-image/Dockerfile) FROM $(IMAGE), with the shop project
## of tests/fixtures/dbt: the image the container tests run dbt in.
image-dbt:
	bash scripts/build-image.sh $(DBT_IMAGE) examples/dbt-image/Dockerfile tests/fixtures/dbt \
	    --build-arg LEOFLOW_IMAGE=$(IMAGE)

## The documentation site (mkdocs.yml, docs/): served with live reload on 127.0.0.1:8000,
## or built into site/ with --strict (a broken link or anchor fails), as the suite does.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict

docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --clean

## The reference pages generated from the code (docs/reference/): rewrite after changing
## a command, a setting, a DAG field, an API route or a chart value; a test checks them.
reference: $(STAMP)
	$(BIN)/python scripts/gen_reference.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

proto: $(STAMP)
	bash scripts/gen_proto.sh

rbac: $(STAMP)
	$(BIN)/python scripts/rbac_cover.py generate
	bash scripts/rbac-covers-executor.sh

clean:
	rm -rf $(VENV) $(RUN_VENV) $(DBT_VENV) .tools .pytest_cache .mypy_cache .ruff_cache build site *.egg-info
