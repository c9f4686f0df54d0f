"""Scheduled jobs in the shell: when a job falls due, and waiting for it.

A scheduled job lives in the journal alone until it is due (the core counts
it, nothing more), so a million jobs scheduled for next month cost no
memory.  One task waits for the earliest due time the journal holds, then
promotes every job due by then; a ``send`` that schedules an earlier one
wakes it.  Due times are Unix times, measured from the runtime's clock
(`Core.unix_time`), so under a mock clock they elapse in virtual time.
"""

from __future__ import annotations

import datetime
import math
from typing import Final

import attrs
import trio

from ._checks import check_number

__all__ = ["LATEST", "PAGE", "Schedule", "due_time"]

LATEST: Final = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the latest due time (and the longest delay) `send` takes."""

PAGE: Final = 100
"""Scheduled jobs read (and promoted) at a time."""


def due_time(delay: object, at: object, now: float) -> float | None:
    """The Unix time a job sent at Unix time *now* falls due; None to run it in turn at once.

    Raises:
        TypeError: *delay* is not a number, or *at* not a number or a `datetime`.
        ValueError: both are given, *delay* is negative, *at* is a naive
            datetime, or either is not finite or beyond year 9999.
    """
    if delay is not None and at is not None:
        raise ValueError("give delay or at, not both")
    if delay is not None:
        check_number("delay", delay)
        assert isinstance(delay, int | float)
        if not 0 <= delay <= LATEST:
            raise ValueError(f"delay must be from 0 to {LATEST:.0f} seconds, not {delay!r}")
        return now + float(delay)
    if at is None:
        return None
    if isinstance(at, datetime.datetime):
        if at.tzinfo is None:
            raise ValueError("at must be an aware datetime (with a tzinfo), not a naive one")
        at = at.timestamp()
    else:
        check_number("at", at)
    assert isinstance(at, int | float)
    if at > LATEST:
        raise ValueError(f"at must be a Unix time up to {LATEST:.0f} (9999-12-31), not {at!r}")
    return float(at)


@attrs.define(eq=False)
class Schedule:
    """The scheduler task's wait: until its deadline, or until an earlier job is scheduled."""

    deadline: float = math.inf
    """The runtime clock's time of the earliest due time known; inf if none."""
    _woken: trio.Event = attrs.field(factory=trio.Event)

    def reading(self) -> None:
        """The scheduler reads the journal now: any job scheduled meanwhile wakes it."""
        self.deadline = math.inf
        self._woken = trio.Event()

    def noticed(self, due: float) -> None:
        """A job was scheduled, due at runtime clock time *due*: wake the scheduler if sooner."""
        if due < self.deadline:
            self._woken.set()

    async def wait(self, deadline: float) -> None:
        """Sleep until runtime clock time *deadline*, or until `noticed` says sooner."""
        self.deadline = deadline
        with trio.move_on_at(deadline):
            await self._woken.wait()
