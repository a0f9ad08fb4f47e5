"""What an apiserver call can end in, without the caller importing aiohttp or the client."""

from __future__ import annotations

import json

from leoflow.kube.objects import JsonObj


class KubeError(Exception):
    """An apiserver call failed. ``status`` is the HTTP status (0: no answer at all)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: JsonObj | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}
        # Seconds the apiserver asked us to wait (Retry-After, or the Status body's
        # details.retryAfterSeconds: APF's 429 and a not-ready apiserver send it).
        self.retry_after = retry_after

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


def _seconds(value: object) -> float | None:
    try:
        seconds = float(str(value))
    except ValueError:
        return None  # an HTTP-date Retry-After: the apiserver never sends one
    return seconds if seconds >= 0 else None


def error_from_response(status: int, raw: bytes, retry_after: str | None = None) -> KubeError:
    """The exception for a non-2xx answer, from its ``Status`` body when it has one."""
    body: JsonObj = {}
    try:
        parsed = json.loads(raw) if raw else {}
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or raw[:200].decode(errors="replace"))
    error = error_for_status(status, reason, message, body)
    details = body.get("details")
    hint = retry_after
    if hint is None and isinstance(details, dict):
        hint = details.get("retryAfterSeconds")
    error.retry_after = _seconds(hint) if hint is not None else None
    return error


def error_for_status(
    status: int, reason: str, message: str, body: JsonObj | None = None
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
