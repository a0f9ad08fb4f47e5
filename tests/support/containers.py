"""A real container engine for the tests that run tasks in containers.

Fixtures: ``docker_host`` (a ``unix://`` URL of a Docker-compatible API: $DOCKER_HOST
when set, else Podman's ``podman system service`` started for the session and
stopped at its end), ``container_image`` and ``dbt_image`` (the tags of the built
images, $LEOFLOW_TEST_IMAGE / $LEOFLOW_TEST_DBT_IMAGE, verified to exist).

No engine or no image: the test FAILS when the env ``CI`` is set (CI installs the
engine and builds the images: ``.ci/run``), and skips with the reason elsewhere.
Podman reads ``CONTAINERS_CONF`` (CI: ``<repo>/.tools/containers/containers.conf``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

DEFAULT_IMAGE = "localhost/leoflow:ci"
DEFAULT_DBT_IMAGE = "localhost/leoflow-dbt:ci"


def unavailable(reason: str) -> NoReturn:
    """Fail under CI (the engine and images are part of it), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"container tests need an engine and the image under CI: {reason}")
    pytest.skip(reason)


def engine_get(docker_host: str, path: str) -> httpx.Response:
    transport = httpx.HTTPTransport(uds=docker_host.removeprefix("unix://"))
    with httpx.Client(transport=transport, base_url="http://engine", timeout=30) as client:
        return client.get("/v1.41" + path)


def answers(docker_host: str) -> bool:
    try:
        return engine_get(docker_host, "/_ping").status_code == 200
    except httpx.TransportError:
        return False


def start_podman_service(sock: Path) -> subprocess.Popen[bytes]:
    """``podman system service`` on ``sock``, once it answers; the caller stops it."""
    podman = shutil.which("podman")
    if podman is None:
        unavailable("no container engine: DOCKER_HOST is unset and podman is not installed")
    process = subprocess.Popen(
        [podman, "system", "service", "--time=0", f"unix://{sock}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not answers(f"unix://{sock}"):
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            unavailable(f"podman system service exited with {process.returncode}: {err[-500:]}")
        if time.monotonic() > deadline:
            process.kill()
            unavailable(f"podman system service did not answer at {sock} within 60 s")
        time.sleep(0.05)  # readiness poll of a process we started, bounded above
    return process


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """A running Docker-compatible API, as a ``unix://`` URL."""
    given = os.environ.get("DOCKER_HOST")
    if given:
        if not answers(given):
            unavailable(f"no container engine answers at DOCKER_HOST={given}")
        yield given
        return
    folder = Path(tempfile.mkdtemp(prefix="leoflow-engine-"))
    sock = folder / "podman.sock"
    process = start_podman_service(sock)
    try:
        yield f"unix://{sock}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _image(docker_host: str, variable: str, default: str) -> str:
    tag = os.environ.get(variable) or default
    found = engine_get(docker_host, f"/images/{tag.replace('/', '%2F')}/json")
    if found.status_code != 200:
        unavailable(f"image {tag} is not built (make image; {variable} names another)")
    return tag


@pytest.fixture(scope="session")
def container_image(docker_host: str) -> str:
    """The Leoflow image's tag (``make image``)."""
    return _image(docker_host, "LEOFLOW_TEST_IMAGE", DEFAULT_IMAGE)


@pytest.fixture(scope="session")
def dbt_image(docker_host: str) -> str:
    """The dbt DAG image's tag (``make image-dbt``)."""
    return _image(docker_host, "LEOFLOW_TEST_DBT_IMAGE", DEFAULT_DBT_IMAGE)


def containers(docker_host: str, label: str) -> list[dict[str, Any]]:
    """The engine's containers (running or not) with ``label``."""
    filters = '{"label": ["' + label + '"]}'
    response = engine_get(docker_host, f"/containers/json?all=true&filters={filters}")
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()
    return result
