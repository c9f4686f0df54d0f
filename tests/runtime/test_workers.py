"""Worker tasks: actors run in a pool of tasks, and an idle actor may hold none.

Up to `LINGERING_TASKS` tasks, an idle actor lingers in its own; past it, a
lane that needs a task takes the one of the actor idle the longest, which
lingers on without a task: a send wakes it into one, and its deadline still
retires its lane.  Spare tasks exit after ``idle_timeout``.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

import inturn
import inturn.actors
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


@pytest.fixture
def two_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inturn.actors, "LINGERING_TASKS", 2)


async def test_past_the_task_budget_idle_actors_give_their_tasks_to_new_keys(
    two_tasks: None, mock_clock: trio.testing.MockClock
) -> None:
    """50 keys, each idle once its job ran: 50 actors linger, in 2 tasks at most."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
        for n in range(50):
            await sup.send(f"k{n}", n)
            await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().completed == 50
        assert sup.stats().actors == 50
        assert worker_tasks() <= 2

        # an actor that gave its task away runs its key's next job, in order
        await sup.send("k0", "again")
        await sup.wait_idle()
        assert [call.job.payload for call in recorder.by_key()["k0"]] == [0, "again"]

        # and its deadline still retires every lane, with or without a task
        mock_clock.jump(IDLE)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0
        assert sup._runtime.core.lanes() == 0
    recorder.assert_sequential()


async def test_a_send_racing_the_hand_over_of_its_actors_task_runs_once(
    two_tasks: None, mock_clock: trio.testing.MockClock
) -> None:
    """A send to a key whose actor's task was just handed over, before that task resumed,
    runs in another task; the handed-over task never runs the actor too."""
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, idle_timeout=IDLE) as sup:
        for n in range(2):
            await sup.send(f"k{n}", n)
        await trio.testing.wait_all_tasks_blocked()
        # k2 takes k0's task; k0 is sent to before that task can resume (one write)
        await sup.send_many([("k2", 2), ("k0", "again")])
        await sup.wait_idle()
        assert [call.job.payload for call in recorder.by_key()["k0"]] == [0, "again"]
        assert sup.stats().completed == 4
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

        mock_clock.jump(IDLE)
        await trio.testing.wait_all_tasks_blocked()
        assert worker_tasks() == 0


async def test_many_keys_seen_once_keep_the_tasks_within_the_budget(
    mock_clock: trio.testing.MockClock,
) -> None:
    """However many keys linger, the worker tasks stay within `LINGERING_TASKS`."""
    async with inturn.open_supervisor(Recorder(), idle_timeout=IDLE) as sup:
        for n in range(3 * inturn.actors.LINGERING_TASKS):
            await sup.send(f"k{n}", n)
        await sup.wait_idle()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 3 * inturn.actors.LINGERING_TASKS
        assert worker_tasks() <= inturn.actors.LINGERING_TASKS


async def test_an_operator_s_cancel_cuts_short_only_the_attempt_it_names(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """One worker task serves the keys in turn: a skip cancels its scope for the attempt it
    names, and the task goes on to run the other key's job, and that key's next, whole."""
    monkeypatch.setattr(inturn.actors, "LINGERING_TASKS", 1)
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
