"""Secret masking over a stream cut at every possible place."""

from __future__ import annotations

import base64
import urllib.parse

from leoflow.agent.masking import MASK, Masker, masked_forms

SECRET = "p@ss word/+=x"


def _through(masker: Masker, data: bytes, cuts: list[int]) -> bytes:
    out = b""
    start = 0
    for cut in [*cuts, len(data)]:
        out += masker.feed(data[start:cut])
        start = cut
    return out + masker.flush()


def test_every_form_is_masked_wherever_the_stream_is_cut() -> None:
    forms = [
        SECRET.encode(),
        base64.b64encode(SECRET.encode()),
        base64.urlsafe_b64encode(SECRET.encode()),
        urllib.parse.quote(SECRET, safe="").encode(),
        urllib.parse.quote_plus(SECRET).encode(),
    ]
    for form in forms:
        line = b"before " + form + b" after\n"
        for cut in range(len(line) + 1):
            out = _through(Masker([SECRET]), line, [cut])
            assert out == b"before " + MASK + b" after\n", (form, cut)


def test_a_value_cut_into_single_bytes_is_masked() -> None:
    data = b"x" + SECRET.encode() + b"y" + SECRET.encode()
    out = _through(Masker([SECRET]), data, list(range(1, len(data))))
    assert out == b"x***y***"


def test_output_without_secrets_passes_unchanged_and_is_not_held_back() -> None:
    masker = Masker([SECRET])
    assert masker.feed(b"hello world\n") == b"hello world\n"
    # Only a possible start of a secret waits for the next chunk.
    assert masker.feed(b"tail p@s") == b"tail "
    assert masker.flush() == b"p@s"


def test_short_values_are_not_masked_and_longer_ones_win() -> None:
    assert masked_forms("abc") == set()
    masker = Masker(["abc", "abcd", "abcdefgh"])
    assert masker.feed(b"abc abcd abcdefgh") + masker.flush() == b"abc *** ***"


def test_a_trailing_newline_of_a_secret_file_does_not_stop_masking() -> None:
    masker = Masker(["hunter22\n"])
    assert masker.feed(b"pw=hunter22;") + masker.flush() == b"pw=***;"
