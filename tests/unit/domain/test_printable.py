"""What reaches a terminal: DAG text escaped, a task's colours kept, nothing else obeyed."""

from __future__ import annotations

from leoflow.domain.printable import TerminalLog, printable


def test_printable_escapes_every_control_character_on_one_line() -> None:
    assert printable("plain text, ünïcode") == "plain text, ünïcode"
    assert printable("a\x1b[2Jb\x00c\nd\te\x9bf") == "a\\x1b[2Jb\\x00c\\x0ad\\x09e\\x9bf"
    assert printable("safe\u202eevil") == "safe\\u202eevil"


def test_printable_can_keep_newlines_for_multi_line_messages() -> None:
    assert printable("one\ntwo\x1b]0;x\x07", lines=True) == "one\ntwo\\x1b]0;x\\x07"


def test_terminal_log_keeps_colours_and_escapes_other_sequences() -> None:
    log = TerminalLog()
    out = log.feed(b"\x1b[1;31mred\x1b[0m \x1b]52;c;aGk=\x07 \x1b[2J\r50%\n") + log.end()
    assert out == b"\x1b[1;31mred\x1b[0m \\x1b]52;c;aGk=\\x07 \\x1b[2J\r50%\n"


def test_terminal_log_joins_a_colour_and_a_character_split_between_chunks() -> None:
    log = TerminalLog()
    data = "\x1b[32mgrün\x1b[0m\n".encode()
    out = b"".join(log.feed(data[i : i + 1]) for i in range(len(data))) + log.end()
    assert out == data


def test_terminal_log_shows_invalid_utf8_and_raw_c1_bytes_escaped() -> None:
    log = TerminalLog()
    assert log.feed(b"a\x9b2Jb\xff") + log.end() == b"a\\x9b2Jb\\xff"
