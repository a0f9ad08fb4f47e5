"""The agent endpoint's TLS certificate, read from files and re-read when they change.

The chart mounts a ``kubernetes.io/tls`` Secret; when it is rotated, the kubelet
swaps the files under the mount. gRPC asks ``fetch()`` for the certificate on
every new connection (``dynamic_ssl_server_credentials``); it answers None
(unchanged) unless a file's mtime, size or inode moved, so a handshake costs two
``stat`` calls. A pair that does not load (a half-written rotation) keeps the
previous one serving, with a warning, rather than refusing every agent.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import grpc

log = logging.getLogger("leoflow.scheduler.tls")


class TlsConfigError(ValueError):
    """The certificate or key cannot be used; the message names the file."""


def _stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _read_pair(cert_file: Path, key_file: Path) -> tuple[bytes, bytes]:
    try:
        cert = cert_file.read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{cert_file}: cannot read the TLS certificate: {exc}") from exc
    try:
        key = key_file.read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{key_file}: cannot read the TLS key: {exc}") from exc
    if b"-----BEGIN CERTIFICATE-----" not in cert:
        raise TlsConfigError(f"{cert_file}: expected a PEM certificate (BEGIN CERTIFICATE)")
    if b"PRIVATE KEY-----" not in key:
        raise TlsConfigError(f"{key_file}: expected a PEM private key (BEGIN ... PRIVATE KEY)")
    return cert, key


class ReloadingCertificate:
    """Server credentials whose certificate follows the files."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._stamps = (_stamp(cert_file), _stamp(key_file))
        cert, key = _read_pair(cert_file, key_file)
        self._initial = grpc.ssl_server_certificate_configuration([(key, cert)])
        self.loads = 1

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._initial, self.fetch, require_client_authentication=False
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's certificate-configuration fetcher: None means "keep the current one"."""
        try:
            stamps = (_stamp(self.cert_file), _stamp(self.key_file))
            if stamps == self._stamps:
                return None
            cert, key = _read_pair(self.cert_file, self.key_file)
            config = grpc.ssl_server_certificate_configuration([(key, cert)])
        except (OSError, TlsConfigError) as exc:
            log.warning("agent endpoint TLS: keeping the current certificate: %s", exc)
            return None
        self._stamps = stamps
        self.loads += 1
        log.info("agent endpoint TLS: loaded the new certificate from %s", self.cert_file)
        return config
