"""DockerExecutor: each Lite task in its own container, made from the task pod.

A try's container is the pod ``leoflow.kube.pod.build_pod`` makes for the Kubernetes
executor, translated (``translate``): the same hardening, limits and agent
bootstrap (endpoint and single-use ticket in the env; the agent inside fetches the
task's command, env and secrets with Start and streams its logs, as in a pod).

Network: by default a container joins the host's network namespace
(``docker_network: host``), so its agent dials Lite's endpoint on loopback, which
stays unexposed; the endpoint's ticket model is unchanged. A task then shares the
host's network (as a Lite agent-executor task does). A named network isolates it,
but needs ``agent_endpoint`` set to an address the container can reach (and TLS,
since the endpoint is then off loopback).

Containers are labelled (dag, run, task, try, owner); a finished one is removed once
its outcome is told; leftovers of a Lite process that is gone are stopped and
removed at start and every ``GC_INTERVAL`` (their agents dialled an endpoint that no
longer exists, so they are reaped, not adopted: their tries run again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from leoflow.domain.execution import Attempt, Launch, LaunchError, LogData, Report, TaskFinished
from leoflow.domain.reasons import EndReason
from leoflow.executor.docker import lifecycle
from leoflow.executor.docker.client import (
    START_HINT,
    DockerClient,
    EngineError,
    EngineUnreachable,
    socket_path,
)
from leoflow.executor.docker.outcome import AGENT_COULD_NOT_REPORT, Outcome, container_outcome
from leoflow.executor.docker.owner import (
    EXECUTOR_VALUE,
    LABEL_EXECUTOR,
    LABEL_OWNER,
    me,
    owner_gone,
)
from leoflow.executor.docker.translate import ContainerRequest, TranslationError, translate
from leoflow.kube.pod import CA_DIR, CA_KEY, SELECTOR, PodBuildError, build_pod
from leoflow.settings import PASSTHROUGH_FIELDS, Settings

log = logging.getLogger("leoflow.executor.docker")

GC_INTERVAL = 60.0
GC_FIRST_PASS = 15.0
# On stop, a container's grace between SIGTERM and SIGKILL: Lite is gone within 3 s.
STOP_GRACE = 1
_LOG_TAIL = 200
# Outcomes told before the container was seen stopped.
_MAY_STILL_RUN = frozenset({EndReason.CANCELLED, EndReason.LOST, EndReason.LAUNCH_FAILED})


@dataclass(eq=False)
class _Try:
    key: tuple[int, int]
    name: str
    grace: int
    ref: str | None = None
    cancelled: str | None = None


class DockerExecutor:
    name = "docker"
    uses_agent = True
    agents_dial_here = True  # every container's agent dials this process's endpoint

    def __init__(
        self, settings: Settings, *, agent_endpoint: str | None, agent_grace: float = 1.0
    ) -> None:
        self.settings = settings
        self.agent_endpoint = agent_endpoint
        self.socket = socket_path(settings.docker_host)
        self.client = DockerClient(self.socket)
        self.agent_grace = agent_grace
        self.owner = me()
        # The DAG's execution fields reach the translation, which honours, ignores or
        # refuses each by name (the operator's pod allowlist is a cluster's policy).
        self._pod_settings = settings.model_copy(
            update={"task_pod_passthrough": frozenset(PASSTHROUGH_FIELDS)}
        )
        self._report: Report | None = None
        self._tries: dict[tuple[int, int], _Try] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._gc_task: asyncio.Task[None] | None = None
        self._stopping = False

    async def warm(self) -> None:
        await check_engine(self.client)

    async def start(self, report: Report) -> None:
        self._report = report
        # The first pass before any launch: a previous Lite's leftovers go first.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(GC_FIRST_PASS):
                await self._collect_logged()
        self._gc_task = asyncio.create_task(self._gc_loop(), name="leoflow-docker-gc")

    async def adopt(self, attempts: Sequence[Attempt]) -> set[tuple[int, int]]:
        """None: a previous Lite's containers dialled its endpoint, gone with it; the
        GC reaps them and their tries run again."""
        return set()

    async def launch(self, launch: Launch) -> None:
        endpoint = self.agent_endpoint
        if not endpoint:
            raise LaunchError("the agent endpoint is not serving")
        if self.settings.docker_network != "host" and _loopback(endpoint):
            raise LaunchError(
                f"docker_network is {self.settings.docker_network!r} but the agent endpoint "
                f"{endpoint} is on this host's loopback, which a container on that network "
                "cannot reach: set agent_endpoint (and agent_listen) to an address it can, "
                "or use docker_network: host"
            )
        try:
            pod = build_pod(launch, self._pod_settings, agent_endpoint=endpoint)
            request = translate(pod, uid=str(uuid.uuid4()))
        except (PodBuildError, TranslationError) as exc:
            raise LaunchError(f"the task's container cannot be made: {exc}") from exc
        if request.ignored:
            log.info(
                "container %s: ignored on one host: %s", request.name, ", ".join(request.ignored)
            )
        key = (launch.ti_pk, launch.try_number)
        tracked = _Try(key, request.name, request.stop_grace)
        self._tries[key] = tracked
        task = asyncio.create_task(
            self._run(tracked, request), name=f"leoflow-docker-{request.name}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel(self, ti_pk: int, try_number: int, reason: str) -> None:
        tracked = self._tries.get((ti_pk, try_number))
        if tracked is None:
            return
        tracked.cancelled = reason or "cancelled"
        if tracked.ref is not None:
            with contextlib.suppress(EngineError, EngineUnreachable):
                await self.client.stop(tracked.ref, tracked.grace)

    async def stop(self) -> None:
        self._stopping = True
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task
        refs = [t.ref for t in self._tries.values() if t.ref is not None]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(STOP_GRACE + 2):
                await asyncio.gather(
                    *(self._quietly(self.client.stop(ref, STOP_GRACE)) for ref in refs)
                )
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(3):
                await asyncio.gather(*(self._quietly(self.client.remove(ref)) for ref in refs))
        await self.client.close()

    @property
    def in_flight(self) -> int:
        return len(self._tries)

    # ---- one try ---------------------------------------------------------------------

    async def _run(self, tracked: _Try, request: ContainerRequest) -> None:
        try:
            outcome, logs = await self._attempt(tracked, request)
        except lifecycle.TryFailed as exc:
            outcome, logs = exc.outcome, tracked.ref is not None
        except (EngineError, EngineUnreachable) as exc:
            outcome = Outcome(EndReason.LAUNCH_FAILED, None, f"the container engine failed: {exc}")
            logs = False
        finally:
            self._tries.pop(tracked.key, None)
        if tracked.ref is not None:
            if logs:
                await self._ship_container_log(tracked)
            if not self._stopping:
                if outcome.reason in _MAY_STILL_RUN:  # a forced remove would wait its grace
                    await self._quietly(self.client.kill(tracked.ref))
                await self._quietly(self.client.remove(tracked.ref))
        self._finish(tracked, outcome)

    async def _attempt(self, tracked: _Try, request: ContainerRequest) -> tuple[Outcome, bool]:
        """How the try ended, and whether the container's own log should be kept."""
        image = await lifecycle.ensure_image(self.client, request)
        lifecycle.check_user(request, image)
        if tracked.cancelled is None:
            body = self._body(request)
            tracked.ref = await lifecycle.create(self.client, request.name, body)
            await lifecycle.start(self.client, tracked.ref, request.name, body)
        if tracked.cancelled is not None or tracked.ref is None:
            return Outcome(EndReason.CANCELLED, None, f"cancelled: {tracked.cancelled}"), False
        waiting = lifecycle.Waiting(self.socket, self.settings.docker_outage_window)
        info = await lifecycle.wait_stopped(self.client, tracked.ref, request.name, waiting)
        outcome = container_outcome(request.name, info)
        await asyncio.sleep(self.agent_grace)  # the agent's own Complete lands first
        return (
            outcome,
            outcome.exit_code in AGENT_COULD_NOT_REPORT or outcome.reason == EndReason.OOM,
        )

    def _body(self, request: ContainerRequest) -> dict[str, Any]:
        body = dict(request.body)
        body["Labels"] = {
            **body["Labels"],
            LABEL_OWNER: self.owner,
            LABEL_EXECUTOR: EXECUTOR_VALUE,
        }
        host = body["HostConfig"] = dict(body["HostConfig"])
        host["NetworkMode"] = self.settings.docker_network
        ca = self.settings.agent_tls_ca_file
        if ca is not None:  # the endpoint's CA bundle, read-only, where a pod mounts it
            host["Binds"] = [f"{ca}:{CA_DIR}/{CA_KEY}:ro"]
            body["Env"] = [*body["Env"], f"LEOFLOW_AGENT_CA_FILE={CA_DIR}/{CA_KEY}"]
        return body

    async def _ship_container_log(self, tracked: _Try) -> None:
        """The agent could not report: its container's output goes to the try's log."""
        assert tracked.ref is not None
        try:
            text = await self.client.logs(tracked.ref, _LOG_TAIL)
        except (EngineError, EngineUnreachable) as exc:
            text = f"(the container log could not be read: {exc})\n".encode()
        if self._report is not None and text:
            header = b"[leoflow] the task's agent could not report; its container log follows\n"
            self._report(LogData(tracked.key[0], tracked.key[1], header + text))

    def _finish(self, tracked: _Try, outcome: Outcome) -> None:
        if self._report is not None:
            self._report(
                TaskFinished(
                    tracked.key[0], tracked.key[1], outcome.exit_code, outcome.reason,
                    outcome.message, time.time(),
                )
            )  # fmt: skip

    @staticmethod
    async def _quietly(call: Any) -> None:
        with contextlib.suppress(EngineError, EngineUnreachable):
            await call

    # ---- leftovers -------------------------------------------------------------------

    async def _gc_loop(self) -> None:
        while True:
            await asyncio.sleep(GC_INTERVAL)
            await self._collect_logged()

    async def _collect_logged(self) -> None:
        try:
            await self.collect_leftovers()
        except (EngineError, EngineUnreachable) as exc:
            log.warning("docker GC: %s; trying again in %gs", exc, GC_INTERVAL)

    async def collect_leftovers(self) -> list[str]:
        """Stop and remove the containers of a Lite process that is gone, and our own
        stopped containers no try is waiting for; the names removed."""
        ours = {t.name for t in self._tries.values()}
        removed = []
        for item in await self.client.list([SELECTOR, f"{LABEL_EXECUTOR}={EXECUTOR_VALUE}"]):
            labels = item.get("Labels") or {}
            names = [n.lstrip("/") for n in item.get("Names") or []]
            owner = str(labels.get(LABEL_OWNER, ""))
            mine_idle = (
                owner == self.owner and item.get("State") != "running" and not set(names) & ours
            )
            if (owner != self.owner and owner_gone(owner)) or mine_idle:
                await self._quietly(self.client.kill(str(item["Id"])))
                await self._quietly(self.client.remove(str(item["Id"])))
                removed.extend(names)
        if removed:
            log.info(
                "docker GC removed %d leftover container(s): %s", len(removed), ", ".join(removed)
            )
        return removed


def _loopback(endpoint: str) -> bool:
    host = endpoint.rpartition(":")[0].strip("[]") if ":" in endpoint else endpoint
    return endpoint.startswith("unix:") or host in ("localhost", "::1") or host.startswith("127.")


async def check_engine(client: DockerClient) -> None:
    """EngineUnreachable naming the socket and how to start an engine, unless one answers."""
    try:
        await client.ping()
    except EngineUnreachable as exc:
        raise EngineUnreachable(
            f"the docker executor needs a container engine, and none answers at "
            f"{client.socket} (DOCKER_HOST or docker_host): {exc.__cause__ or exc}; {START_HINT}"
        ) from exc
