"""`MemoryJournal`: a real journal whose storage is a dict.

It is the default, and what tests use.  It is not a mock: it keeps the same
records a durable journal keeps (bytes payloads, attempts, dead letters,
halted keys) and obeys the same rules, so a supervisor reopened on it behaves
exactly as one restarted on a file would.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from ..errors import DuplicateError, JournalError
from .records import (
    Append,
    Change,
    Complete,
    DeadLetter,
    Discard,
    Halt,
    MarkAttempt,
    Recovery,
    Resume,
    StoredJob,
)

__all__ = ["MemoryJournal"]


@attrs.define(eq=False)
class MemoryJournal:
    """A journal in memory: survives a supervisor, not the process.

    Reopen it with a new supervisor to test recovery without a file.
    """

    _jobs: dict[int, StoredJob] = attrs.field(factory=dict, init=False)
    _unique: dict[str, int] = attrs.field(factory=dict, init=False)
    _dead: dict[int, DeadLetter] = attrs.field(factory=dict, init=False)
    _halted: set[str] = attrs.field(factory=set, init=False)
    _next_id: int = attrs.field(default=1, init=False)
    _is_open: bool = attrs.field(default=False, init=False)

    async def open(self) -> Recovery:
        await trio.lowlevel.checkpoint()
        if self._is_open:
            raise JournalError("this MemoryJournal is already open by a supervisor")
        self._is_open = True
        return Recovery(
            next_id=self._next_id,
            jobs=sorted(self._jobs.values(), key=lambda job: job.id),
            halted=frozenset(self._halted),
        )

    async def write(self, changes: Sequence[Change]) -> None:
        await trio.lowlevel.checkpoint()
        if not self._is_open:
            raise JournalError("this MemoryJournal is not open")
        if len(changes) == 1:  # the common case needs no staging copy
            self._check(changes[0], self._jobs, self._unique)
            self._apply(changes[0])
            return
        jobs, unique = dict(self._jobs), dict(self._unique)
        for change in changes:  # check the whole batch first: all or nothing
            self._check(change, jobs, unique)
            if isinstance(change, Append):
                jobs[change.job_id] = StoredJob(id=change.job_id, key=None, data=b"")
                if change.unique is not None:
                    unique[change.unique] = change.job_id
            elif isinstance(change, Complete | Discard):
                job = jobs.pop(change.job_id)
                if job.unique is not None:
                    del unique[job.unique]
        for change in changes:
            self._apply(change)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self._is_open = False

    def dead_letters(self) -> list[DeadLetter]:
        """Discarded jobs, oldest first."""
        return sorted(self._dead.values(), key=lambda dead: dead.id)

    def unfinished(self) -> list[StoredJob]:
        """Jobs neither completed nor discarded, in id order."""
        return sorted(self._jobs.values(), key=lambda job: job.id)

    def _check(self, change: Change, jobs: dict[int, StoredJob], unique: dict[str, int]) -> None:
        if isinstance(change, Append):
            if change.job_id < self._next_id or change.job_id in jobs:
                raise JournalError(f"job id {change.job_id} was used before")
            if change.unique is not None and change.unique in unique:
                raise DuplicateError(change.unique, unique[change.unique])
        elif isinstance(change, MarkAttempt | Complete | Discard) and change.job_id not in jobs:
            raise JournalError(f"job {change.job_id} is not an unfinished job")

    def _apply(self, change: Change) -> None:
        match change:
            case Append(job_id=job_id, key=key, data=data, unique=unique):
                self._jobs[job_id] = StoredJob(id=job_id, key=key, data=data, unique=unique)
                if unique is not None:
                    self._unique[unique] = job_id
                self._next_id = max(self._next_id, job_id + 1)
            case MarkAttempt(job_id=job_id, attempt=attempt):
                self._jobs[job_id] = attrs.evolve(self._jobs[job_id], attempts=attempt)
            case Complete(job_id=job_id):
                self._forget(job_id)
            case Discard(job_id=job_id, error=error):
                job = self._forget(job_id)
                self._dead[job_id] = DeadLetter(
                    id=job.id,
                    key=job.key,
                    data=job.data,
                    unique=job.unique,
                    attempts=job.attempts,
                    error=error,
                )
            case Halt(key=key):
                self._halted.add(key)
            case Resume(key=key):
                self._halted.discard(key)

    def _forget(self, job_id: int) -> StoredJob:
        job = self._jobs.pop(job_id)
        if job.unique is not None:
            del self._unique[job.unique]
        return job
