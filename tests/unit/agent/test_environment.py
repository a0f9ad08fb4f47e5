"""The task base environment: named variables only, never the control plane's."""

from __future__ import annotations

import pwd

import pytest

from leoflow.agent.environment import (
    DEFAULT_PATH,
    TaskUserError,
    base_environment,
    container_environment,
    resolve_task_user,
    task_environment,
)

PARENT = {
    "PATH": "/opt/bin:/usr/bin",
    "HOME": "/home/lite",
    "USER": "lite",
    "LANG": "C.UTF-8",
    "LC_TIME": "de_DE.UTF-8",
    "TZ": "Europe/Berlin",
    "LEOFLOW_TOKEN_SIGNING_KEY": "forge-anything",
    "LEOFLOW_DATABASE_URL": "postgresql+asyncpg://u:pw@db/leoflow",
    "LEOFLOW_TOKEN": "client-token",
    "AWS_SECRET_ACCESS_KEY": "operator-credential",
}


def test_base_takes_only_the_documented_names() -> None:
    assert base_environment(PARENT) == {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": "/home/lite",
        "USER": "lite",
        "LANG": "C.UTF-8",
        "LC_TIME": "de_DE.UTF-8",
        "TZ": "Europe/Berlin",
    }
    assert base_environment({}) == {"PATH": DEFAULT_PATH}


def test_task_env_and_secrets_come_on_top() -> None:
    env = task_environment(
        base_environment(PARENT), {"PATH": "/task/bin", "X": "1"}, {"LEOFLOW_SECRET_A": "s"}
    )
    assert env["PATH"] == "/task/bin" and env["X"] == "1" and env["LEOFLOW_SECRET_A"] == "s"
    assert "LEOFLOW_TOKEN_SIGNING_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env


def test_a_pod_keeps_its_images_environment_but_no_leoflow_variable() -> None:
    env = container_environment({**PARENT, "JAVA_HOME": "/opt/java", "LEOFLOW_AGENT_TICKET": "t"})
    assert env["JAVA_HOME"] == "/opt/java"
    assert not [name for name in env if name.startswith("LEOFLOW_")]


def test_task_user_brings_its_identity() -> None:
    nobody = pwd.getpwnam("nobody")
    user = resolve_task_user("nobody")
    assert (user.uid, user.gid) == (nobody.pw_uid, nobody.pw_gid)
    assert resolve_task_user(str(nobody.pw_uid)).name == "nobody"
    env = base_environment(PARENT, user)
    assert env["HOME"] == nobody.pw_dir and env["USER"] == env["LOGNAME"] == "nobody"
    with pytest.raises(TaskUserError, match="no-such-user-here"):
        resolve_task_user("no-such-user-here")
