"""``Expanded``: a statement with an expanding IN, run on SQLite as SQL expanded once per
list length, gives what ``conn.execute`` gives, through the same bind processors."""

from __future__ import annotations

import sqlalchemy as sa

from leoflow.store.base import Expanded

table = sa.Table(
    "t",
    sa.MetaData(),
    sa.Column("pk", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String),
    sa.Column("at", sa.Float),
    sa.Column("used", sa.Float),
)


def _engine() -> sa.Engine:
    engine = sa.create_engine("sqlite://")
    with engine.begin() as conn:
        table.metadata.create_all(conn)
        rows = [{"pk": i, "kind": "a" if i % 2 else "b", "at": float(i)} for i in range(1, 9)]
        conn.execute(sa.insert(table), rows)
    return engine


def test_a_select_answers_as_conn_execute_does_for_every_length() -> None:
    # The statement binds a value of its own ("a"), one the call passes (b_at, used
    # twice), and the list, in the middle of the placeholders.
    stmt = (
        sa.select(table.c.pk, table.c.at)
        .where(
            table.c.kind == "a",
            table.c.pk.in_(sa.bindparam("b_pks", expanding=True)),
            table.c.at > sa.bindparam("b_at"),
            table.c.at < sa.bindparam("b_at") + 100,
        )
        .order_by(table.c.pk)
    )
    expanded = Expanded(stmt, "b_pks", shapes=4)
    with _engine().connect() as conn:
        for pks in ([1], [1, 3], [5, 3, 1], [7, 2, 3, 1], [1, 2, 3, 4, 5, 7], [8, 8]):
            for at in (0, 2.5):  # an int goes through Float's processor, as execute's
                got = [tuple(r) for r in expanded.run(conn, {"b_at": at}, pks)]
                want = conn.execute(stmt, {"b_at": at, "b_pks": pks}).all()
                assert got == [tuple(r) for r in want], (pks, at)
                assert all(isinstance(r[1], float) for r in got)
        assert sorted(expanded._shapes) == [1, 2, 3, 4]  # past `shapes`: conn.execute


def test_an_update_returning_uses_each_row_once() -> None:
    stmt = (
        sa.update(table)
        .where(table.c.pk.in_(sa.bindparam("b_pks", expanding=True)), table.c.used.is_(None))
        .values(used=sa.bindparam("b_now"))
        .returning(table.c.pk)
    )
    expanded = Expanded(stmt, "b_pks")
    with _engine().begin() as conn:
        assert sorted(r[0] for r in expanded.run(conn, {"b_now": 1}, [1, 2, 9])) == [1, 2]
        assert [r[0] for r in expanded.run(conn, {"b_now": 2}, [2, 3])] == [3]
        assert conn.execute(sa.select(table.c.used).where(table.c.pk == 1)).scalar() == 1.0
        assert list(expanded.run(conn, {"b_now": 3}, [])) == []  # empty: conn.execute's SQL
