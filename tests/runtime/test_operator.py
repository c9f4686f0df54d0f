"""The operator's view on a running supervisor: `Supervisor.keys`, `job`, `dead_letters`, and the fixes.

Every fix (``requeue``, ``skip``, ``retry_now``, ``pause``/``resume``,
``purge_dead``) is tested on a live supervisor, with its error paths; the
tests whose outcome rests on what the journal stores run on `SQLiteJournal`
too (on the real clock, since its writes wait for a thread).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import time
from collections.abc import Awaitable, Callable, Sequence

import pytest
import trio
import trio.testing

import inturn
from inturn.info import JobInfo, KeyInfo
from inturn.journal import (
    Append,
    Change,
    Complete,
    Discard,
    Due,
    Halt,
    MarkAttempt,
    Requeue,
    Resume,
    Revive,
)
from inturn.journal.records import Retrying
from inturn.testing import FaultyJournal, Recorder
from tests.conftest import MakeJournal
from tests.gating import GatingJournal, Hold, any_of

from .helpers import EventLog, LaggingJournal, Script

CODEC = inturn.JSONCodec()
GUARD = 60.0
"""Seconds (virtual under autojump_clock) after which a test that waits is stuck."""
NO_RETRY = inturn.Retry(max_attempts=1)
SLOW_RETRY = inturn.Retry(initial_delay=3600.0, max_delay=3600.0, jitter=0.0)
"""A failed attempt waits an hour for the next: long enough to be caught waiting."""
SKIPPED = "skipped by operator"


def ran(recorder: Recorder) -> list[int]:
    """The id of every attempt the handler made, in start order."""
    return [call.job.id for call in recorder.calls]


def attempts(recorder: Recorder) -> list[tuple[int, int]]:
    """(job id, attempt) of every attempt the handler made, in start order."""
    return [(call.job.id, call.job.attempt) for call in recorder.calls]


def heads(infos: Sequence[KeyInfo]) -> list[tuple[str, int | None, str | None, bool]]:
    """(key, head job id, head state, halted) of each key."""
    return [(info.key, info.head_job_id, info.head_state, info.halted) for info in infos]


async def dead_ids(sup: inturn.Supervisor) -> list[int]:
    return [dead.id for dead in await sup.dead_letters()]


async def dead_ids_of(
    sup: inturn.Supervisor, *, key: str | None = None, limit: int = 100
) -> list[int]:
    return [dead.id for dead in await sup.dead_letters(key=key, limit=limit)]


async def job_info(sup: inturn.Supervisor, job_id: int) -> JobInfo:
    info = await sup.job(job_id)
    assert info is not None, f"job {job_id} is neither unfinished nor a dead letter"
    return info


# -- keys() -------------------------------------------------------------------


async def test_keys_lists_the_keys_with_work_oldest_head_first(journal: inturn.Journal) -> None:
    """keys() lists each key with unfinished jobs, its queue and its head, the key with the oldest head first."""
    script = Script()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(script, journal=journal) as sup:
            a1 = await sup.send("a", "hold-a1")
            b1 = await sup.send("b", "hold-b1")
            a2 = await sup.send("a", "hold-a2")
            await script.started("hold-a1").wait()
            await script.started("hold-b1").wait()

            [a, b] = await sup.keys()
            assert ("a", 2, a1, "running", 1) == (
                a.key,
                a.queued,
                a.head_job_id,
                a.head_state,
                a.head_attempt,
            )
            assert ("b", 1, b1, "running", 1) == (
                b.key,
                b.queued,
                b.head_job_id,
                b.head_state,
                b.head_attempt,
            )
            for info in (a, b):
                assert (info.halted, info.next_retry_at, info.last_error) == (False, None, None)
                assert info.head_age is not None
                assert 0 <= info.head_age < GUARD
            assert [info.key for info in await sup.keys(limit=1)] == ["a"]

            script.release("hold-a1")
            await script.started("hold-a2").wait()
            # a's head is a2 now, accepted after b's head: b leads
            infos = await sup.keys()
            assert [("b", b1, 1), ("a", a2, 1)] == [
                (info.key, info.head_job_id, info.queued) for info in infos
            ]

            script.release("hold-b1")
            script.release("hold-a2")
            await sup.wait_idle()
            assert await sup.keys() == []


async def test_keys_filters_blocked_running_and_halted_keys(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """state="blocked" keeps keys with a retrying head or halted; "running" keys whose head runs; "halted" halted keys, with jobs or without (those last)."""
    script = Script()
    async with inturn.open_supervisor(script, retry=SLOW_RETRY, on_discard="halt") as sup:
        retrying = await sup.send("retrying", "boom")
        await sup.send("retrying", "r2")
        await sup.send("halted", "bad")
        parked = await sup.send("halted", "h2")
        await sup.send("emptied", "bad")  # halted, and nothing left behind it
        running = await sup.send("running", "hold")
        await trio.testing.wait_all_tasks_blocked()

        every = [
            ("retrying", retrying, "retrying", False),
            ("halted", parked, "queued", True),
            ("running", running, "running", False),
            ("emptied", None, None, True),
        ]
        assert heads(await sup.keys()) == every
        assert heads(await sup.keys(state="blocked")) == [every[0], every[1], every[3]]
        assert heads(await sup.keys(state="running")) == [every[2]]
        assert heads(await sup.keys(state="halted")) == [every[1], every[3]]
        [emptied] = [info for info in await sup.keys() if info.key == "emptied"]
        assert (emptied.queued, emptied.head_attempt, emptied.head_age) == (0, None, None)
        script.release("hold")
        await sup.skip(retrying)  # don't wait out five hours of retries
        await sup.resume("halted")
        await sup.resume("emptied")


async def test_a_retrying_head_shows_its_last_error_and_when_it_runs_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """While its head backs off, a key shows head_state "retrying", the failure's text, and the Unix time of the next attempt; job() agrees."""
    script = Script()
    async with inturn.open_supervisor(script, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom-once")
        await sup.send("k", "next")
        await trio.testing.wait_all_tasks_blocked()

        [info] = await sup.keys(state="blocked")
        assert ("k", 2, head, "retrying", 1, False) == (
            info.key,
            info.queued,
            info.head_job_id,
            info.head_state,
            info.head_attempt,
            info.halted,
        )
        assert info.last_error == "ValueError: boom"
        assert info.next_retry_at == pytest.approx(time.time() + 3600, abs=60)
        job = await job_info(sup, head)
        assert (job.state, job.attempts, job.last_error) == ("retrying", 1, "ValueError: boom")
        assert job.retry_at == info.next_retry_at
        await sup.wait_idle()  # the autojump clock waits out the hour
        assert sup.stats().completed == 2


async def test_a_head_waiting_for_a_slot_shows_queued_until_its_handler_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under max_concurrency, a head whose start was journaled with its acceptance but that waits for a slot is "queued", not "running"."""
    script = Script()
    async with inturn.open_supervisor(script, max_concurrency=1) as sup:
        x = await sup.send("x", "hold-x")
        y = await sup.send("y", "hold-y")  # heads its key: its start goes with its acceptance
        await trio.testing.wait_all_tasks_blocked()

        assert heads(await sup.keys()) == [("x", x, "running", False), ("y", y, "queued", False)]
        assert heads(await sup.keys(state="running")) == [("x", x, "running", False)]
        assert ((await job_info(sup, x)).state, (await job_info(sup, y)).state) == (
            "running",
            "queued",
        )

        script.release("hold-x")
        await script.started("hold-y").wait()
        assert heads(await sup.keys()) == [("y", y, "running", False)]
        assert (await job_info(sup, y)).state == "running"
        script.release("hold-y")


async def test_a_head_waiting_for_a_slot_has_started_no_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A head shown "queued" because it waits for a slot reports 0 attempts started (head_attempt, JobInfo.attempts), as its docs define them."""
    script = Script()
    async with inturn.open_supervisor(script, max_concurrency=1) as sup:
        await sup.send("x", "hold-x")
        y = await sup.send("y", "hold-y")
        await trio.testing.wait_all_tasks_blocked()

        [_, waiting] = await sup.keys()
        info = await job_info(sup, y)
        assert (waiting.head_state, info.state) == ("queued", "queued")
        assert (waiting.head_attempt, info.attempts) == (0, 0)
        script.release("hold-x")
        script.release("hold-y")


async def test_keys_running_filter_with_a_limit_finds_the_running_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """keys(state="running", limit=1) returns the key whose handler runs, even when an older head was marked started but waits for a slot."""
    script = Script()
    async with inturn.open_supervisor(script, max_concurrency=1) as sup:
        await sup.send("x", "hold-x1")
        x2 = await sup.send("x", "x2")
        a1 = await sup.send("a", "hold-a")
        await script.started("hold-x1").wait()
        script.release("hold-x1")
        # x1's completion journals x2's start, but the slot goes to "a", which waited
        await script.started("hold-a").wait()
        await trio.testing.wait_all_tasks_blocked()
        assert heads(await sup.keys()) == [("x", x2, "queued", False), ("a", a1, "running", False)]

        assert heads(await sup.keys(state="running", limit=1)) == [("a", a1, "running", False)]
        script.release("hold-a")


BAD_LIMITS: list[tuple[object, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (True, TypeError),
    (1.5, TypeError),
    ("3", TypeError),
    (None, TypeError),
]


@pytest.mark.parametrize(("limit", "error"), BAD_LIMITS, ids=repr)
async def test_keys_and_dead_letters_refuse_a_bad_limit(
    limit: object, error: type[Exception]
) -> None:
    """keys() and dead_letters() take limit as an int >= 1 only (not a bool): anything else raises."""
    async with inturn.open_supervisor(Script()) as sup:
        with pytest.raises(error):
            await sup.keys(limit=limit)  # type: ignore[arg-type]
        with pytest.raises(error):
            await sup.dead_letters(limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("state", ["stuck", "Running", ""])
async def test_keys_refuses_an_unknown_state_filter(state: str) -> None:
    """keys(state=...) accepts only "blocked", "running", "halted" or None."""
    async with inturn.open_supervisor(Script()) as sup:
        with pytest.raises(ValueError, match="state"):
            await sup.keys(state=state)  # type: ignore[arg-type]


# -- job() and dead_letters() -------------------------------------------------


async def test_job_reads_a_running_and_a_queued_job_and_none_for_others(
    journal: inturn.Journal,
) -> None:
    """job(id) describes an unfinished job (key, state, attempts, unique, payload bytes, acceptance time); None for an unknown or completed id."""
    script = Script()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(script, journal=journal) as sup:
            before = time.time()
            first = await sup.send("k", "hold", unique="u-1")
            second = await sup.send("k", "second")
            await script.started("hold").wait()

            running = await job_info(sup, first)
            assert (first, "k", "running", 1, "u-1") == (
                running.id,
                running.key,
                running.state,
                running.attempts,
                running.unique,
            )
            assert running.data == CODEC.encode("hold")
            assert before <= running.accepted_at <= time.time()
            assert (running.finished_at, running.last_error, running.retry_at) == (None, None, None)
            queued = await job_info(sup, second)
            assert (second, "queued", 0, None) == (
                queued.id,
                queued.state,
                queued.attempts,
                queued.unique,
            )
            assert await sup.job(second + 100) is None

            script.release("hold")
            await sup.wait_idle()
            assert await sup.job(first) is None  # completed jobs are forgotten
            assert await sup.job(second) is None


async def test_dead_letters_lists_discarded_jobs_oldest_first_by_key_and_limit(
    journal: inturn.Journal,
) -> None:
    """dead_letters() returns discarded jobs in id order with attempts and last error; key= and limit= narrow it; job() reads one."""
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(Script(), journal=journal, retry=NO_RETRY) as sup:
            a1 = await sup.send("a", "bad")
            b1 = await sup.send("b", "bad")
            a2 = await sup.send("a", "bad")
            await sup.send("a", "fine")
            keyless = await sup.submit("bad")
            await sup.wait_idle()

            dead = await sup.dead_letters()
            assert [(d.id, d.key) for d in dead] == [
                (a1, "a"),
                (b1, "b"),
                (a2, "a"),
                (keyless, None),
            ]
            for letter in dead:
                assert (letter.state, letter.attempts, letter.retry_at) == ("dead", 1, None)
                assert letter.last_error is not None
                assert letter.last_error.endswith("PermanentError: bad payload")
                assert letter.data == CODEC.encode("bad")
                assert letter.finished_at is not None
                assert letter.accepted_at <= letter.finished_at <= time.time()
            assert await dead_ids_of(sup, key="a") == [a1, a2]
            assert await dead_ids_of(sup, key="b") == [b1]
            assert await dead_ids_of(sup, key="nobody") == []
            assert await dead_ids_of(sup, limit=2) == [a1, b1]
            assert await dead_ids_of(sup, key="a", limit=1) == [a1]
            assert await sup.job(a2) == dead[2]


@pytest.mark.parametrize(("key", "error"), [(3, TypeError), ("", inturn.InvalidKey)])
async def test_dead_letters_refuses_a_bad_key(key: object, error: type[Exception]) -> None:
    """dead_letters(key=...) takes a valid key or None."""
    async with inturn.open_supervisor(Script()) as sup:
        with pytest.raises(error):
            await sup.dead_letters(key=key)  # type: ignore[arg-type]


# -- requeue() ----------------------------------------------------------------


async def test_requeue_puts_a_dead_letter_at_its_keys_tail_with_attempts_reset(
    journal: inturn.Journal,
) -> None:
    """requeue(id) returns a new id; the job runs again as attempt 1 after every job sent before, and the old id is gone."""
    script = Script()
    broken = True

    async def handler(job: inturn.Job) -> object:
        if job.payload == "flaky" and broken:
            raise ValueError("the bank is down")
        return await script(job)

    recorder = Recorder(handler)
    retry = inturn.Retry(max_attempts=3, initial_delay=0.0)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
            dead = await sup.send("k", "flaky")
            await sup.wait_idle()
            [letter] = await sup.dead_letters()
            assert (letter.id, letter.attempts) == (dead, 3)
            assert letter.last_error == "ValueError: the bank is down"

            held = await sup.send("k", "hold")
            after = await sup.send("k", "after")
            await script.started("hold").wait()
            broken = False
            new = await sup.requeue(dead)

            assert new > after
            assert await sup.job(dead) is None
            assert await sup.dead_letters() == []
            info = await job_info(sup, new)
            assert ("k", "queued", 0, CODEC.encode("flaky")) == (
                info.key,
                info.state,
                info.attempts,
                info.data,
            )
            script.release("hold")
            await sup.wait_idle()
            assert await sup.job(new) is None

    assert attempts(recorder) == [(dead, 1), (dead, 2), (dead, 3), (held, 1), (after, 1), (new, 1)]
    recorder.assert_sequential()


async def test_two_requeues_of_one_dead_letter_at_once_requeue_it_once(
    journal: inturn.Journal,
) -> None:
    """Of two concurrent requeues of the same dead letter one returns the new id and the other raises JobNotFound (it is gone); the job runs once."""
    broken = True

    async def handler(job: inturn.Job) -> None:
        if broken:
            raise inturn.PermanentError("no")
        await trio.lowlevel.checkpoint()

    recorder = Recorder(handler)
    outcomes: list[int | BaseException] = []

    async def requeue(sup: inturn.Supervisor, job_id: int) -> None:
        try:
            outcomes.append(await sup.requeue(job_id))
        except inturn.InturnError as exc:
            outcomes.append(exc)

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            dead = await sup.send("k", "x")
            await sup.wait_idle()
            broken = False
            async with trio.open_nursery() as nursery:
                nursery.start_soon(requeue, sup, dead)
                nursery.start_soon(requeue, sup, dead)
            await sup.wait_idle()

    [new] = [outcome for outcome in outcomes if isinstance(outcome, int)]
    [error] = [outcome for outcome in outcomes if not isinstance(outcome, int)]
    assert isinstance(error, inturn.JobNotFound), repr(error)
    assert ran(recorder) == [dead, new]


async def test_requeue_of_a_keyless_dead_letter_runs_it_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A dead letter from submit() comes back as a new keyless job and runs."""
    broken = True

    async def handler(job: inturn.Job) -> None:
        if broken:
            raise inturn.PermanentError("no")
        await trio.lowlevel.checkpoint()

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder) as sup:
        dead = await sup.submit("x")
        await sup.wait_idle()
        broken = False
        new = await sup.requeue(dead)
        await sup.wait_idle()
        assert await sup.dead_letters() == []
    assert [(call.job.id, call.job.key, call.job.attempt) for call in recorder.calls] == [
        (dead, None, 1),
        (new, None, 1),
    ]


async def test_requeue_refuses_a_job_that_is_not_a_dead_letter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """requeue raises JobNotFound for an unknown or completed id, JobStateError for a queued, running or retrying job, and changes nothing."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, retry=SLOW_RETRY) as sup:
        done = await sup.send("k", "fine")
        await sup.wait_idle()
        running = await sup.send("k", "hold")
        queued = await sup.send("k", "queued")
        retrying = await sup.send("r", "boom-once")
        await trio.testing.wait_all_tasks_blocked()

        for missing in (done, queued + 100):
            with pytest.raises(inturn.JobNotFound) as not_found:
                await sup.requeue(missing)
            assert not_found.value.job_id == missing
        for job_id, state in ((running, "running"), (queued, "queued"), (retrying, "retrying")):
            with pytest.raises(inturn.JobStateError) as wrong:
                await sup.requeue(job_id)
            assert (wrong.value.job_id, wrong.value.state) == (job_id, state)

        script.release("hold")
        await sup.retry_now("r")
        await sup.wait_idle()
    assert sorted(attempts(recorder)) == [
        (done, 1),
        (running, 1),
        (queued, 1),
        (retrying, 1),
        (retrying, 2),
    ]


async def test_requeue_refuses_while_an_unfinished_job_holds_its_unique_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """requeue raises DuplicateError while another unfinished job holds the dead letter's unique key, in memory or waiting in the journal; the dead letter stays."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, retry=NO_RETRY, window=1) as sup:
        dead = await sup.send("a", "bad", unique="u")
        await sup.wait_idle()

        holder = await sup.send("b", "hold-b", unique="u")  # the head of "b": in memory
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(inturn.DuplicateError) as held:
            await sup.requeue(dead)
        assert (held.value.unique, held.value.job_id) == ("u", holder)
        assert await dead_ids(sup) == [dead]
        script.release("hold-b")
        await sup.wait_idle()

        await sup.send("c", "hold-c")
        spilled = await sup.send("c", "later", unique="u")  # window=1: waits in the journal
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(inturn.DuplicateError) as held:
            await sup.requeue(dead)
        assert held.value.job_id == spilled
        assert await dead_ids(sup) == [dead]
        script.release("hold-c")
        await sup.wait_idle()

        new = await sup.requeue(dead)  # free now
        await sup.wait_idle()
    assert [call.job.id for call in recorder.calls if call.job.unique == "u"] == [
        dead,
        holder,
        spilled,
        new,
    ]


# -- skip() -------------------------------------------------------------------


async def test_skip_of_a_hung_head_discards_it_at_once_and_the_key_goes_on(
    journal: inturn.Journal,
) -> None:
    """skip() cancels a head whose handler hangs; it becomes a dead letter "skipped by operator" and the key runs its next job, even under on_discard="halt"."""
    script = Script()
    recorder = Recorder(script)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal, on_discard="halt") as sup:
            hung = await sup.send("k", "hang")
            after = await sup.send("k", "after")
            await script.started("hang").wait()

            await sup.skip(hung)
            await sup.wait_idle()
            [dead] = await sup.dead_letters()
            assert (hung, "k", SKIPPED, 1) == (dead.id, dead.key, dead.last_error, dead.attempts)
            stats = sup.stats()
            assert (stats.halted_keys, stats.completed, stats.discarded) == (frozenset(), 1, 1)

    assert ran(recorder) == [hung, after]
    assert recorder.calls[0].end is None  # cut short, never finished


async def test_skip_of_a_retrying_head_cuts_its_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """skip() of a head waiting out a backoff discards it at once: the next job runs without waiting."""
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, retry=SLOW_RETRY, on_discard="halt") as sup:
        head = await sup.send("k", "boom")
        after = await sup.send("k", "after")
        await trio.testing.wait_all_tasks_blocked()
        assert (await job_info(sup, head)).state == "retrying"

        start = trio.current_time()
        await sup.skip(head)
        await sup.wait_idle()
        assert trio.current_time() - start < 1
        [dead] = await sup.dead_letters()
        assert (head, SKIPPED, 1) == (dead.id, dead.last_error, dead.attempts)
        assert sup.stats().halted_keys == frozenset()
    assert attempts(recorder) == [(head, 1), (after, 1)]


async def test_skip_of_a_queued_job_discards_it_unrun_at_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skipped job behind the head never runs: it is discarded when its turn comes, and the key goes on."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, on_discard="halt") as sup:
        first = await sup.send("k", "hold")
        victim = await sup.send("k", "victim")
        after = await sup.send("k", "after")
        await trio.testing.wait_all_tasks_blocked()

        await sup.skip(victim)
        script.release("hold")
        await sup.wait_idle()
        [dead] = await sup.dead_letters()
        assert (victim, SKIPPED, 0) == (dead.id, dead.last_error, dead.attempts)
        assert sup.stats().halted_keys == frozenset()
    assert ran(recorder) == [first, after]


async def test_skip_of_a_job_far_back_in_a_spilled_backlog_never_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skipped job that waits in the journal (beyond the key's window) is discarded unrun when it is paged in."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, window=2) as sup:
        ids = [await sup.send("k", "hold")] + [await sup.send("k", n) for n in range(10)]
        victim = ids[8]
        await trio.testing.wait_all_tasks_blocked()
        assert sup._runtime.core.buffered() <= 2  # the victim waits in the journal
        assert (await job_info(sup, victim)).state == "queued"

        await sup.skip(victim)
        script.release("hold")
        await sup.wait_idle()
        [dead] = await sup.dead_letters()
        assert (victim, SKIPPED, 0) == (dead.id, dead.last_error, dead.attempts)
    assert ran(recorder) == [job_id for job_id in ids if job_id != victim]
    recorder.assert_sequential()


async def test_skip_refuses_a_completed_job_and_a_dead_letter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """skip raises JobNotFound for a completed or unknown id and JobStateError for a dead letter, which stays as it was."""
    async with inturn.open_supervisor(Script(), retry=NO_RETRY) as sup:
        done = await sup.send("k", "fine")
        dead = await sup.send("k", "bad")
        await sup.wait_idle()

        for missing in (done, dead + 100):
            with pytest.raises(inturn.JobNotFound) as not_found:
                await sup.skip(missing)
            assert not_found.value.job_id == missing
        with pytest.raises(inturn.JobStateError) as wrong:
            await sup.skip(dead)
        assert (wrong.value.job_id, wrong.value.state) == (dead, "dead")
        [letter] = await sup.dead_letters()
        assert letter.id == dead
        assert letter.last_error is not None
        assert letter.last_error.endswith("PermanentError: bad payload")


async def test_ask_for_a_skipped_job_raises_job_discarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An ask waiting on a job that is skipped raises JobDiscarded, caused by a PermanentError "skipped by operator"."""
    script = Script()
    caught: list[inturn.JobDiscarded] = []

    async def ask(sup: inturn.Supervisor) -> None:
        with pytest.raises(inturn.JobDiscarded) as discarded:
            await sup.ask("k", "hang")
        caught.append(discarded.value)

    async with inturn.open_supervisor(script) as sup, trio.open_nursery() as nursery:
        nursery.start_soon(ask, sup)
        await script.started("hang").wait()
        [info] = await sup.keys()
        assert info.head_job_id is not None
        await sup.skip(info.head_job_id)

    [error] = caught
    assert error.job_id == info.head_job_id
    assert isinstance(error.__cause__, inturn.PermanentError)
    assert str(error.__cause__) == SKIPPED


async def test_a_skipped_queued_job_stays_skipped_when_the_supervisor_stops_before_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """skip is journaled: a queued job skipped before its turn does not run under the next supervisor opened on the journal."""
    journal = inturn.MemoryJournal()
    script = Script()
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(script, journal=journal) as sup:
            hung = await sup.send("k", "hang")
            victim = await sup.send("k", "victim")
            after = await sup.send("k", "after")
            await script.started("hang").wait()
            await sup.skip(victim)
            scope.cancel()  # stop, as a crash or a deploy would

    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.wait_idle()
        assert await dead_ids(sup) == [victim]
    assert ran(recorder) == [hung, after]


async def test_skip_while_the_heads_start_is_being_journaled_never_runs_the_handler(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A head skipped while its next attempt's start is being written to the journal is discarded without its handler running again."""
    journal = GatingJournal(inturn.MemoryJournal())
    held = journal.hold_writes(
        lambda changes: any(
            isinstance(change, MarkAttempt) and change.attempt == 2 for change in changes
        )
    )
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, journal=journal, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom")
        after = await sup.send("k", "after")
        await trio.testing.wait_all_tasks_blocked()
        assert await sup.retry_now("k")
        await held.wait_held()  # attempt 2 is about to start

        await sup.skip(head)
        held.release()
        await sup.wait_idle()
        [dead] = await sup.dead_letters()
        assert (dead.id, dead.last_error) == (head, SKIPPED)
    assert attempts(recorder) == [(head, 1), (after, 1)]


@pytest.mark.parametrize(
    ("payload", "finishing", "raised"),
    [
        ("ok", Complete, inturn.JobNotFound),  # its completion is being journaled
        ("bad", Discard, inturn.JobStateError),  # its discard (a permanent failure) is
    ],
)
async def test_skip_of_a_job_whose_attempt_finishes_first_says_so(
    payload: str,
    finishing: type[Change],
    raised: type[Exception],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip that lands while the running job's outcome is being journaled waits for it,
    and the job keeps that outcome: `skip` raises what a skip of it would raise next,
    instead of returning as if the job were skipped."""
    journal = GatingJournal(inturn.MemoryJournal())
    held = journal.hold_writes(any_of(finishing), shielded=True)
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, journal=journal, retry=NO_RETRY) as sup:
        job_id = await sup.send("k", payload)
        await held.wait_held()  # the handler returned; its outcome is being journaled
        async with trio.open_nursery() as nursery:

            async def skip() -> None:
                with pytest.raises(raised):
                    await sup.skip(job_id)

            nursery.start_soon(skip)
            await trio.testing.wait_all_tasks_blocked()
            held.release()
        await sup.wait_idle()
        stats = sup.stats()
        dead = await sup.dead_letters()
    if payload == "ok":
        assert (stats.completed, stats.discarded, dead) == (1, 0, [])
    else:
        assert (stats.completed, stats.discarded) == (0, 1)
        assert [info.id for info in dead] == [job_id]
        assert dead[0].last_error != SKIPPED
    assert attempts(recorder) == [(job_id, 1)]


def answer_held(kind: type[Change]) -> tuple[GatingJournal, Hold]:
    """A memory journal that applies each write holding a *kind* change at once, and holds
    its answer until released: committed, and its writer not told yet."""
    journal = GatingJournal(inturn.MemoryJournal())
    return journal, journal.hold_answers(any_of(kind))


@pytest.mark.parametrize("accepted_by", ["send", "send_many", "spilled", "requeue", "promote"])
async def test_skip_of_a_job_whose_acceptance_is_not_answered_yet_discards_it(
    accepted_by: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A skip that finds a job in the journal before its sender's write has returned (a
    durable write is committed before its answer) waits for the sender, then discards the
    job: the send returns its id, the job never runs, and the key goes on."""
    held: list[int] = []

    def acceptance(change: Change) -> int | None:
        """The id of the job whose acceptance *change* is, if it is the one to hold."""
        if accepted_by == "requeue":
            return change.new_id if isinstance(change, Requeue) else None
        if accepted_by == "promote":
            return change.job_id if isinstance(change, Due) else None
        if isinstance(change, Append) and change.data == CODEC.encode("held"):
            return change.job_id
        return None

    def hold(changes: Sequence[Change]) -> bool:
        found = [job_id for change in changes if (job_id := acceptance(change)) is not None]
        held.extend(found)
        return bool(found)

    journal = GatingJournal(inturn.MemoryJournal())
    answers = journal.hold_answers(hold)
    script = Script()
    recorder = Recorder(script)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, journal=journal, retry=NO_RETRY, window=1
        ) as sup:
            sent: list[int] = []
            if accepted_by == "spilled":
                await sup.send("b", "hold-first")  # running: the next job spills
            if accepted_by == "requeue":
                dead = await sup.send("b", "bad")
                await sup.wait_idle()
            async with trio.open_nursery() as nursery:

                async def accept() -> None:
                    if accepted_by in ("send", "spilled"):
                        sent.append(await sup.send("b", "held"))
                    elif accepted_by == "send_many":
                        sent.extend(await sup.send_many([("b", "held")]))
                    elif accepted_by == "requeue":
                        sent.append(await sup.requeue(dead))
                    else:
                        sent.append(await sup.send("b", "held", delay=5.0))

                nursery.start_soon(accept)
                await answers.wait_held()  # in the journal; its sender not answered yet
                nursery.start_soon(sup.skip, held[0])
                await trio.testing.wait_all_tasks_blocked()
                answers.release()
            script.release("hold-first")
            after = await sup.send("b", "after")
            await sup.wait_idle()
            dead_letters = {info.id: info.last_error for info in await sup.dead_letters()}
            stats = sup.stats()
    assert sent == held
    assert dead_letters[held[0]] == SKIPPED
    assert held[0] not in ran(recorder)
    assert ran(recorder)[-1] == after
    assert (stats.queued, stats.running, stats.completed, stats.discarded) == (
        0,
        0,
        1 + (accepted_by == "spilled"),
        1 + (accepted_by == "requeue"),
    )


async def test_a_scheduled_job_promoted_before_its_sender_hears_back_runs_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The scheduler may read a scheduled job from the journal, and promote it, before its
    sender's write has returned (a journal whose reads see a commit before its writer
    hears back): the job runs once when due, and the supervisor goes idle."""
    journal, held = answer_held(Append)
    recorder = Recorder(Script())
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            async with trio.open_nursery() as nursery:
                sent: list[int] = []

                async def send() -> None:
                    sent.append(await sup.send("k", "later", delay=1.0))

                nursery.start_soon(send)
                await held.wait_held()
                await trio.sleep(2.0)  # due meanwhile: promoted, its sender still waiting
                held.release()
            await sup.wait_idle()
            stats = sup.stats()
    assert ran(recorder) == sent
    assert (stats.completed, stats.scheduled, stats.queued) == (1, 0, 0)


@pytest.mark.parametrize(
    ("idle", "actors"),
    [(0.0, 1), (2.0, 0)],  # its key lingering, or past idle_timeout (1.0): retired
    ids=["lingering", "retired"],
)
async def test_skip_of_a_dead_letter_whose_head_requeue_is_not_answered_yet_discards_it(
    autojump_clock: trio.testing.MockClock, idle: float, actors: int
) -> None:
    """A skip that finds a dead letter unfinished again, while `requeue(head=True)` is
    still waiting for its write's answer, waits for the requeue, then discards the job:
    the requeue returns, the job does not run again, and the counts stay whole.  Its key
    lingers or has retired, and the core holds nothing of it either way: the skip is
    still recorded for the revived job (it found no lane to mark it in, and the job ran
    again in 3 runs of 10 of a retired key, as trio ordered the tasks;
    `tests/core/test_core.py` holds the core to it every time)."""
    journal, held = answer_held(Revive)
    recorder = Recorder(Script())
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal, retry=NO_RETRY) as sup:
            dead = await sup.send("k", "bad")
            after = await sup.send("k", "after")
            await sup.wait_idle()
            await trio.sleep(idle)
            assert sup.stats().actors == actors
            async with trio.open_nursery() as nursery:

                async def requeue() -> None:
                    assert await sup.requeue(dead, head=True) == dead

                nursery.start_soon(requeue)
                await held.wait_held()  # unfinished in the journal; not answered yet
                nursery.start_soon(sup.skip, dead)
                await trio.testing.wait_all_tasks_blocked()
                held.release()
            await sup.wait_idle()
            stats = sup.stats()
            dead_letters = [(info.id, info.last_error) for info in await sup.dead_letters()]
    assert dead_letters == [(dead, SKIPPED)]
    assert ran(recorder) == [dead, after]
    assert (stats.queued, stats.running, stats.completed, stats.discarded) == (0, 0, 1, 2)


async def test_skip_of_a_job_sent_as_the_supervisor_stops_raises_supervisor_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip waiting for a job's sender, when the supervisor stops before the sender's
    write is answered, raises `SupervisorClosed` instead of waiting forever."""
    journal, appends = answer_held(Append)
    held: list[int] = []
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as outside:  # callers that outlive the supervisor
            with trio.CancelScope() as stopping:
                async with inturn.open_supervisor(Script(), journal=journal) as sup:

                    async def send() -> None:
                        with pytest.raises(inturn.SupervisorClosed):
                            await sup.send("k", "x")

                    async def skip() -> None:
                        with pytest.raises(inturn.SupervisorClosed, match="stopped while job"):
                            await sup.skip(held[0])

                    outside.start_soon(send)
                    await appends.wait_held()
                    [held] = [[job.id for job in await journal.jobs("k")]]
                    outside.start_soon(skip)
                    await trio.testing.wait_all_tasks_blocked()
                    stopping.cancel()
            appends.release()


async def test_a_cancelled_skip_of_a_running_job_leaves_it_to_run_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip cancelled while it waits for the running attempt to stop is called off: the
    job is not discarded, and its next attempt runs after its backoff."""
    stop = trio.Event()

    async def stubborn(job: inturn.Job) -> None:
        if job.payload == "x" and job.attempt == 1:
            with trio.CancelScope(shield=True):  # deaf to the skip's cancel
                await stop.wait()
            raise ValueError("attempt 1 fails")

    recorder = Recorder(stubborn)
    retry = inturn.Retry(initial_delay=1.0, jitter=0.0)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, retry=retry) as sup:
            job_id = await sup.send("k", "x")
            after = await sup.send("k", "after")
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(5.0) as gave_up:
                await sup.skip(job_id)
            stop.set()
            await sup.wait_idle()
            stats = sup.stats()
    assert gave_up.cancelled_caught
    # The skip's cancel reached attempt 1 as it failed: cut short, as by a shutdown, it
    # runs again as the same attempt.
    assert attempts(recorder) == [(job_id, 1), (job_id, 1), (job_id, 2), (after, 1)]
    assert (stats.completed, stats.discarded) == (2, 0)


@pytest.mark.parametrize("batch", [None, 2])
@pytest.mark.parametrize(
    ("fails", "raised"), [(False, inturn.JobNotFound), (True, inturn.JobStateError)]
)
async def test_skip_of_a_job_whose_handler_finishes_deaf_to_it_keeps_the_outcome(
    batch: int | None, fails: bool, raised: type[Exception], journal: inturn.Journal
) -> None:
    """A handler that swallows the skip's cancel and returns (or fails for good) has done its
    jobs' work: they complete (or become dead letters with its error), none runs again,
    and `skip` says what the job is now.  The skip's cancel, still pending as the handler
    finishes, must cut neither that outcome's write short nor the next job's attempt."""
    started, cut, release = trio.Event(), trio.Event(), trio.Event()
    calls: list[list[int]] = []

    async def deaf(jobs: list[inturn.Job]) -> None:
        calls.append([job.id for job in jobs])
        if started.is_set():
            return
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:  # the skip's cancel: ignored
            cut.set()
            with trio.CancelScope(shield=True):
                await release.wait()
        if fails:
            raise inturn.PermanentError("deaf and failed")

    async def one(job: inturn.Job) -> None:
        await deaf([job])

    handler = one if batch is None else deaf
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal, batch=batch) as sup:
            first, second = await sup.send_many([("k", "x"), ("k", "y")])  # one batch
            await started.wait()
            async with trio.open_nursery() as nursery:

                async def skip() -> None:
                    with pytest.raises(raised):
                        await sup.skip(first)

                nursery.start_soon(skip)
                await cut.wait()
                release.set()
            await sup.wait_idle()
            stats = sup.stats()
            dead = [(info.id, info.last_error) for info in await sup.dead_letters()]
    together = [first] if batch is None else [first, second]  # what the first call had
    if fails:
        assert dead == [
            (job_id, "inturn.errors.PermanentError: deaf and failed") for job_id in together
        ]
    else:
        assert dead == []
    assert (stats.completed, stats.discarded) == (2 - len(dead), len(dead))
    assert calls == ([[first], [second]] if batch is None else [[first, second]])


async def test_a_head_requeue_of_a_job_failing_for_good_as_it_is_skipped_waits_for_the_skip(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip whose running job fails for good as it is skipped (deaf to the skip's
    cancel): a head requeue of the dead letter, called before the skip learns the outcome,
    waits for the skip, which raises as the job is a dead letter; then the job runs again.
    One operator call that changes a job at a time, so each hears back in journal order."""
    release = trio.Event()
    attempts_made: list[int] = []

    async def handler(job: inturn.Job) -> None:
        attempts_made.append(job.attempt)
        if len(attempts_made) == 1:
            with trio.CancelScope(shield=True):  # deaf to the skip
                await release.wait()
            raise inturn.PermanentError("for good")
        await trio.sleep_forever()  # the requeued job: a second skip cancels it

    journal = GatingJournal(inturn.MemoryJournal())
    reads = itertools.count(1)
    # the second read of a job (the skip's, once the attempt has ended), read once let go
    held = journal.hold_reads("job", lambda: next(reads) == 2, read_first=False)
    requeued: list[int] = []
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            job_id = await sup.send("k", "x")
            await trio.testing.wait_all_tasks_blocked()
            async with trio.open_nursery() as nursery:

                async def skip() -> None:
                    with pytest.raises(inturn.JobStateError, match="dead letter"):
                        await sup.skip(job_id)

                async def requeue() -> None:
                    requeued.append(await sup.requeue(job_id, head=True))

                nursery.start_soon(skip)
                await trio.testing.wait_all_tasks_blocked()
                release.set()  # it fails for good: a dead letter, as the skip waits
                await held.wait_held()
                nursery.start_soon(requeue)
                await trio.testing.wait_all_tasks_blocked()
                assert (requeued, attempts_made) == ([], [1])  # the requeue waits
                held.release()
            assert requeued == [job_id]
            await trio.testing.wait_all_tasks_blocked()
            assert attempts_made == [1, 1]  # running again
            await sup.skip(job_id)
            info = await sup.job(job_id)
            assert info is not None
            assert (info.state, info.last_error) == ("dead", SKIPPED)
            await sup.wait_idle()
            assert (sup.stats().completed, sup.stats().discarded) == (0, 2)
    assert attempts_made == [1, 1]


async def test_skip_while_the_heads_retry_is_being_journaled_still_discards_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A head skipped while its failed attempt's Retrying record is being written is discarded at once, not left at the head after its backoff."""
    journal = GatingJournal(inturn.MemoryJournal())
    held = journal.hold_writes(any_of(Retrying))
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, journal=journal, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom")
        after = await sup.send("k", "after")
        await held.wait_held()  # attempt 1 failed; its retry is being journaled

        await sup.skip(head)
        held.release()
        with trio.fail_after(GUARD):
            await sup.wait_idle()
        [dead] = await sup.dead_letters()
        assert (dead.id, dead.last_error) == (head, SKIPPED)
    assert attempts(recorder) == [(head, 1), (after, 1)]


async def test_a_skip_the_journal_refuses_raises_and_the_job_still_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """If the journal refuses a skip's discard, skip raises JournalError and the job is left as it was: it runs in its turn."""
    journal = FaultyJournal(
        inturn.MemoryJournal(),
        fail=lambda changes: any(isinstance(change, Discard) for change in changes),
    )
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        first = await sup.send("k", "hold")
        victim = await sup.send("k", "victim")
        await trio.testing.wait_all_tasks_blocked()

        with pytest.raises(inturn.JournalError):
            await sup.skip(victim)
        assert (await job_info(sup, victim)).state == "queued"
        script.release("hold")
        with trio.fail_after(GUARD):
            await sup.wait_idle()
        assert await sup.dead_letters() == []
    assert ran(recorder) == [first, victim]


async def test_skip_of_a_queued_job_on_a_paused_key_keeps_the_key_parked_and_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Skipping a job of a paused key discards it; wait_idle still returns with the key parked, and resume runs the others in order."""
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom-once")
        victim = await sup.send("k", "victim")
        after = await sup.send("k", "after")
        await trio.testing.wait_all_tasks_blocked()
        await sup.pause("k")

        await sup.skip(victim)
        with trio.fail_after(GUARD):
            await sup.wait_idle()
        assert sup.stats().queued == 2
        await sup.resume("k")
        await sup.retry_now("k")
        with trio.fail_after(GUARD):
            await sup.wait_idle()
        assert [(d.id, d.last_error) for d in await sup.dead_letters()] == [(victim, SKIPPED)]
    assert attempts(recorder) == [(head, 1), (head, 2), (after, 1)]


async def test_skip_of_the_last_job_of_a_spilled_backlog_lets_the_key_drain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Skipping the newest job of a backlog that waits in the journal leaves the key to run the rest and go idle."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, window=2, idle_timeout=0) as sup:
        ids = [await sup.send("k", "hold")] + [await sup.send("k", n) for n in range(5)]
        await trio.testing.wait_all_tasks_blocked()
        await sup.skip(ids[-1])
        script.release("hold")
        with trio.fail_after(GUARD):
            await sup.wait_idle()
        await trio.testing.wait_all_tasks_blocked()
        assert sup.stats().actors == 0
        assert await sup.keys() == []
    assert ran(recorder) == ids[:-1]


# -- retry_now() --------------------------------------------------------------


async def test_retry_now_runs_a_head_waiting_on_a_long_backoff_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """retry_now(key) wakes a head waiting out an hour's backoff: its next attempt runs at once, and it returns True."""
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom-once")
        after = await sup.send("k", "after")
        await trio.testing.wait_all_tasks_blocked()
        assert (await job_info(sup, head)).state == "retrying"

        start = trio.current_time()
        assert await sup.retry_now("k") is True
        await sup.wait_idle()
        assert trio.current_time() - start < 1
    assert attempts(recorder) == [(head, 1), (head, 2), (after, 1)]
    assert recorder.calls[1].start - start < 1


async def test_retry_now_returns_false_when_the_head_is_not_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """retry_now is False, and changes nothing, for a running head, a head waiting for a slot, and a halted key with no jobs."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(
        recorder, max_concurrency=1, on_discard="halt", retry=NO_RETRY
    ) as sup:
        await sup.send("emptied", "bad")
        await sup.wait_idle()
        running = await sup.send("running", "hold-1")
        waiting = await sup.send("waiting", "hold-2")
        await trio.testing.wait_all_tasks_blocked()

        for key in ("running", "waiting", "emptied"):
            assert await sup.retry_now(key) is False, key
        await trio.testing.wait_all_tasks_blocked()
        assert ran(recorder)[1:] == [running]
        assert recorder.calls[1].end is None  # still running, not interrupted
        script.release("hold-1")
        script.release("hold-2")
        await sup.wait_idle()
        await sup.resume("emptied")
    assert ran(recorder)[1:] == [running, waiting]


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("nobody", inturn.KeyNotFound),
        ("done", inturn.KeyNotFound),
        (3, TypeError),
        ("", inturn.InvalidKey),
    ],
)
async def test_retry_now_of_an_unknown_key_raises(
    autojump_clock: trio.testing.MockClock, key: object, error: type[Exception]
) -> None:
    """retry_now raises KeyNotFound for a key with no unfinished jobs that is not halted, and TypeError/InvalidKey for a bad key."""
    async with inturn.open_supervisor(Script()) as sup:
        await sup.send("done", "fine")
        await sup.wait_idle()
        with pytest.raises(error) as raised:
            await sup.retry_now(key)  # type: ignore[arg-type]
        if isinstance(raised.value, inturn.KeyNotFound):
            assert raised.value.key == key


# -- pause() and resume() ----------------------------------------------------


async def test_wait_idle_does_not_return_while_the_running_job_of_a_paused_key_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job still running on a key paused meanwhile is neither terminal nor parked: wait_idle waits for it."""
    script = Script()
    async with inturn.open_supervisor(script) as sup:
        await sup.send("k", "hold")
        await sup.send("k", "second")
        await script.started("hold").wait()
        await sup.pause("k")

        with trio.move_on_after(10) as waited:
            await sup.wait_idle()
        assert waited.cancelled_caught, "wait_idle returned while a job was running"
        script.release("hold")
        await sup.resume("k")


async def test_pause_lets_the_running_job_finish_and_starts_nothing_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """pause(key): the running job finishes, no later job starts, wait_idle returns with the key parked; resume runs the rest in order."""
    script = Script()
    recorder = Recorder(script)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder) as sup:
            ids = [await sup.send("k", "hold"), await sup.send("k", 2), await sup.send("k", 3)]
            other = await sup.send("other", "fine")
            await script.started("hold").wait()

            await sup.pause("k")
            assert sup.stats().halted_keys == frozenset({"k"})
            script.release("hold")
            await trio.testing.wait_all_tasks_blocked()
            assert ran(recorder) == [ids[0], other]
            assert recorder.calls[0].end is not None  # it finished

            with trio.fail_after(10):
                await sup.wait_idle()  # returns with the key parked
            stats = sup.stats()
            assert (stats.halted_keys, stats.queued, stats.running) == (frozenset({"k"}), 2, 0)
            [info] = await sup.keys()
            assert (info.key, info.halted, info.queued, info.head_job_id) == ("k", True, 2, ids[1])

            await sup.resume("k")
            await sup.wait_idle()
            assert sup.stats().halted_keys == frozenset()
    assert ran(recorder) == [ids[0], other, ids[1], ids[2]]
    recorder.assert_sequential()


async def test_pause_parks_a_key_whose_head_backs_off_and_resume_runs_it_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A key paused while its head waits out a backoff runs nothing, even after the backoff ends, until resume; then its jobs run in order."""
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom-once")
        after = await sup.send("k", "after")
        await trio.testing.wait_all_tasks_blocked()

        await sup.pause("k")
        await sup.wait_idle()
        await trio.sleep(2 * 3600)  # long past the backoff
        assert attempts(recorder) == [(head, 1)]
        assert sup.stats().halted_keys == frozenset({"k"})
        assert heads(await sup.keys(state="halted")) == [("k", head, "retrying", True)]

        await sup.resume("k")
        await sup.wait_idle()
    assert attempts(recorder) == [(head, 1), (head, 2), (after, 1)]


async def test_pause_of_a_key_with_no_work_raises_key_not_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """pause raises KeyNotFound for a key never seen, or whose jobs all completed (its actor may still linger), and halts nothing."""
    async with inturn.open_supervisor(Script()) as sup:
        await sup.send("done", "fine")
        await sup.wait_idle()
        for key in ("nobody", "done"):
            with pytest.raises(inturn.KeyNotFound) as not_found:
                await sup.pause(key)
            assert not_found.value.key == key
        assert sup.stats().halted_keys == frozenset()


@pytest.mark.parametrize(("key", "error"), [(3, TypeError), ("", inturn.InvalidKey)])
async def test_pause_and_resume_refuse_a_bad_key(key: object, error: type[Exception]) -> None:
    """pause and resume take a valid key: a bad one raises TypeError or InvalidKey."""
    async with inturn.open_supervisor(Script()) as sup:
        with pytest.raises(error):
            await sup.pause(key)  # type: ignore[arg-type]
        with pytest.raises(error):
            await sup.resume(key)  # type: ignore[arg-type]


async def test_pausing_a_paused_key_again_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A second pause of a paused key is accepted; one resume lets it run."""
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, retry=SLOW_RETRY) as sup:
        head = await sup.send("k", "boom-once")
        await trio.testing.wait_all_tasks_blocked()
        await sup.pause("k")
        await sup.pause("k")
        assert sup.stats().halted_keys == frozenset({"k"})
        await sup.resume("k")
        await sup.retry_now("k")
        await sup.wait_idle()
    assert attempts(recorder) == [(head, 1), (head, 2)]


@pytest.mark.parametrize("first_fails", [False, True])
async def test_a_pause_while_another_pause_of_its_key_is_journaled_returns_once_it_is_halted(
    first_fails: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """A pause of a key whose halt another pause is still writing waits for that write:
    it returns once the journal holds the halt, or, if that write fails, halts the key
    itself.  A pause never returns before the key is halted in the journal."""
    halts: list[Sequence[Change]] = []

    def first_halt(changes: Sequence[Change]) -> bool:
        if not halts and any(isinstance(change, Halt) for change in changes):
            halts.append(changes)
        return bool(halts) and changes is halts[0]

    journal = GatingJournal(
        inturn.MemoryJournal(), fail=lambda changes: first_fails and first_halt(changes)
    )
    held = journal.hold_writes(first_halt)
    script = Script()
    paused: list[str] = []

    async def pause(name: str) -> None:
        with contextlib.suppress(inturn.JournalError):
            await sup.pause("k")
            paused.append(name)

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(script, journal=journal) as sup:
            await sup.send("k", "hold")
            await script.started("hold").wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pause, "first")
                await held.wait_held()
                nursery.start_soon(pause, "second")
                await trio.testing.wait_all_tasks_blocked()
                assert paused == []  # the journal holds no halt yet
                held.release()
            assert paused == (["second"] if first_fails else ["first", "second"])
            assert [info.key for info in await sup.keys(state="halted")] == ["k"]
            assert sup.stats().halted_keys == frozenset({"k"})
            script.release("hold")
            await sup.resume("k")


@pytest.mark.parametrize("second", ["resume", "requeue_head"])
async def test_a_pause_between_two_resumes_of_its_key_leaves_it_halted_as_the_journal_does(
    second: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Two calls that lift a halt (`resume`, or `requeue(head=True)` of a dead letter of
    the key) journaled one after the other, the first answered, then a pause: the
    journal's last word on the key is the pause's, and so is the supervisor's, however
    late the second call hears back."""
    journal = GatingJournal(inturn.MemoryJournal())
    lifts = journal.hold_answers(any_of(Resume, Revive))
    script = Script()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(script, journal=journal) as sup:
            dead = await sup.send("k", "bad")
            await sup.send("k", "hold")
            await script.started("hold").wait()
            await sup.pause("k")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.resume, "k")
                await trio.testing.wait_all_tasks_blocked()
                if second == "resume":
                    nursery.start_soon(sup.resume, "k")
                else:
                    nursery.start_soon(functools.partial(sup.requeue, dead, head=True))
                await trio.testing.wait_all_tasks_blocked()
                lifts.release_one()  # the first lifts the halt
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(sup.pause, "k")
                await trio.testing.wait_all_tasks_blocked()
                lifts.release()
            in_journal = [info.key for info in await sup.keys(state="halted")]
            assert (in_journal, sup.stats().halted_keys) == (["k"], frozenset({"k"}))
            script.release("hold")
            await sup.resume("k")
            await sup.wait_idle()


async def test_a_pause_survives_reopening_the_journal(make_journal: MakeJournal) -> None:
    """A paused key is still halted under the next supervisor opened on the journal: nothing of it runs until resume."""
    events = EventLog()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            Script(), journal=make_journal(), retry=SLOW_RETRY, on_event=events
        ) as sup:
            head = await sup.send("k", "boom-once")
            after = await sup.send("k", "after")
            await events.wait_for("job.retry_scheduled")
            await sup.pause("k")

        recorder = Recorder(Script())
        events = EventLog()
        async with inturn.open_supervisor(recorder, journal=make_journal(), on_event=events) as sup:
            assert sup.stats().halted_keys == frozenset({"k"})
            [info] = await sup.keys()
            assert (info.key, info.halted, info.queued) == ("k", True, 2)
            await sup.wait_idle()
            await trio.testing.wait_all_tasks_blocked()
            assert recorder.calls == []

            await sup.resume("k")
            await events.wait_for("job.retry_scheduled")  # what is left of its backoff
            assert await sup.retry_now("k")
            await sup.wait_idle()
    assert attempts(recorder) == [(head, 2), (after, 1)]


# -- purge_dead() -------------------------------------------------------------


async def test_purge_dead_deletes_only_dead_letters_old_enough(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """purge_dead(older_than=s) deletes dead letters discarded more than s seconds ago (Unix time), of one key if given, and returns how many."""
    async with inturn.open_supervisor(Script(), retry=NO_RETRY) as sup:
        a = [await sup.send("a", "bad"), await sup.send("a", "bad")]
        b = await sup.send("b", "bad")
        await sup.wait_idle()

        assert await sup.purge_dead(older_than=3600) == 0  # discarded just now
        assert await dead_ids(sup) == [*a, b]
        assert await sup.purge_dead(older_than=0, key="a") == 2
        assert await dead_ids(sup) == [b]
        assert await sup.job(a[0]) is None
        assert await sup.purge_dead(older_than=0) == 1
        assert await sup.dead_letters() == []
        assert await sup.purge_dead(older_than=0) == 0


async def test_purge_dead_deletes_more_dead_letters_than_one_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """purge_dead deletes every old enough dead letter however many there are (beyond its batch of 1000)."""
    async with inturn.open_supervisor(Script(), retry=NO_RETRY) as sup:
        await sup.send_many([(f"k{n % 7}", "bad") for n in range(1001)])
        await sup.wait_idle()
        assert await sup.purge_dead(older_than=0) == 1001
        assert await sup.dead_letters() == []


@pytest.mark.parametrize(
    ("older_than", "error"),
    [
        (-1, ValueError),
        (-0.5, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (True, TypeError),
        ("3600", TypeError),
        (None, TypeError),
    ],
    ids=repr,
)
async def test_purge_dead_refuses_a_bad_age(
    autojump_clock: trio.testing.MockClock, older_than: object, error: type[Exception]
) -> None:
    """older_than must be a finite number of seconds >= 0 (not a bool); a bad one purges nothing."""
    async with inturn.open_supervisor(Script(), retry=NO_RETRY) as sup:
        dead = await sup.send("k", "bad")
        await sup.wait_idle()
        with pytest.raises(error):
            await sup.purge_dead(older_than=older_than)  # type: ignore[arg-type]
        for key, key_error in ((3, TypeError), ("", inturn.InvalidKey)):
            with pytest.raises(key_error):
                await sup.purge_dead(older_than=0, key=key)  # type: ignore[arg-type]
        assert await dead_ids(sup) == [dead]


# -- after the supervisor stopped, and bad job ids --------------------------


CLOSED_CALLS: dict[str, Callable[[inturn.Supervisor], Awaitable[object]]] = {
    "requeue": lambda sup: sup.requeue(1),
    "skip": lambda sup: sup.skip(2),
    "pause": lambda sup: sup.pause("k"),
    "resume": lambda sup: sup.resume("k"),
    "retry_now": lambda sup: sup.retry_now("k"),
    "purge_dead": lambda sup: sup.purge_dead(older_than=0),
}


@pytest.mark.parametrize("call", CLOSED_CALLS.values(), ids=CLOSED_CALLS.keys())
async def test_fixes_after_the_supervisor_stopped_raise_supervisor_closed(
    autojump_clock: trio.testing.MockClock,
    call: Callable[[inturn.Supervisor], Awaitable[object]],
) -> None:
    """Every fix called after the async with block ended raises SupervisorClosed."""
    async with inturn.open_supervisor(Script(), retry=NO_RETRY, on_discard="halt") as sup:
        await sup.send("k", "bad")  # a dead letter, id 1
        await sup.send("k", "parked")  # id 2, on a halted key
        await sup.wait_idle()
    with pytest.raises(inturn.SupervisorClosed):
        await call(sup)


BAD_IDS: list[tuple[object, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (True, TypeError),
    ("3", TypeError),
    (1.5, TypeError),
    (None, TypeError),
]


@pytest.mark.parametrize("method", ["job", "requeue", "skip"])
@pytest.mark.parametrize(("job_id", "error"), BAD_IDS, ids=repr)
async def test_a_bad_job_id_raises_and_changes_nothing(
    autojump_clock: trio.testing.MockClock,
    method: str,
    job_id: object,
    error: type[Exception],
) -> None:
    """job, requeue and skip take a job id as an int >= 1 (True is not job 1): anything else raises TypeError or ValueError, and no job is touched."""
    script = Script()
    recorder = Recorder(script)
    async with inturn.open_supervisor(recorder, retry=NO_RETRY) as sup:
        dead = await sup.send("k", "bad")
        await sup.wait_idle()
        held = await sup.send("k", "hold")
        queued = await sup.send("k", "queued")
        await trio.testing.wait_all_tasks_blocked()

        with pytest.raises(error):
            await getattr(sup, method)(job_id)
        assert await dead_ids(sup) == [dead]
        script.release("hold")
        await sup.wait_idle()
        assert await dead_ids(sup) == [dead]
    assert ran(recorder) == [dead, held, queued]


# -- regressions found while documenting ------------------------------------------


async def test_a_running_skip_whose_discard_fails_runs_the_job_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Skipping a running job whose discard cannot be journaled raises JournalError and
    undoes the skip: the job, cut short, runs again; its key is not stuck."""
    script = Script()
    recorder = Recorder(script)
    failing = FaultyJournal(
        inturn.MemoryJournal(), fail=lambda changes: any(isinstance(c, Discard) for c in changes)
    )
    with trio.fail_after(60):  # stuck for good if the skip were left half-done
        async with inturn.open_supervisor(recorder, journal=failing) as sup:
            head = await sup.send("k", "hold")
            after = await sup.send("k", "after")
            await script.started("hold").wait()
            with pytest.raises(inturn.JournalError):
                await sup.skip(head)
            script.release("hold")
            await sup.wait_idle()
    assert failing.failures == 1
    assert [call.job.id for call in recorder.calls] == [head, head, after]


async def test_pause_of_a_key_that_drains_while_the_halt_is_journaled_still_halts_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A pause whose key finishes its last job while the Halt is being written leaves
    the key halted in the supervisor as in the journal, so resume can lift it."""
    script = Script()
    journal = GatingJournal(inturn.MemoryJournal())
    halts = journal.hold_writes(any_of(Halt))
    async with inturn.open_supervisor(script, journal=journal, idle_timeout=0) as sup:
        await sup.send("k", "hold")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.pause, "k")
            await halts.wait_held()
            script.release("hold")  # the key drains; its actor exits
            await trio.testing.wait_all_tasks_blocked()
            halts.release()
        assert sup.stats().halted_keys == frozenset({"k"})
        [info] = await sup.keys(state="halted")
        assert (info.key, info.queued) == ("k", 0)
        await sup.resume("k")
        assert await sup.keys() == []


async def test_a_recovered_head_waiting_for_a_slot_shows_the_attempts_its_journal_counts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A head recovered after a crash (its attempt marked by the dead process) shows as
    queued with the attempts the journal counts, not one fewer, while it waits for a slot."""
    journal = inturn.MemoryJournal()
    await journal.open()
    await journal.write(
        [
            Append(job_id=1, key="x", data=b'"hold-x"'),
            Append(job_id=2, key="y", data=b'"fine"'),
            MarkAttempt(1, 1),  # both were running when the process died
            MarkAttempt(2, 1),
        ]
    )
    await journal.aclose()
    script = Script()
    async with inturn.open_supervisor(script, journal=journal, max_concurrency=1) as sup:
        await script.started("hold-x").wait()  # x holds the one slot; y waits for it
        info = await job_info(sup, 2)
        assert (info.state, info.attempts) == ("queued", 1)
        [key] = [key for key in await sup.keys() if key.key == "y"]
        assert (key.head_state, key.head_attempt) == ("queued", 1)
        assert [key.key for key in await sup.keys(state="running", limit=1)] == ["x"]
        script.release("hold-x")


async def test_a_resume_while_an_overtaken_start_is_given_back_runs_the_head_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A pause overtakes a head's start, marked with its predecessor's completion; a resume
    lands while the actor gives that attempt back: the head runs then, not an
    ``idle_timeout`` later (the actor looks again after the give-back's await)."""
    recorder = Recorder()
    journal = GatingJournal(inturn.MemoryJournal())
    # the first completion, and the first attempt given back: stored, their answers held
    answers = journal.hold_answers(
        lambda changes: any(
            isinstance(change, Complete)
            or (isinstance(change, MarkAttempt) and change.attempt == 0)
            for change in changes
        ),
        limit=2,
    )
    async with inturn.open_supervisor(recorder, journal=journal, idle_timeout=60.0) as sup:
        await sup.send_many([("k", 1), ("k", 2)])
        await trio.testing.wait_all_tasks_blocked()  # 1 ran: its completion (and 2's start) held
        assert len(answers.held) == 1
        await sup.pause("k")
        answers.release_one()  # 2's start is marked, the key halted: the attempt goes back
        await trio.testing.wait_all_tasks_blocked()
        assert len(answers.held) == 2
        await sup.resume("k")
        answers.release_one()
        await trio.testing.wait_all_tasks_blocked()
        assert [call.job.payload for call in recorder.calls] == [1, 2]
        assert trio.current_time() == 0.0
        assert recorder.calls[1].job.attempt == 1  # the attempt given back is not counted


async def test_a_head_requeue_of_a_dead_letter_whose_skip_is_not_told_yet_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip's discard journaled, its skip not told yet: a head requeue of the dead letter
    it made waits for the skip, so the two hear back in journal order (trio may run two
    callers told at once in either), and the job runs, once."""
    journal = GatingJournal(inturn.MemoryJournal())
    discards = journal.hold_answers(any_of(Discard))
    script = Script()
    recorder = Recorder(script)
    requeued: list[int] = []
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            await sup.send("k", "hold")
            skipped = await sup.send("k", "after")
            await script.started("hold").wait()

            async def requeue() -> None:
                requeued.append(await sup.requeue(skipped, head=True))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.skip, skipped)
                await trio.testing.wait_all_tasks_blocked()
                assert discards.waiting == 1  # journaled, its skip not told yet
                try:
                    nursery.start_soon(requeue)
                    await trio.testing.wait_all_tasks_blocked()
                    assert requeued == []  # the requeue waits
                finally:
                    discards.release()
            assert requeued == [skipped]
            script.release("hold")
            await sup.wait_idle()
            stats = sup.stats()
            assert (stats.completed, stats.discarded, stats.queued) == (2, 1, 0)
            assert await sup.dead_letters() == []
    assert [call.job.id for call in recorder.calls] == [skipped - 1, skipped]


async def test_a_failure_for_good_heard_back_after_a_head_requeue_of_its_dead_letter_runs_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job's failure for good journaled, then a head requeue of the dead letter it made,
    both writers told, the requeue first: the journal's last word is the requeue's, and
    the job runs again, once."""
    journal = GatingJournal(inturn.MemoryJournal())
    discards = journal.hold_answers(any_of(Discard))
    attempts: list[int] = []

    async def handler(job: inturn.Job) -> None:
        attempts.append(job.id)
        if len(attempts) == 1:
            raise inturn.PermanentError("for good")

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            job_id = await sup.send("k", "x")
            await trio.testing.wait_all_tasks_blocked()
            assert discards.waiting == 1  # journaled, its actor not told yet
            assert await sup.requeue(job_id, head=True) == job_id
            discards.release()
            await sup.wait_idle()
            stats = sup.stats()
            assert (stats.completed, stats.discarded, stats.queued) == (1, 1, 0)
            assert await sup.dead_letters() == []
    assert attempts == [job_id, job_id]


@pytest.mark.parametrize("called_off", [False, True])
async def test_a_pause_whose_halt_fails_keeps_a_halt_a_failure_for_good_made_meanwhile(
    called_off: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """A pause's `Halt` being journaled, the key's running job fails for good under
    ``on_discard="halt"`` (its discard halts the key in the journal), then the pause's
    write fails, or the pause is cancelled: the pause takes back its own halt only, and
    the key stays halted, in the supervisor as in the journal."""
    journal = GatingJournal(inturn.MemoryJournal(), fail=any_of(Halt))
    held = journal.hold_writes(any_of(Halt))
    fail = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            await fail.wait()
            raise inturn.PermanentError("for good")

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal, on_discard="halt") as sup:
            await sup.send("k", "bad")
            await trio.testing.wait_all_tasks_blocked()
            async with trio.open_nursery() as nursery:

                async def pause() -> None:
                    with contextlib.suppress(inturn.JournalError):
                        await sup.pause("k")

                nursery.start_soon(pause)
                await held.wait_held()  # halted in the supervisor, not yet journaled
                fail.set()
                await trio.testing.wait_all_tasks_blocked()  # discarded: halted in the journal
                if called_off:
                    nursery.cancel_scope.cancel()
                else:
                    held.release()
            assert [info.key for info in await sup.keys(state="halted")] == ["k"]
            assert sup.stats().halted_keys == frozenset({"k"})
            after = await sup.send("k", "after")
            await trio.testing.wait_all_tasks_blocked()
            info = await sup.job(after)
            assert info is not None
            assert info.state == "queued"  # nothing ran
            await sup.resume("k")
            await sup.wait_idle()
            assert sup.stats().completed == 1


@pytest.mark.parametrize("lifting", ["resume", "requeue_head"])
@pytest.mark.parametrize("first", ["lift", "discard"])
async def test_a_lifted_halt_and_a_halting_failure_for_good_hear_back_in_journal_order(
    lifting: str, first: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A paused key's halt being lifted (`resume`, or `requeue(head=True)` of its dead
    letter) as its running job fails for good under ``on_discard="halt"``: whichever of
    the two is journaled first, the supervisor ends with the journal's word on the key,
    however trio orders the two writers told at once (here, the later one first)."""
    journal = GatingJournal(inturn.MemoryJournal())
    fail = trio.Event()
    ran: list[object] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.payload)
        if job.payload == "wait":
            await fail.wait()
        if job.payload in ("bad", "wait") and ran.count(job.payload) == 1:
            raise inturn.PermanentError("for good")

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal, on_discard="halt") as sup:
            dead = await sup.send("k", "bad")  # its discard halts the key
            await trio.testing.wait_all_tasks_blocked()
            await sup.resume("k")
            await sup.send("k", "wait")
            await trio.testing.wait_all_tasks_blocked()
            await sup.pause("k")
            assert [info.state for info in await sup.jobs("k")] == ["running"]
            answers = journal.hold_answers(any_of(Resume, Revive, Discard))

            async def lift() -> None:
                if lifting == "resume":
                    await sup.resume("k")
                else:
                    assert await sup.requeue(dead, head=True) == dead

            async with trio.open_nursery() as nursery:
                if first == "lift":
                    nursery.start_soon(lift)
                    await trio.testing.wait_all_tasks_blocked()
                    fail.set()
                else:
                    fail.set()
                    await trio.testing.wait_all_tasks_blocked()
                    nursery.start_soon(lift)
                await trio.testing.wait_all_tasks_blocked()
                answers.stop()
                while answers.waiting:  # the later write's writer told first
                    answers.release_one(-1)
                    await trio.testing.wait_all_tasks_blocked()
            in_journal = {info.key for info in await sup.keys(state="halted")}
            assert in_journal == sup.stats().halted_keys
            assert in_journal == ({"k"} if first == "lift" else set())
            if in_journal:
                await sup.resume("k")
            await sup.wait_idle()
    assert ran == ["bad", "wait"] + (["bad"] if lifting == "requeue_head" else [])


@pytest.mark.parametrize("skip_lands", ["as_it_runs", "as_its_discard_waits"])
async def test_a_failure_for_good_waiting_on_a_resume_of_its_key_keeps_its_outcome_when_skipped(
    skip_lands: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A job fails for good under ``on_discard="halt"`` while a resume of its key is being
    journaled: its discard waits for the resume.  A skip that lands meanwhile (as the
    job runs, deaf to the skip's cancel; or as its discard waits) does not call that wait
    off: the job keeps its outcome, and the skip says so."""
    journal = GatingJournal(inturn.MemoryJournal())
    fail = trio.Event()

    async def handler(job: inturn.Job) -> None:
        with trio.CancelScope(shield=True):  # deaf to the skip
            await fail.wait()
        raise inturn.PermanentError("for good")

    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal, on_discard="halt") as sup:
            job_id = await sup.send("k", "x")
            await trio.testing.wait_all_tasks_blocked()
            await sup.pause("k")
            resumes = journal.hold_answers(any_of(Resume))
            async with trio.open_nursery() as nursery:

                async def skip() -> None:
                    with pytest.raises(inturn.JobStateError):
                        await sup.skip(job_id)

                nursery.start_soon(sup.resume, "k")
                await trio.testing.wait_all_tasks_blocked()
                try:
                    assert resumes.waiting == 1  # journaled, its caller not told yet
                    if skip_lands == "as_it_runs":
                        nursery.start_soon(skip)
                        await trio.testing.wait_all_tasks_blocked()  # the handler ignores it
                    fail.set()
                    await trio.testing.wait_all_tasks_blocked()  # the discard waits its turn
                    if skip_lands == "as_its_discard_waits":
                        nursery.start_soon(skip)
                        await trio.testing.wait_all_tasks_blocked()
                finally:
                    resumes.release()
            [dead] = await sup.dead_letters()
            assert (dead.id, dead.last_error) == (job_id, "inturn.errors.PermanentError: for good")
            in_journal = {info.key for info in await sup.keys(state="halted")}
            assert in_journal == sup.stats().halted_keys == {"k"}
            await sup.resume("k")


async def test_a_skip_whose_job_failed_for_good_after_its_read_leaves_no_mark_on_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip reads its job unfinished; before it goes on, the job fails for good under
    ``on_discard="halt"`` and the supervisor forgets it (its key, halted, stays).  The
    skip's discard loses to the job's own, it raises, and it leaves nothing of itself
    behind: requeued at its head, the job runs."""
    fail = trio.Event()
    attempts_made: list[int] = []

    async def handler(job: inturn.Job) -> None:
        attempts_made.append(job.id)
        if len(attempts_made) == 1:
            await fail.wait()
            raise inturn.PermanentError("for good")

    journal = GatingJournal(inturn.MemoryJournal())
    reads = journal.hold_reads("job")  # each read of a job, once made
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal, on_discard="halt") as sup:
            job_id = await sup.send("k", "x")
            await trio.testing.wait_all_tasks_blocked()
            async with trio.open_nursery() as nursery:

                async def skip() -> None:
                    with pytest.raises(inturn.JobStateError, match="dead"):
                        await sup.skip(job_id)

                nursery.start_soon(skip)
                await reads.wait_held()  # the skip read it running
                fail.set()
                await trio.testing.wait_all_tasks_blocked()  # a dead letter; the key halts
                reads.release()
            assert await sup.requeue(job_id, head=True) == job_id
            await sup.wait_idle()
            assert sup.stats().halted_keys == frozenset()
            assert await sup.dead_letters() == []
    assert attempts_made == [job_id, job_id]


async def test_a_skip_whose_queued_job_another_writer_discarded_first_lets_its_key_go_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip marks a queued job; the job reaches its key's head and waits there for the
    skip's discard.  Another writer (a fleet member's operator) discards it first, so the
    skip's discard is superseded and raises: the key goes on past the job at once (it went on
    only when its actor's idle timeout ended), and the job never runs."""
    first_done = trio.Event()
    ran: list[int] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.id)
        if len(ran) == 1:
            await first_done.wait()

    inner = inturn.MemoryJournal()
    journal = GatingJournal(inner)
    held = journal.hold_writes(any_of(Discard))  # the skip's discard waits for the other writer's
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            first = await sup.send("k", "a")
            skipped = await sup.send("k", "b")
            last = await sup.send("k", "c")
            await trio.testing.wait_all_tasks_blocked()
            async with trio.open_nursery() as nursery:

                async def skip() -> None:
                    with pytest.raises(inturn.JobStateError, match="dead letter"):
                        await sup.skip(skipped)

                nursery.start_soon(skip)
                await held.wait_held()
                first_done.set()
                await trio.testing.wait_all_tasks_blocked()  # the skipped job heads its key
                assert ran == [first]
                await inner.write([Discard(skipped, "by the other writer")], now=time.time())
                held.release()
            before = trio.current_time()
            await sup.wait_idle()
            assert trio.current_time() == before  # at once, not when its idle actor expired
            assert ran == [first, last]
            [dead] = await sup.dead_letters()
            assert (dead.id, dead.last_error) == (skipped, "by the other writer")


async def test_a_key_paused_while_it_lingers_with_its_slot_gives_the_slot_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With ``max_concurrency=1``: key "a"'s head, skipped as it was accepted, had its start
    marked with its acceptance, so its lingering lane keeps the slot (the skip's discard is
    being journaled).  A pause lands, then the linger ends.  The lane retires, and gives
    back the slot (and the mark): key "b" runs.  It waited for the slot forever (found by
    the operators property, 21 of 40 seeds of its example)."""
    ran: list[int] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.id)

    journal = LaggingJournal(lags=(1.5,))  # every write is answered 1.5 s after it applies
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            handler, journal=journal, max_concurrency=1, idle_timeout=1.0
        ) as sup:
            async with trio.open_nursery() as nursery:

                async def pause() -> None:
                    await trio.sleep_until(2.0)  # "a" lingers from 1.5 to 2.5
                    await sup.pause("a")

                nursery.start_soon(sup.send_many, [("a", "skipped"), ("b", "waits for the slot")])
                await trio.testing.wait_all_tasks_blocked()  # journaled, its send not answered
                nursery.start_soon(sup.skip, 1)
                nursery.start_soon(pause)
            await sup.wait_idle()
            assert ran == [2]
            assert sup.stats().halted_keys == {"a"}
            assert [letter.id for letter in await sup.dead_letters()] == [1]


async def test_a_skipped_head_whose_start_was_marked_but_never_ran_counts_no_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A head's start is journaled with its acceptance; skipped before it ran, its dead
    letter says no attempt was made (it said 1: an operator would look for side effects
    of a run that never happened)."""
    ran: list[int] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.id)

    journal = LaggingJournal(lags=(1.5,))  # the skip lands between the write and its answer
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.send, "a", "skipped")
                await trio.testing.wait_all_tasks_blocked()  # journaled, with its start
                accepted = await journal.job(1)
                assert accepted is not None
                assert accepted.attempts == 1
                nursery.start_soon(sup.skip, 1)
            await sup.wait_idle()
            [letter] = await sup.dead_letters()
    assert (letter.id, letter.attempts, ran) == (1, 0, [])
