"""The values a user sees: a job handed to the handler, one to send, and a stats snapshot."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable
from typing import Any, Protocol, final

import attrs

from ._checks import check_step


class _Steps(Protocol):
    """What runs a job's steps: the supervisor's step log (`inturn._steps.StepLog`)."""

    async def run(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any: ...

    async def transaction(
        self, job_id: int, attempt: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any: ...


__all__ = ["Item", "Job", "Stats"]


@final
@attrs.frozen(weakref_slot=False)  # no `__weakref__` slot: see `new_job`
class Job:
    """One accepted job, as the handler receives it."""

    id: int
    """Unique and increasing in acceptance order, across restarts (in a fleet: each
    member's own sends; a key's order across members is the journal's)."""
    key: str | None
    """The sequence key, or None for a job from ``submit``."""
    payload: object
    """The payload as the codec decoded it from the journal."""
    attempt: int = 1
    """1 for the first try, counting attempts across restarts."""
    unique: str | None = None
    """The unique key this job holds until it is terminal (and its ``unique_for`` after), if any."""
    epoch: int | None = None
    """In a fleet, the fencing token of this process's hold on the job's key:
    every later owner's is higher, so a store of your own that keeps the highest
    epoch it saw per key can refuse a write from an owner that stalled and lost
    the key.  None outside a fleet, and for a keyless job."""
    _steps: _Steps | None = attrs.field(default=None, eq=False, repr=False, alias="steps")
    """The supervisor's step log; None for a Job made by hand."""

    async def step(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` (sync or async) once for this job, whatever its attempts and crashes.

        The first time, the result is journaled (through the codec) before it
        is returned; a later attempt of this job, or the next supervisor after
        a crash, gets the journaled result back without *fn* being called.
        A step that raises is not recorded: the attempt fails as usual and
        the step runs again on the next one.  Returns the result as the codec
        decodes it, the same on every attempt.

        Raises:
            TypeError, ValueError: *name* is not a str of 1 to 200 characters,
                or *fn* is not callable; *name* was taken already in this
                attempt (and did not raise: a step that raised may be taken
                again, to retry it within the attempt).
            PermanentError: *fn* returned a value the codec cannot encode.
            JobStateError: another writer finished the job meanwhile (an
                operator's skip): the step is not recorded.

        and what *fn* raises, or the journal when it cannot record the result
        (the step then runs again on the next attempt).  On a Job made by
        hand (a unit test of a handler) the step just runs.
        """
        if self._steps is None:
            check_step(name, fn)
            result = fn(*args)
            return (await result) if inspect.isawaitable(result) else result
        return await self._steps.run(self.id, name, fn, args)

    async def transaction(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(connection, *args)`` in a transaction of the journal's own database, once
        for this job: its writes and the journal's record of its result commit together.

        *fn* is a plain (``def``) function.  It runs on the journal's thread,
        inside the journal's transaction, with *connection* a connection to the
        journal's database: a `sqlite3.Connection` on an `SQLiteJournal`'s file,
        a `psycopg.Connection` for a `PostgresJournal` (whose ``search_path`` is
        the connection's default, not the journal's schema), an in-memory
        SQLite database for a `MemoryJournal` (`MemoryJournal.database`).
        Write your own tables on it; never commit or roll back (the journal
        does: the call raises).  Then, in the same transaction, the journal
        records the result (through the codec, as `step` does), and checks the
        job is unfinished, no later attempt started, and, in a fleet, its key
        is still this process's.  Everything commits, or nothing does:

        * once committed, no later attempt and no process after a crash calls
          *fn* again for this job and *name*: it gets the recorded result;
        * if *fn* raises, its writes are rolled back and the exception goes
          on, failing the attempt as usual (the next attempt runs it again);
        * if the check fails, the writes are rolled back and the call raises
          `JobStateError` (an operator's skip, a later attempt) or
          `LeaseLost` (another process owns the key now).

        *fn* may be called more than once before its transaction commits (a
        PostgreSQL connection lost and the transaction tried again): it must
        not act outside the transaction.  Keep it short: the journal's other
        writes wait for it.  *name* shares the namespace of `step`'s names.

        Raises:
            TypeError, ValueError: as for `step`; *fn* is ``async``; the
                journal has no database of its own (a third-party journal).
            PermanentError: *fn* returned a value the codec cannot encode.
            JobStateError, LeaseLost: see above.

        and what *fn* raises.  On a Job made by hand with
        ``inturn.testing.make_job(..., database=connection)`` it runs in a
        savepoint of *connection*.
        """
        if self._steps is None:
            raise TypeError(
                "this Job has no journal: make it with inturn.testing.make_job(...,"
                " database=connection) to test a handler that takes transactions"
            )
        return await self._steps.transaction(self.id, self.attempt, name, fn, args)


class _Filling:
    """`Job`'s slots in a class that is not frozen: see `new_job`."""

    __slots__ = tuple(field.name for field in attrs.fields(Job))


def new_job(
    id: int,  # noqa: A002 (the field's name)
    key: str | None,
    payload: object,
    attempt: int,
    unique: str | None,
    epoch: int | None,
    steps: _Steps | None,
) -> Job:
    """``Job(id, key, payload, attempt, unique, epoch, steps)``, built at a third of the cost.

    attrs builds a frozen instance through ``object.__setattr__``, one call
    per field: about 1 us a `Job`, a tenth of a batched job.  This fills a
    `_Filling` (the same slots, not frozen) by plain assignments, then makes
    it a `Job`: Python allows that ``__class__`` assignment between classes
    of the same slots, which is also why `Job` has no ``__weakref__`` slot
    (CPython does not compare layouts that have one).  The runtime builds
    every handler's `Job` here, once per job.
    """
    job = object.__new__(_Filling)
    job.id = id  # type: ignore[attr-defined]
    job.key = key  # type: ignore[attr-defined]
    job.payload = payload  # type: ignore[attr-defined]
    job.attempt = attempt  # type: ignore[attr-defined]
    job.unique = unique  # type: ignore[attr-defined]
    job.epoch = epoch  # type: ignore[attr-defined]
    job._steps = steps  # type: ignore[attr-defined]
    job.__class__ = Job  # type: ignore[assignment]
    return job  # type: ignore[return-value]


@final
@attrs.frozen
class Item:
    """One job for `Supervisor.send_many`, with what `Supervisor.send` takes besides.

    ``Item(key, payload, unique=..., unique_for=..., delay=..., at=...)``; a
    plain ``(key, payload)`` pair is an item without a unique key, due at once.  Checked by
    ``send_many``, as ``send`` checks its arguments.
    """

    key: str
    payload: object
    unique: str | None = attrs.field(default=None, kw_only=True)
    """A unique key the job takes, as `Supervisor.send`'s."""
    unique_for: float | None = attrs.field(default=None, kw_only=True)
    """Seconds *unique* stays reserved once the job is terminal, as `Supervisor.send`'s."""
    delay: float | None = attrs.field(default=None, kw_only=True)
    """Seconds until a scheduled job falls due, as `Supervisor.send`'s."""
    at: float | datetime.datetime | None = attrs.field(default=None, kw_only=True)
    """When a scheduled job falls due (a Unix time or an aware datetime), as `Supervisor.send`'s."""


@final
@attrs.frozen(kw_only=True)
class Stats:
    """A snapshot of a supervisor's state, from ``Supervisor.stats()``."""

    actors: int
    """Live actors: one per active key (lingering ones included), plus one per keyless job
    in flight.  Not tasks: a lingering actor holds none.

    Under ``max_concurrency``, keys waiting for a slot have no actor yet."""
    queued: int
    """Accepted jobs that are not running and not terminal (halted keys included)."""
    running: int
    """Jobs whose attempt is in progress."""
    completed: int
    """Jobs completed since the supervisor opened."""
    discarded: int
    """Jobs discarded since the supervisor opened."""
    halted_keys: frozenset[str]
    """Keys parked by a discard under ``on_discard="halt"``."""
    scheduled: int = 0
    """Scheduled jobs not due yet: not in ``queued``; they join their keys when due."""
