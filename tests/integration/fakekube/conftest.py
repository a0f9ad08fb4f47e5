"""Fixtures: a fake apiserver per test and kubernetes_asyncio clients pointed at it."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.fakekube import FakeApiServer

TOKEN = "test-token"
NS = "cap"

# The hardened pod of transcript 01 (what Leoflow's pod builder produces, in small).
HARDENED_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "lf-demo-1", "labels": {"app.kubernetes.io/managed-by": "leoflow"}},
    "spec": {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": "task",
                "image": "x",
                "command": ["leoflow", "agent"],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                },
            }
        ],
    },
}


def pod_manifest(
    name: str,
    labels: dict[str, str] | None = None,
    command: list[str] | None = None,
    env: list[dict[str, Any]] | None = None,
    grace: int | None = None,
) -> dict[str, Any]:
    """A restricted-compliant pod named ``name``."""
    pod = copy.deepcopy(HARDENED_POD)
    pod["metadata"]["name"] = name
    if labels is not None:
        pod["metadata"]["labels"] = labels
    container = pod["spec"]["containers"][0]
    if command is not None:
        container["command"] = command
    if env is not None:
        container["env"] = env
    if grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = grace
    return pod


def error_body(err: pytest.ExceptionInfo[ApiException]) -> Any:
    """The JSON Status body of a refused request."""
    return json.loads(err.value.body or b"null")


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer(token=TOKEN, restricted_namespaces=[NS], bookmark_interval=0.1) as srv:
        yield srv


@pytest.fixture
async def api(server: FakeApiServer) -> AsyncIterator[Any]:
    async with server.api_client() as api_client:
        yield api_client


@pytest.fixture
def v1(api: Any) -> Any:
    return client.CoreV1Api(api)


@pytest.fixture
def coord(api: Any) -> Any:
    return client.CoordinationV1Api(api)
