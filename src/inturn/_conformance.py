"""The journal conformance kit: the tests every `inturn.Journal` must pass.

`BasicConformance` is half of `JournalConformance` (the other half, the
journal as arbiter, is in `_conformance_arbiter`); `inturn.testing`
re-exports that with `unfinished_jobs`.  The helpers here
(opening and reopening a journal, paging its backlogs in) serve the operator
reads kit in `_conformance_reads` too.  Like `inturn.testing`, this module
imports no pytest: a journal author's suite needs only the fixture.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeAlias, TypeVar

import attrs
import trio

from .errors import DuplicateError, JournalError
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
    StoredJob,
)

__all__ = ["BasicConformance", "unfinished_jobs"]


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
    places = [job.place for job in jobs]
    _expect(places, sorted(set(places)), "Recovery.jobs places (rising, no repeats)")
    for key, backlog in recovery.backlog.items():
        known = [job.place for job in jobs if job.key == key]
        assert known, f"Recovery.backlog names {key!r}, but Recovery.jobs has none of its jobs"
        rest: list[StoredJob] = []
        for _ in range(backlog.count + 1):  # a load that never runs out fails, not hangs
            page = await journal.load(key, known[-1] if not rest else rest[-1].place, 2)
            if not page:
                break
            assert len(page) <= 2, f"load({key!r}, ..., 2) returned {len(page)} jobs"
            rest.extend(page)
        _expect(
            (len(rest), rest[-1].place if rest else None),
            (backlog.count, backlog.last_id),
            f"jobs paged in for {key!r} (count, last place) against its Backlog",
        )
        assert all(job.key == key for job in rest), f"load({key!r}) returned another key's job"
        jobs.extend(rest)
    jobs.sort(key=lambda job: job.place)
    return Recovery(
        next_id=recovery.next_id, jobs=jobs, halted=recovery.halted, scheduled=recovery.scheduled
    )


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


class BasicConformance:
    """Appends, replay, unique keys, ids, halts, batches, paging (see `JournalConformance`)."""

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

    async def test_unique_for_reserves_the_key_after_its_job_finishes(
        self, journal: Journal
    ) -> None:
        """With unique_for, a completed or discarded job's unique key stays reserved until the writer's now passes its finish plus the window, across a reopen, a purge and within a batch; DuplicateError names the job and the time."""

        async def refused(unique: str, now: float | None) -> DuplicateError:
            return await _raises(
                DuplicateError,
                journal.write([Append(job_id=99, key="z", data=b"", unique=unique)], now=now),
            )

        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [Append(job_id=1, key="a", data=b"1", unique="u", unique_for=60.0)], now=1_000.0
            )
            error = await refused("u", 1_005.0)
            _expect((error.job_id, error.until), (1, None), "held by the unfinished job")
            await journal.write([Complete(1)], now=1_010.0)
            for when in ("as written", "after a reopen"):
                error = await refused("u", 1_069.5)
                _expect(
                    (error.unique, error.job_id, error.until),
                    ("u", 1, 1_070.0),
                    f"DuplicateError of a completed job's key {when}",
                )
                await session.reopen()

            await journal.write(
                [Append(job_id=2, key="b", data=b"2", unique="v", unique_for=30.0)], now=2_000.0
            )
            await journal.write([Discard(2, "ValueError: boom")], now=2_000.0)
            await journal.write([Purge(2)], now=2_001.0)  # the reservation outlives its row
            error = await refused("v", 2_029.0)
            _expect((error.job_id, error.until), (2, 2_030.0), "after its dead letter's purge")

            # a window ends at its time exactly, also for a key taken in the same batch
            batch: list[Change] = [
                Append(job_id=3, key="a", data=b"3", unique="u"),
                Append(job_id=4, key="c", data=b"4", unique="w", unique_for=10.0),
                Complete(4),
                Append(job_id=5, key="c", data=b"5", unique="w"),
            ]
            error = await _raises(DuplicateError, journal.write(batch, now=1_070.0))
            _expect((error.unique, error.job_id, error.until), ("w", 4, 1_080.0), "in one batch")
            await journal.write(batch[:3], now=1_070.0)
            await journal.write([Append(job_id=6, key="b", data=b"6", unique="v")], now=2_030.0)
            await journal.write([Append(job_id=7, key="c", data=b"7", unique="w")], now=1_080.0)
            recovery = await session.reopen()

            # without now, the journal's own clock dates and judges it
            await journal.write(
                [Append(job_id=8, key="d", data=b"8", unique="x", unique_for=3_600.0)]
            )
            before = time.time()
            await journal.write([Complete(8)])
            error = await refused("x", None)
            assert error.until is not None, "a reservation after a Complete without now"
            assert before + 3_600 <= error.until <= time.time() + 3_600, (
                f"until {error.until} is not an hour after the Complete"
            )
        _expect(
            [(job.id, job.unique) for job in recovery.jobs],
            [(3, "u"), (6, "v"), (7, "w")],
            "replayed",
        )

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
