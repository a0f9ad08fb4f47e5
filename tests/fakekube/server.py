"""FakeApiServer: core/v1 pods and configmaps, coordination.k8s.io/v1 leases, over real HTTP.

Kubernetes cannot run in the test environment, so the scheduler's kube adapter is
tested against this server through the real ``kubernetes_asyncio`` client, on the
wire. The request pipeline mirrors the apiserver's: resolve request info → count →
(injected latency / failure) → authenticate (bearer token, 401) → authorize (RBAC
emulation, 403) → validate → admit (PodSecurity ``restricted``, 403) → store.
Bodies follow the transcripts in ``transcripts/`` (captured from Kubernetes v1.36).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from . import requestinfo, watch
from .faults import Faults, Predicate, RequestInfo, RequestLog, always
from .objects import manager_from_user_agent
from .psa import restricted_message
from .registry import LEASES, PODS, RESOURCES, Registry, ResourceType
from .selectors import (
    GENERIC_FIELDS,
    POD_FIELDS,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from .status import (
    ApiError,
    bad_request,
    forbidden,
    injected,
    no_such_path,
    not_found,
    status_body,
    success,
    unauthorized,
)
from .store import Store

JsonObj = dict[str, Any]
Rule = tuple[str, str, str, str | None]  # (verb, group, resource[/sub], namespace or None=any)

DEFAULT_USER = "system:serviceaccount:leoflow-system:leoflow"
VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2-fake",
    "platform": "linux/amd64",
}


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


class FakeApiServer:
    """A kube-apiserver double on 127.0.0.1:<random port>; see the package docstring."""

    def __init__(
        self,
        *,
        token: str | None = None,
        user: str = DEFAULT_USER,
        restricted_namespaces: Iterable[str] = (),
        rbac: Iterable[Rule] | None = None,
        history_window: int | None = None,
        bookmark_interval: float = 1.0,
        watch_timeout: float | None = None,
    ) -> None:
        self.store = Store(history_window)
        self.registry = Registry(self.store)
        self.log = RequestLog()
        self.faults = Faults()
        self.token = token
        self.user = user
        self.restricted_namespaces = set(restricted_namespaces)
        self.rbac: set[Rule] | None = set(rbac) if rbac is not None else None
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self._watches: set[watch.OpenWatch] = set()
        self._watches_changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._port = 0
        self._gone: str | None = None
        self._return_task: asyncio.Task[None] | None = None

    # ---- lifecycle ---------------------------------------------------------------

    async def start(self) -> FakeApiServer:
        """Listen on a random port on 127.0.0.1."""
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a watch whose client hung up must stop being served (and
        # counted in open_watches) at once, not at its next write.
        self._runner = web.AppRunner(
            app, handle_signals=False, shutdown_timeout=0.5, handler_cancellation=True
        )
        await self._runner.setup()
        await self._listen()
        return self

    async def _listen(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", self._port, reuse_address=True)
        await self._site.start()
        if not self._port:
            self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Drop watches and stop listening."""
        if self._return_task is not None:
            self._return_task.cancel()
        self.drop_watches(abrupt=False)
        self.store.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeApiServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        """The TCP port (stable across go_away/come_back)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._port}"

    # ---- client wiring -----------------------------------------------------------

    def kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        """Write a kubeconfig (JSON, which is YAML) pointing at this server."""
        user: JsonObj = {"token": self.token} if self.token else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
        }
        target = Path(path)
        target.write_text(json.dumps(config, indent=2))
        return target

    def configuration(self, token: str | None = None) -> Any:
        """A ``kubernetes_asyncio.client.Configuration`` for this server (bearer token set)."""
        from kubernetes_asyncio.client import Configuration

        bearer = token if token is not None else self.token
        if bearer:
            return Configuration(
                host=self.url,
                api_key={"BearerToken": bearer},
                api_key_prefix={"BearerToken": "Bearer"},
            )
        return Configuration(host=self.url)

    def api_client(self, token: str | None = None) -> Any:
        """A ``kubernetes_asyncio.client.ApiClient`` for this server; close it when done."""
        from kubernetes_asyncio.client import ApiClient

        return ApiClient(configuration=self.configuration(token))

    # ---- accounting --------------------------------------------------------------

    @property
    def counts(self) -> Counter[tuple[str, str, str]]:
        """Requests by (verb, group, resource) since the last reset."""
        return self.log.counts

    @property
    def seen(self) -> set[tuple[str, str, str, str]]:
        """Every (verb, group, resource, namespace) ever received."""
        return self.log.seen

    @property
    def open_watches(self) -> int:
        """Watch streams currently being served."""
        return len(self._watches)

    async def wait_open_watches(self, n: int, timeout: float = 60.0) -> None:
        """Wait until exactly ``n`` watches are open (a test's sync point, no polling)."""
        async with asyncio.timeout(timeout):
            while len(self._watches) != n:
                self._watches_changed.clear()
                await self._watches_changed.wait()

    @property
    def silent_watches(self) -> int:
        """Open watches silenced by :meth:`silence_watches` that the client still holds."""
        return sum(1 for handle in self._watches if handle.silent)

    async def wait_watches(self, *, silent: int, live: int, timeout: float = 10.0) -> None:
        """Wait until exactly ``silent`` silenced and ``live`` other watches are open."""
        async with asyncio.timeout(timeout):
            while (self.silent_watches, len(self._watches) - self.silent_watches) != (
                silent,
                live,
            ):
                self._watches_changed.clear()
                await self._watches_changed.wait()

    def reset_counts(self) -> None:
        """Zero the per-verb counters (``seen`` is kept)."""
        self.log.reset()

    # ---- configuration and faults ------------------------------------------------

    def restrict_namespace(self, namespace: str) -> None:
        """Enforce PodSecurity ``restricted`` on pod creates in ``namespace``."""
        self.restricted_namespaces.add(namespace)

    def allow(self, verb: str, group: str, resource: str, namespace: str | None = None) -> None:
        """Turn RBAC emulation on (if off) and grant one rule; ``*`` verb matches any."""
        if self.rbac is None:
            self.rbac = set()
        self.rbac.add((verb, group, resource, namespace))

    def fail_next(
        self,
        n: int = 1,
        status: int = 500,
        when: Predicate = always,
        message: str = "injected fault",
    ) -> None:
        """The next ``n`` requests matching ``when`` answer ``status`` (a Status body)."""
        self.faults.fail_next(n, status, when, message)

    def add_latency(self, seconds: float, when: Predicate = always) -> None:
        """Delay every matching request by ``seconds``."""
        self.faults.add_latency(seconds, when)

    def clear_faults(self) -> None:
        """Disarm failures and latency."""
        self.faults.clear()

    def drop_watches(self, abrupt: bool = True) -> int:
        """End every open watch: ``abrupt`` resets the connection, else a clean EOF."""
        dropped = list(self._watches)
        for handle in dropped:
            handle.dropped = True
            if abrupt:
                handle.abort()
            handle.sub.close()
        return len(dropped)

    def silence_watches(self) -> int:
        """Every open watch goes silent: its connection stays open and nothing more is
        written on it, not even bookmarks (an apiserver instance that hangs). New
        requests (LISTs, new watches) are answered as usual. Returns how many."""
        silenced = [handle for handle in self._watches if not handle.silent]
        for handle in silenced:
            handle.silent = True
        return len(silenced)

    def compact(self, rv: int | None = None) -> int:
        """Compact history up to ``rv`` (default: now): older resumes get 410."""
        return self.store.compact(rv)

    async def go_away(self, mode: str = "refuse", duration: float | None = None) -> None:
        """The apiserver disappears: ``refuse`` connections or answer ``503``.

        With ``duration`` it comes back by itself after that many seconds.
        """
        assert mode in ("refuse", "503")
        self._gone = mode
        self.drop_watches(abrupt=True)
        if mode == "refuse" and self._site is not None and self._runner is not None:
            await self._site.stop()
            self._site = None
            for proto in list(self._runner.server.connections if self._runner.server else []):
                transport = getattr(proto, "transport", None)
                if transport is not None:
                    transport.close()
        if duration is not None:
            self._return_task = asyncio.create_task(self._return_after(duration))

    async def _return_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.come_back()

    async def come_back(self) -> None:
        """End a :meth:`go_away` (same port, same store)."""
        if self._gone == "refuse" and self._site is None:
            await self._listen()
        self._gone = None

    # ---- in-process conveniences -------------------------------------------------

    def pod(self, namespace: str, name: str) -> JsonObj | None:
        """The stored pod (a copy) or None, without a request."""
        return self.store.get("pods", namespace, name)

    async def wait_for_pod(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[JsonObj | None], bool],
        timeout: float = 60.0,
    ) -> JsonObj | None:
        """Wait (event-driven, no polling) until ``predicate(pod or None)`` holds."""
        sub = self.store.subscribe("pods", namespace)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    pod = self.store.get("pods", namespace, name)
                    if predicate(pod):
                        return pod
                    if await sub.queue.get() is None:
                        raise RuntimeError("store closed while waiting for a pod")
        finally:
            self.store.unsubscribe(sub)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        """Wait (event-driven, no polling) until ``predicate()`` holds after a write of
        any object (a pod, a ConfigMap, what the garbage collector did)."""
        sub = self.store.subscribe("*", None)
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    if await sub.queue.get() is None:
                        raise RuntimeError("store closed while waiting")
        finally:
            self.store.unsubscribe(sub)

    async def wait_for_log(
        self,
        namespace: str,
        pod: str,
        text: str,
        container: str | None = None,
        timeout: float = 60.0,
    ) -> str:
        """Wait until the container's recorded log contains ``text``; return the log."""
        async with asyncio.timeout(timeout):
            while True:
                changed = self.store.log_changed()
                for (ns, name, cname), log in self.store.logs.items():
                    mine = (ns, name) == (namespace, pod) and container in (None, cname)
                    if mine and text in log:
                        return log
                await changed.wait()

    def pod_names(self, namespace: str | None = None) -> list[str]:
        """Names of the stored pods."""
        return [p["metadata"]["name"] for p in self.store.objects("pods", namespace)]

    # ---- request pipeline --------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            if self._gone == "503":
                raise injected(503, "apiserver is shutting down")
            info = requestinfo.parse(request.method, request.path, request.query)
            if info is not None:
                self.log.record(info)
                delay = self.faults.delay(info)
                if delay:
                    await asyncio.sleep(delay)
                failure = self.faults.take_failure(info)
                if failure is not None:
                    raise injected(*failure)
            self._authenticate(request)
            if info is None:
                if request.path.rstrip("/") == "/version":
                    return _json(VERSION)
                raise no_such_path()
            self._authorize(info)
            return await self._dispatch(request, info)
        except ApiError as err:
            return _json(err.body, err.code, err.headers)

    def _authenticate(self, request: web.Request) -> None:
        if self.token is None:
            return
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            raise unauthorized()

    def _authorize(self, info: RequestInfo) -> None:
        if self.rbac is None:
            return
        for verb, group, resource, ns in self.rbac:
            if (
                verb in (info.verb, "*")
                and group == info.group
                and resource in (info.resource, "*")
                and ns in (None, info.namespace)
            ):
                return
        what = (
            f'User "{self.user}" cannot {info.verb} resource "{info.resource}" '
            f'in API group "{info.group}"'
        )
        where = (
            f' in the namespace "{info.namespace}"' if info.namespace else " at the cluster scope"
        )
        raise forbidden(info.group, info.base_resource, info.name, what + where)

    async def _dispatch(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        rt = RESOURCES.get((info.group, info.base_resource))
        sub = info.resource.partition("/")[2]
        allowed_subs = {"", "status", "binding", "log"} if rt is PODS else {""}
        if rt is None or sub not in allowed_subs:
            raise no_such_path()
        ns, name, method = info.namespace, info.name, request.method
        manager = manager_from_user_agent(request.headers.get("User-Agent", ""))
        if method == "GET":
            if sub == "log":
                return self._log(request, ns, name)
            if name:
                return _json(self.registry.get(rt, ns, name))
            return await self._collection(request, rt, ns or None)
        if not name and method != "POST":
            raise ApiError(
                status_body(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                    {},
                )
            )
        if not ns:
            raise no_such_path()
        if method == "POST":
            body = await self._body(request)
            if sub == "binding":
                target = (body.get("target") or {}).get("name", "")
                if not target:
                    raise bad_request("binding target name is required")
                self.registry.bind(ns, name, target)
                return _json(success(201), 201)
            if name:
                raise ApiError(
                    status_body(
                        405,
                        "MethodNotAllowed",
                        "the server does not allow this method on the requested resource",
                        {},
                    )
                )
            return _json(self._create(rt, ns, body, manager), 201)
        if method == "PUT":
            body = await self._body(request)
            return _json(self.registry.update(rt, ns, name, body, manager, sub))
        if method == "PATCH":
            body = await self._body(request)
            ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
            return _json(self.registry.patch(rt, ns, name, body, ctype, manager, sub))
        if method == "DELETE":
            opts = await self._body(request) if request.can_read_body else {}
            grace = opts.get("gracePeriodSeconds")
            if grace is None and "gracePeriodSeconds" in request.query:
                grace = int(request.query["gracePeriodSeconds"])
            pre = opts.get("preconditions") or {}
            return _json(
                self.registry.delete(
                    rt,
                    ns,
                    name,
                    grace,
                    pre.get("uid"),
                    pre.get("resourceVersion"),
                    opts.get("propagationPolicy") or request.query.get("propagationPolicy"),
                )
            )
        raise ApiError(
            status_body(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                {},
            )
        )

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"invalid JSON body: {exc}") from exc

    def _create(self, rt: ResourceType, ns: str, body: JsonObj, manager: str) -> JsonObj:
        def admit(pod: JsonObj) -> None:
            if rt is PODS and ns in self.restricted_namespaces:
                why = restricted_message(pod)
                if why is not None:
                    raise forbidden("", "pods", pod["metadata"]["name"], why)

        return self.registry.create(rt, ns, body, manager, admit)

    def _keep(self, rt: ResourceType, query: Any) -> watch.Keep:
        reqs = parse_label_selector(query.get("labelSelector"))
        fields = parse_field_selector(
            query.get("fieldSelector"), POD_FIELDS if rt is PODS else GENERIC_FIELDS
        )

        def keep(obj: JsonObj) -> bool:
            return labels_match(reqs, obj) and fields(obj)

        return keep

    async def _collection(
        self, request: web.Request, rt: ResourceType, ns: str | None
    ) -> web.StreamResponse:
        query = request.query
        keep = self._keep(rt, query)
        if requestinfo.is_watch(query):
            return await self._watch(request, rt, ns, keep)
        items, rv = self.registry.list(rt, ns, keep)
        meta: JsonObj = {"resourceVersion": str(rv)}
        if "continue" in query:
            token = json.loads(base64.urlsafe_b64decode(query["continue"]))
            rv = int(token["rv"])
            meta["resourceVersion"] = str(rv)
            items = [
                i
                for i in items
                if (i["metadata"]["namespace"], i["metadata"]["name"]) > tuple(token["after"])
            ]
        limit = int(query.get("limit", "0") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            after = [last["namespace"], last["name"]]
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"rv": rv, "after": after}).encode()
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        for item in items:
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return _json(
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version,
                "metadata": meta,
                "items": items,
            }
        )

    async def _watch(
        self, request: web.Request, rt: ResourceType, ns: str | None, keep: watch.Keep
    ) -> web.StreamResponse:
        query = request.query
        send_initial = query.get("sendInitialEvents", "").lower() == "true"
        if send_initial and query.get("resourceVersionMatch") != "NotOlderThan":
            raise ApiError(
                status_body(
                    422,
                    "Invalid",
                    "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
                    "resourceVersionMatch to NotOlderThan",
                    {"kind": rt.kind},
                )
            )
        timeout = (
            float(query["timeoutSeconds"]) if "timeoutSeconds" in query else self.watch_timeout
        )
        req = watch.WatchRequest(
            rt=rt,
            namespace=ns,
            keep=keep,
            resource_version=query.get("resourceVersion", ""),
            send_initial_events=send_initial,
            bookmarks=query.get("allowWatchBookmarks", "").lower() in ("true", "1"),
            timeout=timeout,
        )
        lines, sub = watch.start(self.store, req)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if sub is None:
            for line in lines:
                await resp.write(line)
            await resp.write_eof()
            return resp
        transport = request.transport

        def abort() -> None:
            if transport is not None:
                transport.abort()

        handle = watch.OpenWatch(sub, abort)
        self._watches.add(handle)
        self._watches_changed.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        try:
            for line in lines:
                await resp.write(line)
            while True:
                if handle.silent:
                    if await sub.queue.get() is None:  # swallow events until dropped
                        break
                    continue
                wait = self.bookmark_interval if req.bookmarks else None
                if deadline is not None:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    wait = remaining if wait is None else min(wait, remaining)
                out = await watch.next_lines(self.store, req, sub, wait)
                if out is None:
                    break
                for line in out:
                    await resp.write(line)
        except (ConnectionError, RuntimeError):
            return resp
        finally:
            self._watches.discard(handle)
            self._watches_changed.set()
            self.store.unsubscribe(sub)
        if not (handle.dropped and transport is not None and transport.is_closing()):
            with contextlib.suppress(ConnectionError, RuntimeError):
                await resp.write_eof()
        return resp

    def _log(self, request: web.Request, ns: str, name: str) -> web.StreamResponse:
        pod = self.store.get("pods", ns, name)
        if pod is None:
            raise not_found("", "pods", name)
        containers = [c["name"] for c in pod["spec"].get("containers") or []]
        container = request.query.get("container", "")
        if not container:
            if len(containers) != 1:
                raise bad_request(
                    f"a container name must be specified for pod {name}, choose one of: "
                    f"[{' '.join(containers)}]"
                )
            container = containers[0]
        if container not in containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        text = self.store.logs.get((ns, name, container))
        if text is None:
            raise bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        if "tailLines" in request.query:
            tail = int(request.query["tailLines"])
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail:]) if tail else ""
        return web.Response(text=text, content_type="text/plain")


__all__ = ["DEFAULT_USER", "LEASES", "PODS", "FakeApiServer", "Rule"]
