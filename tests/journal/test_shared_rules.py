"""The journals judge a batch by the same rules (`inturn.journal._rules`).

`MemoryJournal` calls the rules as a function; `SQLiteJournal` says them in
its statements.  The runtime's batches (`send_many`'s `Append`s, each maybe
with its start; a batch handler's `MarkAttempt`s and `Complete`s, maybe with
the next job's start), and batches near them (an id used before, a start of
another job, a unique key, a job never appended, a job completed or started
twice, a start on a halted key), must end the same on both: the same answer
or the same error, and the same jobs, dead letters and halted keys after.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import (
    Append,
    Change,
    Complete,
    Discard,
    Halt,
    Journal,
    MarkAttempt,
    MemoryJournal,
)

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
        done = draw(st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 40]), min_size=1, max_size=5))
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
        min_size=1,
        max_size=5,
    )


def state(journal: MemoryJournal) -> dict[str, Any]:
    """What a memory journal holds, but the times it read off the clock."""
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


def discards() -> st.SearchStrategy[list[Change]]:
    """Discards of jobs 1-7 (maybe halting their key), then starts and completions behind them."""
    discard = st.builds(
        Discard, st.sampled_from([1, 2, 3, 7, 40]), st.just("boom"), halt=st.booleans()
    )
    other = st.one_of(
        st.builds(MarkAttempt, st.sampled_from([2, 3, 5, 40]), st.integers(0, 2)),
        st.builds(Complete, st.sampled_from([1, 2, 3, 7])),
    )
    return st.lists(st.one_of(discard, other), min_size=1, max_size=5)


async def seen(journal: Journal, batch: list[Change], name: str) -> tuple[object, object]:
    """*batch* written after `SETUP`: the answer (or the error, the journal's name taken out),
    and what the journal's reads show after it, but the times."""
    await journal.open()
    try:
        for change in SETUP:
            await journal.write([change], now=1.0)
        try:
            answer: object = list(await journal.write(batch, now=1.0))
        except (inturn.JournalError, inturn.DuplicateError) as exc:
            answer = (type(exc), str(exc).removeprefix(f"{name}: "))
        times = {"accepted_at": None, "finished_at": None}
        jobs = [await journal.job(job_id) for job_id in range(1, 16)]
        keys = await journal.keys(now=2.0)
        return answer, (
            [None if job is None else attrs.asdict(job) | times for job in jobs],
            [(info.key, info.queued, info.halted, info.halted_by) for info in keys],
        )
    finally:
        await journal.aclose()


@settings(max_examples=200, deadline=None)
@given(batch=st.one_of(sends(8), completions(), starts(), discards()))
async def test_memory_and_sqlite_judge_a_batch_alike(batch: list[Change]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = str(Path(directory) / "journal.db")
        sqlite = inturn.SQLiteJournal(path, durability="normal")
        assert await seen(MemoryJournal(), batch, "") == await seen(sqlite, batch, path)


@pytest.mark.parametrize(
    ("batch", "superseded"),
    [
        ([Append(job_id=8, key="b", data=b""), MarkAttempt(8, 1)], [MarkAttempt(8, 1)]),
        ([MarkAttempt(1, 0)], []),  # a given-back attempt on a halted key applies
        ([Discard(2, "boom", halt=True), MarkAttempt(5, 1)], [MarkAttempt(5, 1)]),
        ([Complete(2), Complete(2)], [Complete(2)]),
    ],
    ids=["start-on-a-halted-key", "give-back", "halted-by-the-batch", "completed-twice"],
)
async def test_the_rules_supersede_what_they_name(
    batch: list[Change], superseded: list[Change]
) -> None:
    """The property above would hold vacuously if nothing were superseded."""
    journal = MemoryJournal()
    await journal.open()
    for change in SETUP:
        await journal.write([change])
    assert list(await journal.write(batch)) == superseded
