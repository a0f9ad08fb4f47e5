"""``Positional``: a statement's parameters as tuples in the compiled SQL's order,
through the same bind processors ``conn.execute`` would apply."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from leoflow.store.base import Positional, state_update

table = sa.Table(
    "t",
    sa.MetaData(),
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("state", sa.String),
    sa.Column("at", sa.Float),
    sa.Column("note", sa.Text),
)


def test_rows_follow_the_placeholders_and_their_types() -> None:
    dialect = sqlite.dialect()
    update = Positional(state_update(table, ("at", "note")), dialect)
    assert update.sql == "UPDATE t SET state=?, at=?, note=? WHERE t.pk = ? AND t.state = ?"
    params = {"b_pk": 3, "b_expected": "a", "b_new": "b", "v_at": 2, "v_note": None}
    (row,) = update.rows([params])
    assert row == (("b", 2.0, None, 3, "a"))
    assert isinstance(row[1], float)  # Float's bind processor ran, as conn.execute's does
    engine = sa.create_engine("sqlite://")
    with engine.begin() as conn:
        table.metadata.create_all(conn)
        conn.execute(sa.insert(table), [{"pk": 3, "state": "a"}, {"pk": 4, "state": "a"}])
        other = dict(params, b_pk=4, v_note="x")
        result = conn.exec_driver_sql(update.sql, update.rows([params, other]))
        assert result.rowcount == 2
        assert [tuple(r) for r in conn.execute(sa.select(table).order_by(table.c.pk))] == [
            (3, "b", 2.0, None),
            (4, "b", 2.0, "x"),
        ]


def test_a_named_paramstyle_is_refused() -> None:
    with pytest.raises(ValueError):
        Positional(state_update(table, ()), postgresql.psycopg2.dialect())  # type: ignore[no-untyped-call]


def test_an_insert_binds_only_the_rows_keys() -> None:
    insert = Positional(sa.insert(table), sqlite.dialect(), ("pk", "at"))
    assert insert.sql == "INSERT INTO t (pk, at) VALUES (?, ?)"
    assert insert.rows([{"at": 1, "pk": 5}]) == [(5, 1.0)]


def test_a_single_placeholder_still_makes_a_tuple_a_row() -> None:
    insert = Positional(sa.insert(table), sqlite.dialect(), ("pk",))
    assert insert.rows([{"pk": 5, "note": "not bound"}, {"pk": 6}]) == [(5,), (6,)]
