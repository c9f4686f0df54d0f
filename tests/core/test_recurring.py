"""The recurring schedules' rules (`inturn._core_recurring`): ticks, misfires, validation."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, strategies as st

from inturn._core_recurring import CATCH_UP, GRACE, Recurrence, plan
from inturn.info import ScheduleInfo

TIMES = st.floats(min_value=0, max_value=4e9, allow_nan=False)
INTERVALS = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False)


@given(start=TIMES, every=INTERVALS, after=TIMES)
def test_interval_ticks_rise_strictly_and_come_after_what_they_follow(
    start: float, every: float, after: float
) -> None:
    """However floats round, the first tick after a time is after it, and each tick after the
    one before (a tick repeated would fire twice)."""
    recurrence = Recurrence(None, every, "UTC", start)
    ticks = list(itertools.islice(recurrence.ticks(after), 5))
    assert ticks[0] > after
    assert ticks[0] >= start
    assert all(a < b for a, b in itertools.pairwise(ticks))
    assert recurrence.first(ticks[0]) == ticks[1]


def stored(misfire: str, next_at: float, every: float = 60.0) -> ScheduleInfo:
    return ScheduleInfo(
        name="s",
        key="k",
        data=b"",
        cron=None,
        every=every,
        tz="UTC",
        start=0.0,
        misfire=misfire,
        unique_for=None,
        next_at=next_at,
    )


def test_a_tick_on_time_fires_whatever_the_misfire_policy() -> None:
    for misfire in ("skip", "one", "all"):
        fired = plan(stored(misfire, 600.0, 3600.0), 600.0 + GRACE)
        assert (fired.ticks, fired.next_at, fired.dropped) == ((600.0,), 3600.0, 0)


def test_missed_ticks_follow_the_policy_and_all_is_capped() -> None:
    """Hourly, down from tick 3,600 s to 1,000,000 s (the newest tick 400 s late): skip fires
    none, one the newest, all the newest 100."""
    now = 1_000_000.0
    newest = math.floor(now / 3600) * 3600
    skipped, one, every = (plan(stored(m, 3600.0, 3600.0), now) for m in ("skip", "one", "all"))
    assert len(skipped.ticks) == 0
    assert skipped.next_at == newest + 3600
    assert list(one.ticks) == [newest]
    assert len(every.ticks) == CATCH_UP
    assert every.ticks[-1] == newest
    assert every.dropped == newest / 3600 - CATCH_UP
    assert skipped.dropped == newest / 3600
    assert skipped.last_tick == one.last_tick == every.last_tick == newest


def test_the_newest_tick_within_the_grace_is_on_time_and_the_rest_are_missed() -> None:
    """Every 60 s, back 1,000 s late: the newest tick (40 s late) is on time; the rest missed."""
    fired = plan(stored("skip", 60.0), 1000.0)
    assert (fired.ticks, fired.next_at, fired.dropped) == ((960.0,), 1020.0, 15)


def test_a_long_gap_of_an_interval_is_counted_not_walked() -> None:
    """Every second, back after a week: the newest 100 ticks, the rest counted as dropped."""
    week = 7 * 86400.0
    fired = plan(stored("all", 1.0, every=1.0), week + 0.5)
    assert list(fired.ticks) == [week - 99 + n for n in range(100)]
    assert fired.next_at == week + 1
    assert fired.dropped == week - 100
    one = plan(stored("one", 1.0, every=1.0), week + 0.5)
    assert list(one.ticks) == [week]
