"""Durable steps in the journal: the kit's tests of `Step` and ``Journal.steps``.

A step's result is recorded for an unfinished job, kept in the order
recorded, deleted with the job when it completes, kept with its dead letter
(and by a `Revive`), moved by a `Requeue`, and deleted by a `Purge`.  Mixed
into `JournalConformance`.
"""

from __future__ import annotations

from ._conformance import _expect, _raises, _session
from .errors import JournalError
from .journal import (
    Append,
    Complete,
    Discard,
    Journal,
    MarkAttempt,
    Purge,
    Requeue,
    Revive,
    Step,
)

__all__ = ["StepConformance"]


def _job(job_id: int, key: str | None = "k") -> Append:
    return Append(job_id=job_id, key=key, data=b"%d" % job_id)


class StepConformance:
    """`Step` records, read back by ``steps``, through every end a job can have."""

    async def test_steps_are_kept_in_the_order_recorded_and_survive_a_reopen(
        self, journal: Journal
    ) -> None:
        """steps() returns them in order; recording a name again replaces its data in place."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), Step(1, "primary", b"\x00p"), MarkAttempt(1, 1)])
            await journal.write([Step(1, "replica", b"r")])
            await journal.write([Step(1, "primary", b"p2"), _job(2, key=None)])
            first = await journal.steps(1)
            await session.reopen()
            again = await journal.steps(1)
            none = (await journal.steps(2), await journal.steps(99))
        _expect(first, [("primary", b"p2"), ("replica", b"r")], "steps(1)")
        _expect(again, first, "steps(1) after a reopen")
        _expect(none, ([], []), "steps of a job without steps, and of no job")

    async def test_steps_go_with_the_job_and_stay_with_its_dead_letter(
        self, journal: Journal
    ) -> None:
        """Complete deletes them; Discard and Revive keep them; Requeue moves them; Purge deletes them."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(n) for n in (1, 2, 3)])
            await journal.write([Step(n, "s", b"%d" % n) for n in (1, 2, 3)])
            await journal.write([MarkAttempt(1, 1), Complete(1), Discard(2, "E"), Discard(3, "E")])
            completed, dead = await journal.steps(1), await journal.steps(2)
            await journal.write([Revive(2), Requeue(3, 4)])
            revived, moved, left = (
                await journal.steps(2),
                await journal.steps(4),
                await journal.steps(3),
            )
            await journal.write([Discard(4, "E")])
            await journal.write([Purge(4)])
            purged = await journal.steps(4)
            await session.reopen()
            kept = await journal.steps(2)
        _expect((completed, dead), ([], [("s", b"2")]), "steps after Complete(1), Discard(2)")
        _expect((revived, moved, left), ([("s", b"2")], [("s", b"3")], []), "after Revive, Requeue")
        _expect((purged, kept), ([], [("s", b"2")]), "after Purge(4), and a reopen")

    async def test_a_step_of_a_finished_job_is_superseded(self, journal: Journal) -> None:
        """A Step for a completed or discarded job is returned, not applied; for a job never appended, refused."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), _job(2)])
            await journal.write([MarkAttempt(1, 1), Complete(1), Discard(2, "E")])
            late = [Step(1, "s", b"x"), Step(2, "s", b"x")]
            for step in late:
                _expect(list(await journal.write([step])), [step], f"write([{step}])")
            await _raises(JournalError, journal.write([Step(7, "s", b"x")]))
            steps = (await journal.steps(1), await journal.steps(2))
        _expect(steps, ([], []), "steps of the finished jobs")
