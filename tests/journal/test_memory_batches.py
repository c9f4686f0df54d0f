"""MemoryJournal's short way for the runtime's commonest batches decides exactly as its general way.

A send writes an `Append` (maybe with its start), `send_many` many, an
attempt a `MarkAttempt` (a batch handler many), a completion a `Complete`
(a batch many; maybe with the next job's start); the journal checks those in
one pass and applies them (`MemoryJournal._short_ways`).
Any batch, of those shapes or near them (an id used before, a start of
another job, a unique key, a job never appended, a job completed or started
twice, a halted key), must leave the journal, the answer and the error
exactly as the general way (`_rules.judge`, then each change applied) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Append, Change, Complete, MarkAttempt, MemoryJournal

from .test_shared_rules import SETUP, completions, discards, sends, starts, state


class GeneralPath(MemoryJournal):
    """A MemoryJournal that never takes the short way."""

    _short_ways: ClassVar[dict[type[Change], Any]] = {}


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
@given(batch=st.one_of(sends(8), completions(), starts(), discards()))
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
    taken = journal._short_ways[type(batch[0])](journal, batch, 0.0)
    assert taken is not None
    assert list(taken) == [change for change in batch[-1:] if change == MarkAttempt(9, 1)]
