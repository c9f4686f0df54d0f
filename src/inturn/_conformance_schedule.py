"""Scheduled jobs in the journal: the kit's tests of ``Append(due_at=)``, `Due` and places.

A scheduled job is unfinished but in no key's sequence until a `Due` gives
it a place behind everything its key holds then; within a key, jobs run in
the order of their places.  Mixed into `JournalConformance`.
"""

from __future__ import annotations

from ._conformance import _expect, _raises, _session
from .errors import DuplicateError, JournalError
from .journal import Append, Complete, Discard, Due, Journal, MarkAttempt, Revive

__all__ = ["ScheduleConformance"]


def _later(job_id: int, due_at: float, key: str | None = "k", unique: str | None = None) -> Append:
    return Append(job_id=job_id, key=key, data=b"%d" % job_id, unique=unique, due_at=due_at)


def _now(job_id: int, key: str | None = "k") -> Append:
    return Append(job_id=job_id, key=key, data=b"%d" % job_id)


class ScheduleConformance:
    """Scheduled jobs: held apart, listed by due time, and placed by `Due`."""

    async def test_a_scheduled_job_is_unfinished_and_in_no_sequence(self, journal: Journal) -> None:
        """It holds its unique key and is listed by scheduled() and job(), never by open, load, keys or jobs."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_later(1, 50.0, unique="u"), _later(2, 20.0), _now(3, key="j")])
            await journal.write([_later(4, 20.0, key=None)])
            await _raises(
                DuplicateError, journal.write([Append(job_id=5, key="x", data=b"", unique="u")])
            )
            recovery = await session.reopen()
            listed = await journal.scheduled()
            of_k = await journal.scheduled(key="k", limit=1)
            one = await journal.job(1)
            loaded = await journal.load("k", 0, 10)
            keys = await journal.keys(now=0.0)
            queue = await journal.jobs("k")
        _expect([job.id for job in recovery.jobs], [3], "replayed (only the job in a sequence)")
        _expect(recovery.scheduled, 3, "Recovery.scheduled")
        _expect(recovery.next_id, 5, "next id")
        _expect(
            [(info.id, info.state, info.due_at, info.place) for info in listed],
            [
                (2, "scheduled", 20.0, None),
                (4, "scheduled", 20.0, None),
                (1, "scheduled", 50.0, None),
            ],
            "scheduled(): by due time, then id",
        )
        _expect([info.id for info in of_k], [2], "scheduled(key='k', limit=1)")
        _expect(
            one is not None and (one.state, one.unique, one.data),
            ("scheduled", "u", b"1"),
            "job(1)",
        )
        _expect(
            (loaded, [info.key for info in keys], queue), ([], ["j"], []), "load, keys, jobs of k"
        )

    async def test_due_places_a_job_behind_what_its_key_holds(self, journal: Journal) -> None:
        """Due(job, seq) gives it place seq: load, jobs, keys and open see it last; the id counter passes seq."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_later(1, 5.0), _now(2), _now(3)])
            _expect(list(await journal.write([Due(1, 4)])), [], "Due(1, 4) superseded")
            loaded = await journal.load("k", 0, 10)
            after = await journal.load("k", 3, 10)
            queue = await journal.jobs("k")
            one = await journal.job(1)
            recovery = await session.reopen()
            scheduled = await journal.scheduled()
            await _raises(JournalError, journal.write([_now(4)]))  # 4 is taken by the place
            await journal.write([_now(5), MarkAttempt(2, 1), Complete(2)])
            heads = await journal.keys(now=0.0)
        _expect([(job.id, job.place) for job in loaded], [(2, 2), (3, 3), (1, 4)], "load('k')")
        _expect([job.id for job in after], [1], "load('k', after=3)")
        _expect([(info.id, info.place) for info in queue], [(2, 2), (3, 3), (1, 4)], "jobs('k')")
        _expect(
            one is not None and (one.state, one.place, one.due_at), ("queued", 4, None), "job(1)"
        )
        _expect(
            [(job.id, job.place) for job in recovery.jobs], [(2, 2), (3, 3), (1, 4)], "replayed"
        )
        _expect((recovery.next_id, recovery.scheduled, scheduled), (5, 0, []), "after the Due")
        _expect([(info.head_job_id, info.queued) for info in heads], [(3, 3)], "keys(): head 3")

    async def test_a_due_for_a_job_not_scheduled_is_superseded(self, journal: Journal) -> None:
        """Due is superseded for a job already due, discarded, completed or never scheduled; refused for a bad place or id."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_later(1, 1.0), _later(2, 1.0), _later(3, 1.0), _now(4)])
            await journal.write([Due(1, 5), Discard(2, "skipped"), Due(3, 6)])
            await journal.write([MarkAttempt(3, 1), Complete(3)])
            for change in (Due(1, 7), Due(2, 8), Due(3, 9), Due(4, 10)):
                _expect(list(await journal.write([change])), [change], f"write([{change}])")
            await _raises(JournalError, journal.write([_later(11, 1.0), Due(11, 11)]))
            await _raises(JournalError, journal.write([Due(99, 100)]))
            recovery = await session.reopen()
        _expect([(job.id, job.place) for job in recovery.jobs], [(4, 4), (1, 5)], "replayed")
        _expect(recovery.next_id, 7, "next id: past every place handed out, refused ones not")

    async def test_a_scheduled_job_discarded_and_revived_takes_its_id_as_its_place(
        self, journal: Journal
    ) -> None:
        """A scheduled job can be discarded (a dead letter, its unique key free); revived, it runs at its id's place."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_later(1, 9.0, unique="u"), _now(2)])
            await journal.write([Discard(1, "skipped by operator")])
            await journal.write([_later(3, 9.0, unique="u"), Discard(3, "skipped by operator")])
            dead = await journal.job(1)
            recovery = await session.reopen()
            await journal.write([Revive(1)])
            loaded = await journal.load("k", 0, 10)
            scheduled = await journal.scheduled()
        _expect(dead is not None and (dead.state, dead.due_at), ("dead", None), "job(1)")
        _expect(recovery.scheduled, 0, "scheduled after the discards")
        _expect([(job.id, job.place) for job in loaded], [(1, 1), (2, 2)], "load after Revive(1)")
        _expect(scheduled, [], "scheduled after Revive(1)")
