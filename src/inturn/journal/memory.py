"""`MemoryJournal`: a real journal whose storage is a dict.

It is the default, and what tests use.  It is not a mock: it keeps the same
records a durable journal keeps (bytes payloads, attempts, dead letters,
halted keys) and obeys the same rules, so a supervisor reopened on it behaves
exactly as one restarted on a file would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

import attrs
import trio

from ..errors import DuplicateError, JournalError
from .records import (
    Append,
    Backlog,
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


@attrs.define(eq=False, slots=True)
class _Row:
    key: str | None
    data: bytes
    unique: str | None
    attempts: int = 0

    def stored(self, job_id: int) -> StoredJob:
        return StoredJob(
            id=job_id, key=self.key, data=self.data, unique=self.unique, attempts=self.attempts
        )


@attrs.define(eq=False)
class MemoryJournal:
    """A journal in memory: survives a supervisor, not the process.

    Reopen it with a new supervisor to test recovery without a file.
    """

    _jobs: dict[int, _Row] = attrs.field(factory=dict, init=False)
    _by_key: dict[str, dict[int, None]] = attrs.field(factory=dict, init=False)
    """Each key's unfinished job ids, oldest first (ids rise, dicts keep order)."""
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
        # Like a durable journal: each key's head, and a backlog for the rest.
        heads = [job_id for job_id, row in self._jobs.items() if row.key is None]
        backlog: dict[str, Backlog] = {}
        for key, ids in self._by_key.items():
            heads.append(next(iter(ids)))
            if len(ids) > 1:
                backlog[key] = Backlog(count=len(ids) - 1, last_id=next(reversed(ids)))
        return Recovery(
            next_id=self._next_id,
            jobs=[self._jobs[job_id].stored(job_id) for job_id in sorted(heads)],
            backlog=backlog,
            halted=frozenset(self._halted),
        )

    async def load(self, key: str, after: int, limit: int) -> list[StoredJob]:
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._is_open:
            raise JournalError("this MemoryJournal is not open")
        page: list[StoredJob] = []
        # A key's oldest jobs are the ones in memory already: few to skip.
        for job_id in self._by_key.get(key, ()):
            if len(page) >= limit:
                break
            if job_id > after:
                page.append(self._jobs[job_id].stored(job_id))
        return page

    async def write(self, changes: Sequence[Change]) -> None:
        # A cancellation point, not a schedule point: there is nothing to wait
        # for, and the runtime yields where fairness needs it.
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._is_open:
            raise JournalError("this MemoryJournal is not open")
        self._check(changes)  # the whole batch first: all or nothing
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
        return [self._jobs[job_id].stored(job_id) for job_id in sorted(self._jobs)]

    def _check(self, changes: Sequence[Change]) -> None:
        """Raise if any change in the batch is illegal, without changing anything."""
        if len(changes) == 1:  # the common case: nothing to stage
            only = changes[0]
            if isinstance(only, MarkAttempt | Complete | Discard):
                if only.job_id not in self._jobs:
                    raise JournalError(f"job {only.job_id} is not an unfinished job")
                return
            if not isinstance(only, Append):
                return
            if only.job_id < self._next_id:  # every id ever appended is below it
                raise JournalError(f"job id {only.job_id} was used before")
            if only.unique is not None and only.unique in self._unique:
                raise DuplicateError(only.unique, self._unique[only.unique])
            return
        appended: dict[int, str | None] = {}  # job id -> its unique key
        finished: set[int] = set()
        taken: dict[str, int] = {}
        freed: set[str] = set()
        for change in changes:
            if isinstance(change, Append):
                job_id, unique = change.job_id, change.unique
                if job_id < self._next_id or (appended and job_id <= max(appended)):
                    # ids rise in acceptance order, within a batch too
                    raise JournalError(f"job id {job_id} was used before")
                if unique is not None:
                    holder = taken.get(unique)
                    if holder is None and unique not in freed:
                        holder = self._unique.get(unique)
                    if holder is not None:
                        raise DuplicateError(unique, holder)
                    taken[unique] = job_id
                appended[job_id] = unique
            elif isinstance(change, MarkAttempt | Complete | Discard):
                job_id = change.job_id
                if job_id in finished or not (job_id in self._jobs or job_id in appended):
                    raise JournalError(f"job {job_id} is not an unfinished job")
                if isinstance(change, Complete | Discard):
                    finished.add(job_id)
                    row = self._jobs.get(job_id)
                    unique = row.unique if row is not None else appended[job_id]
                    if unique is not None:
                        freed.add(unique)
                        taken.pop(unique, None)

    def _apply(self, change: Change) -> None:
        match change:
            case Append(job_id=job_id, key=key, data=data, unique=unique):
                self._jobs[job_id] = _Row(key=key, data=data, unique=unique)
                if key is not None:
                    self._by_key.setdefault(key, {})[job_id] = None
                if unique is not None:
                    self._unique[unique] = job_id
                self._next_id = max(self._next_id, job_id + 1)
            case MarkAttempt(job_id=job_id, attempt=attempt):
                self._jobs[job_id].attempts = attempt
            case Complete(job_id=job_id):
                self._forget(job_id)
            case Discard(job_id=job_id, error=error):
                job = self._forget(job_id)
                self._dead[job_id] = DeadLetter(
                    id=job_id,
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
            case _:
                assert_never(change)

    def _forget(self, job_id: int) -> _Row:
        job = self._jobs.pop(job_id)
        if job.unique is not None:
            del self._unique[job.unique]
        if job.key is not None:
            ids = self._by_key[job.key]
            del ids[job_id]
            if not ids:
                del self._by_key[job.key]
        return job
