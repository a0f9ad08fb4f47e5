"""One try's container, from image to removal: each step's failure is a told outcome.

- the image: inspected, pulled by the pod's pull policy; one that cannot be had
  fails the try at once: ``image not found: NAME`` and the pull's own error;
- kubelet's runAsNonRoot check against the image's USER (``CreateContainerConfigError``);
- create and start: an engine that refuses says why, and the try fails with it;
- wait: an engine that stops answering (restarted) is asked again, with backoff,
  for ``docker_outage_window``; a container found again is waited for, a container
  gone is lost, an engine still silent at the end fails the try as lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from leoflow.domain.reasons import EndReason
from leoflow.executor.docker.client import DockerClient, EngineError, EngineUnreachable
from leoflow.executor.docker.outcome import Outcome
from leoflow.executor.docker.translate import ContainerRequest, TranslationError, check_non_root

log = logging.getLogger("leoflow.executor.docker")

_BACKOFF = (0.2, 5.0)
# A pull that neither finishes nor fails (a registry that accepts and then stalls)
# fails the try rather than holding it; a large image on a slow link fits well within.
PULL_TIMEOUT = 900.0


class TryFailed(Exception):
    """The try cannot go on; ``outcome`` says how it ended."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def _failed(reason: str, message: str) -> TryFailed:
    return TryFailed(Outcome(reason, None, message))


@contextlib.contextmanager
def _told(reason: str, say: Callable[[EngineError], str]) -> Iterator[None]:
    """An engine error in the block fails the try with ``reason`` and ``say(error)``."""
    try:
        yield
    except EngineError as exc:
        raise _failed(reason, say(exc)) from exc


async def ensure_image(client: DockerClient, request: ContainerRequest) -> dict[str, Any]:
    """The image's inspect JSON, pulled first when the pull policy says so."""
    image = request.image
    found = None if request.pull_policy == "Always" else await client.inspect_image(image)
    if found is not None:
        return found
    if request.pull_policy == "Never":
        raise _failed(
            EndReason.IMAGE_PULL,
            f"image not found: {image} (its imagePullPolicy is Never, so it is not pulled; "
            "load it into the engine first)",
        )
    try:
        async with asyncio.timeout(PULL_TIMEOUT):
            with _told(
                EndReason.IMAGE_PULL, lambda e: f"image not found: {image} (pull failed: {e})"
            ):
                await client.pull(image)
    except TimeoutError as exc:
        raise _failed(
            EndReason.IMAGE_PULL,
            f"image not found: {image} (the pull did not finish within {PULL_TIMEOUT:g}s)",
        ) from exc
    found = await client.inspect_image(image)
    if found is None:
        raise _failed(EndReason.IMAGE_PULL, f"image not found: {image} (the pull left no image)")
    return found


def check_user(request: ContainerRequest, image: dict[str, Any]) -> None:
    user = str((image.get("Config") or {}).get("User") or "")
    try:
        check_non_root(request, user)
    except TranslationError as exc:
        raise _failed(
            EndReason.LAUNCH_FAILED,
            f"the container cannot be created (CreateContainerConfigError): {exc}",
        ) from exc


# What the engine may refuse, the words it uses for it, and the task's setting behind it.
_SETTINGS = (
    ("Memory", ("memory",), "resources.limits.memory"),
    ("NanoCpus", ("cpu",), "resources.limits.cpu"),
    ("User", ("user", "uid", "gid"), "securityContext.runAsUser/runAsGroup (or the image's USER)"),
    ("CapAdd", ("capabilit",), "securityContext.capabilities.add"),
    ("ReadonlyRootfs", ("read-only", "readonly"), "task_pod_security.read_only_root_filesystem"),
    ("Tmpfs", ("tmpfs", "mount"), "the pod's emptyDir volumes (tmpfs)"),
    ("GroupAdd", ("group",), "securityContext.fsGroup/supplementalGroups"),
    (
        "SecurityOpt",
        ("seccomp", "no-new-privileges"),
        "securityContext.seccompProfile/allowPrivilegeEscalation",
    ),
)


def refused_settings(body: dict[str, Any], message: str) -> str:
    """The task's settings the engine's refusal names, with the values given."""
    host: dict[str, Any] = body.get("HostConfig") or {}
    given = {key: body.get(key, host.get(key)) for key, _, _ in _SETTINGS}
    words = message.lower()
    named = [
        f"{setting} = {given[key]!r}"
        for key, hints, setting in _SETTINGS
        if given[key] not in (None, [], {}) and any(h in words for h in hints)
    ]
    return f" (the task's {'; '.join(named)})" if named else ""


async def create(client: DockerClient, name: str, body: dict[str, Any]) -> str:
    """The created container's id; an existing container of that name (this very try,
    launched already) is used, never a second one. A refusal names the setting behind it."""
    try:
        ref = await client.create(name, body)
    except EngineError as exc:
        if exc.status != 409:
            raise _failed(
                EndReason.LAUNCH_FAILED,
                f"the engine refused to create the container {name}: {exc}"
                + refused_settings(body, str(exc)),
            ) from exc
        ref = name
    return ref


async def start(client: DockerClient, ref: str, name: str, body: dict[str, Any]) -> None:
    with _told(
        EndReason.LAUNCH_FAILED,
        lambda e: f"the engine could not start {name}: {e}" + refused_settings(body, str(e)),
    ):
        await client.start(ref)


@dataclass
class Waiting:
    socket: str
    window: float


async def wait_stopped(client: DockerClient, ref: str, name: str, how: Waiting) -> dict[str, Any]:
    """The inspect JSON of the container once it has stopped."""
    loop = asyncio.get_running_loop()
    silent_since: float | None = None
    delay = _BACKOFF[0]
    while True:
        try:
            await client.wait(ref)
            info = await client.inspect(ref)
        except (EngineUnreachable, EngineError) as exc:
            if isinstance(exc, EngineError) and exc.status == 404:
                info = None
            else:
                now = loop.time()
                if silent_since is None:
                    silent_since = now
                    log.warning(
                        "container %s: the engine does not answer (%s); asking again", name, exc
                    )
                if now - silent_since > how.window:
                    raise _failed(
                        EndReason.LOST,
                        f"the engine at {how.socket} did not answer for {how.window:g}s while the "
                        f"container {name} ran ({exc}); the try is lost",
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF[1])
                continue
        if info is None:
            raise _failed(
                EndReason.LOST,
                f"the container {name} is gone (the engine was restarted without it, or it "
                "was removed from outside) before its agent reported",
            )
        if not (info.get("State") or {}).get("Running"):
            return info
        silent_since, delay = None, _BACKOFF[0]  # found again, still running: wait on
