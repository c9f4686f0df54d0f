"""A `MemoryJournal`'s recurring schedules: the rows, and the batches that change them.

The same compare-and-sets as the SQL journals' (`_sql_schedules`): a batch
of schedule changes is judged first, on copies, so one that breaks a rule (a
tick's job with an id used before) changes nothing; then applied.  Such a
batch holds schedule changes alone: the runtime never mixes them with
changes to jobs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

import attrs

from ..errors import JournalError
from ..info import ScheduleInfo
from ._reads import set_schedule_info
from ._rules import Held, used_before
from .records import Append, Change, Fire, ScheduleDrop, SchedulePause, ScheduleSet

__all__ = ["SCHEDULE_CHANGES", "Schedules"]

SCHEDULE_CHANGES = (ScheduleSet, ScheduleDrop, SchedulePause, Fire)


@attrs.define(eq=False)
class Schedules:
    """The schedules a `MemoryJournal` holds, by name."""

    rows: dict[str, ScheduleInfo] = attrs.field(factory=dict)

    def write(
        self,
        changes: Sequence[Change],
        now: float,
        next_id: int,
        held: Held,
        apply: Callable[[Append, float], None],
    ) -> list[Change]:
        """Apply a batch of schedule changes at *now*; the superseded ones (and each tick's job
        whose unique key another job *held* reserves).  *apply* applies a tick's job."""

        def reserved(unique: str) -> bool:
            window = held.reserved.get(unique)
            return unique in held.holders or (window is not None and window[1] > now)

        staged = dict(self.rows)
        applied: list[Change] = []
        superseded: list[Change] = []
        taken: set[str] = set()
        for change in changes:
            if not isinstance(change, SCHEDULE_CHANGES):
                raise JournalError(f"a batch of schedule changes holds nothing else: {change!r}")
            row = staged.get(change.name)
            if isinstance(change, ScheduleSet):
                if (
                    row is not None
                    and row.last_tick is not None
                    and change.next_at <= row.last_tick
                ):
                    superseded.append(change)
                    continue
                last_tick = None if row is None else row.last_tick
                staged[change.name] = set_schedule_info(change, last_tick)
            elif isinstance(change, ScheduleDrop):
                if row is None:
                    superseded.append(change)
                    continue
                del staged[change.name]
            elif isinstance(change, SchedulePause):
                if row is None or (row.next_at is None) == (change.next_at is None):
                    superseded.append(change)
                    continue
                if change.next_at is not None and not (
                    row.last_tick is None or row.last_tick < change.next_at
                ):
                    superseded.append(change)
                    continue
                staged[change.name] = attrs.evolve(row, next_at=change.next_at)
            else:
                if row is None or row.next_at is None or row.next_at != change.at:
                    superseded.append(change)
                    continue
                staged[change.name] = attrs.evolve(
                    row, next_at=change.next_at, last_tick=change.last_tick
                )
                for job in change.jobs:
                    next_id = used_before(job.job_id, next_id)
                    if job.unique is not None and (job.unique in taken or reserved(job.unique)):
                        superseded.append(job)
                        continue
                    if job.unique is not None:
                        taken.add(job.unique)
                    applied.append(job)
            applied.append(change)
        self.rows = staged
        for change in applied:
            if isinstance(change, Append):
                apply(change, now)
        return superseded

    def listed(self, after: str, limit: int, name: str | None = None) -> list[ScheduleInfo]:
        if name is not None:
            return [self.rows[name]] if name in self.rows else []
        return [self.rows[each] for each in sorted(self.rows) if each > after][:limit]

    def due(self, limit: int) -> list[ScheduleInfo]:
        return heapq.nsmallest(
            limit,
            (row for row in self.rows.values() if row.next_at is not None),
            key=lambda row: (row.next_at, row.name),
        )
