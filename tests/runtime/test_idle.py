"""Idle exit: an actor retires after ``idle_timeout`` and a send can never fall into the gap."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn._workers import REAPER_SLACK
from inturn.journal import Append, Change
from inturn.testing import FaultyJournal, Recorder
from tests.gating import GatingJournal, any_of

IDLE = 1.0


@attrs.define(eq=False)
class AfterAppends(FaultyJournal):
    """A MemoryJournal that calls `after_append` once each ``Append`` write is stored,
    before its writer goes on: no checkpoint in between.  (Holding a write is
    `tests.gating.GatingJournal`'s.)"""

    inner: inturn.Journal = attrs.field(factory=inturn.MemoryJournal)
    after_append: Callable[[], None] | None = None

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        superseded = await super().write(changes, now=now)
        if any(isinstance(change, Append) for change in changes) and self.after_append:
            self.after_append()
        return superseded


def events(logs: list[structlog.typing.EventDict], name: str) -> list[structlog.typing.EventDict]:
    return [event for event in logs if event["event"] == name]


async def test_actor_exits_exactly_at_idle_timeout(mock_clock: trio.testing.MockClock) -> None:
    """An actor with an empty mailbox lives until exactly ``idle_timeout`` after its last job."""
    async with inturn.open_supervisor(Recorder(), idle_timeout=IDLE) as sup:
        await sup.send("k", 1)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().completed == 1
        assert sup.stats().actors == 1

        just_before = math.nextafter(IDLE, 0.0)
        mock_clock.jump(just_before)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1

        mock_clock.jump(IDLE - just_before)
        assert trio.current_time() == IDLE
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0
        assert sup._runtime.core.lanes() == 0


async def test_an_actor_idle_again_lives_a_whole_idle_timeout_from_then(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A key's actor woken halfway through its linger and idle again is not retired at its
    first deadline (that entry went stale), but ``idle_timeout`` after its second."""
    async with inturn.open_supervisor(Recorder(), idle_timeout=IDLE) as sup:
        await sup.send("k", 1)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(IDLE / 2)
        await sup.send("k", 2)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(IDLE / 2)  # the first deadline
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1
        mock_clock.jump(math.nextafter(IDLE * 1.5, 0.0) - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1
        mock_clock.jump(IDLE * 1.5 - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0


async def test_keys_idle_within_the_slack_retire_together(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Keys that went idle within ``REAPER_SLACK`` of ``idle_timeout`` after the first retire
    with it, at its deadline (one timer wake-up for all); a key idle later waits for its own."""
    slack = IDLE * REAPER_SLACK
    async with inturn.open_supervisor(Recorder(), idle_timeout=IDLE) as sup:
        await sup.send("first", 1)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(slack)  # exactly at the edge: retired with the first
        await sup.send("within", 2)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(slack / 2)
        await sup.send("later", 3)  # past the edge: its own deadline
        await trio.testing.wait_all_tasks_blocked()
        later_idle = trio.current_time()
        assert sup.stats().actors == 3

        mock_clock.jump(math.nextafter(IDLE, 0.0) - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 3  # none before the first deadline

        mock_clock.jump(IDLE - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1
        assert list(sup._runtime.lingering) == ["later"]

        mock_clock.jump(math.nextafter(later_idle + IDLE, 0.0) - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1  # the later key lingers its whole idle_timeout

        mock_clock.jump(later_idle + IDLE - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0
        assert sup._runtime.core.lanes() == 0


async def test_send_after_idle_exit_spawns_a_new_actor(mock_clock: trio.testing.MockClock) -> None:
    """A send for a key whose actor retired spawns a fresh actor that runs the job."""
    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
            await sup.send("k", 1)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(IDLE)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().actors == 0
            assert len(events(logs, "actor.exited")) == 1

            await sup.send("k", 2)
            assert sup.stats().actors == 1
            await sup.wait_idle()

    assert [call.job.payload for call in recorder.calls] == [1, 2]
    assert len(events(logs, "actor.spawned")) == 2


async def test_send_committed_at_the_deadline_before_the_actor_sees_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A send that commits at the idle deadline, before the actor wakes, is run by that actor."""
    journal = AfterAppends()
    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, journal=journal, idle_timeout=IDLE) as sup:
            await sup.send("k", 1)
            await trio.testing.wait_all_tasks_blocked()
            # The clock reaches the deadline after the journal write and before the
            # commit, with no checkpoint in between: the commit comes first.
            journal.after_append = lambda: mock_clock.jump(IDLE - trio.current_time())
            await sup.send("k", 2)
            assert trio.current_time() == IDLE
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().completed == 2

    assert [(call.job.payload, call.start) for call in recorder.calls] == [(1, 0.0), (2, IDLE)]
    assert len(events(logs, "actor.spawned")) == 1


async def test_send_reserved_before_the_deadline_and_committed_after(
    mock_clock: trio.testing.MockClock,
) -> None:
    """An actor whose deadline fires while a send is being journaled stays and runs that job."""
    journal = GatingJournal(inturn.MemoryJournal())
    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with (
            inturn.open_supervisor(recorder, journal=journal, idle_timeout=IDLE) as sup,
            trio.open_nursery() as nursery,
        ):
            await sup.send("k", 1)
            await trio.testing.wait_all_tasks_blocked()
            appends = journal.hold_writes(any_of(Append))
            nursery.start_soon(sup.send, "k", 2)
            await trio.testing.wait_all_tasks_blocked()  # reserved, journal write pending

            mock_clock.jump(IDLE)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().actors == 1  # the deadline fired, but the actor stayed

            appends.release()  # the send commits at the deadline instant
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().completed == 2

    assert [(call.job.payload, call.start) for call in recorder.calls] == [(1, 0.0), (2, IDLE)]
    assert len(events(logs, "actor.spawned")) == 1


async def test_send_arriving_just_after_the_actor_retired(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A send at the deadline instant, after the actor retired, gets a new actor and runs."""
    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
            await sup.send("k", 1)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(IDLE)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().actors == 0

            await sup.send("k", 2)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().completed == 2

    assert [(call.job.payload, call.start) for call in recorder.calls] == [(1, 0.0), (2, IDLE)]
    assert len(events(logs, "actor.spawned")) == 2


async def test_actor_held_by_a_failed_send_exits_after_idle_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    """An actor kept past its deadline by an in-flight send retires idle_timeout after that send fails."""
    journal = GatingJournal(inturn.MemoryJournal())
    async with inturn.open_supervisor(Recorder(), journal=journal, idle_timeout=IDLE) as sup:
        await sup.send("k", 1)
        await trio.testing.wait_all_tasks_blocked()
        appends = journal.hold_writes(any_of(Append), fails=True)  # then refused

        async def send_and_expect_failure() -> None:
            with pytest.raises(inturn.JournalError):
                await sup.send("k", 2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_and_expect_failure)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(IDLE)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().actors == 1
            appends.release()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1

        mock_clock.jump(math.nextafter(2 * IDLE, 0.0) - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1
        mock_clock.jump(2 * IDLE - trio.current_time())
        assert trio.current_time() == 2 * IDLE
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0
        assert sup._runtime.core.lanes() == 0
        assert sup.stats().completed == 1


async def test_sends_racing_idle_deadlines_are_never_lost(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Sends landing exactly on their actors' idle deadlines all run, whatever order trio picks."""
    # trio runs the tasks woken at one instant in a random order, so across many
    # keys and rounds every interleaving of "deadline fires" and "send commits" occurs.
    keys = [f"k{n}" for n in range(100)]
    rounds = 10
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:

        async def send_at(key: str, round_: int) -> None:
            await trio.sleep_until(round_ * IDLE)
            await sup.send(key, round_)

        for key in keys:
            await sup.send(key, 0)
        await trio.testing.wait_all_tasks_blocked()
        for round_ in range(1, rounds + 1):
            async with trio.open_nursery() as nursery:
                for key in keys:
                    nursery.start_soon(send_at, key, round_)
                await trio.testing.wait_all_tasks_blocked()
                mock_clock.jump(IDLE)  # every idle deadline and every sender wake at once
            await trio.testing.wait_all_tasks_blocked()
            assert trio.current_time() == round_ * IDLE
            assert len(keys) * (round_ + 1) == sup.stats().completed

    recorder.assert_sequential()
    assert {key: list(range(rounds + 1)) for key in keys} == {
        key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()
    }


async def test_no_actor_lingers_after_wait_idle_and_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once idle and ``idle_timeout`` later, no actor task is left, keyed or keyless."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(job.payload)  # type: ignore[arg-type]

    async with inturn.open_supervisor(handler, idle_timeout=IDLE) as sup:
        for n in range(30):
            await sup.send(f"k{n % 7}", n / 10)
            await sup.submit(n / 10)
        await sup.wait_idle()
        assert sup.stats().actors > 0

        autojump_clock.jump(IDLE)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0


async def test_many_distinct_keys_leave_no_residue(mock_clock: trio.testing.MockClock) -> None:
    """10,000 keys seen once each leave no lane, actor, waiter or unique key behind."""
    async with inturn.open_supervisor(Recorder(), idle_timeout=IDLE) as sup:
        for n in range(10_000):
            await sup.send(f"key-{n}", n, unique=f"u-{n}")
        async with trio.open_nursery() as nursery:
            for n in range(100):
                nursery.start_soon(sup.ask, f"asked-{n}", n)
        await sup.wait_idle()
        assert sup.stats().actors == 10_100

        mock_clock.jump(IDLE)
        await trio.testing.wait_all_tasks_blocked()
        runtime = sup._runtime
        assert sup.stats().actors == 0
        assert runtime.core.lanes() == 0
        assert runtime.actors == {}
        assert runtime.waiters == {}
        assert sup.stats().completed == 10_100
