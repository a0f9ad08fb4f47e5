"""Secret masking over a stream cut at every possible place, in every encoding."""

from __future__ import annotations

import base64
import html
import json
import re
import shlex
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leoflow.agent.masking import MASK, MIN_MASKED_LENGTH, Masker, Secrets, masked_forms
from leoflow.agent.outcome import REASON_LIMIT, take_reason

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


# A quote and a backslash (JSON escapes them), non-ASCII (\u00e9 in ASCII-only JSON),
# a slash, a plus and a space (URL encodings differ on each).
HARD = 'k"ey\\ w\u00e9/+rd'


def _encoded_forms(value: str) -> list[bytes]:
    raw = value.encode()
    return [
        raw,
        json.dumps(value).encode(),
        json.dumps(value, ensure_ascii=False).encode(),
        json.dumps(json.dumps(value)).encode(),
        json.dumps(value).replace("/", "\\/").encode(),
        repr(value).encode(),
        repr(raw)[1:].encode(),  # b'...' less its b
        html.escape(value).encode(),
        urllib.parse.quote(value, safe="").encode(),
        urllib.parse.quote(value).encode(),
        urllib.parse.quote_plus(value).encode(),
        base64.b64encode(raw),
        base64.urlsafe_b64encode(raw).rstrip(b"="),
        raw.hex().encode(),
        raw.hex().upper().encode(),
    ]


def test_each_encoding_is_masked_wherever_the_stream_is_cut() -> None:
    for form in _encoded_forms(HARD):
        line = b"before " + form + b" after\n"
        for cut in range(len(line) + 1):
            out = _through(Masker([HARD]), line, [cut])
            # What is left around the mask is at most the quotes of the JSON or repr.
            left = out.replace(b'"', b"").replace(b"'", b"").replace(b"\\", b"")
            assert left == b"before *** after\n", (form, cut)


def _secret_chars(encoded: bytes, start: int, size: int) -> bytes:
    """The base64 characters made of bytes [start, start + size) of the input alone."""
    return encoded[-(-8 * start // 6) : 8 * (start + size) // 6]


def test_base64_inside_a_longer_stream_is_masked_at_each_alignment() -> None:
    raw = HARD.encode()
    for before in range(6):
        for after in range(3):
            stream = b"\x01" * before + raw + b"\x02" * after
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = encode(stream)
                out = _through(Masker([HARD]), encoded, [len(encoded) // 2])
                assert MASK in out, (before, after)
                assert _secret_chars(encoded, before, len(raw))[:6] not in out, (before, after)


PEM = (
    "-----BEGIN TEST KEY-----\n"
    + "\n".join(base64.b64encode(bytes(range(i, i + 48))).decode() for i in range(0, 200, 48))
    + "\n-----END TEST KEY-----\n"
)


def test_a_multi_line_secret_is_masked_line_by_line_however_it_is_printed() -> None:
    lines = PEM.splitlines()
    printed = {
        "as is": PEM.encode(),
        "a prefix on each line": "".join(f"INFO {line}\n" for line in lines).encode(),
        "CRLF": PEM.replace("\n", "\r\n").encode(),
        "folded": " ".join(PEM.split()).encode(),
        "JSON": json.dumps(PEM).encode(),
        "base64 of the whole": base64.b64encode(b"x" + PEM.encode()),
        "hex": PEM.encode().hex().encode(),
    }
    for how, data in printed.items():
        out = _through(Masker([PEM]), data, [len(data) // 3, len(data) // 2])
        leaked = [line for line in lines if line.encode() in out]
        assert leaked == [] and out.count(MASK) >= 1, (how, out)
        # Not even the inner characters of the base64 or hex of a line.
        assert base64.b64encode(lines[2].encode())[4:20] not in out, how
        assert lines[2].encode().hex().encode()[4:40] not in out, how


def test_overlapping_secrets_are_one_mask_and_show_no_part() -> None:
    masker = Masker(["abcdef", "defghi"])
    data = b"x abcdefghi y abcdef z defghi"
    assert _through(masker, data, [5]) == b"x *** y *** z ***"
    # An unending run of overlapping values is one mask, however it arrives.
    masker = Masker(["aaaa"])
    assert _through(masker, b"b" + b"a" * 50 + b"c", list(range(1, 52, 7))) == b"b***c"


def test_the_output_is_masked_inside_its_json_and_stays_json() -> None:
    secrets = Secrets([HARD, "424242"])
    output = json.dumps({"k": HARD, HARD: [1, {"deep": f"x{HARD}y"}], "pin": 424242, "n": 7})
    masked = secrets.json_text(output)
    assert masked is not None
    assert json.loads(masked) == {"k": "***", "***": [1, {"deep": "x***y"}], "pin": "***", "n": 7}
    # Through json.dumps' default ASCII escapes too.
    assert secrets.json_text(json.dumps([HARD], ensure_ascii=True)) == '["***"]'
    # Untouched, byte for byte, where no secret is.
    assert secrets.json_text('{"a":  1}') == '{"a":  1}'
    # A value that only looks like a control character's escape is not one across it.
    assert Secrets(["0000"]).json_text('"\\u0000"') == '"\\u0000"'
    # A value that spans the JSON's own syntax cannot be masked in a string: refused.
    across = Secrets(['a", "b'])
    assert across.json_text('["a", "b"]') is None
    assert across.completion("", '["a", "b"]', "")[1] is None


def test_a_long_exit_reason_is_masked_before_it_is_cut(tmp_path: Path) -> None:
    secret = "s" * 40 + "-tail"
    path = tmp_path / "reason"
    path.write_text("x" * (REASON_LIMIT - 20) + " " + secret + "\n" + PEM)
    text = take_reason(str(path), Secrets([secret, PEM]).text)
    assert secret[:10] not in text and "***" in text and len(text) <= REASON_LIMIT
    path.write_text("bad key " + PEM)
    text = take_reason(str(path), Secrets([PEM]).text)
    assert text.startswith("bad key ***") and not any(line in text for line in PEM.splitlines())


def _pieces(secret: str) -> st.SearchStrategy[list[bytes]]:
    forms = _encoded_forms(secret)
    filler = st.text(max_size=12).map(str.encode)
    return st.lists(st.one_of(filler, st.sampled_from(forms)), max_size=8)


@pytest.mark.slow  # CPU-heavy: left out of make test-fast
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text(min_size=MIN_MASKED_LENGTH, max_size=24).filter(lambda s: "*" not in s),
    data=st.data(),
)
def test_property_no_chunking_lets_a_secret_through(secret: str, data: st.DataObject) -> None:
    pieces = data.draw(_pieces(secret))
    stream = b"|".join([b"", *pieces, b""])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    secrets = Secrets([secret])
    one = Masker(secrets)
    at_once = one.feed(stream) + one.flush()
    chunked = _through(Masker(secrets), stream, cuts)
    assert chunked == at_once
    for form in _encoded_forms(secret):
        assert form.strip(b"\"'") not in chunked, form


def _json_values(secret: str) -> st.SearchStrategy[object]:
    holding = st.builds(lambda a, b: a + secret + b, st.text(max_size=5), st.text(max_size=5))
    strings = st.one_of(st.text(max_size=8), holding)
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), strings)
    return st.recursive(
        leaves,
        lambda kids: st.one_of(
            st.lists(kids, max_size=4), st.dictionaries(strings, kids, max_size=4)
        ),
        max_leaves=12,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text(min_size=MIN_MASKED_LENGTH, max_size=16).filter(lambda s: "*" not in s),
    data=st.data(),
)
def test_property_an_output_stays_json_and_shows_no_secret(
    secret: str, data: st.DataObject
) -> None:
    value = data.draw(_json_values(secret))
    text = json.dumps(value, ensure_ascii=data.draw(st.booleans()))
    masked = Secrets([secret]).json_text(text)
    if masked is None:  # only where the value spans the JSON's own syntax
        assert any(c in secret for c in '",:[]{} \\'), (secret, text)
        return
    json.loads(masked)
    # A control character's escape (\u0000) spells a string's byte, not the secret.
    shown = re.sub(rb"\\u00[01][0-9a-fA-F]", b"\0", masked.encode())
    for form in _encoded_forms(secret)[:4]:  # as is, and as JSON writes it
        assert form.strip(b'"') not in shown, (form, masked)


def test_a_value_cut_by_line_breaks_is_masked_however_the_pieces_arrive() -> None:
    value = "w\u00e9ll-kn0wn-t0ken-31"
    raw = value.encode()
    for cut in range(1, len(value)):
        for brk in (b"\n", b"\r\n"):
            head, rest = value[:cut].encode(), value[cut:].encode()
            data = b"key: " + head + brk + rest + b" end\n"
            # As two prints flushed apart: the first piece ends its own read.
            out = _through(Masker([value]), data, [5 + len(head) + len(brk)])
            assert out == b"key: *** end\n", (cut, out)
    # Wrapped at a column, several times.
    folded = b"\n".join(raw[i : i + 5] for i in range(0, len(raw), 5))
    assert _through(Masker([value]), b"<" + folded + b">", [3, 9]) == b"<***>"


# Every byte an encoder may treat apart: a space, / + & ' ! ~ ( ) (URL encoders differ
# on each), a quote and a backslash (JSON), < (Go's JSON), non-ASCII (\u00e9, %C3%A9).
ODD = "K3y\"&\\/p a+ss'w\u00e9!~(x)<"


def _tells(encoded: bytes) -> set[bytes]:
    """Pieces of an encoded value that would show it (or most of it) was not masked."""
    return {encoded[i : i + 8] for i in range(0, max(1, len(encoded) - 7), 3)}


def _cut_everywhere(value: str, data: bytes, tells: set[bytes]) -> None:
    """``data`` through a masker cut in two at every place: no tell left, a mask shown."""
    secrets = Secrets.of([value])
    for cut in range(len(data) + 1):
        out = _through(Masker(secrets), data, [cut])
        flat = out.replace(b"\r", b"").replace(b"\n", b"")
        leaked = [t for t in tells if t in flat]
        assert MASK in out and not leaked, (cut, leaked, out)


def _wrapped(encoded: bytes, width: int, brk: bytes = b"\n") -> bytes:
    return b"".join(encoded[i : i + width] + brk for i in range(0, len(encoded), width))


def test_base64_wrapped_at_a_column_is_masked_at_each_alignment() -> None:
    raw = ODD.encode()
    # base64 (the CLI, encodebytes) wraps at 76, openssl at 64, with LF or CRLF; the
    # value anywhere in a longer stream, so a wrap falls inside its form.
    for width, brk in ((76, b"\n"), (64, b"\n"), (64, b"\r\n")):
        for before in range(40, 43):
            stream = b"\x01" * before + raw + b"\x02" * 30
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = encode(stream)
                inside = _secret_chars(encoded, before, len(raw))
                _cut_everywhere(ODD, b"data:\n" + _wrapped(encoded, width, brk), _tells(inside))
    # base32 of the value alone (coreutils' base32 wraps at 76 too).
    encoded = base64.b32encode(raw)
    _cut_everywhere(ODD, _wrapped(encoded, 76), _tells(encoded.rstrip(b"=")))
    # Hex wrapped as xxd -p writes it (60 columns).
    hexed = (b"\x01" * 20 + raw).hex().encode()
    _cut_everywhere(ODD, _wrapped(hexed, 60), _tells(raw.hex().encode()))


def test_an_ordinary_line_is_not_held_back_but_a_wrapped_blob_line_is() -> None:
    value = "Zm9vYmFyYmF6cXV4"
    encoded = base64.b64encode(value.encode())
    masker = Masker([value])
    # A line's end that could start a form (of base64 here) is not held over its line
    # break: a quiet task's last line shows at once...
    line = b"a word ending in " + encoded[:1] + b"\n"
    assert masker.feed(line) == line
    # ...unless the line is a run of base64 a wrap may have cut a form in.
    line = b"QUFB" * 5 + encoded[:5] + b"\n"
    assert masker.feed(line) == b"QUFB" * 5
    assert masker.feed(encoded[5:] + b" end\n") + masker.flush() == b"***" + b" end\n"


def _twice(value: str) -> list[bytes]:
    raw = value.encode()
    quote, plus = urllib.parse.quote, urllib.parse.quote_plus
    return [
        quote(quote(value, safe=""), safe="").encode(),  # URL-encoded twice: %252F
        quote(quote(value)).encode(),
        plus(plus(value)).encode(),
        base64.b64encode(quote(value).encode()),
        base64.b64encode(plus(value).encode()).rstrip(b"="),
        quote(json.dumps(value)).encode(),  # JSON in a URL's query
        plus(json.dumps(value, ensure_ascii=False)).encode(),
        quote(base64.b64encode(raw).decode(), safe="").encode(),  # base64 in a query
        base64.b64encode(base64.b64encode(raw)),
        base64.urlsafe_b64encode(base64.b64encode(raw)).rstrip(b"="),
        base64.b64encode(json.dumps(value).encode()),
        html.escape(json.dumps(value)).encode(),  # JSON in an HTML attribute
        json.dumps(quote(value)).replace("/", "\\/").encode(),
        base64.b64encode(raw).hex().encode(),  # base64 | xxd -p
    ]


def test_a_value_encoded_twice_is_masked_wherever_the_stream_is_cut() -> None:
    for form in _twice(ODD):
        inner = form.strip(b'"').replace(b"%22", b"").replace(b"&quot;", b"")
        _cut_everywhere(ODD, b"before " + form + b" after\n", _tells(inner))
    # A JWT's payload: base64url of JSON holding the value, at whatever offset.
    for pad in range(3):
        claims = json.dumps({"sub": "me" + "x" * pad, "pw": ODD, "n": 1})
        token = base64.urlsafe_b64encode(claims.encode()).rstrip(b"=")
        start = claims.index(json.dumps(ODD)[1:-1])
        size = len(json.dumps(ODD)[1:-1])
        inside = _secret_chars(token, start, size)
        _cut_everywhere(ODD, b"Bearer eyJ." + token + b".sig\n", _tells(inside))


def _half_lower(escape: str) -> str:
    return escape[:2].lower() + escape[2:]


def _url_spellings(value: str) -> list[bytes]:
    quote, plus = urllib.parse.quote, urllib.parse.quote_plus
    lower = re.compile(r"%[0-9A-F]{2}")
    # Some escapes in lower case, some upper, some half and half; the value's own
    # letters as they are.
    styles = [str.lower, str.upper, _half_lower] * len(value)
    mixed = lower.sub(lambda m: styles.pop()(m.group()), quote(value, safe=""))
    return [
        lower.sub(lambda m: m.group().lower(), quote(value, safe="")).encode(),
        lower.sub(lambda m: m.group().lower(), plus(value)).encode(),  # + for a space
        mixed.encode(),
        quote(value, safe="!*'()~").encode(),  # JavaScript's encodeURIComponent
        lower.sub(lambda m: m.group().lower(), plus(value).replace("~", "%7E")).encode(),
        quote(value, safe="/:@!$&'()*+,;=").encode(),  # encodeURI: reserved kept
        lower.sub(lambda m: m.group().lower(), quote(quote(value, safe=""))).encode(),
    ]


def test_url_encoding_in_either_case_and_any_safe_set_is_masked() -> None:
    for form in _url_spellings(ODD):
        _cut_everywhere(ODD, b"GET /login?pw=" + form + b"&next=1\n", _tells(form))


def _shell_and_other_escapes(value: str) -> list[bytes]:
    raw = value.encode()
    bash = 'v=$1; printf \'%q\\n\' "$v"; echo "${v@Q}"'
    printed = subprocess.run(["bash", "-c", bash, "_", value], capture_output=True, check=True)
    return [
        shlex.quote(value).encode(),
        *printed.stdout.splitlines(),  # printf %q and ${v@Q}
        " ".join(f"{b:02x}" for b in raw).encode(),  # hexdump's bytes
        ":".join(f"{b:02X}" for b in raw).encode(),  # openssl's
        # Go's JSON: <, > and & as \u003c...; any JSON: hex digits in upper case.
        json.dumps(value)
        .replace("\\u00e9", "\\u00E9")
        .replace("<", "\\u003C")
        .replace("&", "\\u0026")
        .encode(),
        value.encode("unicode_escape").replace(b"\\xe9", b"\\xE9"),
        html.escape(value).replace("&#x27;", "&#39;").replace("&quot;", "&#34;").encode(),
        html.escape(value).replace("&#x27;", "&apos;").encode(),  # XML
    ]


def test_shell_quoting_spaced_hex_and_escapes_in_either_case_are_masked() -> None:
    for form in _shell_and_other_escapes(ODD):
        tells = {t for t in _tells(form.strip(b"'\"")) if b"'" not in t}
        _cut_everywhere(ODD, b"run " + form + b" now\n", tells)


def test_a_form_printed_in_pieces_one_per_line_is_masked_however_reads_cut_it() -> None:
    # print(encoded[:cut]); print(encoded[cut:]), each flushed: a line that is nothing
    # but the start of a form waits for the next, whatever the form.
    raw = ODD.encode()
    forms = [
        base64.b64encode(raw),
        _url_spellings(ODD)[0],  # escapes in lower case
        raw.hex().encode(),
        json.dumps(ODD)[1:-1].encode(),
    ]
    secrets = Secrets.of([ODD])
    for form in forms:
        for cut in range(1, len(form)):
            for brk in (b"\n", b"\r\n"):
                data = form[:cut] + brk + form[cut:] + brk
                out = _through(Masker(secrets), data, [cut + len(brk)])
                assert out == MASK + brk, (form, cut, out)
