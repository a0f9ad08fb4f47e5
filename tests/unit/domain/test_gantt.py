"""The Gantt geometry: rows in the order their first try began, a bar per try with its
wait and its run, a running try reaching now, round ticks over the span."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from leoflow.domain.gantt import LABEL_WIDTH, TrySpan, layout_gantt


def test_rows_bars_and_ticks() -> None:
    spans = [
        TrySpan("b", 1, "up_for_retry", 100.0, 101.0, 110.0),
        TrySpan("b", 2, "success", 120.0, 130.0, 160.0),
        TrySpan("a", 1, "success", 105.0, 106.0, 107.0),
        TrySpan("c", 1, "running", 150.0, 151.0, None),
        TrySpan("z", 0, "none", None, None, None),
    ]
    layout = layout_gantt(spans, now=200.0, chart_width=1000.0)
    assert layout.rows == ("b", "a", "c", "z"), "by first queued; never tried last"
    assert [(b.task_id, b.try_number) for b in layout.bars] == [
        ("b", 1), ("b", 2), ("a", 1), ("c", 1)
    ]  # fmt: skip
    first, second = layout.bars[0], layout.bars[1]
    assert first.wait_x == LABEL_WIDTH and first.row == second.row == 0
    assert first.run_x is not None and first.wait_x < first.run_x < first.end_x
    assert second.wait_x is not None and second.wait_x > first.end_x, "retries in time order"
    running = layout.bars[3]
    assert running.running and running.end_x == LABEL_WIDTH + 1000.0, "a running try reaches now"
    # 100 s over at most 8 ticks: every 15 s, on multiples of 15.
    assert [t.at for t in layout.ticks] == [105.0 + 15 * i for i in range(7)]


def test_nothing_tried_has_no_bars() -> None:
    layout = layout_gantt([TrySpan("a", 0, "none", None, None, None)], now=5.0)
    assert layout.rows == ("a",) and layout.bars == () and layout.start is None


@given(
    st.lists(
        st.tuples(
            st.floats(0, 1e9, allow_nan=False),
            st.floats(0, 1e5, allow_nan=False),
            st.one_of(st.none(), st.floats(0, 1e5, allow_nan=False)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_every_bar_stays_inside_the_chart(times: list[tuple[float, float, float | None]]) -> None:
    spans = [
        TrySpan(f"t{i}", 1, "success", q, q + wait, None if run is None else q + wait + run)
        for i, (q, wait, run) in enumerate(times)
    ]
    now = max(q + w + (r or 0) for q, w, r in times) + 1
    layout = layout_gantt(spans, now=now, chart_width=500.0)
    for bar in layout.bars:
        assert bar.wait_x is not None and bar.run_x is not None
        assert LABEL_WIDTH <= bar.wait_x <= bar.run_x <= bar.end_x <= LABEL_WIDTH + 500.0 + 0.1
    assert 1 <= len(layout.ticks) <= 10


def test_items_queued_together_keep_their_index_order() -> None:
    spans = [TrySpan(f"m[{i}]", 1, "success", 5.0, 6.0, 7.0) for i in (10, 2, 1)]
    assert layout_gantt(spans, now=8.0).rows == ("m[1]", "m[2]", "m[10]")
