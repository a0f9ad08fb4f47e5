"""The one small apiserver client: every method is one entry of ``calls.py``.

It sits on ``kubernetes_asyncio`` for what that library does well (in-cluster and
kubeconfig configuration, bearer-token refresh, TLS, proxies) and asks for raw JSON
(``_preload_content=False``): the pod cache keeps a few fields of each pod, and
building the client's model objects only to throw most of them away costs more
than the parsing it saves (see ``benchmarks/bench_kube.py``).

Each component has its own ``ApiClient`` and User-Agent —
``leoflow-scheduler/<version> (dispatch|podcache|gc|leader|logs)`` — so a platform
team can tell the flows apart in audit logs and write APF FlowSchemas per flow
(ADR 0054, open item). Pod creates and deletes share a token bucket
(``token_bucket``); Lease calls do not wait behind a burst of creates. How the client
reaches the apiserver is ``api_connection``'s; an open watch is a ``watch_stream``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Literal, TypedDict, Unpack
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client as k8s

import leoflow
from leoflow.kube import calls
from leoflow.kube.api_connection import JsonApiClient, load_configuration
from leoflow.kube.calls import ApiCall
from leoflow.kube.errors import (
    CallNotDeclared,
    KubeUnavailable,
    NotFound,
    error_for_status,
    error_from_response,
)
from leoflow.kube.metrics import REQUESTS
from leoflow.kube.objects import JsonObj
from leoflow.kube.token_bucket import TokenBucket
from leoflow.kube.watch_stream import WatchStream
from leoflow.settings import Settings

Component = Literal["dispatch", "podcache", "gc", "leader", "logs"]
COMPONENTS: tuple[Component, ...] = ("dispatch", "podcache", "gc", "leader", "logs")

_METHOD = {"create": "POST", "delete": "DELETE", "list": "GET", "watch": "GET", "get": "GET"}
_METHOD["update"] = "PUT"
_NAMED = frozenset({"delete", "get", "update"})
_DECLARED = frozenset(calls.CALLS)


class _Address(TypedDict, total=False):
    """What a call names beside its table entry: the object, the query, the body."""

    name: str | None
    query: Mapping[str, str] | None
    body: JsonObj | None


# A request that gets no answer at all in this long is abandoned (watches excepted).
REQUEST_TIMEOUT = 30.0


def user_agent(component: str) -> str:
    return f"leoflow-scheduler/{leoflow.__version__} ({component})"


class KubeClient:
    """Leoflow's apiserver calls, one method per entry of ``leoflow.kube.calls``.

    ``task_namespace`` is where task pods live; ``release_namespace`` holds the Lease.
    ``rate_limit=False`` turns the create/delete token bucket off (benchmarks).
    """

    def __init__(
        self,
        configuration: k8s.Configuration,
        *,
        task_namespace: str,
        release_namespace: str,
        qps: float = 20.0,
        burst: int = 40,
        rate_limit: bool = True,
    ) -> None:
        self.configuration = configuration
        self.namespaces = {"task": task_namespace, "release": release_namespace}
        self.bucket: TokenBucket | None = TokenBucket(qps, burst) if rate_limit else None
        self._clients: dict[str, k8s.ApiClient] = {}
        self._closed = False

    @classmethod
    async def from_settings(
        cls,
        settings: Settings,
        *,
        rate_limit: bool = True,
        configuration: k8s.Configuration | None = None,
    ) -> KubeClient:
        """In-cluster config when running in a pod, else ``$KUBECONFIG`` or ``~/.kube/config``."""
        if configuration is None:
            configuration = await load_configuration()
        return cls(
            configuration,
            task_namespace=settings.task_namespace,
            release_namespace=settings.release_namespace,
            qps=settings.kube_qps,
            burst=settings.kube_burst,
            rate_limit=rate_limit,
        )

    async def close(self) -> None:
        self._closed = True
        clients, self._clients = self._clients, {}
        for api in clients.values():
            await api.close()

    # ---- pods (task namespace) ----------------------------------------------------

    async def create_pod(self, body: JsonObj) -> JsonObj:
        """Create a task pod; raises AlreadyExists (409) if its name is taken."""
        if self.bucket is not None:
            await self.bucket.take()
        return await self._json(calls.CREATE_POD, "dispatch", body=body)

    async def delete_pod(
        self,
        name: str,
        *,
        grace_seconds: int | None = None,
        uid: str | None = None,
        component: Component = "gc",
    ) -> bool:
        """Delete a task pod; False when it was already gone (404)."""
        options: JsonObj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = int(grace_seconds)
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        if self.bucket is not None:
            await self.bucket.take()
        try:
            await self._json(calls.DELETE_POD, component, name=name, body=options)
        except NotFound:
            return False
        return True

    async def list_pods(
        self, label_selector: str, *, limit: int = 500, continue_token: str | None = None
    ) -> JsonObj:
        """One page of task pods (raw PodList JSON)."""
        query: dict[str, str] = {"labelSelector": label_selector, "limit": str(limit)}
        if continue_token:
            query["continue"] = continue_token
        return await self._json(calls.LIST_PODS, "podcache", query=query)

    @contextlib.asynccontextmanager
    async def watch_pods(
        self,
        label_selector: str,
        resource_version: str,
        *,
        timeout_seconds: int = 300,
        read_timeout: float | None = None,
    ) -> AsyncIterator[WatchStream]:
        """An open watch of task pods from ``resource_version``, with bookmarks.

        The server ends it after ``timeout_seconds``; a connection that stays silent
        for ``read_timeout`` (default: that plus 30 s) is given up as dead.
        """
        query = {
            "watch": "true",
            "labelSelector": label_selector,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(timeout_seconds)),
        }
        silent = read_timeout if read_timeout is not None else timeout_seconds + 30.0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=silent)
        response = await self._send(
            calls.WATCH_PODS, "podcache", query=query, client_timeout=timeout
        )
        stream = WatchStream(response)
        try:
            yield stream
        finally:
            stream.close()

    async def read_pod_log(self, name: str, *, tail_lines: int | None = None) -> str:
        """A task pod's container log (only for pods whose agent could not ship it)."""
        query = {"tailLines": str(tail_lines)} if tail_lines is not None else None
        response = await self._send(calls.READ_POD_LOG, "logs", name=name, query=query)
        async with response:
            return (await response.read()).decode(errors="replace")

    # ---- configmaps (task namespace): the DAGs' GC anchors ---------------------------

    async def create_configmap(self, body: JsonObj) -> JsonObj:
        """Create a ConfigMap; raises AlreadyExists (409) if its name is taken."""
        return await self._json(calls.CREATE_CONFIGMAP, "dispatch", body=body)

    async def get_configmap(self, name: str) -> JsonObj | None:
        """The ConfigMap, or None if there is none."""
        try:
            return await self._json(calls.GET_CONFIGMAP, "dispatch", name=name)
        except NotFound:
            return None

    async def list_configmaps(self, label_selector: str) -> JsonObj:
        """The ConfigMaps the selector matches (raw ConfigMapList JSON, one page)."""
        query = {"labelSelector": label_selector}
        return await self._json(calls.LIST_CONFIGMAPS, "gc", query=query)

    async def delete_configmap(self, name: str, *, uid: str | None = None) -> bool:
        """Delete a ConfigMap, its dependents in the background (the cluster's garbage
        collector deletes them); False when it was already gone (404)."""
        options: JsonObj = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
        }
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        try:
            await self._json(calls.DELETE_CONFIGMAP, "gc", name=name, body=options)
        except NotFound:
            return False
        return True

    # ---- leases (release namespace) -------------------------------------------------

    async def get_lease(self, name: str) -> JsonObj | None:
        """The Lease (with ``metadata.resourceVersion``), or None if there is none."""
        try:
            return await self._json(calls.GET_LEASE, "leader", name=name)
        except NotFound:
            return None

    async def create_lease(self, body: JsonObj) -> JsonObj:
        """Create the Lease; raises AlreadyExists (a Conflict) if another replica won."""
        return await self._json(calls.CREATE_LEASE, "leader", body=body)

    async def update_lease(self, name: str, body: JsonObj) -> JsonObj:
        """Replace the Lease; raises Conflict when ``body``'s resourceVersion is stale."""
        return await self._json(calls.UPDATE_LEASE, "leader", name=name, body=body)

    # ---- plumbing --------------------------------------------------------------------

    def _api(self, component: str) -> k8s.ApiClient:
        if self._closed:
            raise RuntimeError("the kube client is closed")
        api = self._clients.get(component)
        if api is None:
            api = JsonApiClient(configuration=self.configuration)
            api.user_agent = user_agent(component)
            self._clients[component] = api
        return api

    def path(self, call: ApiCall, name: str | None = None) -> str:
        """The URL path of ``call``, derived from its table entry and nothing else."""
        ns = quote(self.namespaces[call.scope], safe="")
        resource, _, sub = call.resource.partition("/")
        base = "/api/v1" if call.group == "" else f"/apis/{call.group}/v1"
        path = f"{base}/namespaces/{ns}/{resource}"
        if name is not None:
            path += "/" + quote(name, safe="")
        if sub:
            path += "/" + sub
        return path

    async def _send(
        self,
        call: ApiCall,
        component: Component,
        *,
        client_timeout: aiohttp.ClientTimeout | None = None,
        **address: Unpack[_Address],
    ) -> aiohttp.ClientResponse:
        """Send one declared call; return the (2xx) response, unread. Counts it."""
        name, query = address.get("name"), address.get("query")
        if call not in _DECLARED:
            raise CallNotDeclared(f"{call} is not in leoflow.kube.calls")
        named = call.verb in _NAMED or "/" in call.resource
        if named != (name is not None):
            raise CallNotDeclared(f"{call.name} {'needs' if named else 'takes no'} object name")
        api = self._api(component)
        code = "0"
        try:
            response = await api.call_api(
                self.path(call, name),
                _METHOD[call.verb],
                query_params=list(query.items()) if query else None,
                header_params={"Accept": "application/json"},
                body=address.get("body"),
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=client_timeout or REQUEST_TIMEOUT,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            REQUESTS.labels(call.verb, call.resource, code).inc()
            raise KubeUnavailable(0, type(exc).__name__, f"{call.name}: {exc}") from exc
        code = str(response.status)
        REQUESTS.labels(call.verb, call.resource, code).inc()
        if not 200 <= response.status < 300:
            async with response:
                raw = await _read(response)
            raise error_from_response(response.status, raw, response.headers.get("Retry-After"))
        return response  # type: ignore[no-any-return]

    async def _json(
        self, call: ApiCall, component: Component, **address: Unpack[_Address]
    ) -> JsonObj:
        response = await self._send(call, component, **address)
        async with response:
            raw = await _read(response)
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            raise error_for_status(0, "BadResponse", f"{call.name}: not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise error_for_status(0, "BadResponse", f"{call.name}: expected a JSON object")
        return parsed


async def _read(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise KubeUnavailable(0, type(exc).__name__, f"reading the answer failed: {exc}") from exc


__all__ = [
    "COMPONENTS",
    "REQUEST_TIMEOUT",
    "Component",
    "KubeClient",
    "user_agent",
]
