"""`MemoryJournal`: the journal conformance kit, plus what only MemoryJournal shows.

The kits (`inturn.testing.JournalConformance` and `OperatorReadsConformance`)
cover recovery, unique keys, ids, all-or-nothing batches, dead letters and what
an operator reads through the `Journal` protocol; the tests below check what
only MemoryJournal shows (``unfinished()``) and its own messages.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import inturn
from inturn.journal import (
    Append,
    Change,
    Complete,
    Discard,
    Halt,
    MarkAttempt,
    MemoryJournal,
    Purge,
    Recovery,
    Resume,
    Retrying,
)
from inturn.testing import JournalConformance, OperatorReadsConformance, check_journal


class TestMemoryJournalConformance(JournalConformance, OperatorReadsConformance):
    @pytest.fixture
    def journal(self) -> MemoryJournal:
        return MemoryJournal()


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


async def test_ids_out_of_order_in_one_batch_are_refused() -> None:
    """Ids rise in acceptance order: a batch appending 9 then 8 is refused whole."""
    journal = await opened()
    with pytest.raises(inturn.JournalError, match="used before"):
        await journal.write(
            [Append(job_id=9, key="k", data=b""), Append(job_id=8, key="k", data=b"")]
        )
    assert journal.unfinished() == []
    assert (await reopen(journal)).next_id == 1


async def test_halt_and_resume_are_idempotent() -> None:
    """Halting a halted key or resuming one that is not halted is accepted and changes nothing."""
    journal = await opened(Halt("a"), Halt("a"), Resume("never-halted"))
    assert (await reopen(journal)).halted == frozenset({"a"})
    await journal.write([Resume("a")])
    await journal.write([Resume("a")])
    assert (await reopen(journal)).halted == frozenset()


async def test_complete_forgets_the_job() -> None:
    """A completed job is neither unfinished nor a dead letter."""
    journal = await opened(Append(job_id=1, key="k", data=b"x"), Complete(1))
    assert journal.unfinished() == []
    assert await journal.dead_letters() == []
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
    dead = [
        (info.id, info.key, info.data, info.unique, info.attempts, info.last_error)
        for info in await journal.dead_letters()
    ]
    assert dead == [
        (1, "k", b"payload", "u", 2, "ValueError: boom"),
        (2, None, b"x", None, 0, "DecodeError: bad"),
    ]
    assert list((await reopen(journal)).jobs) == []
    assert len(await journal.dead_letters()) == 2


async def test_ids_below_next_id_are_refused_after_reopen() -> None:
    """next_id survives a reopen: an id below it is refused though its job was forgotten."""
    journal = await opened(Append(job_id=5, key="a", data=b""), Complete(5))
    assert (await reopen(journal)).next_id == 6
    with pytest.raises(inturn.JournalError):
        await journal.write([Append(job_id=3, key="a", data=b"")])


async def test_a_finished_job_cannot_be_finished_again() -> None:
    """A discard of a completed job is superseded, leaving no dead letter behind."""
    journal = await opened(Append(job_id=1, key="a", data=b""), Complete(1))
    assert await journal.write([Discard(1, "late")]) == [Discard(1, "late")]
    assert await journal.dead_letters() == []


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
    assert [dead.id for dead in await journal.dead_letters()] == [1]
    assert [(job.id, job.unique) for job in journal.unfinished()] == [(2, "u")]


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
    assert [dead.id for dead in await journal.dead_letters()] == [3]


async def test_memory_journal_satisfies_the_journal_protocol() -> None:
    """MemoryJournal is usable wherever an inturn.Journal is expected."""
    journal: inturn.Journal = MemoryJournal()
    assert (await journal.open()).next_id == 1
    await journal.aclose()


@pytest.mark.parametrize(
    ("batch", "superseded", "dead"),
    [
        ([Retrying(1, "E", 1.0)], [Retrying(1, "E", 1.0)], [1]),
        ([MarkAttempt(2, 1), Retrying(1, "E", 1.0)], [Retrying(1, "E", 1.0)], [1]),
        ([Purge(2)], [Purge(2)], [1]),
        ([MarkAttempt(2, 1), Purge(2)], [Purge(2)], [1]),
        ([Purge(1), Purge(1)], [Purge(1)], []),
    ],
)
async def test_superseded_changes_come_back_in_the_single_and_the_batch_path(
    batch: list[Change], superseded: list[Change], dead: list[int]
) -> None:
    """A Retrying or Purge that lost its job comes back from write; the rest applies."""
    journal = await opened(
        Append(job_id=1, key="k", data=b""), Append(job_id=2, key="k", data=b""), Discard(1, "E")
    )
    assert await journal.write(batch) == superseded
    assert [job.id for job in journal.unfinished()] == [2]
    assert [dead.id for dead in await journal.dead_letters()] == (
        [1] if len(batch) < 2 or batch[0] != Purge(1) else []
    )


@pytest.mark.parametrize(
    "batch", [[Retrying(7, "E", 1.0)], [MarkAttempt(2, 1), Purge(7)], [Complete(7)]]
)
async def test_refusals_name_the_job_and_the_rule(batch: list[Change]) -> None:
    """A change naming a job never appended says which job, and why, and applies nothing."""
    journal = await opened(Append(job_id=1, key="k", data=b""), Append(job_id=2, key="k", data=b""))
    with pytest.raises(inturn.JournalError, match=r"^job 7 was never appended$"):
        await journal.write(batch)
    assert [(job.id, job.attempts) for job in journal.unfinished()] == [(1, 0), (2, 0)]


async def test_keys_orders_by_head_not_by_first_sight() -> None:
    """Over 20,000 keys, keys(limit=3) returns the three oldest heads, though other keys were seen first."""
    journal = await opened()
    count = 20_000
    firsts = [Append(job_id=n + 1, key=f"k{n}", data=b"") for n in range(count)]
    seconds = [Append(job_id=count + n + 1, key=f"k{n}", data=b"") for n in range(count)]
    await journal.write([*firsts, *seconds])
    await journal.write([Complete(n + 1) for n in range(0, count, 2)])  # even keys move on
    keys = await journal.keys(limit=3, now=0.0)
    assert [(k.key, k.head_job_id, k.queued) for k in keys] == [
        ("k1", 2, 2),
        ("k3", 4, 2),
        ("k5", 6, 2),
    ]


async def test_check_journal_runs_every_kit_test_as_a_plain_function() -> None:
    """check_journal passes MemoryJournal, and names the kit test a journal that hides superseded changes fails."""
    await check_journal(MemoryJournal)

    class Hiding(MemoryJournal):
        async def write(
            self, changes: Sequence[Change], *, now: float | None = None
        ) -> list[Change]:
            await super().write(changes, now=now)
            return []  # as if every change had applied

    with pytest.raises(AssertionError, match=r"^JournalConformance\.test_\w+: "):
        await check_journal(Hiding)


async def test_ended_reservations_are_forgotten() -> None:
    """Reservations whose windows ended do not pile up in memory: the next write forgets them."""
    journal = MemoryJournal()
    await journal.open()
    for n in range(1, 101):
        await journal.write(
            [Append(job_id=n, key="k", data=b"", unique=f"u{n}", unique_for=5.0), Complete(n)],
            now=float(n),
        )
    assert len(journal._reserved) <= 5  # the window: 5 s, one job a second
    await journal.write([Halt("h")], now=1_000.0)
    assert (journal._reserved, journal._expiry) == ({}, [])
