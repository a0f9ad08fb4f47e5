from __future__ import annotations

from pathlib import Path

import pytest

from leoflow.secrets import DirectorySecrets, valid_secret_name


async def test_reads_the_file_content_exactly(tmp_path: Path) -> None:
    (tmp_path / "db-password").write_bytes(b"s3cr3t")
    (tmp_path / "with_newline").write_bytes(b"line\n")
    (tmp_path / "unicode.txt").write_bytes("pässwörd".encode())
    secrets = DirectorySecrets(tmp_path)
    assert await secrets.get("db-password") == "s3cr3t"
    assert await secrets.get("with_newline") == "line\n"
    assert await secrets.get("unicode.txt") == "pässwörd"


async def test_kubernetes_symlink_layout(tmp_path: Path) -> None:
    data = tmp_path / "..2026_01_01"
    data.mkdir()
    (data / "token").write_bytes(b"abc")
    (tmp_path / "..data").symlink_to(data.name)
    (tmp_path / "token").symlink_to("..data/token")
    assert await DirectorySecrets(tmp_path).get("token") == "abc"
    assert await DirectorySecrets(tmp_path).get("..data") is None


async def test_missing_and_unreadable(tmp_path: Path) -> None:
    (tmp_path / "binary").write_bytes(b"\xff\xfe")
    (tmp_path / "adir").mkdir()
    secrets = DirectorySecrets(tmp_path)
    assert await secrets.get("absent") is None
    assert await secrets.get("binary") is None
    assert await secrets.get("adir") is None
    assert await DirectorySecrets(tmp_path / "nope").get("x") is None


@pytest.mark.parametrize(
    "name", ["", ".", "..", "../etc/passwd", "a/b", "/etc/passwd", "..data", "a\x00b", "x" * 254]
)
async def test_names_that_could_leave_the_directory_are_refused(tmp_path: Path, name: str) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (tmp_path / "passwd").write_text("outside")
    assert not valid_secret_name(name)
    assert await DirectorySecrets(inner).get(name) is None


def test_ordinary_names_are_valid() -> None:
    for name in ("a", "db-password", "api.key", "A_B", "x" * 253, ".hidden"):
        assert valid_secret_name(name), name
