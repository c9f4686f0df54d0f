"""Durable steps in the journal: the kit's tests of `Step`, ``Journal.steps`` and
``Journal.transaction``.

A step's result is recorded for an unfinished job, kept in the order
recorded, deleted with the job when it completes, kept with its dead letter
(and by a `Revive`), moved by a `Requeue`, and deleted by a `Purge`.  A
`Transaction` runs its function on the journal's database and records its
result in the same transaction, fenced by the job's state and attempt; its
tests write a ``TEMP`` table, which SQLite and PostgreSQL both have.  Mixed
into `JournalConformance`.
"""

from __future__ import annotations

from typing import Any

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
    Transaction,
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


class _Effect:
    """A transaction's function: a row into a temp table of the journal's database, then
    *result*, or *error* raised after the write."""

    def __init__(self, result: bytes = b"r", error: Exception | None = None) -> None:
        self.result, self.error, self.calls = result, error, 0

    def __call__(self, connection: Any) -> bytes:
        self.calls += 1
        connection.execute("CREATE TEMP TABLE IF NOT EXISTS kit_effects (n INTEGER)")
        connection.execute("INSERT INTO kit_effects VALUES (1)")
        if self.error is not None:
            raise self.error
        return self.result


def _effects(connection: Any) -> bytes:
    connection.execute("CREATE TEMP TABLE IF NOT EXISTS kit_effects (n INTEGER)")
    (count,) = connection.execute("SELECT COUNT(*) FROM kit_effects").fetchone()
    return b"%d" % count


class TransactionConformance:
    """``Journal.transaction``: the function's writes and the step's record commit together,
    fenced by the job's state and attempt."""

    async def test_a_transaction_records_its_result_with_its_writes(self, journal: Journal) -> None:
        """Applied: the result is returned and recorded as a step; recorded, it is the
        answer to the same name again, and the function is not called."""
        effect, again = _Effect(b"first"), _Effect(b"second")
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), MarkAttempt(1, 1)])
            answer = await journal.transaction(Transaction(1, 1, "apply"), effect)
            await journal.write([MarkAttempt(1, 2)])
            replayed = await journal.transaction(Transaction(1, 2, "apply"), again)
            steps = await journal.steps(1)
            effects = await journal.transaction(Transaction(1, 2, "count"), _effects)
        _expect((answer, replayed), (b"first", b"first"), "the answers")
        _expect((effect.calls, again.calls), (1, 0), "calls of the functions")
        _expect(steps, [("apply", b"first")], "steps(1)")
        _expect(effects, b"1", "rows the functions wrote")

    async def test_a_transaction_whose_function_raises_changes_nothing(
        self, journal: Journal
    ) -> None:
        """The error goes to the caller; the function's writes and the step are not kept, and
        the journal goes on."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), MarkAttempt(1, 1)])
            failing = _Effect(error=LookupError("no such account"))
            error = await _raises(
                LookupError, journal.transaction(Transaction(1, 1, "apply"), failing)
            )
            steps = await journal.steps(1)
            effects = await journal.transaction(Transaction(1, 1, "count"), _effects)
            await journal.write([Complete(1)])
        _expect(str(error), "no such account", "the error")
        _expect(steps, [], "steps(1)")
        _expect(effects, b"0", "rows the functions wrote")

    async def test_a_fenced_off_transaction_is_superseded_and_not_run(
        self, journal: Journal
    ) -> None:
        """None, and the function not called, for a finished job or an attempt after which
        another started; refused for a job never appended."""
        effect = _Effect()
        async with _session(journal) as session:
            await session.open()
            await journal.write([_job(1), _job(2), _job(3), MarkAttempt(3, 2)])
            await journal.write([MarkAttempt(1, 1), Complete(1), Discard(2, "E")])
            late = [
                await journal.transaction(Transaction(job_id, 1, "apply"), effect)
                for job_id in (1, 2, 3)
            ]
            await _raises(JournalError, journal.transaction(Transaction(7, 1, "a"), effect))
            steps = [await journal.steps(job_id) for job_id in (1, 2, 3)]
        _expect(late, [None, None, None], "the answers")
        _expect(effect.calls, 0, "calls of the function")
        _expect(steps, [[], [], []], "steps")
