"""Host and Origin names as the request guard matches them: parsing, the allow-list
rules, and the address ``api_listen`` names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
HOSTS_SETTING = "api_allowed_hosts (LEOFLOW_API_ALLOWED_HOSTS)"
DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name``, ``name:port``, ``[v6]``, ``[v6]:port`` -> (lowercase name, port);
    None when malformed. IPv6 names keep their brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text_ = value.partition(":")
        port_text = port_text_ if sep else None
    name = name.removesuffix(".")
    if not name or any(c in name for c in "/\\@ \t"):
        return None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


@dataclass(frozen=True, slots=True)
class _HostRule:
    name: str  # "*", ".suffix" or an exact name
    port: int | None

    def allows(self, name: str, port: int | None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name == "*":
            return True
        if self.name.startswith("."):
            return name == self.name[1:] or name.endswith(self.name)
        return name == self.name


def host_rules(extra: Sequence[str]) -> tuple[_HostRule, ...]:
    """The loopback names plus ``extra``; ValueError naming a malformed entry."""
    rules = []
    for entry in (*LOOPBACK_HOSTS, *extra):
        parsed = split_host(entry)
        if parsed is None:
            raise ValueError(f"{HOSTS_SETTING}: not a host name, [IPv6] or name:port: {entry!r}")
        rules.append(_HostRule(*parsed))
    return tuple(rules)


def listen_host(listen: str) -> tuple[str, ...]:
    """The address ``api_listen`` names, when it names one (not 0.0.0.0 or ::): a
    client that dials that address sends it as Host."""
    host = listen.rpartition(":")[0].strip("[]")
    if host in ("", "0.0.0.0", "::"):
        return ()
    return (f"[{host}]" if ":" in host else host,)


def parse_origin(value: str) -> tuple[str, str, int] | None:
    """``scheme://host[:port]`` -> (scheme, host, port); None when not such an origin."""
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.scheme, host, port if port is not None else DEFAULT_PORTS[parts.scheme]
