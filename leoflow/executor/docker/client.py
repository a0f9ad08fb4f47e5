"""A small asyncio client of the Docker Engine API over its Unix socket (Docker, or
Podman's compatible ``podman system service``), on httpx, which Leoflow already uses.

Only the calls the ``docker`` executor makes. An engine that cannot be reached
raises ``EngineUnreachable`` (the socket named); an answer that is an error raises
``EngineError`` with the engine's own message.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_HOST = "unix:///var/run/docker.sock"
API = "/v1.41"  # Docker 20.10+; Podman 4 serves it too
START_HINT = (
    "start an engine: `sudo systemctl start docker`, or Podman's compatible service "
    "`podman system service --time=0 unix:///run/podman/podman.sock` and "
    "DOCKER_HOST=unix:///run/podman/podman.sock"
)


class EngineUnreachable(Exception):
    """No engine answered at the socket."""


class EngineError(Exception):
    """The engine answered with an error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def socket_path(docker_host: str | None) -> str:
    """The Unix socket ``DOCKER_HOST`` names (``unix:///path`` or a bare path)."""
    host = docker_host or os.environ.get("DOCKER_HOST") or DEFAULT_HOST
    if host.startswith("unix://"):
        return host[len("unix://") :]
    if host.startswith("/"):
        return host
    raise ValueError(
        f"DOCKER_HOST={host!r}: the docker executor speaks to a local engine over its "
        "Unix socket (unix:///var/run/docker.sock)"
    )


class DockerClient:
    def __init__(self, socket: str) -> None:
        self.socket = socket
        transport = httpx.AsyncHTTPTransport(uds=socket)
        # No read timeout: /wait and /images/create answer when the work is done.
        timeout = httpx.Timeout(30.0, read=None)
        self._http = httpx.AsyncClient(
            transport=transport, base_url="http://engine", timeout=timeout
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(
        self, method: str, path: str, *, params: dict[str, Any] | None = None,
        body: Any = None, ok: tuple[int, ...] = (200, 201, 204),
    ) -> httpx.Response:  # fmt: skip
        try:
            response = await self._http.request(method, API + path, params=params, json=body)
        except httpx.TransportError as exc:
            raise EngineUnreachable(f"no container engine answers at {self.socket}: {exc}") from exc
        if response.status_code not in ok:
            raise EngineError(response.status_code, _message(response))
        return response

    async def ping(self) -> None:
        await self._call("GET", "/_ping")

    async def _found(self, path: str) -> dict[str, Any] | None:
        """GET ``path``'s JSON object; None when the engine says there is no such thing."""
        try:
            response = await self._call("GET", path)
        except EngineError as exc:
            if exc.status == 404:
                return None
            raise
        result: dict[str, Any] = response.json()
        return result

    async def inspect_image(self, image: str) -> dict[str, Any] | None:
        return await self._found(f"/images/{quote(image, safe='')}/json")

    async def pull(self, image: str) -> None:
        """Pull ``image``; EngineError with the pull's own error when it fails."""
        name, tag = _split_tag(image)
        params = {"fromImage": name, "tag": tag} if tag else {"fromImage": name}
        try:
            async with self._http.stream("POST", API + "/images/create", params=params) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise EngineError(response.status_code, _message(response))
                async for line in response.aiter_lines():
                    error = _stream_error(line)
                    if error:
                        raise EngineError(500, error)
        except httpx.TransportError as exc:
            raise EngineUnreachable(f"no container engine answers at {self.socket}: {exc}") from exc

    async def create(self, name: str, body: dict[str, Any]) -> str:
        response = await self._call("POST", "/containers/create", params={"name": name}, body=body)
        return str(response.json()["Id"])

    async def start(self, ref: str) -> None:
        await self._call("POST", f"/containers/{ref}/start", ok=(204, 304))

    async def wait(self, ref: str) -> int:
        """Block until the container is not running; its exit code."""
        response = await self._call(
            "POST", f"/containers/{ref}/wait", params={"condition": "not-running"}
        )
        return int(response.json().get("StatusCode", -1))

    async def inspect(self, ref: str) -> dict[str, Any] | None:
        return await self._found(f"/containers/{ref}/json")

    async def stop(self, ref: str, grace: int) -> None:
        await self._call("POST", f"/containers/{ref}/stop", params={"t": grace}, ok=(204, 304, 404))

    async def kill(self, ref: str) -> None:
        """SIGKILL now (a forced remove may first wait out the container's stop timeout)."""
        await self._call(
            "POST", f"/containers/{ref}/kill", params={"signal": "KILL"}, ok=(204, 304, 404, 409)
        )

    async def remove(self, ref: str) -> None:
        await self._call(
            "DELETE",
            f"/containers/{ref}",
            params={"force": "true", "v": "true"},
            ok=(200, 204, 404),
        )

    async def list(self, labels: list[str]) -> list[dict[str, Any]]:
        filters = json.dumps({"label": labels})
        response = await self._call(
            "GET", "/containers/json", params={"all": "true", "filters": filters}
        )
        result: list[dict[str, Any]] = response.json()
        return result

    async def logs(self, ref: str, tail: int) -> bytes:
        params = {"stdout": "true", "stderr": "true", "tail": str(tail)}
        response = await self._call("GET", f"/containers/{ref}/logs", params=params)
        return b"".join(demux(response.content))


def demux(data: bytes) -> list[bytes]:
    """The payloads of a non-TTY log stream (8-byte headers: stream, 0, 0, 0, size)."""
    out: list[bytes] = []
    i = 0
    while i + 8 <= len(data) and data[i] in (0, 1, 2) and data[i + 1 : i + 4] == b"\0\0\0":
        size = int.from_bytes(data[i + 4 : i + 8], "big")
        out.append(data[i + 8 : i + 8 + size])
        i += 8 + size
    if i < len(data):
        out.append(data[i:])  # not multiplexed (a TTY, or an engine that does not frame)
    return out


def _split_tag(image: str) -> tuple[str, str]:
    if "@" in image:
        return image, ""
    head, _, last = image.rpartition("/")
    if ":" in last:
        name, _, tag = last.partition(":")
        return (f"{head}/{name}" if head else name), tag
    return image, "latest"


def _stream_error(line: str) -> str:
    try:
        event = json.loads(line)
    except ValueError:
        return ""
    if isinstance(event, dict) and event.get("error"):
        return str(event.get("error"))
    return ""


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip() or f"HTTP {response.status_code}"
    if isinstance(data, dict):
        return str(data.get("message") or data.get("cause") or data)
    return str(data)
