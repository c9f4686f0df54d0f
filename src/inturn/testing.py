"""Tools for testing code that uses inturn.  Not imported by ``import inturn``.

With pytest-trio's ``autojump_clock`` fixture, backoff delays and idle
timeouts pass in virtual time: a test that retries five times with a minute
of backoff each returns at once.  `Recorder` wraps a handler and records every
attempt on trio's clock, so a test can check what the handler saw.
`FaultyJournal` makes chosen journal writes fail (`fail_after_step` picks the
write that follows a durable step, as a crash between two steps would), and
`JournalConformance` and
`OperatorReadsConformance` are the suites of tests every `inturn.Journal` must
pass (kept in `_conformance*`, re-exported here): as pytest mixins, or all at
once as a plain function, `check_journal`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import attrs
import trio

from ._checks import check_step, check_transaction
from ._conformance import unfinished_jobs
from ._conformance_arbiter import JournalConformance
from ._conformance_reads import OperatorReadsConformance
from ._runtime import Handler
from ._steps import encode_result, take_step
from .codec import Codec, JSONCodec
from .errors import JournalError
from .info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from .jobs import Job
from .journal import (
    Answer,
    Change,
    Command,
    Journal,
    JournalReads,
    Recovery,
    Step,
    StoredJob,
    Transaction,
)

__all__ = [
    "Call",
    "FaultyJournal",
    "StepCall",
    "fail_after_step",
    "make_job",
    "check_journal",
    "JournalConformance",
    "OperatorReadsConformance",
    "Recorder",
    "unfinished_jobs",
]


@attrs.frozen
class StepCall:
    """One `Job.step` an attempt took."""

    name: str
    replayed: bool
    """Its result came from the journal (an earlier attempt recorded it): its function did not run."""
    result: object


@attrs.define(eq=False, kw_only=True)
class Call:
    """One attempt the handler made, on trio's clock."""

    job: Job
    start: float
    end: float | None = None
    """When the handler returned or raised; None while it runs, or if it was cancelled."""
    result: object = None
    error: BaseException | None = None
    overlapped: bool = False
    """Another job of the same key was running when this one started."""
    steps: list[StepCall] = attrs.field(factory=list)
    """The durable steps it took that returned, in order."""


@attrs.define(eq=False)
class _RecordedSteps:
    """The supervisor's step log, with each step's outcome noted in a `Call`."""

    inner: Any
    call: Call

    async def run(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        ran = False

        def tracked(*args: Any) -> Any:
            nonlocal ran
            ran = True
            return fn(*args)

        result = await self.inner.run(job_id, name, tracked, args)
        self.call.steps.append(StepCall(name, replayed=not ran, result=result))
        return result

    async def transaction(
        self, job_id: int, attempt: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        check_transaction(name, fn)  # before the wrapper hides what *fn* is
        ran = False

        def tracked(*args: Any) -> Any:
            nonlocal ran
            ran = True
            return fn(*args)

        result = await self.inner.transaction(job_id, attempt, name, tracked, args)
        self.call.steps.append(StepCall(name, replayed=not ran, result=result))
        return result


async def _return_none(job: Job) -> None:
    await trio.lowlevel.checkpoint()


@attrs.define(eq=False)
class Recorder:
    """A handler wrapper that records each attempt's start and end.

    Pass it to ``open_supervisor`` in place of the handler::

        recorder = Recorder(handler)
        async with inturn.open_supervisor(recorder) as sup:
            ...
        recorder.assert_sequential()

    Without a handler it records calls to a no-op that returns None.
    """

    handler: Handler = _return_none
    calls: list[Call] = attrs.field(factory=list, init=False)
    _running: dict[str, int] = attrs.field(factory=dict, init=False)

    async def __call__(self, job: Job) -> object:
        call = Call(job=job, start=trio.current_time())
        self.calls.append(call)
        if job._steps is not None:
            job = attrs.evolve(job, steps=_RecordedSteps(job._steps, call))
        if job.key is not None:
            call.overlapped = self._running.get(job.key, 0) > 0
            self._running[job.key] = self._running.get(job.key, 0) + 1
        try:
            call.result = await self.handler(job)
        except Exception as exc:
            call.end = trio.current_time()
            call.error = exc
            raise
        finally:
            if job.key is not None:
                self._running[job.key] -= 1
                if not self._running[job.key]:
                    del self._running[job.key]
        call.end = trio.current_time()
        return call.result

    def by_key(self) -> dict[str | None, list[Call]]:
        """The calls per key (None for keyless jobs), each list in start order."""
        grouped: dict[str | None, list[Call]] = {}
        for call in self.calls:
            grouped.setdefault(call.job.key, []).append(call)
        return grouped

    def assert_sequential(self) -> None:
        """Assert that each key's jobs ran one at a time, in acceptance order.

        Within a key no attempt started while another was running, job ids never
        went down (a retry repeats its id), and attempts of one job never went
        down (one cut short by shutdown or a runtime crash runs again as itself).

        Raises:
            AssertionError: naming the key and the jobs at fault.
        """
        for key, calls in self.by_key().items():
            if key is None:
                continue
            for call in calls:
                assert not call.overlapped, (
                    f"key {key!r}: job {call.job.id} started while another job was running"
                )
            for before, after in pairwise(calls):
                assert after.job.id >= before.job.id, (
                    f"key {key!r}: job {after.job.id} ran after job {before.job.id}"
                )
                if after.job.id == before.job.id:
                    # equal when an attempt was cut short (shutdown, a runtime crash)
                    assert after.job.attempt >= before.job.attempt, (
                        f"key {key!r}: job {after.job.id} went back to attempt {after.job.attempt}"
                    )


@attrs.define(eq=False)
class FaultyJournal:
    """Wraps a journal and makes chosen writes fail, for fault-injection tests.

    *fail* sees each batch of changes; when it returns True the write raises
    `JournalError` and the inner journal is left untouched.
    """

    inner: Journal
    fail: Callable[[Sequence[Change]], bool] = attrs.field(default=lambda changes: False)
    failures: int = attrs.field(default=0, init=False)
    """How many writes were made to fail."""

    async def open(self) -> Recovery:
        return await self.inner.open()

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        if self.fail(changes):
            await trio.lowlevel.checkpoint()
            self.failures += 1
            raise JournalError("injected failure")
        return await self.inner.write(changes, now=now)

    async def transaction(
        self, change: Transaction, run: Callable[[Any], bytes], *, now: float | None = None
    ) -> bytes | None:
        """The inner journal's, failing (before *run* is called) when *fail* says so of
        ``[change]``."""
        if self.fail([change]):  # type: ignore[list-item]  # a Transaction is no Change
            await trio.lowlevel.checkpoint()
            self.failures += 1
            raise JournalError("injected failure")
        transaction = getattr(self.inner, "transaction", None)
        if transaction is None:
            raise TypeError(f"{type(self.inner).__name__} has no transactions")
        data: bytes | None = await transaction(change, run, now=now)
        return data

    async def load(self, key: str, after: int, limit: int) -> Sequence[StoredJob]:
        return await self.inner.load(key, after, limit)

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        return await self.inner.keys(state=state, limit=limit, now=now)

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        return await self.inner.keys_by_name(
            state=state, prefix=prefix, after=after, limit=limit, now=now
        )

    async def overview(self, *, now: float) -> Overview:
        return await self.inner.overview(now=now)

    async def job(self, job_id: int) -> JobInfo | None:
        return await self.inner.job(job_id)

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        return await self.inner.jobs(key, limit=limit, after=after)

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        return await self.inner.scheduled(key=key, limit=limit)

    async def steps(self, job_id: int) -> list[tuple[str, bytes]]:
        return await self.inner.steps(job_id)

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        return await self.inner.schedules(after=after, limit=limit, name=name)

    async def due_schedules(self, *, limit: int = 100) -> list[ScheduleInfo]:
        return await self.inner.due_schedules(limit=limit)

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        return await self.inner.dead_letters(
            key=key, limit=limit, after=after, finished_before=finished_before
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
        return await self.inner.audit(
            after=after, before=before, limit=limit, key=key, job_id=job_id
        )

    async def commands(self) -> Sequence[Command]:
        return await self.inner.commands()

    async def answer(self, command_id: int, answer: Answer) -> None:
        await self.inner.answer(command_id, answer)

    async def submit(self, command: Command, *, timeout: float) -> Answer:  # noqa: ASYNC109 (as Journal.submit)
        return await self.inner.submit(command, timeout=timeout)

    def reader(self) -> JournalReads:
        return self.inner.reader()

    async def aclose(self) -> None:
        await self.inner.aclose()


@attrs.define(eq=False)
class _KeptSteps:
    """Steps for jobs made by `make_job`: results kept encoded, in memory, as a journal keeps them."""

    codec: Codec
    database: Any = None
    """Where transactions run: a `sqlite3.Connection` or a `psycopg.Connection`, or None."""
    done: dict[tuple[int, str], bytes] = attrs.field(factory=dict)

    async def transaction(
        self, job_id: int, attempt: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        check_transaction(name, fn)
        database = self.database
        if database is None:
            raise TypeError(
                "make_job(..., database=connection) runs a handler's transactions on"
                " connection: this job was made without one"
            )
        data = self.done.get((job_id, name))
        if data is None:
            data = _in_savepoint(
                database,
                lambda: encode_result(
                    self.codec, job_id, name, fn(database, *args), 16 * 1024 * 1024
                ),
            )
            self.done[(job_id, name)] = data
        return self.codec.decode(data)

    async def run(
        self, job_id: int, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        check_step(name, fn)
        data = self.done.get((job_id, name))
        if data is None:
            data = await take_step(self.codec, job_id, name, fn, args)
            self.done[(job_id, name)] = data
        return self.codec.decode(data)


def _in_savepoint(database: Any, run: Callable[[], bytes]) -> bytes:
    """``run()`` in a savepoint of *database* (psycopg's or sqlite3's), rolled back if it raises."""
    if hasattr(database, "transaction"):  # psycopg: its own transaction blocks
        with database.transaction():
            return run()
    database.execute("SAVEPOINT inturn_make_job")
    try:
        data = run()
    except BaseException:
        database.execute("ROLLBACK TO inturn_make_job")
        database.execute("RELEASE inturn_make_job")
        raise
    database.execute("RELEASE inturn_make_job")
    return data


def make_job(
    payload: object,
    *,
    key: str | None = "key",
    id: int = 1,  # noqa: A002 (the Job's field)
    attempt: int = 1,
    unique: str | None = None,
    codec: Codec | None = None,
    database: Any = None,
) -> Job:
    """A `Job` as a supervisor hands it to a handler, for unit tests of the handler alone.

    Its payload has been through *codec* (`JSONCodec()` by default) and so
    do its steps' results: a step returning what the codec refuses raises
    `PermanentError`, as under a supervisor.  Steps are kept with the job:
    ``attrs.evolve(job, attempt=2)`` is its retry, which replays them.
    Its transactions (`Job.transaction`) run on *database* (a `sqlite3.Connection`
    or a `psycopg.Connection`), each in a savepoint, rolled back if it raises.
    """
    codec = JSONCodec() if codec is None else codec
    decoded = codec.decode(codec.encode(payload))
    return Job(
        id=id,
        key=key,
        payload=decoded,
        attempt=attempt,
        unique=unique,
        steps=_KeptSteps(codec, database),
    )


def fail_after_step(name: str, *, times: int = 1) -> Callable[[Sequence[Change]], bool]:
    """A `FaultyJournal` rule: fail the next write of a job after it recorded step *name*.

    As a crash between two steps would: the attempt fails (with
    `JournalError`) after step *name* was journaled, so the next attempt
    replays it from the journal.  At most *times* writes fail per job.
    """
    recorded: dict[int, int] = {}  # job id -> failures left

    def fail(changes: Sequence[Change]) -> bool:
        jobs = {
            job_id
            for change in changes
            if isinstance(job_id := getattr(change, "job_id", None), int)
        }
        due = [job_id for job_id in jobs if recorded.get(job_id, 0) > 0]
        if due:  # the whole batch fails: nothing of it is stored
            for job_id in due:
                recorded[job_id] -= 1
            return True
        for change in changes:
            if isinstance(change, Step) and change.name == name:
                recorded.setdefault(change.job_id, times)
        return False

    return fail


async def check_journal(make: Callable[[], Journal]) -> None:
    """Run every test of the conformance kits on journals made by *make*, without pytest.

    *make* returns a fresh, unopened journal each time it is called (one per
    test), as the kits' ``journal`` fixture does; trio's
    ``check_two_way_stream`` has the same shape.

    Raises:
        AssertionError: naming the kit's test that failed, and why.
    """
    for kit in (JournalConformance, OperatorReadsConformance):
        for name in sorted(name for name in dir(kit) if name.startswith("test_")):
            try:
                await getattr(kit(), name)(make())
            except AssertionError as exc:
                raise AssertionError(f"{kit.__name__}.{name}: {exc}") from exc
