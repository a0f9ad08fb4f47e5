"""ANSI log rendering: colours to spans, text escaped, chunk boundaries anywhere."""

from __future__ import annotations

from leoflow.api.ui.ansi import AnsiRenderer, render_log


def test_colours_become_spans_and_reset_closes_them() -> None:
    assert render_log(b"ok \x1b[31mred\x1b[0m plain") == 'ok <span class="a-f1">red</span> plain'
    assert render_log(b"\x1b[1;92mbold\x1b[m") == '<span class="a-b a-f10">bold</span>'
    assert render_log(b"\x1b[44mbg\x1b[49m") == '<span class="a-g4">bg</span>'


def test_html_is_escaped_and_other_escapes_dropped() -> None:
    out = render_log(b"<script>&\x1b[2K\x1b]0;title\x07done\r\n")
    assert out == "&lt;script&gt;&amp;done\n"


def test_any_split_of_the_bytes_renders_the_same_text() -> None:
    data = "caf\u00e9 \x1b[33myellow\x1b[0m \u2713 \x1b[1mb\x1b[22m\n".encode()
    whole = render_log(data)
    for cut in range(1, len(data)):
        r = AnsiRenderer()
        joined = r.feed(data[:cut]) + r.feed(data[cut:], final=True)
        # Split pieces may close and reopen a span; the visible text is identical.
        assert _text(joined) == _text(whole), cut
        assert joined.count("<span") == joined.count("</span>")


def _text(html: str) -> str:
    import re

    return re.sub(r"<[^>]+>", "", html)


def test_colours_carry_over_a_chunk_boundary() -> None:
    r = AnsiRenderer()
    assert r.feed(b"\x1b[32mgre") == '<span class="a-f2">gre</span>'
    assert r.feed(b"en\x1b[0m!") == '<span class="a-f2">en</span>!'
