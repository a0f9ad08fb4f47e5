"""What a task's command starts from: a small base, never the control plane's environment.

Lite's process holds ``LEOFLOW_TOKEN_SIGNING_KEY`` (it can forge any task's session),
the database URL and every other ``LEOFLOW_*`` setting; none of that may reach a task.
So a task's environment is built, not inherited: the variables named in ``BASE_NAMES``
(and every ``LC_*``) taken from the process that starts it, then the task's ``env``
and context variables, then its declared secrets. This is close to what systemd gives
a service (``PATH``, ``LANG``, ``USER``, ``LOGNAME``, ``HOME``, ``SHELL``).

With a ``task_user`` the identity variables (``HOME``, ``USER``, ``LOGNAME``, ``SHELL``)
are that user's, from the password database.

Stdlib only: the agent (which may not import the domain) and Lite's executors share it.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass

BASE_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR")
LOCALE_PREFIX = "LC_"
# systemd's default for services, used when the starting process has no PATH at all.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, slots=True)
class TaskUser:
    """The OS account tasks run as: ids for setuid/setgid/setgroups and its identity."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str


class TaskUserError(ValueError):
    """The configured task user does not exist, or cannot be switched to."""


def resolve_task_user(spec: str) -> TaskUser:
    """A user name or numeric uid, looked up in the password database."""
    try:
        entry = pwd.getpwuid(int(spec)) if spec.isdigit() else pwd.getpwnam(spec)
    except (KeyError, OverflowError):
        raise TaskUserError(f"task_user {spec!r}: no such user on this host") from None
    groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    return TaskUser(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir, entry.pw_shell)


def base_environment(source: Mapping[str, str], user: TaskUser | None = None) -> dict[str, str]:
    """The documented base, taken from ``source`` (the starting process's environment)."""
    env = {name: source[name] for name in BASE_NAMES if name in source}
    env.update((k, v) for k, v in source.items() if k.startswith(LOCALE_PREFIX))
    env.setdefault("PATH", DEFAULT_PATH)
    return _as_user(env, user)


def container_environment(
    source: Mapping[str, str], user: TaskUser | None = None
) -> dict[str, str]:
    """A task pod's base: the container's environment without the agent's own variables.

    Everything else in a pod's environment was put there by the task's image or by
    Kubernetes; the pod spec carries nothing of the control plane's (``build_pod``).
    """
    return _as_user({k: v for k, v in source.items() if not k.startswith("LEOFLOW_")}, user)


def _as_user(env: dict[str, str], user: TaskUser | None) -> dict[str, str]:
    if user is not None:
        env.update(HOME=user.home, USER=user.name, LOGNAME=user.name, SHELL=user.shell)
    return env


def task_environment(
    base: Mapping[str, str], task_env: Mapping[str, str], secrets: Mapping[str, str]
) -> dict[str, str]:
    """Base, then the task's env and context variables, then its secrets: later wins."""
    env = dict(base)
    env.update(task_env)
    env.update(secrets)
    return env
