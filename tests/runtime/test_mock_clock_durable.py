"""Mock-clock tests with a durable journal are deterministic (issue 12, part 9).

Under `autojump_clock`, trio jumps virtual time whenever every task waits,
and a task waiting for a journal's thread waits.  So time jumped while
SQLite committed: a key's jobs, one virtual second apart, were seen at
0, 60, 61, 120.  The journals keep the run busy while their thread works,
under an autojumping clock only, so virtual time moves only when the
runtime itself sleeps.

Busy, but not greedy: a run that checkpoints in a loop never lets go of the
GIL, and the journal's thread waited up to the interpreter's switch interval
each time it wanted it back, so one commit took up to a second and the
suite ran three times slower than it does.  A waiting task with nobody else
to let run blocks on its request instead.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
import trio.testing

import inturn
from tests.conftest import MakeJournal


async def test_virtual_time_moves_only_with_the_handlers_sleeps(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Ten jobs of one key, each sleeping one virtual second, start at 0, 1, ..., 9 exactly, with a timer elsewhere that would drag the clock ahead."""
    starts: list[float] = []
    origin = trio.current_time()

    async def handler(job: inturn.Job) -> None:
        starts.append(trio.current_time() - origin)
        await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        # A far deadline: an idle jump would land on it (60 s), not on the next second.
        nursery.start_soon(trio.sleep, 60)
        async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
            for n in range(10):
                await sup.send("k", n)
            await sup.wait_idle()
        nursery.cancel_scope.cancel()
    assert starts == [float(n) for n in range(10)]


@attrs.define(eq=False)
class StepCounter(trio.abc.Instrument):
    """How many steps the run's tasks take."""

    steps: int = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


async def test_a_task_waiting_for_the_journals_thread_does_not_spin_while_it_works(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Opening a SQLite file and sending to it take a handful of steps, not one per checkpoint the thread's work would allow."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    counter = StepCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        recovery = await journal.open()
        opened = counter.steps
        await journal.write([inturn.journal.Append(1, "k", b"1")])
        written = counter.steps - opened
    finally:
        trio.lowlevel.remove_instrument(counter)
        await journal.aclose()
    assert recovery.next_id == 1
    # A step per 10 ms a commit takes, at most, and a few to go on: a loop of
    # checkpoints took hundreds, and thousands when it starved the thread.
    assert opened <= 20
    assert written <= 20


@attrs.define(eq=False)
class TurnCounter(trio.abc.Instrument):
    """How many turns the run loop takes (each one waits for I/O, perhaps not at all)."""

    turns: int = 0

    def before_io_wait(self, timeout: float) -> None:
        self.turns += 1


async def test_closing_a_durable_journal_neither_spins_the_run_nor_moves_the_clock(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The journal's thread ends (and closes its file) in a few turns of the run, with the
    clock still: waiting for it with `trio.to_thread`, trio's loop turned without
    sleeping while the thread worked, and starved it, a tenth of a second a close."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    await journal.write([inturn.journal.Append(1, "k", b"1")])
    counter = TurnCounter()
    before = trio.current_time()
    trio.lowlevel.add_instrument(counter)
    try:
        with trio.move_on_after(1000):  # a deadline an idle jump would land on
            await journal.aclose()
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert trio.current_time() == before
    assert counter.turns <= 20


async def test_an_operators_read_of_a_durable_journal_neither_spins_the_run_nor_moves_the_clock(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An operator's reads of a journal a supervisor holds run on a thread of their own:
    the run waits for them as it waits for the journal's thread."""
    path = tmp_path / "jobs.db"
    done = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await done.wait()

    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
        await sup.send("k", 1)
        await trio.testing.wait_all_tasks_blocked()
        async with inturn.operate(inturn.SQLiteJournal(path)) as operator:
            assert operator.live
            counter = TurnCounter()
            before = trio.current_time()
            trio.lowlevel.add_instrument(counter)
            try:
                with trio.move_on_after(1000):  # a deadline an idle jump would land on
                    keys = await operator.keys()
            finally:
                trio.lowlevel.remove_instrument(counter)
        assert [info.key for info in keys] == ["k"]
        assert trio.current_time() == before
        assert counter.turns <= 20
        done.set()
