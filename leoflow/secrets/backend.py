"""The secret backend interface: a name in, a value (or nothing) out."""

from __future__ import annotations

from typing import Protocol


class SecretBackend(Protocol):
    async def get(self, name: str) -> str | None:
        """The secret's value, or None when there is no such secret or it is unreadable."""
        ...
