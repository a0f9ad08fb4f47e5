"""FakeKubelet: moves pods through their lifecycle as a scheduler + kubelet would.

The executor, pod cache and reaper only ever see pods through the apiserver, so the
simulation works in-process on the server's registry (no HTTP: the request counters
stay the client's). For each pod it binds to ``fake-node-1`` (PodScheduled, as a
Binding does), reports Running with a running container status, then a terminated
state with exitCode/reason/startedAt/finishedAt and phase Succeeded or Failed.

Outcomes: either ``run_commands=True`` (run the container's ``command`` + ``args``
as a local process with its ``env``, the log recorded for ``pods/log``), or a
scripted :class:`Outcome` per pod name or labels (succeed, fail, OOMKilled, evicted,
ImagePullBackOff, never start). Graceful deletion is honoured like a kubelet: SIGTERM,
SIGKILL after ``deletionGracePeriodSeconds``, terminal status, then the final
grace-0 delete that removes the pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from leoflow.aio.waits import wait_set

from .agents import SimulatedAgents
from .objects import now
from .registry import PODS
from .server import FakeApiServer
from .status import ApiError

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    """What happens to a pod's containers. Build with the class methods."""

    kind: str
    after: float = 0.0
    exit_code: int = 0
    log: str = ""
    message: str = ""
    reason: str = ""

    @classmethod
    def succeed(cls, after: float = 0.0, log: str = "") -> Outcome:
        """Exit 0 (reason Completed) after ``after`` seconds."""
        return cls("exit", after, 0, log)

    @classmethod
    def fail(cls, exit_code: int = 1, after: float = 0.0, log: str = "") -> Outcome:
        """Exit non-zero (reason Error)."""
        return cls("exit", after, exit_code, log)

    @classmethod
    def oom_killed(cls, after: float = 0.0, log: str = "") -> Outcome:
        """Killed by the OOM killer: exit 137, reason OOMKilled, phase Failed."""
        return cls("oom", after, 137, log)

    @classmethod
    def evicted(cls, after: float = 0.0, message: str = "") -> Outcome:
        """Node-pressure eviction: phase Failed, status.reason Evicted, no terminated state."""
        msg = message or (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 52Mi. "
        )
        return cls("evicted", after, 0, "", msg)

    @classmethod
    def image_pull_backoff(cls) -> Outcome:
        """Stays Pending with the container waiting in ImagePullBackOff."""
        return cls.waiting("ImagePullBackOff")

    @classmethod
    def waiting(cls, reason: str, message: str = "") -> Outcome:
        """Stays Pending with the container waiting for ``reason``, as a kubelet reports
        a container it cannot pull, create or start (``ErrImageNeverPull``,
        ``CreateContainerError`` ...). ``message`` defaults to the kubelet's wording."""
        return cls("waiting", message=message or _KUBELET_MESSAGES.get(reason, ""), reason=reason)

    @classmethod
    def never_start(cls) -> Outcome:
        """Bound but stays Pending (ContainerCreating) forever."""
        return cls("never_start")

    @classmethod
    def run_command(cls) -> Outcome:
        """Run the container's command as a local process."""
        return cls("run")

    @classmethod
    def agent(cls) -> Outcome:
        """Speak the pod agent's part over gRPC in this process (``agents.py``), then
        exit as the agent does: 0 when its Complete was accepted."""
        return cls("agent")


# What kubelet (pkg/kubelet/images, kuberuntime) says beside each waiting reason; the
# image name is filled in per container.
_KUBELET_MESSAGES = {
    "ImagePullBackOff": 'Back-off pulling image "{image}"',
    "ErrImagePull": (
        'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
        "not found"
    ),
    "ErrImageNeverPull": 'Container image "{image}" is not present with pull policy of Never',
    "InvalidImageName": (
        'Failed to apply default image tag "{image}": couldn\'t parse image reference '
        '"{image}": invalid reference format'
    ),
    "CreateContainerConfigError": 'secret "warehouse" not found',
    "CreateContainerError": (
        "failed to generate container spec: failed to apply OCI options: no such file or directory"
    ),
    "RunContainerError": (
        "failed to start container: OCI runtime create failed: runc create failed: "
        'exec: "/app/run": permission denied'
    ),
}


@dataclass(frozen=True)
class _Rule:
    outcome: Outcome
    name: str | None
    labels: Mapping[str, str] | None

    def matches(self, pod: JsonObj) -> bool:
        meta = pod["metadata"]
        if self.name is not None and meta["name"] != self.name:
            return False
        labels = meta.get("labels") or {}
        return self.labels is None or all(labels.get(k) == v for k, v in self.labels.items())


@dataclass(eq=False)
class _Run:
    namespace: str
    name: str
    uid: str
    terminating: asyncio.Event = field(default_factory=asyncio.Event)
    grace: float = 30.0
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    empty_dirs: dict[str, str] = field(default_factory=dict)  # mount path -> host dir


def _container_id() -> str:
    return "containerd://" + uuid.uuid4().hex + uuid.uuid4().hex


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> JsonObj:
    cond: JsonObj = {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now(),
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _set_conditions(status: JsonObj, *conds: JsonObj) -> None:
    by_type = {c["type"]: c for c in status.get("conditions") or []}
    for cond in conds:
        old = by_type.get(cond["type"])
        if old is not None and old.get("status") == cond["status"]:
            cond["lastTransitionTime"] = old.get("lastTransitionTime")
        by_type[cond["type"]] = cond
    status["conditions"] = list(by_type.values())


class FakeKubelet:
    """Scheduler + kubelet for one fake node; see the module docstring."""

    def __init__(
        self,
        server: FakeApiServer,
        *,
        node_name: str = "fake-node-1",
        run_commands: bool = False,
        default: Outcome | None = None,
        namespace: str | None = None,
        inherit_env: bool = True,
        agents: SimulatedAgents | None = None,
        start_latency: float = 0.0,
    ) -> None:
        """``start_latency``: seconds from a pod's binding to its container running (a
        real node's image check, sandbox and container start), for benchmarks."""
        self.server = server
        self.start_latency = start_latency
        self.agents = agents or SimulatedAgents()
        self.node_name = node_name
        self.namespace = namespace
        self.inherit_env = inherit_env
        self.default = default or (Outcome.run_command() if run_commands else Outcome.succeed())
        self._rules: list[_Rule] = []
        self._runs: dict[str, _Run] = {}
        self._seen: set[str] = set()  # uids ever handled: a late event never restarts a pod
        self._task: asyncio.Task[None] | None = None
        self._ip = 10

    # ---- configuration -----------------------------------------------------------

    def script(
        self,
        outcome: Outcome,
        *,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Pods matching ``name`` and/or ``labels`` get ``outcome``; the latest rule wins."""
        self._rules.insert(0, _Rule(outcome, name, dict(labels) if labels is not None else None))

    def outcome_for(self, pod: JsonObj) -> Outcome:
        """The scripted outcome for the pod, else the default."""
        for rule in self._rules:
            if rule.matches(pod):
                return rule.outcome
        return self.default

    # ---- lifecycle ---------------------------------------------------------------

    async def start(self) -> FakeKubelet:
        """Start reacting to pods (existing ones included)."""
        sub = self.server.store.subscribe("pods", self.namespace)
        for pod in self.server.store.objects("pods", self.namespace):
            self._on_pod(pod)
        self._task = asyncio.create_task(self._loop(sub))
        return self

    async def stop(self) -> None:
        """Stop: kill every local process, leave the pods as they are."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for run in list(self._runs.values()):
            await self._cancel(run)

    async def __aenter__(self) -> FakeKubelet:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def lose(self, namespace: str, name: str) -> bool:
        """The node vanished: the pod is force-deleted and its process killed."""
        pod = self.server.store.get("pods", namespace, name)
        if pod is None:
            return False
        run = self._runs.pop(pod["metadata"]["uid"], None)
        if run is not None:
            self._kill(run, signal.SIGKILL)
            if run.task is not None:
                run.task.cancel()
        self.server.registry.delete(PODS, namespace, name, grace=0)
        return True

    async def _loop(self, sub: Any) -> None:
        try:
            while True:
                event = await sub.queue.get()
                if event is None:
                    return
                if event.type == "DELETED":
                    run = self._runs.pop(event.obj["metadata"]["uid"], None)
                    if run is not None:
                        self._kill(run, signal.SIGKILL)
                        if run.task is not None:
                            run.task.cancel()
                else:
                    self._on_pod(event.obj)
        finally:
            self.server.store.unsubscribe(sub)

    def _on_pod(self, pod: JsonObj) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        uid = meta["uid"]
        run = self._runs.get(uid)
        if run is None:
            if uid in self._seen or spec.get("nodeName") not in (None, "", self.node_name):
                return
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            run = _Run(meta["namespace"], meta["name"], uid)
            self._runs[uid] = run
            self._seen.add(uid)
            run.task = asyncio.create_task(self._lifecycle(pod, run))
        if meta.get("deletionTimestamp") and not run.terminating.is_set():
            run.grace = float(meta.get("deletionGracePeriodSeconds", 0))
            run.terminating.set()

    async def _cancel(self, run: _Run) -> None:
        self._kill(run, signal.SIGKILL)
        if run.task is not None:
            run.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run.task
        self._runs.pop(run.uid, None)

    def _kill(self, run: _Run, sig: signal.Signals) -> None:
        for proc in run.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)

    # ---- one pod -----------------------------------------------------------------

    def _status(self, run: _Run, change: Any) -> bool:
        return self.server.registry.mutate_status(run.namespace, run.name, change) is not None

    async def _lifecycle(self, pod: JsonObj, run: _Run) -> None:
        registry = self.server.registry
        outcome = self.outcome_for(pod)
        containers = pod["spec"].get("containers") or []
        try:
            if not pod["spec"].get("nodeName"):
                try:
                    registry.bind(run.namespace, run.name, self.node_name)
                except ApiError:
                    return
            if outcome.kind in ("never_start", "waiting"):
                self._status(run, lambda s: self._waiting(s, containers, outcome))
                await run.terminating.wait()
                self._finish_deletion(run)
                return
            if self.start_latency > 0:
                await wait_set(run.terminating, self.start_latency)
                if run.terminating.is_set():
                    self._finish_deletion(run)
                    return
            started = now()
            self._ip += 1
            self._status(run, lambda s: self._running(s, containers, started))
            if outcome.kind == "run":
                results = await asyncio.gather(*(self._process(pod, c, run) for c in containers))
            elif outcome.kind == "agent":
                results = [await self.agents.run(pod, containers[0])]
                results += [(0, "Completed", "") for _ in containers[1:]]
            else:
                results = await self._scripted(containers, outcome, run)
            if outcome.kind == "evicted" and not run.terminating.is_set():
                self._status(run, lambda s: self._evicted(s, outcome))
            else:
                finished = now()
                self._status(
                    run, lambda s: self._terminated(s, containers, results, started, finished)
                )
            if run.terminating.is_set():
                self._finish_deletion(run)
        finally:
            self._runs.pop(run.uid, None)
            for host_dir in run.empty_dirs.values():
                shutil.rmtree(host_dir, ignore_errors=True)

    def _finish_deletion(self, run: _Run) -> None:
        """The kubelet's last word on a terminating pod: delete it with grace 0."""
        with contextlib.suppress(ApiError):
            self.server.registry.delete(PODS, run.namespace, run.name, grace=0, uid=run.uid)

    async def _scripted(
        self, containers: list[JsonObj], outcome: Outcome, run: _Run
    ) -> list[tuple[int, str, str]]:
        for c in containers:
            self.server.store.append_log(run.namespace, run.name, c["name"], outcome.log)
        await wait_set(run.terminating, outcome.after)
        if run.terminating.is_set():
            # A scripted container honours SIGTERM at once: 128 + 15.
            return [(143, "Error", "") for _ in containers]
        reason = {"oom": "OOMKilled"}.get(
            outcome.kind, "Completed" if outcome.exit_code == 0 else "Error"
        )
        return [(outcome.exit_code, reason, "") for _ in containers]

    @staticmethod
    def _empty_dirs(pod: JsonObj, container: JsonObj, run: _Run) -> dict[str, str]:
        """The container's emptyDir mounts, each a fresh host directory of this pod (the
        process runs on this host: its /tmp would be the host's, shared by every pod)."""
        empty = {v["name"] for v in pod["spec"].get("volumes") or [] if "emptyDir" in v}
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") in empty and mount["mountPath"] not in run.empty_dirs:
                run.empty_dirs[mount["mountPath"]] = tempfile.mkdtemp(prefix="fakekube-empty-")
        return run.empty_dirs

    def _env(self, pod: JsonObj, container: JsonObj, run: _Run) -> dict[str, str]:
        env = (
            dict(os.environ)
            if self.inherit_env
            else {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        )
        env["HOSTNAME"] = pod["metadata"]["name"]
        fields = {
            "metadata.name": pod["metadata"]["name"],
            "metadata.namespace": pod["metadata"]["namespace"],
            "metadata.uid": pod["metadata"]["uid"],
            "spec.nodeName": self.node_name,
            "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
            "status.podIP": f"10.244.0.{self._ip}",
        }
        mounts = self._empty_dirs(pod, container, run)
        for var in container.get("env") or []:
            if "value" in var:
                # A path into an emptyDir mount names the pod's own host directory.
                env[var["name"]] = mounts.get(str(var["value"]), str(var["value"]))
                continue
            path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
            if path in fields:
                env[var["name"]] = fields[path]
            elif path.startswith(("metadata.labels['", "metadata.annotations['")):
                section, _, key = path.partition("['")
                source = pod["metadata"].get(section.split(".")[1]) or {}
                env[var["name"]] = source.get(key.rstrip("']"), "")
        return env

    async def _process(self, pod: JsonObj, container: JsonObj, run: _Run) -> tuple[int, str, str]:
        argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        store = self.server.store
        store.append_log(run.namespace, run.name, container["name"], "")
        if not argv:
            return 128, "StartError", "no command: the fake kubelet cannot run an image entrypoint"
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=self._env(pod, container, run),
                cwd=container.get("workingDir") or None,
                start_new_session=True,
            )
        except OSError as exc:
            return 128, "StartError", f"failed to start container process: {exc}"
        run.procs.append(proc)

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                text = chunk.decode(errors="replace")
                store.append_log(run.namespace, run.name, container["name"], text)

        pumping = asyncio.create_task(pump())
        waiting = asyncio.create_task(proc.wait())
        stopping = asyncio.create_task(run.terminating.wait())
        try:
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                self._kill(run, signal.SIGTERM)
                try:
                    async with asyncio.timeout(run.grace):
                        await asyncio.shield(waiting)
                except TimeoutError:
                    self._kill(run, signal.SIGKILL)
                    await waiting
            await pumping
        finally:
            if proc.returncode is None:
                self._kill(run, signal.SIGKILL)
            for task in (stopping, waiting, pumping):
                if not task.done():
                    task.cancel()
        code = proc.returncode if proc.returncode is not None else 137
        if code < 0:
            code = 128 - code  # killed by signal N: a container runtime reports 128 + N
        return code, "Completed" if code == 0 else "Error", ""

    # ---- status shapes -------------------------------------------------------------

    def _waiting(self, status: JsonObj, containers: list[JsonObj], outcome: Outcome) -> None:
        names = [c["name"] for c in containers]
        unready = f"containers with unready status: [{' '.join(names)}]"
        _set_conditions(
            status,
            _condition("PodReadyToStartContainers", outcome.kind == "waiting"),
            _condition("Initialized", True),
            _condition("Ready", False, "ContainersNotReady", unready),
            _condition("ContainersReady", False, "ContainersNotReady", unready),
        )
        status["hostIP"] = "10.0.0.1"
        status["hostIPs"] = [{"ip": "10.0.0.1"}]
        status["startTime"] = now()
        statuses = []
        for c in containers:
            if outcome.kind == "waiting":
                waiting = {
                    "reason": outcome.reason,
                    "message": outcome.message.replace("{image}", c.get("image", "")),
                }
            else:
                waiting = {"reason": "ContainerCreating"}
            statuses.append(
                {
                    "name": c["name"],
                    "state": {"waiting": waiting},
                    "lastState": {},
                    "ready": False,
                    "restartCount": 0,
                    "image": c.get("image", ""),
                    "imageID": "",
                    "started": False,
                }
            )
        status["containerStatuses"] = statuses

    def _running(self, status: JsonObj, containers: list[JsonObj], started: str) -> None:
        status["phase"] = "Running"
        _set_conditions(
            status,
            _condition("PodReadyToStartContainers", True),
            _condition("Initialized", True),
            _condition("Ready", True),
            _condition("ContainersReady", True),
        )
        status["hostIP"] = "10.0.0.1"
        status["hostIPs"] = [{"ip": "10.0.0.1"}]
        status["podIP"] = f"10.244.0.{self._ip}"
        status["podIPs"] = [{"ip": f"10.244.0.{self._ip}"}]
        status["startTime"] = started
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "state": {"running": {"startedAt": started}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": c.get("image", ""),
                "imageID": f"{c.get('image', '')}@sha256:{uuid.uuid4().hex}{uuid.uuid4().hex}",
                "containerID": _container_id(),
                "started": True,
            }
            for c in containers
        ]

    def _terminated(
        self,
        status: JsonObj,
        containers: list[JsonObj],
        results: list[tuple[int, str, str]],
        started: str,
        finished: str,
    ) -> None:
        ok = all(code == 0 for code, _, _ in results)
        status["phase"] = "Succeeded" if ok else "Failed"
        why = "PodCompleted" if ok else "PodFailed"
        _set_conditions(
            status,
            _condition("PodReadyToStartContainers", False),
            _condition("Ready", False, why),
            _condition("ContainersReady", False, why),
        )
        by_name = {cs["name"]: cs for cs in status.get("containerStatuses") or []}
        out = []
        for c, (code, reason, message) in zip(containers, results, strict=True):
            cs = dict(by_name.get(c["name"]) or {"name": c["name"], "image": c.get("image", "")})
            terminated: JsonObj = {"exitCode": code, "reason": reason}
            if message:
                terminated["message"] = message
            terminated["startedAt"] = started
            terminated["finishedAt"] = finished
            if cs.get("containerID"):
                terminated["containerID"] = cs["containerID"]
            cs["state"] = {"terminated": terminated}
            cs["ready"] = False
            cs["started"] = False
            out.append(cs)
        status["containerStatuses"] = out

    def _evicted(self, status: JsonObj, outcome: Outcome) -> None:
        status["phase"] = "Failed"
        status["reason"] = "Evicted"
        status["message"] = outcome.message
        _set_conditions(
            status,
            _condition("DisruptionTarget", True, "TerminationByKubelet", outcome.message),
            _condition("Ready", False, "PodFailed"),
            _condition("ContainersReady", False, "PodFailed"),
        )
        for cs in status.get("containerStatuses") or []:
            cs["ready"] = False
