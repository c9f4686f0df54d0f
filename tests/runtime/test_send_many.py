"""send_many: several sequenced jobs accepted all or none, in one journal write."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import Append, Change
from inturn.testing import FaultyJournal, Recorder
from tests.gating import GatingJournal, any_of


class CountingJournal(FaultyJournal):
    """Records every batch it is asked to write."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(inturn.MemoryJournal(), fail=lambda changes: fail)
        self.writes: list[Sequence[Change]] = []

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        self.writes.append(list(changes))
        return await super().write(changes, now=now)

    def appends_per_write(self) -> list[int]:
        """How many jobs each write that accepted jobs accepted."""
        counts = [sum(isinstance(change, Append) for change in batch) for batch in self.writes]
        return [count for count in counts if count]


async def test_send_many_returns_ids_in_order_and_runs_each_key_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The ids come back in the order given, and each key's jobs run in that order."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder) as sup:
        ids = await sup.send_many([("a", 1), ("b", 2), ("a", 3), ("b", 4), ("a", 5)])
        await sup.wait_idle()

    assert ids == sorted(ids)
    assert len(set(ids)) == 5
    recorder.assert_sequential()
    by_key = {key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()}
    assert by_key == {"a": [1, 3, 5], "b": [2, 4]}


async def test_send_many_is_one_journal_write(autojump_clock: trio.testing.MockClock) -> None:
    """A batch of N jobs is journaled by one write holding N appends."""
    journal = CountingJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        await sup.send_many([(f"k{n % 3}", n) for n in range(10)])
        assert journal.appends_per_write() == [10]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("", 1), inturn.InvalidKey),
        ((7, 1), TypeError),
        (("k", (1, 2)), inturn.EncodeError),
        (("k",), TypeError),
        (["k", 1], TypeError),
    ],
)
async def test_one_bad_item_rejects_the_whole_batch(
    bad: object, error: type[Exception], autojump_clock: trio.testing.MockClock
) -> None:
    """One invalid key, payload or item rejects the batch: nothing journaled, nothing changed."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        before = sup.stats()
        with pytest.raises(error):
            await sup.send_many([("a", 1), bad, ("b", 2)])  # type: ignore[list-item]
        assert journal.unfinished() == []
        assert sup.stats() == before
        assert await sup.send("a", 3) == 1  # no id was used up


async def test_a_refused_write_rejects_the_whole_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """If the journal refuses the batch, no job of it is accepted and later sends work."""
    inner = inturn.MemoryJournal()
    refuse = True
    journal = FaultyJournal(inner, fail=lambda changes: refuse and len(changes) > 1)
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        with pytest.raises(inturn.JournalError):
            await sup.send_many([("a", 1), ("a", 2), ("b", 3)])
        assert sup.stats().queued == 0
        refuse = False
        await sup.send("a", 4)
        await sup.wait_idle()

    assert [call.job.payload for call in recorder.calls] == [4]
    assert inner.unfinished() == []


async def test_empty_batch_accepts_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """An empty batch returns no ids and writes nothing."""
    journal = CountingJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        assert await sup.send_many([]) == []
    assert journal.writes == []


async def test_send_many_after_stop_raises_supervisor_closed() -> None:
    """send_many on a stopped supervisor raises SupervisorClosed."""
    async with inturn.open_supervisor(Recorder()) as sup:
        pass
    with pytest.raises(inturn.SupervisorClosed):
        await sup.send_many([("a", 1)])


async def test_batches_of_one_key_spilled_and_answered_out_of_order_keep_the_key_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two send_many batches of one key, past its window (spilled), whose writes end in the
    reverse order: the later batch commits while the earlier one's jobs are still being
    journaled ahead of it, the earlier one is refused and retracted, and the key runs
    exactly the later batch, in order, then goes idle with nothing left behind."""
    recorder = Recorder()
    # A journal must apply writes in the order they were made: this one does not, so
    # the first batch's ids come after the second's and it is refused.
    journal = GatingJournal(inturn.MemoryJournal())
    first = journal.hold_writes(any_of(Append), limit=1)
    outcomes: dict[str, object] = {}

    async def send(name: str, payloads: range) -> None:
        try:
            outcomes[name] = await sup.send_many([("k", n) for n in payloads])
        except inturn.JournalError as exc:
            outcomes[name] = exc

    async with inturn.open_supervisor(recorder, journal=journal, window=2) as sup:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, "first", range(10))
            await trio.testing.wait_all_tasks_blocked()  # the first batch is being journaled
            nursery.start_soon(send, "second", range(10, 20))
            await journal.wait_written(any_of(Append))  # the second batch is stored
            first.release()
        await sup.wait_idle()
        assert sup.stats().queued == 0
        await trio.sleep(2.0)  # past idle_timeout, in virtual time: the actor retires
        assert sup._runtime.core.lanes() == 0

    assert isinstance(outcomes["first"], inturn.JournalError)
    assert outcomes["second"] == list(range(11, 21))
    recorder.assert_sequential()
    assert [call.job.payload for call in recorder.calls] == list(range(10, 20))


async def test_a_refused_batch_hands_the_slot_it_took_to_a_key_that_waits_for_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under max_concurrency=1 a batch's first job takes the free slot for its start (the
    rest of its key spills, window=1); a send to another key, committed while the batch is
    still being journaled, waits for that slot. The batch is refused: nothing of it runs,
    the waiting key gets the slot and runs, and nothing is left behind."""
    recorder = Recorder()
    memory = inturn.MemoryJournal()
    journal = GatingJournal(memory)
    # the batch's write waits, then the disk is full
    batch = journal.hold_writes(lambda changes: len(changes) > 1, limit=1, fails=True)
    outcome: list[object] = []

    async def send_batch() -> None:
        try:
            outcome.append(await sup.send_many([("a", 1), ("a", 2), ("a", 3)]))
        except inturn.JournalError as exc:
            outcome.append(exc)

    async with inturn.open_supervisor(
        recorder, journal=journal, window=1, max_concurrency=1, idle_timeout=0
    ) as sup:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_batch)
            await batch.wait_held()
            await sup.send("b", 4)  # journaled: its key waits for the batch's slot
            await trio.testing.wait_all_tasks_blocked()
            assert recorder.calls == []
            batch.release()
        with trio.fail_after(10):
            await sup.wait_idle()
        assert sup.stats().queued == 0

    assert len(outcome) == 1
    assert isinstance(outcome[0], inturn.JournalError)
    assert [(call.job.key, call.job.payload) for call in recorder.calls] == [("b", 4)]
    assert memory.unfinished() == []
