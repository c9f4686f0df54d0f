"""`MemoryJournal`: recovery, all-or-nothing batches, dead letters, unique keys, ids."""

from __future__ import annotations

import pytest

import inturn
from inturn.journal import (
    Append,
    Change,
    Complete,
    DeadLetter,
    Discard,
    Halt,
    MarkAttempt,
    MemoryJournal,
    Recovery,
    Resume,
    StoredJob,
)


async def opened(*changes: Change) -> MemoryJournal:
    """A fresh journal, opened, with *changes* written one batch each."""
    journal = MemoryJournal()
    await journal.open()
    for change in changes:
        await journal.write([change])
    return journal


async def reopen(journal: MemoryJournal) -> Recovery:
    await journal.aclose()
    return await journal.open()


async def test_fresh_journal_recovers_nothing() -> None:
    """A new journal opens empty, handing out ids from 1."""
    recovery = await MemoryJournal().open()
    assert recovery == Recovery(next_id=1, jobs=[], halted=frozenset())


async def test_open_returns_unfinished_jobs_in_id_order() -> None:
    """open returns every unfinished job in id order with its attempts, and next_id."""
    journal = await opened()
    await journal.write(
        [
            Append(job_id=1, key="a", data=b"1"),
            Append(job_id=2, key="b", data=b"2", unique="u"),
            Append(job_id=3, key=None, data=b"3"),
            Append(job_id=4, key="a", data=b"4"),
        ]
    )
    await journal.write([MarkAttempt(2, 1), MarkAttempt(2, 2), Complete(1)])

    recovery = await reopen(journal)

    assert recovery.next_id == 5
    assert list(recovery.jobs) == [
        StoredJob(id=2, key="b", data=b"2", unique="u", attempts=2),
        StoredJob(id=3, key=None, data=b"3"),
        StoredJob(id=4, key="a", data=b"4"),
    ]
    assert recovery.halted == frozenset()


async def test_jobs_come_back_in_id_order_whatever_the_write_order() -> None:
    """Jobs appended with ids out of order in one batch still recover in id order."""
    journal = await opened()
    await journal.write([Append(job_id=9, key="k", data=b""), Append(job_id=8, key="k", data=b"")])
    assert [job.id for job in (await reopen(journal)).jobs] == [8, 9]
    assert [job.id for job in journal.unfinished()] == [8, 9]


async def test_halted_keys_are_recovered_until_resumed() -> None:
    """Halt records a key as parked across reopens; Resume clears it."""
    journal = await opened(Halt("a"), Halt("b"), Resume("b"), Resume("never-halted"))
    assert (await reopen(journal)).halted == frozenset({"a"})
    await journal.write([Resume("a")])
    assert (await reopen(journal)).halted == frozenset()


async def test_attempt_marks_are_recovered() -> None:
    """The last MarkAttempt of a job is its recovered attempt count (a give-back included)."""
    journal = await opened(Append(job_id=1, key="k", data=b""))
    await journal.write([MarkAttempt(1, 1)])
    await journal.write([MarkAttempt(1, 2)])
    await journal.write([MarkAttempt(1, 1)])  # attempt 2 was interrupted by shutdown
    (job,) = (await reopen(journal)).jobs
    assert job.attempts == 1


async def test_complete_forgets_the_job() -> None:
    """A completed job is neither unfinished nor a dead letter."""
    journal = await opened(Append(job_id=1, key="k", data=b"x"), Complete(1))
    assert journal.unfinished() == []
    assert journal.dead_letters() == []
    assert list((await reopen(journal)).jobs) == []


async def test_discard_keeps_a_dead_letter() -> None:
    """A discarded job leaves the unfinished set and is kept with its error and attempts."""
    journal = await opened(
        Append(job_id=1, key="k", data=b"payload", unique="u"),
        MarkAttempt(1, 1),
        MarkAttempt(1, 2),
        Discard(1, "ValueError: boom"),
        Append(job_id=2, key=None, data=b"x"),
        Discard(2, "DecodeError: bad"),
    )
    assert journal.unfinished() == []
    assert journal.dead_letters() == [
        DeadLetter(
            id=1, key="k", data=b"payload", unique="u", attempts=2, error="ValueError: boom"
        ),
        DeadLetter(id=2, key=None, data=b"x", unique=None, attempts=0, error="DecodeError: bad"),
    ]
    assert list((await reopen(journal)).jobs) == []
    assert len(journal.dead_letters()) == 2


async def test_unique_key_is_held_by_an_unfinished_job() -> None:
    """Appending a unique key held by an unfinished job raises DuplicateError naming the holder."""
    journal = await opened(Append(job_id=1, key="a", data=b"", unique="u"))
    with pytest.raises(inturn.DuplicateError) as exc_info:
        await journal.write([Append(job_id=2, key="b", data=b"", unique="u")])
    assert exc_info.value.job_id == 1
    assert [job.id for job in journal.unfinished()] == [1]


@pytest.mark.parametrize("finish", [Complete(1), Discard(1, "boom")])
async def test_unique_key_is_released_when_terminal(finish: Change) -> None:
    """Once its holder is completed or discarded, a unique key can be appended again."""
    journal = await opened(Append(job_id=1, key="a", data=b"", unique="u"), finish)
    await journal.write([Append(job_id=2, key="a", data=b"", unique="u")])
    assert [(job.id, job.unique) for job in journal.unfinished()] == [(2, "u")]


async def test_unique_key_is_recovered() -> None:
    """A unique key held before a reopen is still held after it."""
    journal = await opened(Append(job_id=1, key="a", data=b"", unique="u"))
    await reopen(journal)
    with pytest.raises(inturn.DuplicateError):
        await journal.write([Append(job_id=2, key="a", data=b"", unique="u")])


@pytest.mark.parametrize("finish", [None, Complete(1), Discard(1, "boom")])
async def test_ids_are_never_reused(finish: Change | None) -> None:
    """An id once appended is refused again, whether its job is unfinished, completed or discarded."""
    journal = await opened(Append(job_id=1, key="a", data=b""))
    if finish is not None:
        await journal.write([finish])
    with pytest.raises(inturn.JournalError, match="job id 1 was used before"):
        await journal.write([Append(job_id=1, key="a", data=b"")])


async def test_ids_below_next_id_are_refused_after_reopen() -> None:
    """next_id survives a reopen: an id below it is refused though its job was forgotten."""
    journal = await opened(Append(job_id=5, key="a", data=b""), Complete(5))
    assert (await reopen(journal)).next_id == 6
    with pytest.raises(inturn.JournalError):
        await journal.write([Append(job_id=3, key="a", data=b"")])


async def test_an_id_is_not_reused_inside_one_batch() -> None:
    """A batch is checked as its changes one by one would be: an id reused inside it is refused."""
    journal = await opened()
    with pytest.raises(inturn.JournalError):
        await journal.write(
            [
                Append(job_id=1, key="a", data=b"first"),
                Complete(1),
                Append(job_id=1, key="a", data=b"second"),
            ]
        )
    assert journal.unfinished() == []
    assert (await reopen(journal)).next_id == 1


@pytest.mark.parametrize(
    "change",
    [MarkAttempt(7, 1), Complete(7), Discard(7, "boom")],
)
async def test_changes_to_unknown_jobs_are_refused(change: Change) -> None:
    """MarkAttempt, Complete or Discard of a job that is not unfinished raises JournalError."""
    journal = await opened()
    with pytest.raises(inturn.JournalError, match="job 7 is not an unfinished job"):
        await journal.write([change])


async def test_a_finished_job_cannot_be_finished_again() -> None:
    """Completing a job twice raises JournalError, leaving no dead letter behind."""
    journal = await opened(Append(job_id=1, key="a", data=b""), Complete(1))
    with pytest.raises(inturn.JournalError):
        await journal.write([Discard(1, "late")])
    assert journal.dead_letters() == []


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (Append(job_id=1, key="k", data=b""), inturn.JournalError),  # id used before
        (Append(job_id=3, key="k", data=b"", unique="held"), inturn.DuplicateError),
        (MarkAttempt(99, 1), inturn.JournalError),
        (Complete(99), inturn.JournalError),
        (Discard(99, "x"), inturn.JournalError),
    ],
)
@pytest.mark.parametrize("position", [0, 2, 4])
async def test_a_batch_with_one_bad_change_changes_nothing(
    bad: Change, error: type[Exception], position: int
) -> None:
    """A batch holding one bad change raises and leaves every record as it was."""
    journal = await opened(
        Append(job_id=1, key="k", data=b"one", unique="held"),
        Append(job_id=2, key="k", data=b"two"),
        Halt("h"),
    )
    good: list[Change] = [
        Append(job_id=10, key="k", data=b"new", unique="fresh"),
        MarkAttempt(1, 1),
        Complete(2),
        Halt("x"),
        Resume("h"),
    ]
    batch = [*good[:position], bad, *good[position:]]
    before = (journal.unfinished(), journal.dead_letters())

    with pytest.raises(error):
        await journal.write(batch)

    assert (journal.unfinished(), journal.dead_letters()) == before
    recovery = await reopen(journal)
    assert (recovery.next_id, recovery.halted) == (3, frozenset({"h"}))
    # the good changes alone still apply: nothing was left half-written
    await journal.write(good)
    assert [job.id for job in journal.unfinished()] == [1, 10]


async def test_batch_sees_its_own_earlier_changes() -> None:
    """Inside one batch, a change may refer to a job appended earlier in the batch."""
    journal = await opened()
    await journal.write(
        [
            Append(job_id=1, key="k", data=b"", unique="u"),
            MarkAttempt(1, 1),
            Discard(1, "boom"),
            Append(job_id=2, key="k", data=b"", unique="u"),
        ]
    )
    assert [dead.id for dead in journal.dead_letters()] == [1]
    assert [(job.id, job.unique) for job in journal.unfinished()] == [(2, "u")]


async def test_duplicate_unique_inside_one_batch_is_refused() -> None:
    """Two appends holding the same unique key in one batch raise DuplicateError, writing neither."""
    journal = await opened()
    with pytest.raises(inturn.DuplicateError) as exc_info:
        await journal.write(
            [
                Append(job_id=1, key="a", data=b"", unique="u"),
                Append(job_id=2, key="b", data=b"", unique="u"),
            ]
        )
    assert exc_info.value.job_id == 1
    assert journal.unfinished() == []


async def test_open_twice_raises() -> None:
    """A journal already open by one supervisor refuses a second open."""
    journal = await opened(Append(job_id=1, key="k", data=b""))
    with pytest.raises(inturn.JournalError, match="already open"):
        await journal.open()
    await journal.write([Complete(1)])  # the first opener still owns it


async def test_write_before_open_raises() -> None:
    """Writing to a journal that was never opened raises JournalError and stores nothing."""
    journal = MemoryJournal()
    with pytest.raises(inturn.JournalError, match="not open"):
        await journal.write([Append(job_id=1, key="k", data=b"")])
    assert journal.unfinished() == []


@pytest.mark.parametrize("size", [1, 2])
async def test_write_after_aclose_raises(size: int) -> None:
    """Writing after aclose raises JournalError and stores nothing, for any batch size."""
    journal = await opened()
    await journal.aclose()
    batch: list[Change] = [Append(job_id=n, key="k", data=b"") for n in range(1, size + 1)]
    with pytest.raises(inturn.JournalError, match="not open"):
        await journal.write(batch)
    assert journal.unfinished() == []


async def test_reopen_after_aclose_shows_the_same_content() -> None:
    """A journal closed and opened again holds exactly what it held."""
    journal = await opened(
        Append(job_id=1, key="a", data=b"1", unique="u"),
        Append(job_id=2, key="b", data=b"2"),
        MarkAttempt(1, 3),
        Append(job_id=3, key="c", data=b"3"),
        Discard(3, "boom"),
        Halt("c"),
    )
    first = await reopen(journal)
    second = await reopen(journal)
    assert first == second
    assert (first.next_id, [job.id for job in first.jobs], first.halted) == (
        4,
        [1, 2],
        frozenset({"c"}),
    )
    assert [dead.id for dead in journal.dead_letters()] == [3]


async def test_memory_journal_satisfies_the_journal_protocol() -> None:
    """MemoryJournal is usable wherever an inturn.Journal is expected."""
    journal: inturn.Journal = MemoryJournal()
    assert (await journal.open()).next_id == 1
    await journal.aclose()
