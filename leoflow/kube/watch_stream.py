"""One open watch of the apiserver, read line by line as raw JSON events."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

import aiohttp

from leoflow.kube.errors import KubeUnavailable
from leoflow.kube.objects import JsonObj


class WatchStream:
    """One open watch: iterate for ``(type, object)`` pairs, raw JSON dicts.

    Lines are split from the byte stream here (as kopf does) rather than through the
    client's ``Watch``, which retries a 410 once with the same stale resourceVersion
    and hides where a stream ended.
    """

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def events(self) -> AsyncGenerator[tuple[str, JsonObj], None]:
        buffer = b""
        try:
            async for chunk in self._response.content.iter_any():
                buffer += chunk
                start = 0
                index = buffer.find(b"\n", start)
                while index >= 0:
                    line = buffer[start:index]
                    start = index + 1
                    index = buffer.find(b"\n", start)
                    if line.strip():
                        event = json.loads(line)
                        yield event.get("type", ""), event.get("object") or {}
                if start:
                    buffer = buffer[start:]
            if buffer.strip():
                event = json.loads(buffer)
                yield event.get("type", ""), event.get("object") or {}
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise KubeUnavailable(0, type(exc).__name__, f"watch stream broke: {exc}") from exc

    def close(self) -> None:
        self._response.close()
