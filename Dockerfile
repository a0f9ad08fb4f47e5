# syntax=docker/dockerfile:1
# One image for `leoflow api`, `leoflow scheduler` and the in-pod `leoflow agent`, and
# the base for DAG images. Leoflow lives in its own venv, /opt/leoflow, and only the
# `leoflow` command is on PATH (/usr/local/bin/leoflow -> /opt/leoflow/bin/leoflow):
# `python` and `pip` stay the image's own, so whatever a DAG image installs cannot
# reach the agent's dependencies (dbt pins protobuf<7; Leoflow's gRPC code needs newer).
# A dbt DAG image (README "dbt projects"):
#
#   FROM ghcr.io/leoflow/leoflow:0.1.0
#   USER 0
#   RUN python -m venv /opt/dbt \
#       && /opt/dbt/bin/pip install --no-cache-dir dbt-core==1.11.16 dbt-duckdb==1.11.1
#   ENV PATH=/opt/dbt/bin:$PATH
#   COPY --chown=65532:65532 dags/ /opt/dags/
#   # parse at build time: the scheduler reads target/manifest.json and needs no dbt
#   RUN cd /opt/dags/analytics/dbt && dbt deps && dbt parse --target-path target
#   USER 65532:65532          # keep the final USER numeric: runAsNonRoot needs it
#
# Build: docker build -t ghcr.io/leoflow/leoflow:0.1.0 .

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- builder: a wheel of leoflow installed into a self-contained venv
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY leoflow/ leoflow/
RUN python -m venv /opt/leoflow \
    && python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && /opt/leoflow/bin/pip install --no-cache-dir "$(echo /wheels/leoflow-*.whl)[pro]" \
    && find /opt/leoflow -depth -name '__pycache__' -type d -exec rm -rf {} + \
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
