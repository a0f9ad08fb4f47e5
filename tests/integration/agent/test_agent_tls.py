"""TLS on the agent endpoint, over real sockets: handshakes, refusals, rotation."""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from leoflow.protocol.agent_v1 import method_path, pb
from leoflow.scheduler.agent_endpoint import AgentEndpoint
from leoflow.scheduler.tls import ReloadingCertificate, TlsConfigError
from leoflow.secrets import DirectorySecrets
from leoflow.settings import SettingsError, load_settings
from tests.support.certs import Pair, make_ca, make_server_cert

from .fake_backend import FakeBackend
from .plane import KEY, Plane


@dataclass
class TlsPlane:
    plane: Plane
    port: int
    ca: Pair
    other_ca: Pair
    live: Pair  # the files the endpoint serves (replaced to rotate)
    tls: ReloadingCertificate
    certs: Path


@pytest.fixture
async def tls_plane(tmp_path: Path) -> AsyncIterator[TlsPlane]:
    certs = tmp_path / "certs"
    ca = make_ca(certs, "ca")
    other_ca = make_ca(certs, "other-ca")
    first = make_server_cert(certs, ca, "first")
    live = Pair(certs / "live.crt", certs / "live.key")
    shutil.copy(first.cert, live.cert)
    shutil.copy(first.key, live.key)
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    backend = FakeBackend(DirectorySecrets(secrets_dir))
    endpoint = AgentEndpoint(backend, KEY, heartbeat_interval=0.2)
    tls = ReloadingCertificate(live.cert, live.key)
    address = await endpoint.start("127.0.0.1:0", tls=tls.credentials())
    channel = grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(ca.cert.read_bytes()))
    try:
        yield TlsPlane(
            Plane(backend, endpoint, address, channel, secrets_dir),
            int(address.rsplit(":", 1)[1]),
            ca,
            other_ca,
            live,
            tls,
            certs,
        )
    finally:
        await channel.close()
        await endpoint.stop(0)


def _served_certificate(port: int, ca: Path) -> bytes:
    """DER of the certificate the endpoint presents to a new TLS connection."""
    import socket

    context = ssl.create_default_context(cafile=str(ca))
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert tls.selected_alpn_protocol() == "h2"
    assert der is not None
    return der


def _der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


async def _code(channel: grpc.aio.Channel, timeout: float = 5) -> grpc.StatusCode:
    call = channel.unary_unary(
        method_path("Exchange"),
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.ExchangeResponse.FromString,
    )
    try:
        await call(pb.ExchangeRequest(ticket="no-such-ticket"), timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_handshake_presents_the_configured_certificate(tls_plane: TlsPlane) -> None:
    der = await asyncio.to_thread(_served_certificate, tls_plane.port, tls_plane.ca.cert)
    assert der == _der(tls_plane.live.cert)
    # Through TLS the call reaches the endpoint, which refuses the made-up ticket.
    assert await _code(tls_plane.plane.channel) == grpc.StatusCode.UNAUTHENTICATED


async def test_an_agent_runs_a_task_over_tls(tls_plane: TlsPlane) -> None:
    plane = tls_plane.plane
    (plane.secrets_dir / "db_password").write_text("hunter2")
    ti = plane.ti(
        1,
        argv=["sh", "-c", 'echo "over tls"; test "$LEOFLOW_SECRET_DB_PASSWORD" = hunter2'],
        secrets=("db_password",),
    )
    proc = await plane.agent(
        env=plane.agent_env(
            LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti),
            LEOFLOW_AGENT_CA_FILE=str(tls_plane.ca.cert),
        )
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert "over tls\n" in bytes(ti.log).decode()
    assert ti.outcome is not None and ti.outcome["exit_code"] == 0


async def test_a_client_trusting_another_ca_is_refused(tls_plane: TlsPlane) -> None:
    plane = tls_plane.plane
    wrong = grpc.aio.secure_channel(
        plane.address, grpc.ssl_channel_credentials(tls_plane.other_ca.cert.read_bytes())
    )
    try:
        assert await _code(wrong) == grpc.StatusCode.UNAVAILABLE
    finally:
        await wrong.close()
    with pytest.raises(ssl.SSLCertVerificationError):
        await asyncio.to_thread(_served_certificate, tls_plane.port, tls_plane.other_ca.cert)
    ti = plane.ti(1)
    proc = await plane.agent(
        env=plane.agent_env(
            LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti),
            LEOFLOW_AGENT_CA_FILE=str(tls_plane.other_ca.cert),
            LEOFLOW_AGENT_CONNECT_TIMEOUT="1",
        )
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 3, err.decode()  # unreachable: the handshake never completes
    assert "could not reach the control plane" in err.decode()
    assert plane.backend.journal == [] and plane.backend.session_calls == 0


async def test_a_plaintext_client_is_refused(tls_plane: TlsPlane) -> None:
    plane = tls_plane.plane
    plain = grpc.aio.insecure_channel(plane.address)
    try:
        assert await _code(plain) == grpc.StatusCode.UNAVAILABLE
    finally:
        await plain.close()
    ti = plane.ti(1)
    proc = await plane.agent(
        env=plane.agent_env(
            LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti), LEOFLOW_AGENT_CONNECT_TIMEOUT="1"
        )
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 3, err.decode()
    assert plane.backend.journal == []


async def test_replaced_certificate_files_serve_new_connections(tls_plane: TlsPlane) -> None:
    before = await asyncio.to_thread(_served_certificate, tls_plane.port, tls_plane.ca.cert)
    assert before == _der(tls_plane.live.cert)
    # Rotate to a certificate from another CA, as a rotated Secret's files are swapped.
    rotated = make_server_cert(tls_plane.certs, tls_plane.other_ca, "rotated")
    staged = tls_plane.certs / "staged"
    staged.mkdir()
    shutil.copy(rotated.cert, staged / "live.crt")
    shutil.copy(rotated.key, staged / "live.key")
    os.replace(staged / "live.key", tls_plane.live.key)
    os.replace(staged / "live.crt", tls_plane.live.cert)
    after = await asyncio.to_thread(_served_certificate, tls_plane.port, tls_plane.other_ca.cert)
    assert after == _der(rotated.cert) != before
    assert tls_plane.tls.loads == 2
    fresh = grpc.aio.secure_channel(
        tls_plane.plane.address,
        grpc.ssl_channel_credentials(tls_plane.other_ca.cert.read_bytes()),
    )
    try:
        assert await _code(fresh) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        await fresh.close()


async def test_a_broken_rotation_keeps_the_current_certificate(tls_plane: TlsPlane) -> None:
    tls_plane.live.cert.write_text("not a certificate\n")
    der = await asyncio.to_thread(_served_certificate, tls_plane.port, tls_plane.ca.cert)
    assert der == _der(tls_plane.certs / "first.crt")
    assert tls_plane.tls.loads == 1


def test_unusable_files_are_named(tmp_path: Path) -> None:
    key = tmp_path / "tls.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    cert = tmp_path / "tls.crt"
    cert.write_text("hello\n")
    with pytest.raises(TlsConfigError, match=r"tls\.crt: expected a PEM certificate"):
        ReloadingCertificate(cert, key)
    with pytest.raises(FileNotFoundError):
        ReloadingCertificate(tmp_path / "missing.crt", key)


async def test_agent_with_an_unreadable_ca_file_is_a_usage_error(tls_plane: TlsPlane) -> None:
    plane = tls_plane.plane
    ti = plane.ti(1)
    missing = tls_plane.certs / "nope.crt"
    proc = await plane.agent(
        env=plane.agent_env(
            LEOFLOW_AGENT_TICKET=plane.backend.ticket(ti), LEOFLOW_AGENT_CA_FILE=str(missing)
        )
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert f"LEOFLOW_AGENT_CA_FILE={missing}: cannot read the CA bundle" in err.decode()


def test_certificate_without_key_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="agent_tls_cert_file and agent_tls_key_file"):
        load_settings(home=tmp_path, agent_tls_cert_file=tmp_path / "tls.crt")
