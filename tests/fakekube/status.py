"""Kubernetes ``Status`` bodies, shaped exactly as the captured transcripts show.

Clients branch on ``reason`` and ``code`` and log ``message``; a fake that answers
with a differently shaped body would let client code pass here and fail against a
real apiserver. Every builder returns an :class:`ApiError` the server turns into a
response; the key order follows the apiserver's Go structs (``metav1.Status``,
``StatusDetails``) so bodies compare byte-for-byte modulo names.
"""

from __future__ import annotations

from typing import Any

JsonObj = dict[str, Any]


class ApiError(Exception):
    """A request the apiserver refuses: carries the HTTP code and the Status body."""

    def __init__(self, body: JsonObj, headers: dict[str, str] | None = None) -> None:
        super().__init__(body.get("message", ""))
        self.body = body
        self.code = int(body["code"])
        self.headers = headers or {}


def qualified(group: str, resource: str) -> str:
    """``pods`` for core, ``leases.coordination.k8s.io`` otherwise (GroupResource.String)."""
    return f"{resource}.{group}" if group else resource


def status_body(
    code: int,
    reason: str,
    message: str,
    details: JsonObj | None = None,
) -> JsonObj:
    """A failure Status; ``details`` is omitted when None (as 401 and 410 show)."""
    body: JsonObj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _details(name: str, group: str, resource: str) -> JsonObj:
    details: JsonObj = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def not_found(group: str, resource: str, name: str) -> ApiError:
    """404 as transcript 12."""
    msg = f'{qualified(group, resource)} "{name}" not found'
    return ApiError(status_body(404, "NotFound", msg, _details(name, group, resource)))


def no_such_path() -> ApiError:
    """404 for a path the server does not serve (the real generic answer)."""
    return ApiError(
        status_body(404, "NotFound", "the server could not find the requested resource", {})
    )


def already_exists(group: str, resource: str, name: str) -> ApiError:
    """409 AlreadyExists as transcript 02."""
    msg = f'{qualified(group, resource)} "{name}" already exists'
    return ApiError(status_body(409, "AlreadyExists", msg, _details(name, group, resource)))


def conflict(group: str, resource: str, name: str, why: str | None = None) -> ApiError:
    """409 Conflict as transcript 11 (stale resourceVersion) or a failed precondition."""
    why = why or (
        "the object has been modified; please apply your changes to the latest version "
        "and try again"
    )
    msg = f'Operation cannot be fulfilled on {qualified(group, resource)} "{name}": {why}'
    return ApiError(status_body(409, "Conflict", msg, _details(name, group, resource)))


def forbidden(group: str, resource: str, name: str, why: str) -> ApiError:
    """403 as transcripts 03 (admission) and 16 (RBAC): errors.NewForbidden's format."""
    qr = qualified(group, resource)
    msg = f'{qr} "{name}" is forbidden: {why}' if name else f"{qr} is forbidden: {why}"
    return ApiError(status_body(403, "Forbidden", msg, _details(name, group, resource)))


def unauthorized() -> ApiError:
    """401 as transcript 17: no details at all."""
    return ApiError(status_body(401, "Unauthorized", "Unauthorized"))


def expired(message: str) -> JsonObj:
    """The 410 Status that transcript 18 carries inside a watch ERROR event."""
    return status_body(410, "Expired", message)


def gone(message: str) -> ApiError:
    """410 as an HTTP answer (list with a too-old continue token)."""
    return ApiError(status_body(410, "Expired", message))


def bad_request(message: str) -> ApiError:
    """400 BadRequest (bad selector, log of a container not started)."""
    return ApiError(status_body(400, "BadRequest", message))


def invalid(kind: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are (field, bad value, why) triples."""
    parts = [f'{field}: Invalid value: "{value}": {why}' for field, value, why in causes]
    msg = f'{kind} "{name}" is invalid: '
    msg += parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details: JsonObj = {
        "name": name,
        "kind": kind,
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{value}": {why}',
                "field": field,
            }
            for field, value, why in causes
        ],
    }
    return ApiError(status_body(422, "Invalid", msg, details))


def injected(code: int, message: str = "injected fault") -> ApiError:
    """A fault-injection answer with the reason the apiserver uses for that code."""
    reasons = {
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
        409: "Conflict",
        403: "Forbidden",
        404: "NotFound",
        410: "Expired",
        400: "BadRequest",
        422: "Invalid",
    }
    reason = reasons.get(code, "InternalError")
    if code == 500:
        body = status_body(
            code,
            reason,
            f"Internal error occurred: {message}",
            {"causes": [{"message": message}]},
        )
    else:
        body = status_body(code, reason, message, {} if code == 429 else None)
    headers = {"Retry-After": "1"} if code in (429, 503) else {}
    return ApiError(body, headers)


def success(code: int) -> JsonObj:
    """A Success Status as transcript 05a (binding) answers."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}
