"""The console's tables show what DAGs and tasks say without letting them drive the terminal."""

from __future__ import annotations

from leoflow.commands.tables import table


def test_a_table_cell_cannot_move_the_cursor() -> None:
    shown = table(["task", "reason"], [["t\x1b[1A", "boom\r\nfake row"]])
    assert "\x1b" not in shown and "\r" not in shown
    assert shown.splitlines()[1] == "t\\x1b[1A  boom\\x0d\\x0afake row"
