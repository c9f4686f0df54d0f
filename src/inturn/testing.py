"""Tools for testing code that uses inturn.  Not imported by ``import inturn``.

With pytest-trio's ``autojump_clock`` fixture, backoff delays and idle
timeouts pass in virtual time: a test that retries five times with a minute
of backoff each returns at once.  `Recorder` wraps a handler and records every
attempt on trio's clock, so a test can check what the handler saw.
`FaultyJournal` makes chosen journal writes fail, and `JournalConformance` and
`OperatorReadsConformance` are the suites of tests every `inturn.Journal` must
pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from itertools import pairwise
from typing import Any, TypeAlias, TypeVar

import attrs
import trio

from .actors import Handler
from .errors import DuplicateError, JournalError
from .info import JobInfo, KeyFilter, KeyInfo
from .jobs import Job
from .journal import (
    Append,
    Change,
    Complete,
    Discard,
    Halt,
    Journal,
    MarkAttempt,
    Purge,
    Recovery,
    Resume,
    Retrying,
    StoredJob,
)

__all__ = [
    "Call",
    "FaultyJournal",
    "JournalConformance",
    "OperatorReadsConformance",
    "Recorder",
    "unfinished_jobs",
]


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

    async def write(self, changes: Sequence[Change]) -> None:
        if self.fail(changes):
            await trio.lowlevel.checkpoint()
            self.failures += 1
            raise JournalError("injected failure")
        await self.inner.write(changes)

    async def load(self, key: str, after: int, limit: int) -> Sequence[StoredJob]:
        return await self.inner.load(key, after, limit)

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        return await self.inner.keys(state=state, limit=limit, now=now)

    async def job(self, job_id: int) -> JobInfo | None:
        return await self.inner.job(job_id)

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

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- the journal conformance kit -------------------------------------------


_E = TypeVar("_E", bound=BaseException)

_State: TypeAlias = tuple[int, list[StoredJob], frozenset[str]]


def _state(recovery: Recovery) -> _State:
    """What a reopen sees, comparable whatever sequence type ``jobs`` is."""
    return recovery.next_id, list(recovery.jobs), recovery.halted


def _expect(actual: object, expected: object, what: str) -> None:
    # pytest rewrites no asserts in an installed package: say what differed
    assert actual == expected, f"{what}: got {actual!r}, expected {expected!r}"


async def _raises(error: type[_E], call: Awaitable[object]) -> _E:
    # pytest.raises without pytest: inturn.testing must import without it
    try:
        await call
    except error as exc:
        return exc
    raise AssertionError(f"expected {error.__name__}, but nothing was raised")


async def _replayed(journal: Journal, recovery: Recovery) -> Recovery:
    """*recovery* with every key's backlog paged in with ``load``, checked on the way."""
    jobs = list(recovery.jobs)
    ids = [job.id for job in jobs]
    _expect(ids, sorted(set(ids)), "Recovery.jobs ids (rising, no repeats)")
    for key, backlog in recovery.backlog.items():
        known = [job.id for job in jobs if job.key == key]
        assert known, f"Recovery.backlog names {key!r}, but Recovery.jobs has none of its jobs"
        rest: list[StoredJob] = []
        for _ in range(backlog.count + 1):  # a load that never runs out fails, not hangs
            page = await journal.load(key, known[-1] if not rest else rest[-1].id, 2)
            if not page:
                break
            assert len(page) <= 2, f"load({key!r}, ..., 2) returned {len(page)} jobs"
            rest.extend(page)
        _expect(
            (len(rest), rest[-1].id if rest else None),
            (backlog.count, backlog.last_id),
            f"jobs paged in for {key!r} (count, last id) against its Backlog",
        )
        assert all(job.key == key for job in rest), f"load({key!r}) returned another key's job"
        jobs.extend(rest)
    jobs.sort(key=lambda job: job.id)
    return Recovery(next_id=recovery.next_id, jobs=jobs, halted=recovery.halted)


async def unfinished_jobs(journal: Journal) -> list[StoredJob]:
    """Open *journal*, read every unfinished job (backlogs paged in), close it.

    What a supervisor opened on it would run, in id order: for tests that
    check what a journal kept.
    """
    recovery = await journal.open()
    try:
        return list((await _replayed(journal, recovery)).jobs)
    finally:
        with trio.CancelScope(shield=True):
            await journal.aclose()


@attrs.define(eq=False)
class _Session:
    """Opens and reopens a journal, and closes it however the test ends.

    What it returns from `open` has every backlog paged in (and checked), so
    tests compare all unfinished jobs whatever a journal leaves in backlogs.
    """

    journal: Journal
    is_open: bool = False

    async def open(self) -> Recovery:
        recovery = await self.journal.open()
        self.is_open = True
        return await _replayed(self.journal, recovery)

    async def close(self) -> None:
        await self.journal.aclose()
        self.is_open = False

    async def reopen(self) -> Recovery:
        """What the journal kept, as the next supervisor to open it sees it."""
        await self.close()
        return await self.open()


@asynccontextmanager
async def _session(journal: Journal) -> AsyncIterator[_Session]:
    session = _Session(journal)
    try:
        yield session
    finally:
        if session.is_open:
            with trio.CancelScope(shield=True):
                await journal.aclose()


class JournalConformance:
    """Tests every `inturn.Journal` must pass; mix into a test class.

    The class provides a ``journal`` fixture that returns (or yields) a fresh,
    unopened journal: each test opens it, writes, and reopens the same object
    after ``aclose`` to see what it kept, the way a supervisor restarted on a
    file would.  The tests use only the `Journal` protocol and the records in
    `inturn.journal`::

        class TestMyJournal(JournalConformance):
            @pytest.fixture
            def journal(self, tmp_path: Path) -> MyJournal:
                return MyJournal(tmp_path / "jobs.db")

    The tests are async: run them under pytest-trio, with ``trio_mode = true``
    or ``pytestmark = pytest.mark.trio`` on the subclass.  inturn runs them
    against `MemoryJournal`, so the fake the runtime tests use obeys the same
    rules as a durable journal (trio ships ``check_two_way_stream`` for the
    same reason).
    """

    async def test_fresh_journal_opens_empty(self, journal: Journal) -> None:
        """A journal never written to opens with next_id 1, no jobs and no halted keys."""
        async with _session(journal) as session:
            recovery = await session.open()
            _expect(
                _state(recovery), (1, [], frozenset()), "a fresh journal's next_id, jobs, halted"
            )

    async def test_jobs_replay_in_id_order_as_appended(self, journal: Journal) -> None:
        """Unfinished jobs replay in id order, per key and across keys, with key, data and unique as appended."""
        appended = [
            StoredJob(id=1, key="a", data=b'{"n": 1}'),
            StoredJob(id=2, key="b", data=b"", unique="u-2"),
            StoredJob(id=3, key=None, data=b"keyless"),
            StoredJob(id=4, key="a", data=b"\x00\xff not utf-8", unique="u-4"),
            StoredJob(id=5, key="b", data=b"five"),
            StoredJob(id=6, key="a", data=b"six"),
        ]
        appends = [
            Append(job_id=job.id, key=job.key, data=job.data, unique=job.unique) for job in appended
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write(appends[:1])
            await journal.write(appends[1:4])  # a batch of several
            await journal.write(appends[4:])

            first = await session.reopen()
            second = await session.reopen()  # open hands jobs back; it does not consume them

        _expect(list(first.jobs), appended, "replayed jobs")
        assert [type(job.data) for job in first.jobs] == [bytes] * len(appended), (
            "data must come back as bytes"
        )
        _expect(_state(second), _state(first), "a second reopen")

    async def test_replay_keeps_the_latest_attempt_mark(self, journal: Journal) -> None:
        """A job replays with the attempt of its latest MarkAttempt, even a lower one that gave one back."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key="k", data=b"3"),
                ]
            )
            await journal.write([MarkAttempt(1, 1)])
            await journal.write([MarkAttempt(1, 2)])
            await journal.write([MarkAttempt(1, 1)])  # attempt 2 given back on shutdown
            await journal.write([MarkAttempt(2, 1), MarkAttempt(2, 2), MarkAttempt(2, 3)])
            recovery = await session.reopen()
            _expect([job.attempts for job in recovery.jobs], [1, 3, 0], "replayed attempts")

            await journal.write([MarkAttempt(2, 2)])  # give one back after a restart
            await journal.write([MarkAttempt(3, 1)])
            await journal.write([MarkAttempt(3, 0)])  # and the first one
            recovery = await session.reopen()
        _expect([job.attempts for job in recovery.jobs], [1, 2, 0], "replayed attempts")

    async def test_complete_removes_the_job_from_replay(self, journal: Journal) -> None:
        """A completed job is not replayed; the jobs around it are."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key="k", data=b"3"),
                ]
            )
            await journal.write([MarkAttempt(2, 1)])
            await journal.write([Complete(2)])
            recovery = await session.reopen()
        _expect([job.id for job in recovery.jobs], [1, 3], "replayed job ids")

    async def test_discard_removes_the_job_from_replay(self, journal: Journal) -> None:
        """A discarded job is not replayed; the jobs around it are."""
        # A journal keeps a discarded job as a dead letter, but the protocol has
        # no reader for dead letters yet, so this kit cannot see them: test them
        # per journal (MemoryJournal.dead_letters()).
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key="k", data=b"3"),
                ]
            )
            await journal.write([MarkAttempt(2, 1)])
            await journal.write([Discard(2, "ValueError: boom")])
            recovery = await session.reopen()
        _expect([job.id for job in recovery.jobs], [1, 3], "replayed job ids")

    async def test_unique_held_by_an_unfinished_job_is_refused(self, journal: Journal) -> None:
        """An Append whose unique an unfinished job holds raises DuplicateError naming the holder, and changes nothing."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="a", data=b"1", unique="u")])
            before = _state(await session.reopen())

            error = await _raises(
                DuplicateError, journal.write([Append(job_id=2, key="b", data=b"2", unique="u")])
            )
            _expect((error.unique, error.job_id), ("u", 1), "DuplicateError's unique and job_id")

            # two appends of one unique key in one batch: the first holds it
            error = await _raises(
                DuplicateError,
                journal.write(
                    [
                        Append(job_id=2, key="b", data=b"2", unique="v"),
                        Append(job_id=3, key="c", data=b"3", unique="v"),
                    ]
                ),
            )
            _expect((error.unique, error.job_id), ("v", 2), "DuplicateError's unique and job_id")

            after = await session.reopen()
        _expect(_state(after), before, "the journal after refused Appends")

    async def test_unique_is_free_after_complete_or_discard(self, journal: Journal) -> None:
        """Once its holder is completed or discarded, an Append may take the unique again, before and after a reopen."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="a", data=b"1", unique="u")])
            await journal.write([Complete(1)])
            await journal.write([Append(job_id=2, key="a", data=b"2", unique="u")])
            await journal.write([Discard(2, "ValueError: boom")])
            await journal.write([Append(job_id=3, key="a", data=b"3", unique="u")])
            await journal.write([Complete(3)])
            await session.reopen()
            await journal.write([Append(job_id=4, key="b", data=b"4", unique="u")])
            recovery = await session.reopen()
        _expect([(job.id, job.unique) for job in recovery.jobs], [(4, "u")], "replayed")

    async def test_unique_stays_reserved_across_reopen(self, journal: Journal) -> None:
        """A unique held by an unfinished job is still held after a reopen."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="a", data=b"1", unique="u")])
            await journal.write([MarkAttempt(1, 1)])
            await session.reopen()
            error = await _raises(
                DuplicateError, journal.write([Append(job_id=2, key="a", data=b"2", unique="u")])
            )
            _expect(error.job_id, 1, "DuplicateError's job_id")

    async def test_ids_are_never_reused(self, journal: Journal) -> None:
        """next_id after a reopen is above every id ever appended, even once the newest job completed, and a used id is refused."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="a", data=b"1"),
                    Append(job_id=2, key="a", data=b"2"),
                    Append(job_id=3, key="a", data=b"3"),
                ]
            )
            await journal.write([Append(job_id=7, key="b", data=b"7")])  # ids may skip
            await journal.write([Discard(2, "ValueError: boom")])
            await journal.write([Complete(7)])  # the newest job

            recovery = await session.reopen()
            assert recovery.next_id > 7, f"next_id {recovery.next_id} would reuse id 7"

            for used in (1, 2, 7):  # unfinished, discarded, completed
                await _raises(JournalError, journal.write([Append(job_id=used, key="c", data=b"")]))
            await journal.write([Complete(3)])
            recovery = await session.reopen()
        assert recovery.next_id > 7, f"next_id {recovery.next_id} would reuse id 7"
        _expect([job.id for job in recovery.jobs], [1], "replayed job ids")

    async def test_halt_and_resume_persist(self, journal: Journal) -> None:
        """A halted key stays halted across a reopen until a Resume, which also persists."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="a", data=b"1")])
            await journal.write([Halt("a")])
            await journal.write([Halt("b")])
            _expect((await session.reopen()).halted, frozenset({"a", "b"}), "halted keys")

            await journal.write([Resume("b")])
            recovery = await session.reopen()
            _expect(recovery.halted, frozenset({"a"}), "halted keys")
            _expect([job.id for job in recovery.jobs], [1], "replayed job ids")

            await journal.write([Resume("a")])
            recovery = await session.reopen()
        _expect(recovery.halted, frozenset(), "halted keys")

    async def test_a_batch_with_one_illegal_change_applies_none(self, journal: Journal) -> None:
        """A batch holding one illegal change raises and applies none of its changes, alone or among legal ones."""
        good: list[Change] = [
            Append(job_id=10, key="k", data=b"new", unique="fresh"),
            MarkAttempt(1, 1),
            Complete(2),
            Halt("x"),
            Resume("h"),
        ]
        illegal: list[tuple[Change, type[Exception]]] = [
            (MarkAttempt(99, 1), JournalError),  # an unknown job
            (Complete(99), JournalError),
            (Discard(99, "boom"), JournalError),
            (Append(job_id=1, key="k", data=b""), JournalError),  # the id of an unfinished job
            (Append(job_id=2, key="k", data=b""), JournalError),  # and of one `good` completes
            (Append(job_id=11, key="k", data=b"", unique="held"), DuplicateError),
        ]
        clashing: list[tuple[Change, type[Exception]]] = [  # illegal only after good[0]
            (Append(job_id=10, key="k", data=b""), JournalError),
            (Append(job_id=11, key="k", data=b"", unique="fresh"), DuplicateError),
        ]
        # Ids rise within every batch, as the supervisor writes them: a journal
        # may refuse an id below one appended earlier in the batch.
        batches = [([bad], error) for bad, error in illegal]  # alone
        batches += [
            ([*good[:position], bad, *good[position:]], error)
            for bad, error in illegal + clashing
            for position in (1, 3, len(good))
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"one", unique="held"),
                    Append(job_id=2, key="k", data=b"two"),
                    Halt("h"),
                ]
            )
            before = _state(await session.reopen())
            for batch, error in batches:
                await _raises(error, journal.write(batch))
                after = _state(await session.reopen())
                _expect(after, before, f"the journal after refusing {batch}")

            await journal.write(good)  # the legal changes alone still apply
            recovery = await session.reopen()
        _expect([(job.id, job.attempts) for job in recovery.jobs], [(1, 1), (10, 0)], "replayed")
        _expect(recovery.halted, frozenset({"x"}), "halted keys")

    async def test_a_batch_applies_in_order(self, journal: Journal) -> None:
        """Each change in a batch sees the ones before it: a job appended, marked and completed in one batch is gone."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [Append(job_id=1, key="k", data=b"1", unique="u"), MarkAttempt(1, 1), Complete(1)]
            )
            recovery = await session.reopen()
            _expect(list(recovery.jobs), [], "replayed jobs")

            await journal.write(
                [
                    Append(job_id=2, key="k", data=b"2", unique="u"),
                    MarkAttempt(2, 1),
                    Discard(2, "ValueError: boom"),
                    Append(job_id=3, key="k", data=b"3", unique="u"),  # 2 freed it
                    MarkAttempt(3, 1),
                    MarkAttempt(3, 2),
                    Halt("a"),
                    Resume("a"),
                    Resume("b"),
                    Halt("b"),
                ]
            )
            recovery = await session.reopen()
        _expect(
            list(recovery.jobs),
            [StoredJob(id=3, key="k", data=b"3", unique="u", attempts=2)],
            "replayed jobs",
        )
        _expect(recovery.halted, frozenset({"b"}), "halted keys")
        assert recovery.next_id > 3, f"next_id {recovery.next_id} would reuse id 3"

    async def test_open_twice_raises(self, journal: Journal) -> None:
        """Opening a journal that is open already raises JournalError, and the first opener keeps it."""
        async with _session(journal) as session:
            await session.open()
            await _raises(JournalError, journal.open())
            await journal.write([Append(job_id=1, key="k", data=b"1")])
            recovery = await session.reopen()
        _expect([job.id for job in recovery.jobs], [1], "replayed job ids")

    async def test_write_when_not_open_raises(self, journal: Journal) -> None:
        """A write before the first open or after aclose raises JournalError and stores nothing."""
        async with _session(journal) as session:
            one: list[Change] = [Append(job_id=1, key="k", data=b"1")]
            two: list[Change] = [Append(job_id=2, key="k", data=b"2"), Halt("k")]
            await _raises(JournalError, journal.write(one))
            await _raises(JournalError, journal.write(two))
            _expect(_state(await session.open()), (1, [], frozenset()), "next_id, jobs, halted")

            await session.close()
            await _raises(JournalError, journal.write(one))
            await _raises(JournalError, journal.write(two))
            _expect(_state(await session.open()), (1, [], frozenset()), "next_id, jobs, halted")

    async def test_write_is_a_cancellation_point(self, journal: Journal) -> None:
        """A write in a cancelled scope raises trio.Cancelled and stores nothing."""
        async with _session(journal) as session:
            await session.open()
            returned = False
            with trio.CancelScope() as scope:
                scope.cancel()
                await journal.write([Append(job_id=1, key="k", data=b"1"), Halt("k")])
                returned = True
            assert not returned, "write returned in a cancelled scope"

            await journal.write([Append(job_id=1, key="k", data=b"1")])  # still usable
            recovery = await session.reopen()
        _expect([job.id for job in recovery.jobs], [1], "replayed job ids")
        _expect(recovery.halted, frozenset(), "halted keys")

    async def test_open_is_a_cancellation_point(self, journal: Journal) -> None:
        """An open in a cancelled scope raises trio.Cancelled and leaves the journal unclaimed."""
        async with _session(journal) as session:
            returned = False
            with trio.CancelScope() as scope:
                scope.cancel()
                await session.open()
                returned = True
            assert not returned, "open returned in a cancelled scope"
            _expect(_state(await session.open()), (1, [], frozenset()), "next_id, jobs, halted")

    async def test_load_pages_a_keys_unfinished_jobs_in_id_order(self, journal: Journal) -> None:
        """load(key, after, limit) returns the oldest `limit` unfinished jobs of that key above `after`, in id order, as appended."""
        appended = [
            StoredJob(id=1, key="a", data=b"a1"),
            StoredJob(id=2, key="b", data=b"b2", unique="u-2"),
            StoredJob(id=3, key=None, data=b"keyless"),
            StoredJob(id=4, key="a", data=b"\x00\xff not utf-8", unique="u-4"),
            StoredJob(id=5, key="a", data=b""),
            StoredJob(id=6, key="b", data=b"b6"),
            StoredJob(id=8, key="a", data=b"a8"),  # ids may skip
            StoredJob(id=9, key=None, data=b"keyless"),
            StoredJob(id=10, key="a", data=b"a10"),
        ]
        a = [job for job in appended if job.key == "a"]
        b = [job for job in appended if job.key == "b"]
        cases: list[tuple[tuple[str, int, int], list[StoredJob]]] = [
            (("a", 0, 100), a),
            (("a", 0, 2), a[:2]),
            (("a", 1, 2), a[1:3]),  # after one of its own ids
            (("a", 3, 10), a[1:]),  # after another job's id
            (("a", 6, 1), a[3:4]),
            (("a", 7, 1), a[3:4]),  # after an id never used
            (("a", 8, 5), a[4:]),
            (("a", 10, 5), []),  # after its last job
            (("a", 99, 5), []),
            (("b", 0, 5), b),
            (("b", 2, 1), b[1:]),
            (("missing", 0, 5), []),  # a key with no jobs
        ]
        appends: list[Change] = [
            Append(job_id=job.id, key=job.key, data=job.data, unique=job.unique) for job in appended
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write(appends[:4])  # a batch of several
            for append in appends[4:]:
                await journal.write([append])
            for when in ("as written", "after a reopen"):
                for args, expected in cases:
                    _expect(list(await journal.load(*args)), expected, f"load{args} {when}")
                await session.reopen()

    async def test_load_sees_every_write_that_returned_before_it(self, journal: Journal) -> None:
        """load leaves out a job completed or discarded, shows its latest attempt mark, and includes a new Append."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key="k", data=b"%d" % n) for n in range(1, 6)])
            await journal.write([MarkAttempt(1, 1)])
            await journal.write([Complete(1), MarkAttempt(2, 1)])  # done, and the next started
            await journal.write([MarkAttempt(2, 2)])
            await journal.write([Discard(3, "ValueError: boom")])
            loaded = await journal.load("k", 0, 10)
            _expect([(job.id, job.attempts) for job in loaded], [(2, 2), (4, 0), (5, 0)], "loaded")

            await journal.write([Append(job_id=6, key="k", data=b"6"), MarkAttempt(4, 1)])
            await journal.write([MarkAttempt(2, 1)])  # attempt 2 given back on shutdown
            loaded = await journal.load("k", 0, 10)
            _expect(
                [(job.id, job.attempts) for job in loaded],
                [(2, 1), (4, 1), (5, 0), (6, 0)],
                "loaded",
            )
            _expect([job.id for job in await journal.load("k", 5, 10)], [6], "load after 5")

            await journal.write([Complete(2), Complete(4), Complete(5), Discard(6, "boom")])
            _expect(list(await journal.load("k", 0, 10)), [], "load once every job ended")

    async def test_load_when_not_open_raises(self, journal: Journal) -> None:
        """A load before the first open or after aclose raises JournalError."""
        async with _session(journal) as session:
            await _raises(JournalError, journal.load("k", 0, 10))
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1")])
            await session.close()
            await _raises(JournalError, journal.load("k", 0, 10))

    async def test_load_is_a_cancellation_point(self, journal: Journal) -> None:
        """A load in a cancelled scope raises trio.Cancelled."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1")])
            returned = False
            with trio.CancelScope() as scope:
                scope.cancel()
                await journal.load("k", 0, 10)
                returned = True
            assert not returned, "load returned in a cancelled scope"
            _expect([job.id for job in await journal.load("k", 0, 10)], [1], "loaded job ids")

    async def test_open_returns_each_keys_head_and_a_backlog_load_pages_in(
        self, journal: Journal
    ) -> None:
        """open's own Recovery holds every keyless job and each key's oldest jobs, and each key's Backlog counts exactly what load pages in behind them."""
        keys = ["long"] * 50 + ["short"] * 3 + ["gone"] * 2 + [None] * 3 + ["single"]
        order = [keys[(n * 7) % len(keys)] for n in range(len(keys))]  # interleaved
        appended = [
            StoredJob(id=n, key=key, data=b"%d" % n, unique=f"u-{n}" if n % 5 == 0 else None)
            for n, key in enumerate(order, start=1)
        ]
        ids_of = {key: [job.id for job in appended if job.key == key] for key in set(keys)}
        # every job of "gone", and the oldest of "long" (two) and "short": heads move on
        ended = {*ids_of["gone"], *ids_of["long"][:2], ids_of["short"][0]}
        unfinished = [job for job in appended if job.id not in ended]
        by_key: dict[str, list[StoredJob]] = {}
        for job in unfinished:
            if job.key is not None:
                by_key.setdefault(job.key, []).append(job)

        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=job.id, key=job.key, data=job.data, unique=job.unique)
                    for job in appended
                ]
            )
            await journal.write([Complete(job_id) for job_id in sorted(ended)])
            await journal.write([Halt("short")])
            await session.close()
            recovery = await journal.open()  # the raw Recovery, backlogs not paged in
            session.is_open = True

            jobs = list(recovery.jobs)
            ids = [job.id for job in jobs]
            _expect(ids, sorted(set(ids)), "Recovery.jobs ids (rising, no repeats)")
            _expect(
                [job for job in jobs if job.key is None],
                [job for job in unfinished if job.key is None],
                "keyless jobs in Recovery.jobs",
            )
            _expect(set(recovery.backlog) - set(by_key), set(), "Backlog keys without jobs")
            for key, pending in by_key.items():
                held = [job for job in jobs if job.key == key]
                assert held, f"Recovery.jobs holds none of {key!r}'s unfinished jobs"
                _expect(held, pending[: len(held)], f"{key!r}'s jobs in Recovery.jobs")
                rest = pending[len(held) :]
                backlog = recovery.backlog.get(key)
                if not rest:
                    _expect(backlog, None, f"Recovery.backlog for {key!r}, all in Recovery.jobs")
                    continue
                assert backlog is not None, f"Recovery.backlog leaves out {key!r}'s other jobs"
                _expect(
                    (backlog.count, backlog.last_id),
                    (len(rest), rest[-1].id),
                    f"{key!r}'s Backlog (count, last id)",
                )
                paged: list[StoredJob] = []
                for _ in range(len(rest) + 1):  # a journal that never runs out fails here
                    page = list(await journal.load(key, (held + paged)[-1].id, 7))
                    if not page:
                        break
                    paged.extend(page)
                _expect(paged, rest, f"{key!r}'s jobs paged in behind Recovery.jobs")
            _expect(recovery.halted, frozenset({"short"}), "halted keys")
            assert recovery.next_id > len(appended), f"next_id {recovery.next_id} reuses an id"


# -- what an operator reads --------------------------------------------------

_NOW = 2_000_000_000.0
"""The *now* the tests pass to ``keys``: any Unix time after the jobs were accepted."""

_View: TypeAlias = tuple[list[KeyInfo], list[JobInfo | None], list[JobInfo]]


async def _view(journal: Journal, ids: Sequence[int]) -> _View:
    """Everything an operator reads: all keys, the jobs *ids*, all dead letters."""
    return (
        await journal.keys(limit=10_000, now=_NOW),
        [await journal.job(job_id) for job_id in ids],
        await journal.dead_letters(limit=10_000),
    )


async def _info(journal: Journal, job_id: int) -> JobInfo:
    info = await journal.job(job_id)
    assert info is not None, f"job({job_id}) returned None for an unfinished job or dead letter"
    return info


async def _key(journal: Journal, key: str, head_id: int, queued: int, halted: bool) -> KeyInfo:
    """The `KeyInfo` for *key*, built from what ``job`` says of its head."""
    head = await _info(journal, head_id)
    return KeyInfo(
        key=key,
        queued=queued,
        halted=halted,
        head_job_id=head_id,
        head_state=head.state,
        head_attempt=head.attempts,
        head_age=_NOW - head.accepted_at,
        next_retry_at=head.retry_at,
        last_error=head.last_error,
    )


def _idle(key: str) -> KeyInfo:
    """The `KeyInfo` of a halted key without unfinished jobs."""
    return KeyInfo(
        key=key,
        queued=0,
        halted=True,
        head_job_id=None,
        head_state=None,
        head_attempt=None,
        head_age=None,
        next_retry_at=None,
        last_error=None,
    )


class OperatorReadsConformance:
    """Tests of what an operator reads from every `inturn.Journal`; mix into a test class.

    Covers ``keys``, ``job`` and ``dead_letters``, and the `Retrying` and
    `Purge` changes they show, through the protocol only, with the same
    ``journal`` fixture as `JournalConformance` (mix in both)::

        class TestMyJournal(JournalConformance, OperatorReadsConformance):
            ...

    Times a journal stamps (``accepted_at``, ``finished_at``) are checked
    against the wall clock around the write; everything else exactly, before
    and after a reopen.
    """

    async def test_job_state_follows_attempts_retries_and_discard(self, journal: Journal) -> None:
        """job() is queued once appended, running once marked, retrying after Retrying until the next MarkAttempt (last error kept), and dead with the Discard's error and no retry time."""
        async with _session(journal) as session:
            await session.open()
            before = time.time()
            await journal.write([Append(job_id=1, key="k", data=b"\x00data", unique="u")])
            after = time.time()
            info = await _info(journal, 1)
            assert before <= info.accepted_at <= after, (
                f"accepted_at {info.accepted_at} is not the time of the Append"
                f" ({before} to {after})"
            )
            expected = JobInfo(
                id=1,
                key="k",
                state="queued",
                attempts=0,
                unique="u",
                accepted_at=info.accepted_at,
                finished_at=None,
                last_error=None,
                retry_at=None,
                data=b"\x00data",
            )
            _expect(info, expected, "job(1) once appended")
            steps: list[tuple[Change, dict[str, Any]]] = [
                (MarkAttempt(1, 1), {"state": "running", "attempts": 1}),
                (
                    Retrying(1, "ValueError: one", 1_000.5),
                    {"state": "retrying", "last_error": "ValueError: one", "retry_at": 1_000.5},
                ),
                (MarkAttempt(1, 2), {"state": "running", "attempts": 2, "retry_at": None}),
                (MarkAttempt(1, 1), {"state": "running", "attempts": 1}),  # given back
                (
                    Retrying(1, "ValueError: two", 2_000.0),
                    {"state": "retrying", "last_error": "ValueError: two", "retry_at": 2_000.0},
                ),
            ]
            for change, fields in steps:
                await journal.write([change])
                expected = attrs.evolve(expected, **fields)
                _expect(await journal.job(1), expected, f"job(1) after {change}")
                await session.reopen()
                _expect(await journal.job(1), expected, f"job(1) after {change} and a reopen")

            before = time.time()
            await journal.write([Discard(1, "ValueError: three")])
            after = time.time()
            dead = await _info(journal, 1)
            assert dead.finished_at is not None, "a dead letter has no finished_at"
            assert before <= dead.finished_at <= after, (
                f"finished_at {dead.finished_at} is not the time of the Discard"
                f" ({before} to {after})"
            )
            expected = attrs.evolve(
                expected,
                state="dead",
                last_error="ValueError: three",
                retry_at=None,
                finished_at=dead.finished_at,
            )
            _expect(dead, expected, "job(1) once discarded")
            await session.reopen()
            _expect(await journal.job(1), expected, "job(1) discarded, after a reopen")

    async def test_retrying_names_an_unfinished_job(self, journal: Journal) -> None:
        """A Retrying of an unknown, completed or discarded job raises JournalError and changes nothing, alone or in a batch."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key="k", data=b"%d" % n) for n in (1, 2, 3)])
            await journal.write([Complete(2)])
            await journal.write([Discard(3, "ValueError: boom")])
            before = await _view(journal, [1, 2, 3])
            for job_id in (99, 2, 3):
                bad = Retrying(job_id, "ValueError: late", 1.0)
                await _raises(JournalError, journal.write([bad]))
                await _raises(JournalError, journal.write([MarkAttempt(1, 1), bad]))
                _expect(await _view(journal, [1, 2, 3]), before, f"the journal after {bad}")
            await session.reopen()
            _expect(await _view(journal, [1, 2, 3]), before, "the journal after a reopen")

    async def test_purge_deletes_a_dead_letter_and_nothing_else(self, journal: Journal) -> None:
        """Purge of a dead letter deletes it for good (its id stays used); of any other job it raises JournalError and changes nothing."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key="k", data=b"%d" % n) for n in (1, 2, 3, 4)])
            await journal.write([Discard(1, "ValueError: boom")])
            await journal.write([Complete(2)])
            await journal.write([MarkAttempt(4, 1)])
            before = await _view(journal, [1, 2, 3, 4])
            for job_id in (2, 3, 4, 99):  # completed, queued, running, unknown
                await _raises(JournalError, journal.write([Purge(job_id)]))
                _expect(await _view(journal, [1, 2, 3, 4]), before, f"after Purge({job_id})")

            await journal.write([Purge(1)])
            _expect(await journal.job(1), None, "job(1) once purged")
            _expect(await journal.dead_letters(), [], "dead letters once purged")
            recovery = await session.reopen()
            _expect(await journal.job(1), None, "job(1) once purged, after a reopen")
            _expect([job.id for job in recovery.jobs], [3, 4], "replayed job ids")
            await _raises(JournalError, journal.write([Purge(1)]))  # gone already
            await _raises(JournalError, journal.write([Append(job_id=1, key="k", data=b"")]))

    async def test_batches_with_retrying_or_purge_are_all_or_nothing(
        self, journal: Journal
    ) -> None:
        """A batch with an illegal Retrying or Purge (or one made illegal by an earlier change in it) applies nothing; legal ones apply in order."""
        illegal: list[tuple[list[Change], type[Exception]]] = [
            ([Retrying(1, "E", 1.0), Purge(1)], JournalError),  # 1 is not dead
            ([Purge(2), Purge(2)], JournalError),  # purged already
            ([Append(job_id=9, key="k", data=b"", unique="new"), Purge(99)], JournalError),
            ([Discard(1, "E"), Purge(1), Purge(1)], JournalError),
            ([Complete(1), Retrying(1, "E", 1.0)], JournalError),  # finished already
            ([Purge(2), MarkAttempt(2, 1)], JournalError),
            ([Purge(2), Retrying(2, "E", 1.0)], JournalError),
            ([Purge(2), Append(job_id=9, key="k", data=b"", unique="held")], DuplicateError),
        ]
        ids = [1, 2, 3, 9, 10]
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1", unique="held"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key="j", data=b"3"),
                ]
            )
            await journal.write([Discard(2, "ValueError: boom")])
            before = await _view(journal, ids)
            replayed = _state(await session.reopen())
            for batch, error in illegal:
                await _raises(error, journal.write(batch))
                _expect(await _view(journal, ids), before, f"the journal after refusing {batch}")
                _expect(_state(await session.reopen()), replayed, f"a reopen after {batch}")

            # a requeue: the dead letter's payload appended anew, and the dead letter purged
            await journal.write([Append(job_id=9, key="k", data=b"2"), Purge(2)])
            # a whole life in one batch, down to a purge
            await journal.write(
                [
                    MarkAttempt(3, 1),
                    Retrying(3, "E", 1.0),
                    MarkAttempt(3, 2),
                    Discard(3, "E2"),
                    Purge(3),
                    Append(job_id=10, key="j", data=b"10"),
                    MarkAttempt(10, 1),
                    Retrying(10, "E3", 5.0),
                ]
            )
            for when in ("as written", "after a reopen"):
                _expect(await journal.job(2), None, f"job(2), purged, {when}")
                _expect(await journal.job(3), None, f"job(3), purged, {when}")
                _expect(
                    [(k.key, k.head_job_id, k.head_state) for k in await journal.keys(now=_NOW)],
                    [("k", 1, "queued"), ("j", 10, "retrying")],
                    f"keys (key, head id, head state) {when}",
                )
                info = await _info(journal, 10)
                _expect((info.last_error, info.retry_at), ("E3", 5.0), f"job(10) {when}")
                _expect(await journal.dead_letters(), [], f"dead letters {when}")
                await session.reopen()

    async def test_keys_lists_each_key_by_its_oldest_head(self, journal: Journal) -> None:
        """keys() has one entry per key with unfinished jobs, oldest head first, then halted keys without jobs by key; keyless jobs and keys left with only dead letters are not keys."""
        placed: list[tuple[int, str | None]] = [
            (1, "a"),
            (2, "b"),
            (3, None),
            (4, "a"),
            (5, "c"),
            (6, "b"),
            (7, "d"),
            (8, "c"),
            (9, "e"),
            (10, "a"),
            (11, "f"),
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key=key, data=b"") for n, key in placed])
            await journal.write([Complete(1)])  # a's head moves on, behind b's
            await journal.write([Discard(5, "ValueError: c"), Discard(7, "ValueError: d")])
            await journal.write([Discard(11, "ValueError: f")])  # f: only a dead letter
            await journal.write([Halt("z"), Halt("e"), Halt("y"), Halt("d")])
            await journal.write([MarkAttempt(2, 1), Retrying(2, "ValueError: b", 50.0)])
            await journal.write([MarkAttempt(4, 1), MarkAttempt(3, 1)])
            for when in ("as written", "after a reopen"):
                expected = [
                    await _key(journal, "b", 2, queued=2, halted=False),
                    await _key(journal, "a", 4, queued=2, halted=False),
                    await _key(journal, "c", 8, queued=1, halted=False),
                    await _key(journal, "e", 9, queued=1, halted=True),
                    _idle("d"),  # its only job is a dead letter
                    _idle("y"),
                    _idle("z"),
                ]
                _expect(await journal.keys(now=_NOW), expected, f"keys() {when}")
                _expect(
                    [(k.head_state, k.next_retry_at, k.last_error) for k in expected[:2]],
                    [("retrying", 50.0, "ValueError: b"), ("running", None, None)],
                    f"the heads of b and a (state, next retry, last error) {when}",
                )
                later = await journal.keys(now=_NOW + 60)
                _expect(
                    [k.head_age for k in later],
                    [k.head_age + 60 if k.head_age is not None else None for k in expected],
                    f"head ages a minute later {when}",
                )
                await session.reopen()

    async def test_keys_filters_by_the_state_of_the_head_and_halts(self, journal: Journal) -> None:
        """keys(state=...) keeps "blocked" keys (head retrying, or halted), "running" ones (head running) and "halted" ones; a job behind the head does not count."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="retrying", data=b""),
                    Append(job_id=2, key="running", data=b""),
                    Append(job_id=3, key="queued", data=b""),
                    Append(job_id=4, key="halted-running", data=b""),
                    Append(job_id=5, key="halted-queued", data=b""),
                    Append(job_id=6, key="retried", data=b""),
                    Append(job_id=7, key=None, data=b""),  # keyless: in no list
                    Append(job_id=8, key="queued", data=b""),
                ]
            )
            await journal.write(
                [
                    MarkAttempt(1, 1),
                    Retrying(1, "E", 10.0),
                    MarkAttempt(2, 1),
                    MarkAttempt(4, 2),
                    MarkAttempt(6, 1),
                    Retrying(6, "E", 10.0),
                    MarkAttempt(6, 2),  # running again
                    MarkAttempt(7, 1),
                    Retrying(7, "E", 10.0),
                    MarkAttempt(8, 1),  # behind queued's head
                    Retrying(8, "E", 10.0),
                    Halt("halted-running"),
                    Halt("halted-queued"),
                    Halt("halted-empty"),
                ]
            )
            every = [
                "retrying",
                "running",
                "queued",
                "halted-running",
                "halted-queued",
                "retried",
                "halted-empty",
            ]
            expected: dict[KeyFilter | None, list[str]] = {
                None: every,
                "blocked": ["retrying", "halted-running", "halted-queued", "halted-empty"],
                "running": ["running", "halted-running", "retried"],
                "halted": ["halted-running", "halted-queued", "halted-empty"],
            }
            for when in ("as written", "after a reopen"):
                everything = {k.key: k for k in await journal.keys(now=_NOW)}
                _expect(list(everything), every, f"keys() {when}")
                for state, keys in expected.items():
                    _expect(
                        await journal.keys(state=state, now=_NOW),
                        [everything[key] for key in keys],
                        f"keys(state={state!r}) {when}",
                    )
                await session.reopen()

    async def test_keys_returns_at_most_limit(self, journal: Journal) -> None:
        """keys(limit=n) is the first n of the full list, halted keys without jobs included, with or without a state filter."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key=f"k{n}", data=b"") for n in range(1, 6)])
            await journal.write([Halt("idle-1"), Halt("idle-2"), Halt("k2"), Halt("k4")])
            full = await journal.keys(now=_NOW)
            _expect(len(full), 7, "how many keys keys() lists")
            for limit in (1, 2, 5, 6, 7, 8, 100, 2**70):
                _expect(await journal.keys(limit=limit, now=_NOW), full[:limit], f"limit={limit}")
            halted = await journal.keys(state="halted", now=_NOW)
            _expect([k.key for k in halted], ["k2", "k4", "idle-1", "idle-2"], "halted keys")
            for limit in (1, 2, 3):
                _expect(
                    await journal.keys(state="halted", limit=limit, now=_NOW),
                    halted[:limit],
                    f"state='halted', limit={limit}",
                )

    async def test_job_is_none_unless_unfinished_or_dead(self, journal: Journal) -> None:
        """job() of an id never used, of a completed job or of a purged one is None; of a keyless job it has key None."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key=None, data=b"3"),
                ]
            )
            await journal.write([Complete(1), Discard(2, "ValueError: boom")])
            await journal.write([Purge(2)])
            for when in ("as written", "after a reopen"):
                for job_id in (1, 2, 4, 0, -1, 2**70):
                    _expect(await journal.job(job_id), None, f"job({job_id}) {when}")
                info = await _info(journal, 3)
                _expect((info.key, info.state, info.data), (None, "queued", b"3"), "job(3)")
                await session.reopen()

    async def test_dead_letters_filters_by_key_id_and_time(self, journal: Journal) -> None:
        """dead_letters() lists dead letters in id order as job() shows them: of one key, above an id, discarded before a time, at most limit."""
        placed: list[tuple[int, str | None]] = [
            (1, "a"),
            (2, "b"),
            (3, "a"),
            (4, "a"),
            (5, None),
            (6, "b"),
            (7, "a"),
            (8, "a"),
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key=key, data=b"%d" % n) for n, key in placed])
            await journal.write([MarkAttempt(4, 1), Retrying(4, "E", 1.0)])
            for job_id in (7, 2, 4, 1, 5):  # not in id order
                await journal.write([Discard(job_id, f"ValueError: {job_id}")])
            await journal.write([Complete(8)])  # 3 and 6 stay unfinished
            for when in ("as written", "after a reopen"):
                dead = [await _info(journal, job_id) for job_id in (1, 2, 4, 5, 7)]
                of_a = [info for info in dead if info.key == "a"]
                cases: list[tuple[dict[str, Any], list[JobInfo]]] = [
                    ({}, dead),
                    ({"key": "a"}, of_a),
                    ({"key": "nobody"}, []),
                    ({"after": 1}, dead[1:]),
                    ({"after": 3}, dead[2:]),  # an unfinished job's id
                    ({"after": 4, "key": "a"}, of_a[2:]),
                    ({"after": 7}, []),
                    ({"after": 2**70}, []),
                    ({"limit": 2}, dead[:2]),
                    ({"limit": 2, "after": 2}, dead[2:4]),
                    ({"limit": 1, "key": "a", "after": 1}, of_a[1:2]),
                    ({"limit": 2**70}, dead),
                ]
                times = sorted({info.finished_at or 0.0 for info in dead})
                for before in [times[0] - 1, *times, times[-1] + 1]:
                    older = [info for info in dead if (info.finished_at or 0.0) < before]
                    cases += [
                        ({"finished_before": before}, older),
                        (
                            {"finished_before": before, "key": "a"},
                            [i for i in older if i.key == "a"],
                        ),
                        ({"finished_before": before, "limit": 1}, older[:1]),
                    ]
                for kwargs, expected in cases:
                    _expect(
                        await journal.dead_letters(**kwargs),
                        expected,
                        f"dead_letters({kwargs}) {when}",
                    )
                paged: list[JobInfo] = []
                while page := await journal.dead_letters(
                    limit=2, after=paged[-1].id if paged else 0
                ):
                    paged.extend(page)
                _expect(paged, dead, f"dead letters paged two at a time {when}")
                _expect(
                    [(info.state, info.last_error, info.retry_at) for info in dead[2:3]],
                    [("dead", "ValueError: 4", None)],
                    f"dead letter 4, discarded while retrying, {when}",
                )
                await session.reopen()

    async def test_bad_arguments_raise_and_change_nothing(self, journal: Journal) -> None:
        """keys, job and dead_letters raise TypeError or ValueError for a bad argument, and the journal stays as it was."""
        loose: Any = journal  # to pass what the signatures forbid
        bad: list[tuple[str, Callable[[], Awaitable[object]], type[Exception]]] = [
            ("keys(state='stuck')", lambda: loose.keys(state="stuck", now=_NOW), ValueError),
            ("keys(state='BLOCKED')", lambda: loose.keys(state="BLOCKED", now=_NOW), ValueError),
            ("keys(state=1)", lambda: loose.keys(state=1, now=_NOW), ValueError),
            ("keys(limit=0)", lambda: loose.keys(limit=0, now=_NOW), ValueError),
            ("keys(limit=-1)", lambda: loose.keys(limit=-1, now=_NOW), ValueError),
            ("keys(limit=1.5)", lambda: loose.keys(limit=1.5, now=_NOW), TypeError),
            ("keys(limit=True)", lambda: loose.keys(limit=True, now=_NOW), TypeError),
            ("keys(limit='3')", lambda: loose.keys(limit="3", now=_NOW), TypeError),
            ("keys(limit=None)", lambda: loose.keys(limit=None, now=_NOW), TypeError),
            ("keys(now='now')", lambda: loose.keys(now="now"), TypeError),
            ("keys(now=None)", lambda: loose.keys(now=None), TypeError),
            ("keys(now=True)", lambda: loose.keys(now=True), TypeError),
            ("keys(now=nan)", lambda: loose.keys(now=math.nan), ValueError),
            ("keys(now=inf)", lambda: loose.keys(now=math.inf), ValueError),
            ("job('1')", lambda: loose.job("1"), TypeError),
            ("job(1.0)", lambda: loose.job(1.0), TypeError),
            ("job(True)", lambda: loose.job(True), TypeError),
            ("job(None)", lambda: loose.job(None), TypeError),
            ("dead_letters(key=1)", lambda: loose.dead_letters(key=1), TypeError),
            ("dead_letters(key=b'k')", lambda: loose.dead_letters(key=b"k"), TypeError),
            ("dead_letters(limit=0)", lambda: loose.dead_letters(limit=0), ValueError),
            ("dead_letters(limit=2.0)", lambda: loose.dead_letters(limit=2.0), TypeError),
            ("dead_letters(after=-1)", lambda: loose.dead_letters(after=-1), ValueError),
            ("dead_letters(after='0')", lambda: loose.dead_letters(after="0"), TypeError),
            ("dead_letters(after=1.0)", lambda: loose.dead_letters(after=1.0), TypeError),
            (
                "dead_letters(finished_before='x')",
                lambda: loose.dead_letters(finished_before="x"),
                TypeError,
            ),
            (
                "dead_letters(finished_before=True)",
                lambda: loose.dead_letters(finished_before=True),
                TypeError,
            ),
            (
                "dead_letters(finished_before=nan)",
                lambda: loose.dead_letters(finished_before=math.nan),
                ValueError,
            ),
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1"), Halt("h")])
            await journal.write([Append(job_id=2, key="k", data=b"2"), Discard(2, "boom")])
            before = await _view(journal, [1, 2])
            for what, call, error in bad:
                try:
                    await call()
                except error:
                    pass
                else:
                    raise AssertionError(f"{what} raised no {error.__name__}")
                _expect(await _view(journal, [1, 2]), before, f"the journal after {what}")
            await session.reopen()
            _expect(await _view(journal, [1, 2]), before, "the journal after a reopen")

    async def test_reads_when_not_open_raise(self, journal: Journal) -> None:
        """keys, job and dead_letters before the first open or after aclose raise JournalError."""
        async with _session(journal) as session:
            await _raises(JournalError, journal.keys(now=_NOW))
            await _raises(JournalError, journal.job(1))
            await _raises(JournalError, journal.dead_letters())
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1"), Discard(1, "boom")])
            await session.close()
            await _raises(JournalError, journal.keys(now=_NOW))
            await _raises(JournalError, journal.job(1))
            await _raises(JournalError, journal.dead_letters())

    async def test_reads_are_cancellation_points(self, journal: Journal) -> None:
        """keys, job and dead_letters in a cancelled scope raise trio.Cancelled."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1")])
            reads: list[Callable[[], Awaitable[object]]] = [
                lambda: journal.keys(now=_NOW),
                lambda: journal.job(1),
                lambda: journal.dead_letters(),
            ]
            for read in reads:
                returned = False
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await read()
                    returned = True
                assert not returned, f"{read} returned in a cancelled scope"
            _expect([k.key for k in await journal.keys(now=_NOW)], ["k"], "keys() after")
