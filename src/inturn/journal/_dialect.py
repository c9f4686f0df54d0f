"""What the two SQL journals share above their SQL: the methods that carry a read to it.

`SQLiteJournal` and `PostgresJournal` differ in their SQL, not in how a call
reaches it.  Each names its plain functions of a connection in a `Dialect`;
`ThreadedJournal` gives it the protocol's reads and inbox methods, run on
its `JournalThread`, and `DialectReader` the blocking reads of its reader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar, cast

import attrs
import trio

from .._checks import check_number
from ..errors import JournalError
from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from ._reads import (
    check_audit,
    check_dead_letters,
    check_job_id,
    check_jobs,
    check_keys,
    check_keys_by_name,
    check_now,
    check_scheduled,
    check_schedules,
)
from ._thread import JournalThread
from .records import Answer, Change, Command, StoredJob, Transaction

__all__ = ["Dialect", "DialectReader", "ThreadedJournal"]

_C = TypeVar("_C")
_T = TypeVar("_T")


@attrs.frozen
class Dialect(Generic[_C]):
    """A journal's reads and inbox steps, as functions of its connection."""

    select_pending: Callable[[_C, str, int, int], list[StoredJob]]
    select_keys: Callable[[_C, KeyFilter | None, int, float], list[KeyInfo]]
    select_keys_by_name: Callable[
        [_C, KeyFilter | None, str, str | None, int, float], list[KeyInfo]
    ]
    select_overview: Callable[[_C, float], Overview]
    select_job: Callable[[_C, int], JobInfo | None]
    select_queue: Callable[[_C, str, int, int], list[JobInfo]]
    select_dead_letters: Callable[[_C, str | None, int, int, float | None], list[JobInfo]]
    select_scheduled: Callable[[_C, str | None, int], list[JobInfo]]
    select_steps: Callable[[_C, int], list[tuple[str, bytes]]]
    select_audit: Callable[[_C, int, int | None, int, str | None, int | None], list[AuditEntry]]
    select_schedules: Callable[[_C, str, int, str | None], list[ScheduleInfo]]
    select_due_schedules: Callable[[_C, int], list[ScheduleInfo]]
    take: Callable[[_C], list[Command]] = attrs.field(default=lambda connection: [])
    answer: Callable[[_C, int, Answer], None] = attrs.field(
        default=lambda connection, command_id, answer: None
    )


class ThreadedJournal(Generic[_C]):
    """Mixin: the journal methods that only queue work for the journal's thread."""

    dialect: ClassVar[Dialect[Any]]
    poll_interval: float
    _worker: JournalThread[_C] | None

    @property
    def name(self) -> str:
        """How error messages name this journal."""
        raise NotImplementedError

    async def write(self, changes: Sequence[Change], *, now: float | None = None) -> list[Change]:
        if now is not None:
            check_now(now)
        await trio.lowlevel.checkpoint_if_cancelled()
        superseded = await (self._worker or self._open_worker()).write(changes, now)
        return cast(list[Change], superseded)  # some of *changes*: no other kind

    async def transaction(
        self, change: Transaction, run: Callable[[_C], bytes], *, now: float | None = None
    ) -> bytes | None:
        if now is not None:
            check_now(now)
        await trio.lowlevel.checkpoint_if_cancelled()
        return await (self._worker or self._open_worker()).transact(change, run, now)

    async def load(self, key: str, after: int, limit: int) -> list[StoredJob]:
        return await self._read(
            lambda connection: self.dialect.select_pending(connection, key, after, limit)
        )

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        check_keys(state, limit, now)
        return await self._read(
            lambda connection: self.dialect.select_keys(connection, state, limit, now)
        )

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        check_keys_by_name(state, prefix, after, limit, now)
        return await self._read(
            lambda connection: self.dialect.select_keys_by_name(
                connection, state, prefix, after, limit, now
            )
        )

    async def overview(self, *, now: float) -> Overview:
        check_number("now", now)
        return await self._read(lambda connection: self.dialect.select_overview(connection, now))

    async def job(self, job_id: int) -> JobInfo | None:
        check_job_id(job_id)
        return await self._read(lambda connection: self.dialect.select_job(connection, job_id))

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        check_jobs(key, limit, after)
        return await self._read(
            lambda connection: self.dialect.select_queue(connection, key, limit, after)
        )

    async def steps(self, job_id: int) -> list[tuple[str, bytes]]:
        check_job_id(job_id)
        return await self._read(lambda connection: self.dialect.select_steps(connection, job_id))

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        check_scheduled(key, limit)
        return await self._read(
            lambda connection: self.dialect.select_scheduled(connection, key, limit)
        )

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        check_schedules(after, limit, name)
        return await self._read(
            lambda connection: self.dialect.select_schedules(connection, after, limit, name)
        )

    async def due_schedules(self, *, limit: int = 100) -> list[ScheduleInfo]:
        check_schedules("", limit)
        return await self._read(
            lambda connection: self.dialect.select_due_schedules(connection, limit)
        )

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        check_dead_letters(key, limit, after, finished_before)
        return await self._read(
            lambda connection: self.dialect.select_dead_letters(
                connection, key, limit, after, finished_before
            )
        )

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        check_audit(after, before, limit, key, job_id)
        return await self._read(
            lambda connection: self.dialect.select_audit(
                connection, after, before, limit, key, job_id
            )
        )

    async def commands(self) -> list[Command]:
        # Polls: an operator in another process can set no trio.Event here.
        while not (taken := await self._read(self.dialect.take)):  # noqa: ASYNC110
            await trio.sleep(self.poll_interval)
        return taken

    async def answer(self, command_id: int, answer: Answer) -> None:
        await self._read(lambda connection: self.dialect.answer(connection, command_id, answer))

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None  # from here on, writes are refused
        if worker is None:
            await trio.lowlevel.checkpoint()
            return
        await worker.stop()  # after every batch already queued
        self._closed()

    def _closed(self) -> None:
        """Called once the journal's thread has ended: release what `open` took."""

    async def _read(self, run: Callable[[_C], _T]) -> _T:
        await trio.lowlevel.checkpoint_if_cancelled()
        return await self._open_worker().read(run)

    def _open_worker(self) -> JournalThread[_C]:
        if self._worker is None:
            raise JournalError(f"{self.name}: this {type(self).__name__} is not open")
        return self._worker


class DialectReader(Generic[_C]):
    """Mixin: a reader's blocking reads, given its `_read`."""

    dialect: ClassVar[Dialect[Any]]

    def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted, as `inturn.Journal.keys` returns them."""
        check_keys(state, limit, now)
        return self._read(
            lambda connection: self.dialect.select_keys(connection, state, limit, now)
        )

    def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        """Keys by name, a page after *after*, as `inturn.Journal.keys_by_name` returns them."""
        check_keys_by_name(state, prefix, after, limit, now)
        return self._read(
            lambda connection: self.dialect.select_keys_by_name(
                connection, state, prefix, after, limit, now
            )
        )

    def overview(self, *, now: float) -> Overview:
        """The journal at a glance, as `inturn.Journal.overview` returns it."""
        check_number("now", now)
        return self._read(lambda connection: self.dialect.select_overview(connection, now))

    def job(self, job_id: int) -> JobInfo | None:
        """The unfinished job or dead letter *job_id*, as `inturn.Journal.job` returns it."""
        check_job_id(job_id)
        return self._read(lambda connection: self.dialect.select_job(connection, job_id))

    def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        """*key*'s unfinished jobs in order, as `inturn.Journal.jobs` returns them."""
        check_jobs(key, limit, after)
        return self._read(
            lambda connection: self.dialect.select_queue(connection, key, limit, after)
        )

    def steps(self, job_id: int) -> list[tuple[str, bytes]]:
        """The steps job *job_id* recorded, as `inturn.Journal.steps` returns them."""
        check_job_id(job_id)
        return self._read(lambda connection: self.dialect.select_steps(connection, job_id))

    def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Scheduled jobs, the earliest due first, as `inturn.Journal.scheduled` returns them."""
        check_scheduled(key, limit)
        return self._read(lambda connection: self.dialect.select_scheduled(connection, key, limit))

    def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        """Recurring schedules by name, as `inturn.Journal.schedules` returns them."""
        check_schedules(after, limit, name)
        return self._read(
            lambda connection: self.dialect.select_schedules(connection, after, limit, name)
        )

    def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        """Dead letters in id order, as `inturn.Journal.dead_letters` returns them."""
        check_dead_letters(key, limit, after, finished_before)
        return self._read(
            lambda connection: self.dialect.select_dead_letters(
                connection, key, limit, after, finished_before
            )
        )

    def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        """The audit trail, newest first, as `inturn.Journal.audit` returns it."""
        check_audit(after, before, limit, key, job_id)
        return self._read(
            lambda connection: self.dialect.select_audit(
                connection, after, before, limit, key, job_id
            )
        )

    def _read(self, run: Callable[[_C], _T]) -> _T:
        raise NotImplementedError
