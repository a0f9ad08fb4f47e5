"""Bearer-token auth with three roles: viewer < operator < admin.

Tokens are configured as SHA-256 hashes in a YAML file (``api_tokens_file``,
``LEOFLOW_API_TOKENS_FILE``; in Kubernetes a mounted Secret)::

    tokens:
      - {name: ci, role: operator, sha256: <hex of sha256(token)>}

Make a hash with ``printf %s "$TOKEN" | sha256sum``. The file is re-read when it
changes (a rotated Secret takes effect without a restart); a broken new version is
logged and the last good one stays in force.

A presented token is hashed and compared with *every* configured hash with
``hmac.compare_digest``: the time taken does not depend on which entry, if any,
matches, nor on how much of a hash matches.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any

import yaml
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError

log = logging.getLogger("leoflow.api.auth")

TOKENS_SETTING = "api_tokens_file (LEOFLOW_API_TOKENS_FILE)"


class Role(IntEnum):
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class TokensFileError(Exception):
    """The tokens file cannot be read or is malformed; the message names the file."""


class _TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    role: str = Field(pattern=r"^(viewer|operator|admin)$")
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")


class _TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: list[_TokenEntry]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: the token's name and role."""

    name: str
    role: Role


@dataclass(frozen=True, slots=True)
class _Token:
    name: str
    role: Role
    digest: bytes


def hash_token(token: str) -> str:
    """The hex SHA-256 the tokens file holds for ``token``."""
    return hashlib.sha256(token.encode()).hexdigest()


def _load(path: Path) -> tuple[_Token, ...]:
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TokensFileError(f"{path}: cannot read the API tokens file: {exc}") from exc
    try:
        parsed = _TokensFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}"
            for err in exc.errors()
        )
        raise TokensFileError(
            f"{path}: invalid API tokens file ({problems}); expected "
            "'tokens: [{name: NAME, role: viewer|operator|admin, sha256: HEX}]'"
        ) from exc
    return tuple(
        _Token(e.name, Role[e.role.upper()], bytes.fromhex(e.sha256)) for e in parsed.tokens
    )


class Auth:
    """Who a bearer token is. ``Auth.disabled()`` lets everyone in as admin (Lite on
    a loopback address without a tokens file)."""

    def __init__(self, tokens: tuple[_Token, ...], path: Path | None, *, enabled: bool) -> None:
        self._tokens = tokens
        self._path = path
        self._enabled = enabled
        self._stamp = self._stat()

    @classmethod
    def from_file(cls, path: Path) -> Auth:
        return cls(_load(path), path, enabled=True)

    @classmethod
    def from_hashes(cls, entries: list[tuple[str, Role, str]]) -> Auth:
        """Tokens given in code: (name, role, hex sha256)."""
        return cls(tuple(_Token(n, r, bytes.fromhex(h)) for n, r, h in entries), None, enabled=True)

    @classmethod
    def disabled(cls) -> Auth:
        return cls((), None, enabled=False)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def _stat(self) -> tuple[int, int] | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _maybe_reload(self) -> None:
        stamp = self._stat()
        if stamp is None or stamp == self._stamp:
            return
        assert self._path is not None
        self._stamp = stamp
        try:
            self._tokens = _load(self._path)
        except TokensFileError as exc:
            log.error("%s; keeping the tokens loaded before", exc)
        else:
            log.info("reloaded %d API token(s) from %s", len(self._tokens), self._path)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal a bearer token stands for; None if unknown (or no token)."""
        if not self._enabled:
            return Principal("anonymous", Role.ADMIN)
        if not token:
            return None
        self._maybe_reload()
        digest = hashlib.sha256(token.encode()).digest()
        found: _Token | None = None
        for entry in self._tokens:
            # No early exit: every entry is compared, whichever matches.
            if hmac.compare_digest(digest, entry.digest) and found is None:
                found = entry
        return None if found is None else Principal(found.name, found.role)

    def principals_by_digest(self) -> list[tuple[bytes, Principal]]:
        """Every configured token's SHA-256 digest with its principal (the web UI
        binds a session to a digest, so a token removed from the file ends it)."""
        self._maybe_reload()
        return [(t.digest, Principal(t.name, t.role)) for t in self._tokens]


_bearer = HTTPBearer(auto_error=False, description="An API token; roles viewer < operator < admin")


def _require(role: Role) -> Any:
    def dependency(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Principal:
        auth: Auth = request.app.state.leoflow.auth
        principal = auth.authenticate(None if credentials is None else credentials.credentials)
        if principal is None:
            raise HTTPException(
                401,
                "a valid bearer token is required (Authorization: Bearer TOKEN)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if principal.role < role:
            raise HTTPException(
                403,
                f"token {principal.name!r} has role {principal.role.label}; "
                f"this needs {role.label}",
            )
        return principal

    return Depends(dependency)


Viewer = Annotated[Principal, _require(Role.VIEWER)]
Operator = Annotated[Principal, _require(Role.OPERATOR)]
Admin = Annotated[Principal, _require(Role.ADMIN)]
