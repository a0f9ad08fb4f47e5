"""What an apiserver call can end in, without the caller importing aiohttp or the client."""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """An apiserver call failed. ``status`` is the HTTP status (0: no answer at all)."""

    def __init__(
        self, status: int, reason: str, message: str, body: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def retryable(self) -> bool:
        """Worth trying again later: no answer, throttled, or the server's own trouble."""
        return self.status in (0, 429) or self.status >= 500


class KubeUnavailable(KubeError):
    """No answer: connection refused or reset, or a timeout."""


class NotFound(KubeError):
    """404."""


class Conflict(KubeError):
    """409: a write lost a resourceVersion race (``reason`` Conflict)."""


class AlreadyExists(Conflict):
    """409 on create: an object of that name exists (``reason`` AlreadyExists)."""


class Gone(KubeError):
    """410: the resourceVersion (or continue token) is older than the server's history."""


class Refused(KubeError):
    """401/403/422 and other answers that trying again will not change."""


class CallNotDeclared(Exception):
    """A call that is not in ``leoflow.kube.calls`` was attempted."""


def error_from_response(status: int, raw: bytes) -> KubeError:
    """The exception for a non-2xx answer, from its ``Status`` body when it has one."""
    body: dict[str, Any] = {}
    try:
        parsed = json.loads(raw) if raw else {}
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or raw[:200].decode(errors="replace"))
    return error_for_status(status, reason, message, body)


def error_for_status(
    status: int, reason: str, message: str, body: dict[str, Any] | None = None
) -> KubeError:
    cls: type[KubeError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status == 410:
        cls = Gone
    elif status == 0:
        cls = KubeUnavailable
    elif status == 429 or status >= 500:
        cls = KubeError
    else:
        cls = Refused
    return cls(status, reason or str(status), message, body)
