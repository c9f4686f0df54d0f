"""The journal as arbiter: the kit's tests of first-commit-wins.

Every change to a job is a compare-and-set on its state, decided by the
journal (see `inturn.journal.records`): one that finds its job finished, or
its key halted for a start, is *superseded* and returned by ``write`` while
the rest of the batch applies.  These tests pin that down, with two writers
in flight at once, and are mixed into `JournalConformance`.
"""

from __future__ import annotations

import trio

from ._conformance import BasicConformance, _expect, _raises, _replayed, _session, _state
from ._conformance_recurring import RecurringConformance
from ._conformance_schedule import ScheduleConformance
from ._conformance_steps import StepConformance, TransactionConformance
from ._conformance_trace import TraceConformance
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
    Requeue,
    Resume,
    Retrying,
    Revive,
)

__all__ = ["ArbiterConformance", "JournalConformance"]


def _job(job_id: int, key: str | None = "k", unique: str | None = None) -> Append:
    return Append(job_id=job_id, key=key, data=b"%d" % job_id, unique=unique)


class ArbiterConformance:
    """Superseded changes, halted starts, `Requeue`, and writers racing."""

    async def test_a_change_to_a_finished_job_is_superseded(self, journal: Journal) -> None:
        """A change to a completed or discarded job is returned, not applied; the rest of its batch applies."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), _job(2), _job(3)])
            await journal.write([Complete(2)])
            await journal.write([Discard(3, "E: first")])
            late: list[Change] = [
                MarkAttempt(2, 1),
                Retrying(2, "E", 1.0),
                Complete(2),
                Discard(2, "E", halt=True),
                MarkAttempt(3, 1),
                Retrying(3, "E", 1.0),
                Complete(3),
                Discard(3, "E: again"),
            ]
            for change in late:
                _expect(list(await journal.write([change])), [change], f"write([{change}])")
                batch = [MarkAttempt(1, 1), change, Halt("x")]
                _expect(list(await journal.write(batch)), [change], f"write({batch})")
            recovery = await session.reopen()
            dead = await journal.dead_letters()
        _expect([(job.id, job.attempts) for job in recovery.jobs], [(1, 1)], "replayed")
        _expect(recovery.halted, frozenset({"x"}), "halted keys (a superseded halt halts nothing)")
        _expect([(info.id, info.last_error) for info in dead], [(3, "E: first")], "dead letters")

    async def test_a_change_to_a_job_never_appended_is_refused(self, journal: Journal) -> None:
        """A change naming an id never appended is a bug, not a race: JournalError, nothing applied."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1)])
            before = _state(await session.reopen())
            for change in (MarkAttempt(7, 1), Complete(7), Discard(7, "E"), Purge(7)):
                await _raises(JournalError, journal.write([change]))
                await _raises(JournalError, journal.write([Halt("x"), MarkAttempt(1, 1), change]))
                _expect(_state(await session.reopen()), before, f"the journal after {change}")

    async def test_a_start_on_a_halted_key_is_superseded(self, journal: Journal) -> None:
        """A MarkAttempt raising a job's attempts is superseded while its key is halted; one giving an attempt back is not."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), _job(2, key=None), MarkAttempt(1, 1), Halt("k")])
            start = MarkAttempt(1, 2)
            _expect(list(await journal.write([start])), [start], "a start on a halted key")
            give_back = MarkAttempt(1, 0)
            _expect(list(await journal.write([give_back])), [], "a give-back on a halted key")
            _expect(list(await journal.write([MarkAttempt(2, 1)])), [], "a keyless start")
            again = MarkAttempt(1, 1)
            batch: list[Change] = [Resume("k"), again, Halt("k"), MarkAttempt(1, 2)]
            _expect(list(await journal.write(batch)), [batch[-1]], f"write({batch})")
            recovery = await session.reopen()
        _expect([(job.id, job.attempts) for job in recovery.jobs], [(1, 1), (2, 1)], "replayed")
        _expect(recovery.halted, frozenset({"k"}), "halted keys")

    async def test_the_runtimes_two_batch_shapes_are_arbitrated(self, journal: Journal) -> None:
        """Append + its start, and Complete + the next start, on a halted key: the start is superseded, the rest applies."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), _job(2), Halt("k")])
            start = MarkAttempt(3, 1)
            _expect(list(await journal.write([_job(3), start])), [start], "Append + its start")
            late = MarkAttempt(2, 1)
            _expect(list(await journal.write([Complete(1), late])), [late], "Complete + next")
            gone = Complete(1)
            batch: list[Change] = [gone, MarkAttempt(2, 0)]
            _expect(list(await journal.write(batch)), [gone], "a Complete of a gone job")
            await journal.write([Resume("k")])
            _expect(list(await journal.write([_job(4, key="j"), MarkAttempt(4, 1)])), [], "j")
            _expect(list(await journal.write([Complete(2), MarkAttempt(3, 1)])), [], "resumed")
            recovery = await session.reopen()
        _expect([(job.id, job.attempts) for job in recovery.jobs], [(3, 1), (4, 1)], "replayed")

    async def test_a_discard_with_halt_halts_its_key(self, journal: Journal) -> None:
        """Discard(halt=True) halts the job's key in the same step; a superseded one halts nothing."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1, key="a"), _job(2, key="b"), _job(3, key=None)])
            await journal.write([Complete(2)])
            late = Discard(2, "E", halt=True)
            _expect(list(await journal.write([late])), [late], "a discard of a completed job")
            await journal.write([Discard(1, "E", halt=True), Discard(3, "E", halt=True)])
            recovery = await session.reopen()
        _expect(recovery.halted, frozenset({"a"}), "halted keys")

    async def test_requeue_puts_a_dead_letter_back_in_one_step(self, journal: Journal) -> None:
        """Requeue turns a dead letter into a new unfinished job (same key, data, unique; no attempts)."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1, unique="u"), MarkAttempt(1, 1), Discard(1, "E")])
            _expect(list(await journal.write([Requeue(1, 5)])), [], "a requeue")
            again = Requeue(1, 6)
            _expect(list(await journal.write([again])), [again], "the same requeue again")
            await _raises(DuplicateError, journal.write([_job(7, unique="u")]))
            recovery = await session.reopen()
            _expect(await journal.job(1), None, "job(1), requeued")
            info = await journal.job(5)
        _expect(
            [(job.id, job.key, job.data, job.unique, job.attempts) for job in recovery.jobs],
            [(5, "k", b"1", "u", 0)],
            "replayed",
        )
        _expect(recovery.next_id, 6, "next id (a superseded requeue takes none)")
        _expect(info is not None and info.state, "queued", "job(5)'s state")

    async def test_requeue_is_refused_for_a_held_unique_or_a_used_id(
        self, journal: Journal
    ) -> None:
        """Requeue raises DuplicateError while an unfinished job holds its unique key, and JournalError for a used id; nothing changes."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1, unique="u"), Discard(1, "E"), _job(2, unique="u")])
            before = _state(await session.reopen())
            error = await _raises(DuplicateError, journal.write([Requeue(1, 3)]))
            _expect(error.job_id, 2, "DuplicateError's job_id")
            await _raises(JournalError, journal.write([Requeue(1, 2)]))
            await _raises(JournalError, journal.write([Complete(2), Requeue(1, 2)]))
            _expect(_state(await session.reopen()), before, "the journal after the refusals")
            _expect(list(await journal.write([Complete(2), Requeue(1, 3)])), [], "freed first")

    async def test_revive_puts_a_dead_letter_back_in_its_own_place(self, journal: Journal) -> None:
        """Revive makes dead letter 1 unfinished again as job 1, before the key's later jobs, attempts reset, and with resume lifts the halt in the same step; a second Revive is superseded; a held unique key is a DuplicateError."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [_job(1, unique="u"), MarkAttempt(1, 2), Discard(1, "E", halt=True), _job(2)]
            )
            _expect(list(await journal.write([Revive(1, resume=True)])), [], "a revive")
            again = Revive(1)
            _expect(list(await journal.write([again])), [again], "the same revive again")
            await _raises(DuplicateError, journal.write([_job(3, unique="u")]))
            recovery = await _replayed(journal, await session.reopen())
            info = await journal.job(1)
            await journal.write([Discard(2, "F"), _job(4, unique="w"), Discard(4, "G")])
            await journal.write([_job(5, unique="w")])
            await _raises(DuplicateError, journal.write([Revive(4)]))
            await _raises(JournalError, journal.write([Revive(99)]))
        _expect(
            [(job.id, job.unique, job.attempts) for job in recovery.jobs],
            [(1, "u", 0), (2, None, 0)],
            "replayed: job 1 first again",
        )
        _expect(recovery.halted, frozenset(), "halted keys (resumed with the revive)")
        _expect(
            info is not None and (info.state, info.attempts, info.last_error),
            ("queued", 0, None),
            "job(1), revived",
        )

    async def test_requeue_and_revive_respect_reservations(self, journal: Journal) -> None:
        """A dead letter takes its own reserved key back with Revive or Requeue (the new job, and its window, hold it then); one whose key another job reserves, unfinished or within its window, is a DuplicateError naming that job, and nothing changes."""

        def windowed(job_id: int, unique: str) -> Append:
            return Append(job_id=job_id, key="k", data=b"", unique=unique, unique_for=100.0)

        async with _session(journal) as session:
            await session.open()
            await journal.write([windowed(1, "u"), Discard(1, "E")], now=0.0)  # until 100
            _expect(list(await journal.write([Revive(1)], now=50.0)), [], "a revive of its own")
            await journal.write([Discard(1, "E")], now=60.0)  # until 160
            _expect(list(await journal.write([Requeue(1, 2)], now=70.0)), [], "a requeue")
            await journal.write([Complete(2)], now=80.0)  # job 2 took its window along
            error = await _raises(DuplicateError, journal.write([_job(3, unique="u")], now=179.0))
            _expect((error.job_id, error.until), (2, 180.0), "the requeued job's reservation")

            await journal.write([windowed(4, "v"), Discard(4, "E")], now=0.0)  # until 100
            await journal.write([_job(5, unique="v")], now=200.0)  # it ended: taken
            await journal.write([windowed(6, "w"), Discard(6, "E")], now=0.0)
            await journal.write([windowed(7, "w"), Complete(7)], now=150.0)  # until 250
            before = _state(await session.reopen())
            conflicts: list[tuple[Change, tuple[int, float | None]]] = [
                (Revive(4), (5, None)),
                (Requeue(4, 8), (5, None)),
                (Revive(6), (7, 250.0)),
                (Requeue(6, 8), (7, 250.0)),
            ]
            for change, holder in conflicts:
                error = await _raises(DuplicateError, journal.write([change], now=200.0))
                _expect((error.job_id, error.until), holder, f"DuplicateError of {change}")
                _expect(_state(await session.reopen()), before, f"the journal after {change}")
            await journal.write([Complete(5)], now=201.0)  # no window: free at once
            _expect(list(await journal.write([Revive(4)], now=201.0)), [], "a revive, freed")
            _expect(list(await journal.write([Requeue(6, 8)], now=250.0)), [], "a requeue, ended")
            recovery = await session.reopen()
        _expect([(job.id, job.unique) for job in recovery.jobs], [(4, "v"), (8, "w")], "replayed")

    async def test_purge_of_a_job_that_is_not_dead_is_superseded(self, journal: Journal) -> None:
        """A Purge of a queued, running, completed or requeued job is returned, not applied."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), _job(2), _job(3), MarkAttempt(3, 1), _job(4)])
            await journal.write([Complete(1), Discard(4, "E"), Requeue(4, 5)])
            for job_id in (1, 2, 3, 4):
                purge = Purge(job_id)
                _expect(list(await journal.write([purge])), [purge], f"write([{purge}])")
            recovery = await session.reopen()
        _expect([job.id for job in recovery.jobs], [2, 3, 5], "replayed")

    async def test_two_writers_racing_for_one_job_one_wins(self, journal: Journal) -> None:
        """Concurrent Complete and Discard of one job: exactly one applies, the other is superseded."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(n) for n in range(1, 21)])
            answers: dict[Change, list[Change]] = {}

            async def write(change: Change) -> None:
                answers[change] = list(await journal.write([change]))

            async with trio.open_nursery() as nursery:
                for job_id in range(1, 21):
                    nursery.start_soon(write, Complete(job_id))
                    nursery.start_soon(write, Discard(job_id, "skipped"))
            for job_id in range(1, 21):
                pair: list[Change] = [Complete(job_id), Discard(job_id, "skipped")]
                lost = [change for change in pair if answers[change]]
                _expect(len(lost), 1, f"superseded of {pair}")
                info = await journal.job(job_id)
                dead = info is not None and info.state == "dead"
                _expect(dead, lost[0] == pair[0], f"job({job_id}) is dead iff the discard won")

    async def test_a_load_racing_a_write_sees_it_whole_or_not_at_all(
        self, journal: Journal
    ) -> None:
        """A load concurrent with a batch sees all of the batch or none of it; the next load sees all."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(n) for n in range(1, 11)])
            seen: list[list[int]] = []

            async def load() -> None:
                seen.append([job.id for job in await journal.load("k", 0, 100)])

            async with trio.open_nursery() as nursery:
                nursery.start_soon(load)
                nursery.start_soon(journal.write, [Complete(n) for n in range(1, 10, 2)])
                nursery.start_soon(load)
            odd, even = list(range(1, 11)), list(range(2, 11, 2))
            for page in seen:
                assert page in (odd, even), f"a load saw part of a batch: {page}"
            _expect([job.id for job in await journal.load("k", 0, 100)], even, "a later load")

    async def test_replay_keeps_the_last_error_and_the_retry_time(self, journal: Journal) -> None:
        """open and load hand back each job's last error and retry time; a Discard keeps stopped_during."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), MarkAttempt(1, 1), Retrying(1, "E: down", 1234.5)])
            await journal.write([_job(2), _job(3), MarkAttempt(3, 2), Retrying(3, "E: x", 9.0)])
            await journal.write([MarkAttempt(3, 3), Discard(3, "E: x", stopped_during=3)])
            recovery = await session.reopen()
            paged = await journal.load("k", 1, 10)
            dead = await journal.job(3)
        _expect(
            [(job.id, job.error, job.retry_at) for job in recovery.jobs],
            [(1, "E: down", 1234.5), (2, None, None)],
            "replayed (id, error, retry_at)",
        )
        _expect([(job.id, job.error) for job in paged], [(2, None)], "load after job 1")
        _expect(
            dead is not None and (dead.state, dead.last_error, dead.stopped_during),
            ("dead", "E: x", 3),
            "job(3)",
        )

    async def test_every_read_is_a_cancellation_point(self, journal: Journal) -> None:
        """keys, job and dead_letters raise Cancelled in a cancelled scope."""
        async with _session(journal) as session:
            await session.open()
            for read in (
                lambda: journal.keys(now=0.0),
                lambda: journal.job(1),
                lambda: journal.dead_letters(),
                lambda: journal.load("k", 0, 1),
            ):
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await read()
                    raise AssertionError("a read in a cancelled scope did not raise Cancelled")
                assert scope.cancelled_caught


class JournalConformance(
    BasicConformance,
    ArbiterConformance,
    ScheduleConformance,
    RecurringConformance,
    StepConformance,
    TransactionConformance,
    TraceConformance,
):
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
