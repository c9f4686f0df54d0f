"""Recurring schedules in the SQL journals: one table, and the statements both dialects share.

A schedule is one row, by name (`ScheduleSet`); ``next_at`` is its cursor,
NULL while it is paused, and ``last_tick`` the newest tick it fired.  Each
change is one compare-and-set statement, its row count the answer:

* `Fire` moves the cursor only from where its writer read it (``next_at =
  at``), the reservation of (schedule, tick time) that makes a tick fire
  once; a fleet member's also needs the schedule's lease (`fence`);
* `ScheduleSet` replaces a schedule only with a cursor after its
  ``last_tick``;
* `SchedulePause` pauses a running schedule, or resumes a paused one.

Cursors are REAL / double precision: a float read back is the float written,
so the equality of `Fire` compares what the writer read.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ..info import ScheduleInfo
from .records import Fire, ScheduleDrop, SchedulePause, ScheduleSet

__all__ = ["COLUMNS", "ScheduleSQL", "schedule_info"]

COLUMNS: Final = "name, key, data, cron, every, tz, start, misfire, unique_for, next_at, last_tick"


def schedule_info(row: tuple[Any, ...]) -> ScheduleInfo:
    """A row of `COLUMNS` as the value reads hand out."""
    name, key, data, cron, every, tz, start, misfire, window, next_at, last_tick = row
    return ScheduleInfo(
        name=name,
        key=key,
        data=bytes(data),
        cron=cron,
        every=every,
        tz=tz,
        start=start,
        misfire=misfire,
        unique_for=window,
        next_at=next_at,
        last_tick=last_tick,
    )


@attrs.frozen
class ScheduleSQL:
    """The statements on *table*, with the driver's placeholder *mark* (``?`` or ``%s``).

    *fence* is an extra condition on a `Fire` (a fleet member's lease), with
    its own parameters passed after the change's.
    """

    table: str
    mark: str

    def set(self, connection: Any, change: ScheduleSet) -> bool:
        m = self.mark
        values = ", ".join([m] * 10)
        sql = (
            f"INSERT INTO {self.table} (name, key, data, cron, every, tz, start, misfire,"
            f" unique_for, next_at) VALUES ({values}) ON CONFLICT (name) DO UPDATE SET"
            " key = excluded.key, data = excluded.data, cron = excluded.cron,"
            " every = excluded.every, tz = excluded.tz, start = excluded.start,"
            " misfire = excluded.misfire, unique_for = excluded.unique_for,"
            f" next_at = excluded.next_at WHERE {self.table}.last_tick IS NULL"
            f" OR excluded.next_at > {self.table}.last_tick"
        )
        row = (
            change.name,
            change.key,
            change.data,
            change.cron,
            change.every,
            change.tz,
            change.start,
            change.misfire,
            change.unique_for,
            change.next_at,
        )
        return bool(connection.execute(sql, row).rowcount)

    def drop(self, connection: Any, change: ScheduleDrop) -> bool:
        sql = f"DELETE FROM {self.table} WHERE name = {self.mark}"
        return bool(connection.execute(sql, (change.name,)).rowcount)

    def pause(self, connection: Any, change: SchedulePause) -> bool:
        m = self.mark
        if change.next_at is None:
            sql = f"UPDATE {self.table} SET next_at = NULL WHERE name = {m} AND next_at IS NOT NULL"
            return bool(connection.execute(sql, (change.name,)).rowcount)
        sql = (
            f"UPDATE {self.table} SET next_at = {m} WHERE name = {m} AND next_at IS NULL"
            f" AND (last_tick IS NULL OR last_tick < {m})"
        )
        return bool(connection.execute(sql, (change.next_at, change.name, change.next_at)).rowcount)

    def fire(
        self, connection: Any, change: Fire, fence: str = "", fenced: tuple[Any, ...] = ()
    ) -> bool:
        """*fence*, if given, takes the lease: the owner is the first of *fenced*."""
        m = self.mark
        owner = f", owner = {m}" if fence else ""
        sql = (
            f"UPDATE {self.table} SET next_at = {m}, last_tick = {m}{owner}"
            f" WHERE name = {m} AND next_at = {m}{fence}"
        )
        lease = fenced[:1]
        row = (change.next_at, change.last_tick, *lease, change.name, change.at, *fenced[1:])
        return bool(connection.execute(sql, row).rowcount)

    def due(self, limit: int) -> tuple[str, tuple[Any, ...]]:
        """The running schedules, the earliest cursor first: at most *limit*."""
        return (
            f"SELECT {COLUMNS} FROM {self.table} WHERE next_at IS NOT NULL"
            f" ORDER BY next_at, name LIMIT {self.mark}",
            (limit,),
        )

    def listed(self, after: str, limit: int) -> tuple[str, tuple[Any, ...]]:
        """Schedules by name, those after *after*: at most *limit*."""
        m = self.mark
        return (
            f"SELECT {COLUMNS} FROM {self.table} WHERE name > {m} ORDER BY name LIMIT {m}",
            (after, limit),
        )

    def one(self, name: str) -> tuple[str, tuple[Any, ...]]:
        return (f"SELECT {COLUMNS} FROM {self.table} WHERE name = {self.mark}", (name,))
