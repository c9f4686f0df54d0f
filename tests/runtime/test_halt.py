"""on_discard="halt": a discard parks its key until ``resume``; keyless jobs never halt."""

from __future__ import annotations

import attrs
import trio
import trio.testing

import inturn
from inturn.testing import Recorder

from .helpers import dead_letters

NO_RETRY = inturn.Retry(max_attempts=1)


async def fail_bad(job: inturn.Job) -> object:
    """Fail permanently on payload "bad"; otherwise take one second and return the payload."""
    if job.payload == "bad":
        raise inturn.PermanentError("bad payload")
    await trio.sleep(1)
    return job.payload


def timeline(recorder: Recorder, key: str | None) -> list[tuple[int, float]]:
    """(job id, start time) of every attempt made for *key*."""
    return [(call.job.id, call.start) for call in recorder.by_key().get(key, [])]


async def test_a_discard_parks_the_key_and_leaves_its_later_jobs_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After a discard under "halt", later jobs of the key wait unrun while other keys go on."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(fail_bad)
    async with inturn.open_supervisor(recorder, journal=journal, on_discard="halt") as sup:
        first = await sup.send("a", "ok")
        bad = await sup.send("a", "bad")
        parked = [await sup.send("a", n) for n in range(2)]
        others = [await sup.send("b", n) for n in range(2)]
        await sup.wait_idle()  # returns although two jobs of "a" never ran

        assert trio.current_time() == 2.0
        stats = sup.stats()
        assert (frozenset({"a"}), 2, 0, 3, 1) == (
            stats.halted_keys,
            stats.queued,
            stats.running,
            stats.completed,
            stats.discarded,
        )
        assert parked == [job.id for job in journal.unfinished()]
        assert [(first, 0.0), (bad, 1.0)] == timeline(recorder, "a")
        assert [(others[0], 0.0), (others[1], 1.0)] == timeline(recorder, "b")
        [dead] = await journal.dead_letters()  # open: the supervisor holds it
        assert (bad, "a", 1) == (dead.id, dead.key, dead.attempts)
        assert dead.last_error is not None
        assert dead.last_error.endswith("PermanentError: bad payload")
        await sup.resume("a")  # let the body end with nothing parked


async def test_resume_runs_the_parked_jobs_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """resume(key) un-halts the key and its queued jobs run one at a time, in acceptance order."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(fail_bad)
    async with inturn.open_supervisor(recorder, journal=journal, on_discard="halt") as sup:
        bad = await sup.send("a", "bad")
        parked = [await sup.send("a", n) for n in range(3)]
        await sup.wait_idle()
        await trio.sleep(10)

        await sup.resume("a")
        assert frozenset() == sup.stats().halted_keys
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded, sup.stats().queued) == (3, 1, 0)

    assert [(bad, 0.0)] + [(job_id, 10.0 + n) for n, job_id in enumerate(parked)] == (
        timeline(recorder, "a")
    )
    recorder.assert_sequential()
    assert journal.unfinished() == []


async def test_jobs_sent_to_a_halted_key_are_accepted_and_parked_behind_the_others(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A send to a halted key returns an id; the job waits for resume, after the earlier ones."""
    recorder = Recorder(fail_bad)
    async with inturn.open_supervisor(recorder, on_discard="halt") as sup:
        await sup.send("a", "bad")
        earlier = await sup.send("a", "earlier")
        await sup.wait_idle()

        later = await sup.send("a", "later")
        await sup.wait_idle()  # the new job is parked too
        assert (2, frozenset({"a"})) == (sup.stats().queued, sup.stats().halted_keys)

        await sup.resume("a")
        await sup.wait_idle()

    assert [1, earlier, later] == [job_id for job_id, _ in timeline(recorder, "a")]


async def test_a_halted_key_holds_no_actor(autojump_clock: trio.testing.MockClock) -> None:
    """Parking a key retires its actor at once; resume spawns a fresh one."""
    async with inturn.open_supervisor(fail_bad, on_discard="halt", idle_timeout=60.0) as sup:
        await sup.send("a", "bad")
        await sup.send("a", "parked")
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0  # no lingering for idle_timeout either

        await sup.resume("a")
        await trio.testing.wait_all_tasks_blocked()
        assert (sup.stats().actors, sup.stats().running) == (1, 1)


async def test_a_discard_after_max_attempts_halts_the_key_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Running out of attempts parks the key exactly as a permanent failure does."""

    async def handler(job: inturn.Job) -> None:
        if job.payload == "flaky":
            raise ValueError("still failing")

    recorder = Recorder(handler)
    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, retry=retry, on_discard="halt") as sup:
        await sup.send("a", "flaky")
        await sup.send("a", "next")
        await sup.wait_idle()
        assert trio.current_time() == 3.0
        assert (frozenset({"a"}), 1) == (sup.stats().halted_keys, sup.stats().queued)
        await sup.resume("a")

    assert [(call.job.id, call.job.attempt, call.start) for call in recorder.calls] == [
        (1, 1, 0.0),
        (1, 2, 1.0),
        (1, 3, 3.0),
        (2, 1, 3.0),
    ]


async def test_a_resumed_key_halts_again_on_its_next_discard(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After resume, the next discard of the key parks it again, with its later jobs."""
    recorder = Recorder(fail_bad)
    async with inturn.open_supervisor(recorder, on_discard="halt") as sup:
        await sup.send("a", "bad")
        await sup.send("a", "bad")
        last = await sup.send("a", "last")
        await sup.wait_idle()

        await sup.resume("a")
        await sup.wait_idle()
        stats = sup.stats()
        assert (frozenset({"a"}), 2, 1) == (stats.halted_keys, stats.discarded, stats.queued)
        assert last not in [job_id for job_id, _ in timeline(recorder, "a")]
        await sup.resume("a")


async def test_resume_of_a_key_that_is_not_halted_does_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Resuming an unknown, idle or busy key changes no state and disturbs no job."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(fail_bad)
    async with inturn.open_supervisor(recorder, journal=journal, on_discard="halt") as sup:
        await sup.send("idle", 0)
        await sup.wait_idle()  # "idle" done at 1.0; its actor lingers
        busy = [await sup.send("busy", n) for n in range(3)]
        await trio.testing.wait_all_tasks_blocked()
        before = (sup.stats(), journal.unfinished())

        for key in ("never-seen", "idle", "busy"):
            await sup.resume(key)
            await trio.testing.wait_all_tasks_blocked()
            assert before == (sup.stats(), journal.unfinished()), key

        await sup.wait_idle()

    assert [(job_id, 1.0 + n) for n, job_id in enumerate(busy)] == timeline(recorder, "busy")
    recorder.assert_sequential()


async def test_a_discarded_keyless_job_halts_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under "halt", discarding a submit job parks no key and other jobs carry on."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(fail_bad)
    async with inturn.open_supervisor(recorder, journal=journal, on_discard="halt") as sup:
        bad = await sup.submit("bad")
        await trio.testing.wait_all_tasks_blocked()
        after = await sup.submit("after")
        keyed = [await sup.send("k", n) for n in range(2)]
        await sup.wait_idle()
        stats = sup.stats()
        assert (frozenset(), 3, 1, 0) == (
            stats.halted_keys,
            stats.completed,
            stats.discarded,
            stats.queued,
        )

    assert [(bad, 0.0), (after, 0.0)] == sorted(timeline(recorder, None))
    assert [(keyed[0], 0.0), (keyed[1], 1.0)] == timeline(recorder, "k")
    assert [bad] == [dead.id for dead in await dead_letters(journal)]
    assert journal.unfinished() == []


async def test_leaving_the_body_with_a_halted_key_leaves_its_jobs_in_the_journal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The body ends without waiting for parked jobs; they stay unfinished for the next open."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(fail_bad, journal=journal, on_discard="halt") as sup:
        await sup.send("a", "bad")
        parked = await sup.send("a", "parked")
    assert trio.current_time() == 0.0
    assert [parked] == [job.id for job in journal.unfinished()]


async def test_keys_say_which_discard_halted_a_key(
    journal: inturn.Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """Supervisor.keys names the job whose discard halted a key and its error; a pause names none; resume clears it."""
    async with inturn.open_supervisor(fail_bad, journal=journal, on_discard="halt") as sup:
        bad = await sup.send("a", "bad")
        behind = await sup.send("a", "ok")
        await sup.send("b", "ok")
        await sup.pause("b")  # paused before its job starts
        await sup.wait_idle()
        keys = {info.key: info for info in await sup.keys()}
        assert (keys["a"].halted, keys["a"].head_job_id, keys["a"].halted_by) == (True, behind, bad)
        assert keys["a"].halt_error is not None
        assert keys["a"].halt_error.endswith("PermanentError: bad payload")
        assert keys["a"].last_error is None  # the head's own: it never ran
        assert (keys["b"].halted, keys["b"].halted_by, keys["b"].halt_error) == (True, None, None)
        [halted] = await sup.keys(state="halted", limit=1)
        assert attrs.evolve(halted, head_age=None) == attrs.evolve(keys["a"], head_age=None)

        await sup.resume("a")
        await sup.resume("b")
        await sup.wait_idle()
        assert await sup.keys() == []
