"""MemoryJournal's short way for batches of many decides exactly as its long way.

`send_many` writes many `Append`s (each maybe with its start), and a batch
handler many `MarkAttempt`s and many `Complete`s (maybe with the next job's start); the journal
checks and applies those in one pass.  Any batch, of those shapes or near
them (an id used before, a start of another job, a unique key, a job never
appended, a job completed or started twice, a halted key), must leave the journal, the
answer and the error exactly as the general path does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Append, Change, Complete, Halt, MarkAttempt, MemoryJournal

KEYS = ("a", "b", "c")
SETUP: list[Change] = [
    *(Append(job_id=n, key=KEYS[n % 3], data=b"%d" % n) for n in range(1, 7)),
    Append(job_id=7, key="a", data=b"7", unique="u"),
    MarkAttempt(1, 1),
    Halt("b"),
]
"""Jobs 1-7 (7 holds unique key "u"), job 1 started, key "b" halted."""


def sends(first: int) -> st.SearchStrategy[list[Change]]:
    """Appends with rising ids from about *first*, each maybe with its start; sometimes a
    near miss (an id used before, a unique key, a window, a start of another job)."""

    @st.composite
    def build(draw: st.DrawFn) -> list[Change]:
        changes: list[Change] = []
        job_id = draw(st.sampled_from([first, first, first, first - 1, 3]))
        for _ in range(draw(st.integers(1, 5))):
            unique = draw(st.sampled_from([None, None, None, None, "u", "v"]))
            changes.append(
                Append(
                    job_id=job_id,
                    key=draw(st.sampled_from([*KEYS, *KEYS, None])),  # None: a keyless job
                    data=b"x",
                    unique=unique,
                    unique_for=draw(st.sampled_from([None, None, None, None, 5.0])),
                )
            )
            if draw(st.booleans()):
                changes.append(MarkAttempt(draw(st.sampled_from([job_id, job_id, 2])), 1))
            job_id += draw(st.sampled_from([1, 1, 1, 2, 0]))
        return changes

    return build()


def completions() -> st.SearchStrategy[list[Change]]:
    """Completes of jobs 1-7 (or one never appended, or one twice), maybe with a start behind."""

    @st.composite
    def build(draw: st.DrawFn) -> list[Change]:
        done = draw(st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 40]), min_size=2, max_size=5))
        changes: list[Change] = [Complete(job_id) for job_id in done]
        if draw(st.booleans()):
            changes.append(MarkAttempt(draw(st.sampled_from([2, 3, 5, 6, 40])), 1))
        return changes

    return build()


def starts() -> st.SearchStrategy[list[Change]]:
    """Starts of jobs 1-7 (job 1 started already; jobs 1 and 4 on halted key "b"), or of one
    never appended, or of one twice."""
    return st.lists(
        st.builds(MarkAttempt, st.sampled_from([1, 2, 3, 4, 5, 40]), st.integers(0, 2)),
        min_size=2,
        max_size=5,
    )


def state(journal: MemoryJournal) -> dict[str, Any]:
    """What the journal holds, but the times it read off the clock."""
    return {
        "jobs": {
            job_id: attrs.asdict(row) | {"accepted_at": None}
            for job_id, row in journal._jobs.items()
        },
        "by_key": {key: list(ids) for key, ids in journal._by_key.items()},
        "unique": dict(journal._unique),
        "reserved": dict(journal._reserved),
        "halted": dict(journal._halted),
        "next_id": journal._next_id,
    }


class GeneralPath(MemoryJournal):
    """A MemoryJournal that never takes the short way for batches of many."""

    def _write_many(
        self, changes: Sequence[Change], now: float, wall: bool
    ) -> Sequence[Change] | None:
        return None


async def outcome(batch: Sequence[Change], journal: MemoryJournal) -> tuple[object, dict[str, Any]]:
    await journal.open()
    for change in SETUP:
        await journal.write([change])
    try:
        answer: object = list(await journal.write(batch))
    except (inturn.JournalError, inturn.DuplicateError) as exc:
        answer = (type(exc), str(exc))
    return answer, state(journal)


@settings(max_examples=300, deadline=None)
@given(batch=st.one_of(sends(8), completions(), starts()))
async def test_a_batch_of_many_ends_as_the_general_path_ends_it(batch: list[Change]) -> None:
    assert await outcome(batch, MemoryJournal()) == await outcome(batch, GeneralPath())


@pytest.mark.parametrize(
    "batch",
    [
        [
            Append(job_id=8, key="a", data=b""),
            Append(job_id=9, key="b", data=b""),
            MarkAttempt(9, 1),
        ],
        [Complete(2), Complete(3), MarkAttempt(5, 1)],
        [Complete(2), Complete(3), Complete(4)],
        [MarkAttempt(2, 1), MarkAttempt(3, 1), MarkAttempt(5, 1)],
    ],
    ids=["sends-with-a-start-on-a-halted-key", "completions-with-a-start", "completions", "starts"],
)
async def test_the_short_way_takes_the_batches_it_is_for(batch: list[Change]) -> None:
    """These batches do take the short way (the property above would hold vacuously if none did)."""
    journal = MemoryJournal()
    await journal.open()
    for change in SETUP:
        await journal.write([change])
    taken = journal._write_many(batch, 0.0, False)
    assert taken is not None
    assert list(taken) == [change for change in batch[-1:] if change == MarkAttempt(9, 1)]
