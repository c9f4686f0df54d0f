"""MemoryJournal's immediate writes decide exactly as `write` does.

A plain send (`append_now`) and a completion with the next job's start
(`complete_now`) are answered in a call, without the records; any sequence
of them, near misses included (an id used before, a job gone or never
appended, a start of a job gone, a start on a halted key, a job holding a
unique key with a window, a closed journal), must leave the journal, the
answer and the error exactly as the same changes written through `write`.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Append, Change, Complete, Halt, MarkAttempt, MemoryJournal

from .test_shared_rules import SETUP, state as full_state


@attrs.frozen
class Send:
    job_id: int
    key: str
    attempt: int


@attrs.frozen
class Finish:
    job_id: int
    next_id: int | None
    attempt: int
    now: float | None


Step = Send | Finish


def steps() -> st.SearchStrategy[list[Step]]:
    send = st.builds(
        Send,
        st.sampled_from([11, 12, 13, 14, 3]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 2),
    )
    finish = st.builds(
        Finish,
        st.sampled_from([1, 2, 3, 5, 7, 10, 11, 40]),
        st.sampled_from([None, None, 2, 4, 6, 10, 11, 40]),
        st.integers(0, 2),
        st.sampled_from([None, None, 1e9]),
    )
    return st.lists(st.one_of(send, finish), min_size=1, max_size=8)


def as_changes(step: Step) -> list[Change]:
    if isinstance(step, Send):
        append = Append(job_id=step.job_id, key=step.key, data=b"x")
        return [append] if not step.attempt else [append, MarkAttempt(step.job_id, step.attempt)]
    if step.next_id is None:
        return [Complete(step.job_id)]
    return [Complete(step.job_id), MarkAttempt(step.next_id, step.attempt)]


async def through_write(journal: MemoryJournal, step: Step) -> object:
    """The answer `write` gives: whether the start (if any) was applied, or what it raised."""
    changes = as_changes(step)
    now = step.now if isinstance(step, Finish) else None
    try:
        superseded = await journal.write(changes, now=now)
    except (inturn.JournalError, inturn.DuplicateError) as exc:
        return type(exc), str(exc)
    if changes[0] in superseded:
        return "completion superseded"
    return changes[-1] not in superseded or not isinstance(changes[-1], MarkAttempt)


async def through_now(journal: MemoryJournal, step: Step) -> object:
    """The same through `append_now` / `complete_now`, and `write` where those decline."""
    try:
        if isinstance(step, Send):
            return journal.append_now(step.job_id, step.key, b"x", step.attempt)
        before = state(journal)
        answer = journal.complete_now(step.job_id, step.next_id, step.attempt, now=step.now)
    except (inturn.JournalError, inturn.DuplicateError) as exc:
        return type(exc), str(exc)
    if answer is not None:
        return answer
    assert state(journal) == before, "declined, it changed nothing"
    return await through_write(journal, step)


def state(journal: MemoryJournal) -> dict[str, object]:
    """`full_state`, but a reservation's end, which the wall clock sets (the tests below check it)."""
    held = full_state(journal)
    held["reserved"] = {unique: job_id for unique, (job_id, _) in journal._reserved.items()}
    return held


async def opened() -> MemoryJournal:
    """`SETUP`, and job 10 holding unique key "w" with a window."""
    journal = MemoryJournal()
    await journal.open()
    for change in [*SETUP, Append(job_id=10, key="c", data=b"", unique="w", unique_for=5.0)]:
        await journal.write([change])
    return journal


@settings(max_examples=400, deadline=None)
@given(sequence=steps(), close_at=st.integers(0, 8))
async def test_immediate_writes_end_as_write_ends_them(sequence: list[Step], close_at: int) -> None:
    general, immediate = await opened(), await opened()
    for position, step in enumerate(sequence):
        if position == close_at:
            await general.aclose()
            await immediate.aclose()
        assert await through_now(immediate, step) == await through_write(general, step)
        assert state(immediate) == state(general)


@pytest.mark.parametrize(
    ("step", "answer"),
    [
        (Send(11, "a", 1), True),
        (Send(11, "b", 1), False),  # "b" is halted: the start is superseded, the job accepted
        (Finish(2, 5, 1, None), True),
        (Finish(2, 4, 1, None), False),
        (Finish(1, None, 0, None), True),
        (Finish(10, None, 0, 1e9), True),  # its unique key stays reserved for its window
    ],
    ids=[
        "send-and-start",
        "send-on-a-halted-key",
        "complete-and-start",
        "start-halted",
        "complete",
        "complete-unique",
    ],
)
async def test_immediate_writes_answer_the_common_cases_themselves(
    step: Step, answer: bool
) -> None:
    """These are answered without `write` (the property would hold vacuously if none were)."""
    journal = await opened()
    if isinstance(step, Send):
        assert journal.append_now(step.job_id, step.key, b"x", step.attempt) is answer
    else:
        assert journal.complete_now(step.job_id, step.next_id, step.attempt, now=step.now) is answer
    assert Halt("b") in SETUP
    if step == Finish(10, None, 0, 1e9):
        assert journal._reserved == {"w": (10, 1e9 + 5.0)}
