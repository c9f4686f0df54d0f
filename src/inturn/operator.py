"""Inspect and fix a journal that no supervisor holds: `operate`.

The same reads and fixes as the `Supervisor` methods, for when nothing runs:
the ``inturn`` command line on a file a crashed process left, a maintenance
script, a test.  Every fix is one journal write, so it is all or nothing and
survives a crash like any other change.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import final

import trio

from ._checks import check_count, check_number
from .errors import JobNotFound, JobStateError, KeyNotFound
from .info import JobInfo, KeyFilter, KeyInfo
from .journal import Discard, Halt, Journal, Purge, Requeue, Resume
from .keys import validate_key

__all__ = [
    "SKIPPED_TEXT",
    "Operator",
    "check_job_id",
    "check_limit",
    "operate",
    "purge_dead",
    "schedule_point",
]

SKIPPED_TEXT = "skipped by operator"
"""The error text a skipped job keeps as a dead letter."""

_PURGE_BATCH = 1000


async def schedule_point() -> None:
    """Let other tasks run, without a cancellation point.

    A journal need not yield (the memory one doesn't), and every trio async
    function that can block must: the runtime adds the schedule point, after
    the journal answered.  Shielded, so what was done is never reported lost.
    """
    await trio.lowlevel.cancel_shielded_checkpoint()


def check_job_id(job_id: object) -> int:
    return check_count("job_id", job_id, minimum=1)


def check_limit(limit: object) -> int:
    return check_count("limit", limit, minimum=1)


async def requeue_check(journal: Journal, job_id: object) -> JobInfo:
    """The dead letter *job_id*, or the error that says why it cannot be requeued."""
    checked = check_job_id(job_id)
    info = await journal.job(checked)
    if info is None:
        raise JobNotFound(checked)
    if info.state != "dead":
        raise JobStateError(info.id, info.state, "only a dead letter can be requeued")
    return info


async def skip_check(journal: Journal, job_id: object) -> JobInfo:
    """The unfinished job *job_id*, or the error that says why it cannot be skipped."""
    checked = check_job_id(job_id)
    info = await journal.job(checked)
    if info is None:
        raise JobNotFound(checked)
    if info.state == "dead":
        raise JobStateError(info.id, info.state, "it is a dead letter already")
    return info


async def purge_dead(journal: Journal, older_than: object, key: str | None) -> int:
    """Delete the dead letters discarded more than *older_than* seconds ago; return how many."""
    check_number("older_than", older_than)
    assert isinstance(older_than, int | float)
    if older_than < 0:
        raise ValueError(f"older_than must be >= 0 seconds, not {older_than!r}")
    if key is not None:
        key = validate_key(key)
    before = time.time() - older_than
    purged = 0
    while dead := await journal.dead_letters(key=key, limit=_PURGE_BATCH, finished_before=before):
        # A dead letter requeued meanwhile is superseded, not purged: the rest are.
        superseded = await journal.write([Purge(info.id) for info in dead])
        purged += len(dead) - len(superseded)
    await schedule_point()
    return purged


@final
class Operator:
    """Reads and fixes one journal while no supervisor runs it; made by `operate`."""

    def __init__(self, journal: Journal, next_id: int, halted: set[str]) -> None:
        self._journal = journal
        self._next_id = next_id
        self._halted = halted

    async def keys(self, *, state: KeyFilter | None = None, limit: int = 100) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted: oldest head first.  See `Supervisor.keys`."""
        found = await self._journal.keys(state=state, limit=check_limit(limit), now=time.time())
        await schedule_point()
        return found

    async def job(self, job_id: int) -> JobInfo | None:
        """The unfinished job or dead letter *job_id*, or None."""
        info = await self._journal.job(check_job_id(job_id))
        await schedule_point()
        return info

    async def dead_letters(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Dead letters, oldest first; of *key* only if given."""
        if key is not None:
            key = validate_key(key)
        found = await self._journal.dead_letters(key=key, limit=check_limit(limit))
        await schedule_point()
        return found

    async def requeue(self, job_id: int) -> int:
        """Put dead letter *job_id* back at the tail of its key, attempts reset; return its new id.

        Raises:
            JobNotFound, JobStateError: no such dead letter.
            DuplicateError: an unfinished job holds its unique key.
        """
        info = await requeue_check(self._journal, job_id)
        new_id = self._next_id
        if await self._journal.write([Requeue(info.id, new_id)]):
            await requeue_check(self._journal, info.id)  # requeued or purged meanwhile
            raise JobStateError(info.id, "gone", "it was requeued or purged meanwhile")
        self._next_id += 1
        await schedule_point()
        return new_id

    async def skip(self, job_id: int) -> None:
        """Discard unfinished job *job_id* now, unrun, as a dead letter "skipped by operator"."""
        info = await skip_check(self._journal, job_id)
        if await self._journal.write([Discard(info.id, SKIPPED_TEXT)]):
            await skip_check(self._journal, info.id)  # finished meanwhile: say how
            raise JobStateError(info.id, "gone", "it finished meanwhile")
        await schedule_point()

    async def pause(self, key: str) -> None:
        """Halt *key*: none of its jobs start until `resume`.

        Raises:
            KeyNotFound: *key* has no unfinished jobs and is not halted.
        """
        key = validate_key(key)
        if key not in self._halted and not await self._journal.load(key, 0, 1):
            raise KeyNotFound(key)
        await self._journal.write([Halt(key)])
        self._halted.add(key)
        await schedule_point()

    async def resume(self, key: str) -> None:
        """Let halted *key* run again; a key that is not halted is left as it is."""
        key = validate_key(key)
        if key not in self._halted:
            await trio.lowlevel.checkpoint()
            return
        await self._journal.write([Resume(key)])
        self._halted.discard(key)
        await schedule_point()

    async def purge_dead(self, *, older_than: float, key: str | None = None) -> int:
        """Delete dead letters discarded more than *older_than* seconds ago; return how many."""
        return await purge_dead(self._journal, older_than, key)


@asynccontextmanager
async def operate(journal: Journal) -> AsyncIterator[Operator]:
    """Claim *journal* to inspect and fix it; no job runs meanwhile.

    Raises:
        JournalLocked: a supervisor holds it (use the `Supervisor` methods in
            that process instead).
        JournalError: the journal cannot be opened (a `MemoryJournal` that
            a supervisor holds raises this one).
    """
    recovery = await journal.open()
    try:
        yield Operator(journal, recovery.next_id, set(recovery.halted))
    finally:
        with trio.CancelScope(shield=True):
            await journal.aclose()
