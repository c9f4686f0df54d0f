"""`inturn.operate`: read and fix a journal that no supervisor holds, and the next supervisor sees the fixes.

The journals are left the way a crashed (here: cancelled) worker leaves
them: a head backing off, a halted key with a dead letter, a head whose
attempt was cut short, and jobs queued behind each.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import attrs
import pytest
import trio

import inturn
from inturn.info import KeyInfo
from inturn.testing import Recorder
from tests.conftest import MakeJournal

from .helpers import EventLog, Script

CODEC = inturn.JSONCodec()
GUARD = 60.0
SLOW_RETRY = inturn.Retry(initial_delay=3600.0, max_delay=3600.0, jitter=0.0)
SKIPPED = "skipped by operator"


@attrs.frozen
class Left:
    """The ids of the jobs `crash_with_work` leaves behind, per key."""

    retrying: tuple[int, int]
    """("retrying", "boom"): the head failed and backs off an hour; one job behind it."""
    halted: tuple[int, int]
    """("halted", "bad"): the head is a dead letter and the key halted; one job parked."""
    hung: tuple[int, int, int]
    """("hung", "hang"): the head was running when the worker stopped; two jobs behind it."""


async def crash_with_work(journal: inturn.Journal) -> Left:
    """Run a supervisor on *journal* until every key is stuck, then cancel it, as a crash would."""
    script = Script()
    events = EventLog()
    with trio.fail_after(GUARD), trio.CancelScope() as scope:
        async with inturn.open_supervisor(
            script, journal=journal, retry=SLOW_RETRY, on_discard="halt", on_event=events
        ) as sup:
            retrying = (await sup.send("retrying", "boom"), await sup.send("retrying", "r2"))
            halted = (await sup.send("halted", "bad"), await sup.send("halted", "h2"))
            hung = (
                await sup.send("hung", "hang"),
                await sup.send("hung", "q2"),
                await sup.send("hung", "q3"),
            )
            await events.wait_for("job.retry_scheduled")
            await events.wait_for("key.halted")
            await script.started("hang").wait()
            scope.cancel()
    assert scope.cancelled_caught
    return Left(retrying=retrying, halted=halted, hung=hung)


def heads(infos: Sequence[KeyInfo]) -> list[tuple[str, int | None, str | None, bool]]:
    """(key, head job id, head state, halted) of each key."""
    return [(info.key, info.head_job_id, info.head_state, info.halted) for info in infos]


def ids_by_key(recorder: Recorder) -> dict[str | None, list[int]]:
    return {key: [call.job.id for call in calls] for key, calls in recorder.by_key().items()}


async def test_operate_reads_what_a_crashed_worker_left(make_journal: MakeJournal) -> None:
    """keys(), job() and dead_letters() on a journal no supervisor holds show each stuck key, why it is stuck, and the dead letters."""
    left = await crash_with_work(make_journal())
    async with inturn.operate(make_journal()) as op:
        infos = await op.keys()
        assert heads(infos) == [
            ("retrying", left.retrying[0], "retrying", False),
            ("halted", left.halted[1], "queued", True),
            ("hung", left.hung[0], "queued", False),  # its cut-short attempt was given back
        ]
        retrying, halted, hung = infos
        assert (retrying.queued, retrying.head_attempt, retrying.last_error) == (
            2,
            1,
            "ValueError: boom",
        )
        assert retrying.next_retry_at == pytest.approx(time.time() + 3600, abs=60)
        assert (halted.queued, halted.head_attempt, halted.last_error) == (1, 0, None)
        assert (hung.queued, hung.head_attempt, hung.next_retry_at) == (3, 0, None)
        for info in infos:
            assert info.head_age is not None
            assert 0 <= info.head_age < GUARD

        assert heads(await op.keys(state="blocked")) == heads(infos[:2])
        assert heads(await op.keys(state="halted")) == heads(infos[1:2])
        assert await op.keys(state="running") == []
        assert heads(await op.keys(limit=1)) == heads(infos[:1])

        job = await op.job(left.retrying[0])
        assert job is not None
        assert (
            job.key,
            job.state,
            job.attempts,
            job.last_error,
        ) == ("retrying", "retrying", 1, "ValueError: boom")
        queued = await op.job(left.hung[1])
        assert queued is not None
        assert (queued.state, queued.attempts, queued.data) == ("queued", 0, CODEC.encode("q2"))
        assert await op.job(left.hung[2] + 100) is None

        [dead] = await op.dead_letters()
        assert (dead.id, dead.key, dead.state, dead.attempts) == (
            left.halted[0],
            "halted",
            "dead",
            1,
        )
        assert dead.last_error is not None
        assert dead.last_error.endswith("PermanentError: bad payload")
        assert await op.job(dead.id) == dead
        assert await op.dead_letters(key="hung") == []
        assert [d.id for d in await op.dead_letters(key="halted", limit=1)] == [dead.id]


async def test_operate_fixes_are_what_the_next_supervisor_runs(make_journal: MakeJournal) -> None:
    """After operate's skip, requeue, pause and resume, a supervisor runs the requeued job at its key's tail, never the skipped one, and nothing of the paused key until resumed."""
    left = await crash_with_work(make_journal())
    async with inturn.operate(make_journal()) as op:
        await op.skip(left.hung[1])  # a queued job behind the head
        requeued = await op.requeue(left.halted[0])  # behind the parked job
        await op.resume("halted")
        await op.pause("retrying")

        skipped = await op.job(left.hung[1])
        assert skipped is not None
        assert (skipped.state, skipped.last_error, skipped.attempts) == ("dead", SKIPPED, 0)
        assert await op.job(left.halted[0]) is None
        info = await op.job(requeued)
        assert info is not None
        assert ("halted", "queued", 0, CODEC.encode("bad")) == (
            info.key,
            info.state,
            info.attempts,
            info.data,
        )
        assert requeued > left.hung[2]
        assert heads(await op.keys(state="halted")) == [
            ("retrying", left.retrying[0], "retrying", True)
        ]

    recorder = Recorder()
    events = EventLog()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=make_journal(), on_event=events) as sup:
            await sup.wait_idle()
            assert ids_by_key(recorder) == {
                "halted": [left.halted[1], requeued],
                "hung": [left.hung[0], left.hung[2]],
            }
            assert sup.stats().halted_keys == frozenset({"retrying"})
            assert [dead.id for dead in await sup.dead_letters()] == [left.hung[1]]

            await sup.resume("retrying")
            await events.wait_for("job.retry_scheduled")  # what is left of its backoff
            assert await sup.retry_now("retrying")
            await sup.wait_idle()
            assert await sup.send("new", None) > requeued  # ids never repeat
    assert ids_by_key(recorder)["retrying"] == list(left.retrying)
    assert [call.job.attempt for call in recorder.by_key()["retrying"]] == [2, 1]
    assert [call.job.attempt for call in recorder.by_key()["halted"]] == [1, 1]
    recorder.assert_sequential()


async def test_operate_skip_of_a_head_discards_it_before_anything_runs(
    make_journal: MakeJournal,
) -> None:
    """skip of a key's head (here: backing off) makes it a dead letter at once; the next supervisor starts the key at the job behind it."""
    left = await crash_with_work(make_journal())
    async with inturn.operate(make_journal()) as op:
        await op.skip(left.retrying[0])
        await op.skip(left.hung[0])
        [info] = [info for info in await op.keys() if info.key == "retrying"]
        assert (info.head_job_id, info.queued) == (left.retrying[1], 1)

    recorder = Recorder()
    events = EventLog()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=make_journal(), on_event=events) as sup:
            await sup.wait_idle()
            dead = {d.id: d.last_error for d in await sup.dead_letters()}
            await sup.resume("halted")
    assert dead[left.retrying[0]] == SKIPPED
    assert dead[left.hung[0]] == SKIPPED
    assert ids_by_key(recorder) == {
        "retrying": [left.retrying[1]],
        "hung": [left.hung[1], left.hung[2]],
        "halted": [left.halted[1]],
    }


async def test_operate_on_a_sqlite_journal_a_supervisor_holds_sends_it_the_fixes(
    tmp_path: Path,
) -> None:
    """operate() on a SQLite file a running supervisor holds is live: each fix goes to that supervisor, which carries it out; its errors come back as themselves."""
    path = tmp_path / "jobs.db"
    script = Script()
    recorder = Recorder(script)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=inturn.SQLiteJournal(path)) as sup:
            held = await sup.send("k", "hold-1")
            after = await sup.send("k", 2)
            await script.started("hold-1").wait()
            async with inturn.operate(inturn.SQLiteJournal(path)) as op:
                assert op.live
                await op.pause("k")
                assert sup.stats().halted_keys == frozenset({"k"})  # honoured at once
                assert [info.key for info in await op.keys(state="halted")] == ["k"]
                with pytest.raises(inturn.KeyNotFound):
                    await op.pause("no-such-key")
                with pytest.raises(inturn.JobNotFound):
                    await op.skip(999)
                with pytest.raises(inturn.JobStateError):
                    await op.requeue(held)  # not a dead letter
                with pytest.raises(inturn.InvalidKey):
                    await op.pause("")  # checked here, never sent
                await op.skip(held)  # its running attempt is cut short
                assert not await op.retry_now("k")
                await op.resume("k")
                await sup.wait_idle()
                script.release("hold-1")  # the requeued job returns this time
                requeued = await op.requeue(held)
                await sup.wait_idle()
                assert await op.purge_dead(older_than=0) == 0
                info = await op.job(requeued)
                assert info is None  # it ran and completed
    assert [call.job.id for call in recorder.calls] == [held, after, requeued]
    assert recorder.calls[0].end is None  # cancelled, never completed


async def test_operate_on_a_memory_journal_a_supervisor_holds_sends_it_the_fixes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """operate() on a MemoryJournal a running supervisor has open is live too, and the supervisor goes on."""
    journal = inturn.MemoryJournal()
    recorder = Recorder(Script())
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        job_id = await sup.send("k", "bad")
        await sup.wait_idle()
        async with inturn.operate(journal) as op:
            assert op.live
            [dead] = await op.dead_letters()
            assert dead.id == job_id
            assert await op.purge_dead(older_than=0) == 1
        await sup.send("k", 1)
        await sup.wait_idle()
    assert [call.job.payload for call in recorder.calls] == ["bad", 1]


async def test_a_fix_nobody_takes_is_withdrawn(autojump_clock: trio.testing.MockClock) -> None:
    """A fix sent while the journal is held but no supervisor takes commands raises JournalError after answer_within, and is withdrawn: nothing changes, later."""
    journal = inturn.MemoryJournal()
    await journal.open()  # held, by no supervisor
    await journal.write([inturn.journal.Append(job_id=1, key="k", data=b"1")])
    async with inturn.operate(journal, answer_within=5.0) as op:
        with pytest.raises(inturn.JournalError, match="no supervisor took the command"):
            await op.pause("k")
    await journal.aclose()
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.wait_idle()
        assert sup.stats().halted_keys == frozenset()
    assert [call.job.id for call in recorder.calls] == [1]


async def test_a_command_taken_by_a_supervisor_that_died_is_taken_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A command taken and never answered (its supervisor died) is carried out by the next supervisor."""
    journal = inturn.MemoryJournal()
    await journal.open()
    await journal.write([inturn.journal.Append(job_id=1, key="k", data=b'"hold"')])
    answers: list[object] = []
    answered = trio.Event()

    async def pause() -> None:
        async with inturn.operate(journal, answer_within=1000.0) as op:
            await op.pause("k")
            answers.append("paused")
        answered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pause)
        [taken] = await journal.commands()  # taken by a supervisor that then dies
        assert (taken.verb, taken.key) == ("pause", "k")
        await journal.aclose()
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(Script(), journal=journal) as sup:  # "hold" runs on
                await answered.wait()
                assert sup.stats().halted_keys == frozenset({"k"})
                scope.cancel()
    assert answers == ["paused"]


async def test_a_supervisor_cannot_open_a_sqlite_journal_operate_holds(tmp_path: Path) -> None:
    """While operate() holds a SQLite file, open_supervisor on it raises JournalLocked: no job runs under the operator."""
    path = tmp_path / "jobs.db"
    with trio.fail_after(GUARD):
        async with inturn.operate(inturn.SQLiteJournal(path)) as op:
            with pytest.raises(inturn.JournalLocked):
                async with inturn.open_supervisor(Recorder(), journal=inturn.SQLiteJournal(path)):
                    pytest.fail("the body must not run")
            assert await op.keys() == []


async def test_operate_refuses_fixes_that_do_not_apply() -> None:
    """requeue of an unknown or unfinished job, skip of an unknown job or a dead letter, and pause of a key without work each raise, and the journal is as it was."""
    journal = inturn.MemoryJournal()
    left = await crash_with_work(journal)
    async with inturn.operate(journal) as op:
        before = (heads(await op.keys()), await op.dead_letters())

        with pytest.raises(inturn.JobNotFound):
            await op.requeue(left.hung[2] + 100)
        for job_id, state in ((left.hung[1], "queued"), (left.retrying[0], "retrying")):
            with pytest.raises(inturn.JobStateError) as wrong:
                await op.requeue(job_id)
            assert (wrong.value.job_id, wrong.value.state) == (job_id, state)
        with pytest.raises(inturn.JobNotFound):
            await op.skip(left.hung[2] + 100)
        with pytest.raises(inturn.JobStateError) as wrong:
            await op.skip(left.halted[0])
        assert (wrong.value.job_id, wrong.value.state) == (left.halted[0], "dead")
        with pytest.raises(inturn.KeyNotFound) as not_found:
            await op.pause("nobody")
        assert not_found.value.key == "nobody"
        await op.resume("hung")  # not halted: nothing to do

        assert (heads(await op.keys()), await op.dead_letters()) == before


async def test_operate_skip_of_a_completed_job_raises_job_not_found() -> None:
    """skip and requeue of a job that completed raise JobNotFound: completed jobs are forgotten."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        done = await sup.send("k", 1)
    async with inturn.operate(journal) as op:
        for fix in (op.skip, op.requeue):
            with pytest.raises(inturn.JobNotFound) as not_found:
                await fix(done)
            assert not_found.value.job_id == done
        assert await op.job(done) is None


async def test_operate_requeue_refuses_while_an_unfinished_job_holds_its_unique_key() -> None:
    """requeue raises DuplicateError while an unfinished job holds the dead letter's unique key, and the dead letter stays."""
    journal = inturn.MemoryJournal()
    script = Script()
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(
            script, journal=journal, retry=inturn.Retry(max_attempts=1)
        ) as sup:
            dead = await sup.send("a", "bad", unique="u")
            await sup.wait_idle()
            holder = await sup.send("b", "hang", unique="u")
            await script.started("hang").wait()
            scope.cancel()
    async with inturn.operate(journal) as op:
        with pytest.raises(inturn.DuplicateError) as held:
            await op.requeue(dead)
        assert (held.value.unique, held.value.job_id) == ("u", holder)
        assert [d.id for d in await op.dead_letters()] == [dead]
        await op.skip(holder)
        new = await op.requeue(dead)  # the unique key is free now
        info = await op.job(new)
        assert info is not None
        assert (info.unique, info.state) == ("u", "queued")


async def test_operate_pause_of_a_halted_key_without_jobs_is_accepted() -> None:
    """pause of a key halted with no jobs left is fine, and resume lifts the halt."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        Script(), journal=journal, on_discard="halt", retry=inturn.Retry(max_attempts=1)
    ) as sup:
        await sup.send("k", "bad")
        await sup.wait_idle()
    async with inturn.operate(journal) as op:
        await op.pause("k")
        assert heads(await op.keys()) == [("k", None, None, True)]
        await op.resume("k")
        assert await op.keys() == []
        with pytest.raises(inturn.KeyNotFound):
            await op.pause("k")  # resumed, no jobs: nothing to pause


async def test_operate_requeue_hands_out_fresh_ids() -> None:
    """Two requeues get two new, rising ids, and a supervisor opened later hands out ids above them."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        Script(), journal=journal, retry=inturn.Retry(max_attempts=1)
    ) as sup:
        dead = [await sup.send("a", "bad"), await sup.send("b", "bad")]
        await sup.wait_idle()
    async with inturn.operate(journal) as op:
        first = await op.requeue(dead[0])
        second = await op.requeue(dead[1])
    assert dead[1] < first < second
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        assert await sup.send("c", None) > second
    assert sorted(call.job.id for call in recorder.calls) == [first, second, second + 1]


async def test_operate_purge_dead_deletes_only_dead_letters_old_enough() -> None:
    """purge_dead(older_than=s, key=...) deletes the dead letters discarded more than s seconds ago, of that key if given, and returns how many."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        Script(), journal=journal, retry=inturn.Retry(max_attempts=1)
    ) as sup:
        a = [await sup.send("a", "bad"), await sup.send("a", "bad")]
        b = await sup.send("b", "bad")
        await sup.wait_idle()
    async with inturn.operate(journal) as op:
        assert await op.purge_dead(older_than=3600) == 0
        assert await op.purge_dead(older_than=0, key="a") == 2
        assert [d.id for d in await op.dead_letters()] == [b]
        assert await op.job(a[0]) is None
        assert await op.purge_dead(older_than=0) == 1
        assert await op.dead_letters() == []


BAD_IDS: list[tuple[object, type[Exception]]] = [
    (0, ValueError),
    (-1, ValueError),
    (True, TypeError),
    ("3", TypeError),
    (1.5, TypeError),
    (None, TypeError),
]

OperatorCall = Callable[[inturn.Operator, object], Awaitable[object]]
ID_CALLS: dict[str, OperatorCall] = {
    "job": lambda op, job_id: op.job(job_id),  # type: ignore[arg-type]
    "requeue": lambda op, job_id: op.requeue(job_id),  # type: ignore[arg-type]
    "skip": lambda op, job_id: op.skip(job_id),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("call", ID_CALLS.values(), ids=ID_CALLS.keys())
@pytest.mark.parametrize(("job_id", "error"), BAD_IDS, ids=repr)
async def test_operate_refuses_a_bad_job_id_and_changes_nothing(
    call: OperatorCall, job_id: object, error: type[Exception]
) -> None:
    """job, requeue and skip take an int >= 1 (True is not job 1): anything else raises and the journal is as it was."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        Script(), journal=journal, retry=inturn.Retry(max_attempts=1)
    ) as sup:
        await sup.send("k", "bad")  # job 1: a dead letter
        await sup.wait_idle()
    async with inturn.operate(journal) as op:
        with pytest.raises(error):
            await call(op, job_id)
        assert [d.id for d in await op.dead_letters()] == [1]
        assert await op.keys() == []


@pytest.mark.parametrize(
    ("older_than", "error"),
    [
        (-1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (True, TypeError),
        ("7d", TypeError),
    ],
    ids=repr,
)
async def test_operate_purge_dead_refuses_a_bad_age(
    older_than: object, error: type[Exception]
) -> None:
    """older_than must be a finite number of seconds >= 0, not a bool; a bad one purges nothing."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        Script(), journal=journal, retry=inturn.Retry(max_attempts=1)
    ) as sup:
        await sup.send("k", "bad")
        await sup.wait_idle()
    async with inturn.operate(journal) as op:
        with pytest.raises(error):
            await op.purge_dead(older_than=older_than)  # type: ignore[arg-type]
        assert len(await op.dead_letters()) == 1


@pytest.mark.parametrize(("limit", "error"), [(0, ValueError), (True, TypeError), (2.0, TypeError)])
async def test_operate_reads_refuse_a_bad_limit_or_state(
    limit: object, error: type[Exception]
) -> None:
    """keys() and dead_letters() take an int limit >= 1, and keys() a known state filter."""
    async with inturn.operate(inturn.MemoryJournal()) as op:
        with pytest.raises(error):
            await op.keys(limit=limit)  # type: ignore[arg-type]
        with pytest.raises(error):
            await op.dead_letters(limit=limit)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="state"):
            await op.keys(state="stuck")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            await op.dead_letters(key=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("wait", "error"), [(0, ValueError), (-1.0, ValueError), ("10", TypeError)]
)
async def test_a_bad_answer_within_is_refused_before_anything_opens(
    wait: object, error: type[Exception]
) -> None:
    """answer_within must be a number of seconds > 0; a bad one changes nothing (the journal stays closed)."""
    journal = inturn.MemoryJournal()
    with pytest.raises(error):
        async with inturn.operate(journal, answer_within=wait):  # type: ignore[arg-type]
            pytest.fail("the body must not run")
    await journal.open()  # not left open by the refused operate
    await journal.aclose()
