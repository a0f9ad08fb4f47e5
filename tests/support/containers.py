"""A container engine and the images `make image` / `make image-dbt` built, for the tests
that run real containers.

The rule, written once: with ``CI`` set a missing engine or image FAILS the test (CI
installs the engine and builds both images: ``.ci/run``); elsewhere it skips, saying
what to run. Fixtures (loaded for the whole suite by ``tests/conftest.py``):

- ``container_image``: the Leoflow image's tag (``LEOFLOW_TEST_IMAGE``, else
  ``localhost/leoflow:ci``), checked to exist in the engine;
- ``dbt_image``: the dbt DAG image's tag (``LEOFLOW_TEST_DBT_IMAGE``, else
  ``localhost/leoflow-dbt:ci``), likewise;
- ``docker_host``: a ``unix://`` URL of a Docker-compatible API that answers:
  ``$DOCKER_HOST`` if set, else ``podman system service`` started for the session.

Podman is run with ``CONTAINERS_CONF`` set to the repo's own containers.conf
(``.tools/containers/containers.conf``, scripts/container-engine.sh) unless it is set.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / ".tools" / "containers" / "containers.conf"
DEFAULT_IMAGE = "localhost/leoflow:ci"
DEFAULT_DBT_IMAGE = "localhost/leoflow-dbt:ci"
SETUP_HINT = "an engine as root on Debian: scripts/container-engine.sh"


def unavailable(reason: str) -> None:
    """Fail under CI (where the engine and images must be there), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this fails rather than skips)", pytrace=False)
    pytest.skip(f"{reason}; {SETUP_HINT}")


def engine_env() -> dict[str, str]:
    """The environment for podman: the repo's containers.conf unless one is named."""
    env = dict(os.environ)
    if "CONTAINERS_CONF" not in env and CONTAINERS_CONF.exists():
        env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
    return env


def engine() -> str:
    """The engine's command: podman if installed, else docker with a daemon that answers."""
    podman = shutil.which("podman")
    if podman:
        return podman
    docker = shutil.which("docker")
    if docker and _run([docker, "info"]).returncode == 0:
        return docker
    unavailable("no container engine: neither podman nor a running docker")
    raise AssertionError("unreachable")


def _run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=engine_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def run_container(
    image: str, *argv: str, options: tuple[str, ...] = (), timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``<engine> run --rm OPTIONS IMAGE ARGV...``, its output captured (never raises)."""
    return _run([engine(), "run", "--rm", *options, image, *argv], timeout=timeout)


def require_image(variable: str, default: str, make: str) -> str:
    """The tag ``$variable`` names (else ``default``), once the engine has that image."""
    tag = os.environ.get(variable) or default
    done = _run([engine(), "image", "inspect", "--format", "{{.Id}}", tag])
    if done.returncode != 0:
        unavailable(f"image {tag} ({variable}) not found: build it with `make {make}={tag}`")
    return tag


@pytest.fixture(scope="session")
def container_image() -> str:
    """The Leoflow image the container tests run, checked to exist."""
    return require_image("LEOFLOW_TEST_IMAGE", DEFAULT_IMAGE, "image IMAGE")


@pytest.fixture(scope="session")
def dbt_image() -> str:
    """The dbt DAG image (examples/dbt-image/Dockerfile), checked to exist."""
    return require_image("LEOFLOW_TEST_DBT_IMAGE", DEFAULT_DBT_IMAGE, "image-dbt DBT_IMAGE")


def api_get(url: str, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """``GET path`` on the Docker-compatible API at ``unix://SOCKET``: status and body.
    Raises OSError when nothing answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(url.removeprefix("unix://"))
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: engine\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    return (int(status[1]) if len(status) > 1 and status[1].isdigit() else 0), body


def ping(url: str) -> bool:
    """True if the API at ``unix://SOCKET`` answers ``GET /_ping`` with 200."""
    try:
        return api_get(url, "/_ping", timeout=5.0)[0] == 200
    except OSError:
        return False


def start_service(sock: Path, timeout: float = 60.0) -> subprocess.Popen[bytes]:
    """``podman system service --time=0 unix://SOCK`` in the background, once it answers."""
    podman = shutil.which("podman")
    if podman is None:
        unavailable("DOCKER_HOST is unset and podman, to serve the API, is not installed")
        raise AssertionError("unreachable")
    log = (sock.parent / "service.log").open("wb")
    service = subprocess.Popen(
        [podman, "system", "service", "--time=0", f"unix://{sock}"],
        env=engine_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    deadline = time.monotonic() + timeout
    while not ping(f"unix://{sock}"):
        if service.poll() is not None or time.monotonic() > deadline:
            stop_service(service)
            output = (sock.parent / "service.log").read_text(errors="replace")
            raise AssertionError(f"podman system service on {sock} did not answer: {output}")
        time.sleep(0.05)  # polling the socket: the service has no readiness signal
    return service


def stop_service(service: subprocess.Popen[bytes]) -> None:
    if service.poll() is None:
        service.terminate()
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """A ``unix://`` URL of a running Docker-compatible API for the session."""
    given = os.environ.get("DOCKER_HOST")
    if given:
        if not given.startswith("unix://"):
            pytest.fail(f"DOCKER_HOST={given}: the tests expect a unix:// socket", pytrace=False)
        if not ping(given):
            unavailable(f"DOCKER_HOST={given} does not answer GET /_ping")
        yield given
        return
    # A short path: a unix socket's path is limited to ~107 bytes.
    folder = Path(tempfile.mkdtemp(prefix="leoflow-podman-"))
    sock = folder / "podman.sock"
    service = start_service(sock)
    try:
        yield f"unix://{sock}"
    finally:
        stop_service(service)
        shutil.rmtree(folder, ignore_errors=True)


def start_podman_service(sock: Path) -> subprocess.Popen[bytes]:
    """``podman system service`` on ``sock``, once it answers; the caller stops it."""
    return start_service(sock)


def containers(docker_host: str, label: str) -> list[dict[str, Any]]:
    """The engine's containers (running or not) with ``label``."""
    filters = '{"label": ["' + label + '"]}'
    transport = httpx.HTTPTransport(uds=docker_host.removeprefix("unix://"))
    with httpx.Client(transport=transport, base_url="http://engine", timeout=30) as client:
        response = client.get(f"/v1.41/containers/json?all=true&filters={filters}")
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()
    return result
