"""Worker tasks: actors run in a pool of tasks, and an idle key holds none.

An actor with nothing to run ends and its key lingers with neither a task nor
an actor: its worker goes back to the pool at once, a send gets the key an
actor and a task again, and its deadline retires its lane.  Spare tasks exit
after ``idle_timeout``.
"""

from __future__ import annotations

import gc
import math

import structlog
import trio
import trio.testing

import inturn
from inturn._workers import REAPER_SLACK
from inturn.actors import Actor
from inturn.testing import Recorder

IDLE = 1.0


def worker_tasks() -> int:
    """The worker tasks alive in this run (every one is named "inturn.actor")."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    tasks = [root]
    count = 0
    while tasks:
        task = tasks.pop()
        count += task.name == "inturn.actor"
        tasks.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return count


async def test_idle_actors_hold_no_task_and_keys_seen_one_after_another_share_one(
    mock_clock: trio.testing.MockClock,
) -> None:
    """50 keys, each idle once its job ran: 50 actors linger, and one task served them all."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
        for n in range(50):
            await sup.send(f"k{n}", n)
            await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().completed == 50
        assert sup.stats().actors == 50
        assert worker_tasks() == 1  # spare, not held by any lingering actor

        # a lingering actor gets a task again for its key's next job, in order
        await sup.send("k0", "again")
        await sup.wait_idle()
        assert [call.job.payload for call in recorder.by_key()["k0"]] == [0, "again"]
        assert worker_tasks() == 1

        # and its deadline retires every lane, the spare task with them
        mock_clock.jump(IDLE)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0
        assert sup._runtime.core.lanes() == 0
        assert worker_tasks() == 0
    recorder.assert_sequential()


def live_actors(sup: inturn.Supervisor) -> int:
    """The `Actor` objects of *sup* alive in this process (other tests' may linger in
    tracebacks kept)."""
    gc.collect()
    runtime = sup._runtime
    return sum(type(thing) is Actor and thing.runtime is runtime for thing in gc.get_objects())


async def test_a_lingering_key_holds_no_actor_object(mock_clock: trio.testing.MockClock) -> None:
    """Keys idle after their jobs linger as their deadline only: no `Actor` and no lane
    state in the core each (a million keys seen once linger together), and a send still
    wakes one, in order, as the same actor (no second spawn)."""
    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
            for n in range(20):
                await sup.send(f"k{n}", n)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().actors == 20  # each lingering key counts as one
            assert live_actors(sup) == 0
            assert sup._runtime.core.lanes() == 0

            await sup.send("k3", "again")
            await sup.wait_idle()
            assert [call.job.payload for call in recorder.by_key()["k3"]] == [3, "again"]
            assert sup.stats().actors == 20
            assert live_actors(sup) == 0
            assert sup._runtime.core.lanes() == 0
    spawned = [event["key"] for event in logs if event["event"] == "actor.spawned"]
    assert sorted(spawned) == sorted(f"k{n}" for n in range(20))
    recorder.assert_sequential()


async def test_sends_to_lingering_keys_in_one_write_each_get_a_task(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Two lingering keys woken by one batch both run, each in order, in tasks of their own."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
        for n in range(2):
            await sup.send(f"k{n}", n)
        await trio.testing.wait_all_tasks_blocked()
        await sup.send_many([("k1", "again"), ("k2", 2), ("k0", "again")])
        await sup.wait_idle()
        assert [call.job.payload for call in recorder.by_key()["k0"]] == [0, "again"]
        assert [call.job.payload for call in recorder.by_key()["k1"]] == [1, "again"]
        assert sup.stats().completed == 5
        assert sup.stats().actors == 3
    recorder.assert_sequential()


async def test_a_lingering_key_s_deadline_landing_with_its_send_serves_the_send(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A send accepted in the instant its key's linger runs out: the job runs, in order,
    whichever of the two trio runs first."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
        await sup.send("k", 1)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(IDLE)  # the reaper is due, not yet run
        await sup.send("k", 2)
        await sup.wait_idle()
        assert [call.job.payload for call in recorder.calls] == [1, 2]
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 1  # the second job's actor lingers anew
    recorder.assert_sequential()


async def test_spare_tasks_exit_after_idle_timeout(mock_clock: trio.testing.MockClock) -> None:
    """Tasks freed by keyless jobs wait idle_timeout for work, then exit."""
    async with inturn.open_supervisor(Recorder(), idle_timeout=IDLE) as sup:
        for n in range(5):
            await sup.submit(n)
        await sup.wait_idle()
        await trio.testing.wait_all_tasks_blocked()
        spare = worker_tasks()
        assert spare >= 1
        assert sup.stats().actors == 0  # spare tasks are not actors

        await sup.submit("reuse")  # runs in a spare task: none is started
        await sup.wait_idle()
        await trio.testing.wait_all_tasks_blocked()
        assert worker_tasks() == spare

        mock_clock.jump(math.nextafter(IDLE * (1 - REAPER_SLACK), 0.0))  # not even early
        await trio.testing.wait_all_tasks_blocked()
        assert worker_tasks() == spare
        mock_clock.jump(IDLE - trio.current_time())
        await trio.testing.wait_all_tasks_blocked()
        assert worker_tasks() == 0


async def test_tasks_number_the_keys_running_at_once_not_those_lingering(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Ten keys run at once and 3,000 are seen once after them: a dozen tasks at most (trio's
    scheduling decides how many of the keys seen once overlap), and 3,010 actors."""
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "hold":
            await release.wait()

    async with inturn.open_supervisor(handler, idle_timeout=IDLE) as sup:
        for n in range(10):
            await sup.send(f"held{n}", "hold")
        await trio.testing.wait_all_tasks_blocked()
        assert worker_tasks() == 10
        for n in range(3000):
            await sup.send(f"k{n}", n)
        await trio.testing.wait_all_tasks_blocked()
        tasks = worker_tasks()
        assert 11 <= tasks <= 13  # the keys seen once ran one or a few at a time
        release.set()
        await sup.wait_idle()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 3010
        assert worker_tasks() == tasks  # all spare now, none held by a lingering actor


async def test_an_operator_s_cancel_cuts_short_only_the_attempt_it_names(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One worker task serves the keys in turn: a skip cancels its scope for the attempt it
    names, and the task goes on to run the other key's job, and that key's next, whole."""
    ran: list[object] = []

    async def handler(job: inturn.Job) -> None:
        if job.payload == "hang":
            await trio.sleep_forever()
        await trio.sleep(0.1)  # a cancel left over would cut this short
        ran.append(job.payload)

    async with inturn.open_supervisor(handler, idle_timeout=IDLE) as sup:
        hang = await sup.send("a", "hang")
        await trio.testing.wait_all_tasks_blocked()
        await sup.skip(hang)
        for key, payload in [("b", "b1"), ("a", "a2"), ("b", "b2")]:
            await trio.testing.wait_all_tasks_blocked()  # the other key lingers
            await sup.send(key, payload)  # and this one takes its task
            await sup.wait_idle()
            assert worker_tasks() == 1
        assert sup.stats().completed == 3
        assert sup.stats().discarded == 1

    assert ran == ["b1", "a2", "b2"]
