"""The docker executor's pure parts: whose container it is, the socket, the log
stream's frames, a stopped container's outcome, image references."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from leoflow.domain.reasons import EndReason
from leoflow.executor.docker.client import _split_tag, demux, socket_path
from leoflow.executor.docker.executor import _loopback
from leoflow.executor.docker.lifecycle import refused_settings
from leoflow.executor.docker.outcome import container_outcome
from leoflow.executor.docker.owner import me, owner_gone


def test_this_process_is_not_gone() -> None:
    assert not owner_gone(me())


def test_a_process_that_ended_is_gone_and_a_reused_pid_too() -> None:
    process = subprocess.Popen(["true"])
    process.wait()
    host = socket.gethostname()
    assert owner_gone(f"{host}/{process.pid}/12345")
    # Our own PID with another start time: a PID reused after the owner died.
    assert owner_gone(f"{host}/{os.getpid()}/1")


def test_another_hosts_owner_is_never_judged() -> None:
    assert not owner_gone(f"not-{socket.gethostname()}/1/1")
    assert not owner_gone("garbage")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("unix:///run/podman/podman.sock", "/run/podman/podman.sock"),
        ("/var/run/docker.sock", "/var/run/docker.sock"),
    ],
)
def test_socket_path(value: str, path: str) -> None:
    assert socket_path(value) == path


def test_socket_path_from_the_environment_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/x.sock")
    assert socket_path(None) == "/tmp/x.sock"
    monkeypatch.delenv("DOCKER_HOST")
    assert socket_path(None) == "/var/run/docker.sock"


def test_a_tcp_engine_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"DOCKER_HOST='tcp://h:2375'.*Unix socket"):
        socket_path("tcp://h:2375")


def test_demux_frames_and_plain_text() -> None:
    framed = b"\x01\0\0\0\0\0\0\x03out" + b"\x02\0\0\0\0\0\0\x04err\n"
    assert demux(framed) == [b"out", b"err\n"]
    assert b"".join(demux(b"plain text\n")) == b"plain text\n"


def test_outcomes_of_a_stopped_container() -> None:
    oom = container_outcome("c", {"State": {"OOMKilled": True, "ExitCode": 137}})
    assert oom.reason == EndReason.OOM and oom.message.startswith("out of memory")
    killed = container_outcome("c", {"State": {"ExitCode": 137}})
    assert killed.reason == EndReason.EXIT_CODE and "SIGKILL" in killed.message
    assert "memory" not in killed.message
    agent = container_outcome("c", {"State": {"ExitCode": 3}})
    assert agent.exit_code == 3 and "could not reach Lite's agent endpoint" in agent.message
    assert container_outcome("c", {"State": {"ExitCode": 0}}).reason == EndReason.SUCCESS


@pytest.mark.parametrize(
    ("image", "split"),
    [
        ("localhost/leoflow:ci", ("localhost/leoflow", "ci")),
        ("localhost:5000/a/b:1.2", ("localhost:5000/a/b", "1.2")),
        ("localhost:5000/a/b", ("localhost:5000/a/b", "latest")),
        ("busybox", ("busybox", "latest")),
        ("a/b@sha256:abc", ("a/b@sha256:abc", "")),
    ],
)
def test_image_references(image: str, split: tuple[str, str]) -> None:
    assert _split_tag(image) == split


@pytest.mark.parametrize(
    ("endpoint", "loopback"),
    [
        ("127.0.0.1:7070", True),
        ("localhost:7070", True),
        ("[::1]:7070", True),
        ("unix:/tmp/a.sock", True),
        ("10.88.0.1:7070", False),
        ("host.containers.internal:7070", False),
    ],
)
def test_loopback_endpoints(endpoint: str, loopback: bool) -> None:
    assert _loopback(endpoint) is loopback


def test_a_refusal_names_the_setting_behind_it() -> None:
    body = {
        "User": "65532",
        "HostConfig": {"Memory": 1000, "CapDrop": ["ALL"], "CapAdd": ["NOT_A_CAP"]},
    }
    runc = "unable to set memory limit to 1000 (current usage: 2461696)"
    assert refused_settings(body, runc) == " (the task's resources.limits.memory = 1000)"
    cap = 'container create: "CAP_NOT_A_CAP": unknown capability'
    assert "securityContext.capabilities.add = ['NOT_A_CAP']" in refused_settings(body, cap)
    assert refused_settings(body, "no space left on device") == ""
    assert refused_settings({"HostConfig": {}}, "memory") == "", "only settings given"
