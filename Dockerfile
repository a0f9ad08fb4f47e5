# syntax=docker/dockerfile:1
# One image for `leoflow api`, `leoflow scheduler` and the in-pod `leoflow agent`, and
# the base for DAG images. Leoflow lives in its own venv, /opt/leoflow, and only the
# `leoflow` command is on PATH (/usr/local/bin/leoflow -> /opt/leoflow/bin/leoflow):
# `python` and `pip` stay the image's own, so whatever a DAG image installs cannot
# reach the agent's dependencies (dbt pins protobuf<7; Leoflow's gRPC code needs newer).
# A dbt DAG image builds FROM this one: examples/dbt-image/Dockerfile (`make image-dbt`,
# README "dbt projects").
#
# Build: `make image` (docker, podman or buildah), or docker build -t ghcr.io/leoflow/leoflow:0.1.0 .
# Air-gapped: `make image OFFLINE=1` makes the wheels of leoflow and its dependencies on
# the host (build/wheels/) and installs them here with no package index (OFFLINE=1).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- builder: a wheel of leoflow installed into a self-contained venv
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
ARG OFFLINE=0
# The extension modules in the wheels keep their symbols (uvloop's loop is 14 MB, 1.6 MB
# stripped; 37 MB in all): binutils' strip removes them. An offline build reaches no
# apt mirror and keeps them unless the base image has strip.
# hadolint ignore=DL3008
RUN if [ "$OFFLINE" != 1 ]; then apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           binutils >/dev/null \
        && rm -rf /var/lib/apt/lists/*; fi
WORKDIR /src
# build/wheels/ exists only for `make image OFFLINE=1`: the glob may match nothing.
COPY pyproject.toml README.md build/wheel[s]/ ./
COPY leoflow/ leoflow/
# The agent venv keeps no pip, setuptools or packages' own tests: nothing runs pip in it.
# Its bytecode is compiled here, once (unchecked-hash: the image never changes, so no
# source is stat'ed to validate it): a task's root filesystem is read-only, so Python
# could never write it there, and compiling every import at each task's start made the
# agent's start ~3x slower in a container (2.8 s against 0.95 s, measured under load).
# kubernetes_asyncio stays source only: no task imports it, its bytecode is 22 MB, and
# the scheduler, its one user, is a long-lived process that compiles it once a start.
RUN python -m venv /opt/leoflow \
    && if [ "$OFFLINE" = 1 ]; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/src; \
       else python -m pip wheel --no-cache-dir --no-deps --wheel-dir /src .; fi \
    && /opt/leoflow/bin/pip install --no-cache-dir --no-compile "$(echo /src/leoflow-*.whl)[pro]" \
    && /opt/leoflow/bin/python -m pip uninstall --yes --quiet pip setuptools \
    && if command -v strip >/dev/null; then \
         find /opt/leoflow -name '*.so' -exec strip --strip-unneeded {} +; fi \
    && find /opt/leoflow/lib/python3*/site-packages -mindepth 2 -maxdepth 2 -name tests \
         -type d -exec rm -rf {} + \
    && find /opt/leoflow -depth -name '__pycache__' -type d -exec rm -rf {} + \
    && /opt/leoflow/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash \
         -x '/kubernetes_asyncio/' /opt/leoflow/lib \
    && /opt/leoflow/bin/leoflow --help >/dev/null

# ---- final: slim runtime, no build tools, numeric non-root user
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="leoflow" \
      org.opencontainers.image.description="Leoflow workflow orchestrator: api, scheduler and task agent" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/leoflow/leoflow"

COPY --from=builder /opt/leoflow /opt/leoflow
RUN ln -s /opt/leoflow/bin/leoflow /usr/local/bin/leoflow

# HOME and dbt's writable paths live under /tmp, the one writable path when the root
# filesystem is read-only (the chart and taskPodSecurity.readOnlyRootFilesystem mount
# an emptyDir there). DBT_TARGET_PATH / DBT_LOG_PATH / DBT_PROFILES_DIR are the env
# forms of dbt's --target-path / --log-path / --profiles-dir.
ENV HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DBT_TARGET_PATH=/tmp/dbt/target \
    DBT_LOG_PATH=/tmp/dbt/logs \
    DBT_PROFILES_DIR=/tmp/dbt

WORKDIR /tmp
# Numeric so the kubelet can verify runAsNonRoot without a UID pinned in the pod spec.
USER 65532:65532
EXPOSE 8080 9090 50051
ENTRYPOINT ["leoflow"]
CMD ["--help"]
