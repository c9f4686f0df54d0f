"""Regression tests for races between sends, operators and actors (each fails on the defect it names)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn.journal import Append, Complete, MarkAttempt, Retrying
from inturn.testing import FaultyJournal, Recorder
from tests.gating import GatingJournal, any_of

from .helpers import Script

GUARD = 1000.0
"""Virtual seconds after which a test on the autojump clock is stuck."""
REAL_GUARD = 10.0
"""Real seconds after which a test on SQLite (real clock: its writes wait for a thread) is stuck."""


def ran(recorder: Recorder) -> list[int]:
    return [call.job.id for call in recorder.calls]


# -- 1: a job waiting for a slot loses no attempt -----------------------------------


async def journaled(journal: inturn.MemoryJournal, job_id: int) -> tuple[str, int]:
    """(state, attempts) of *job_id* as the journal alone records it."""
    async with inturn.operate(journal) as op:
        info = await op.job(job_id)
    assert info is not None
    return info.state, info.attempts


@pytest.mark.parametrize("via", ["send", "send_many"])
async def test_defect1_a_job_waiting_for_a_slot_keeps_its_attempts(
    via: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A head that waits for a slot is not marked as started, so a stop does not use up its attempt."""
    journal = inturn.MemoryJournal()
    script = Script()
    options: dict[str, Any] = {"retry": inturn.Retry(max_attempts=1), "max_concurrency": 1}
    with trio.move_on_after(GUARD):  # the supervisor is cancelled with "hang" running
        async with inturn.open_supervisor(script, journal=journal, **options) as sup:
            if via == "send":
                await sup.send("a", "hang")
                waiting = await sup.send("b", "b")
            else:  # a1 completes while b waits for the slot: a2's start is not marked
                _, waiting, _ = await sup.send_many([("a", "a1"), ("b", "hang"), ("a", "a2")])
                waiting = 3
            await script.started("hang").wait()
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep_forever()
    assert await journaled(journal, waiting) == ("queued", 0)

    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal, **options):
        pass
    assert [
        (call.job.id, call.job.attempt) for call in recorder.calls if call.job.id == waiting
    ] == [(waiting, 1)]


@pytest.mark.parametrize("jobs", [1, 3])
async def test_defect1_a_start_marked_early_is_given_back_at_shutdown(
    jobs: int, autojump_clock: trio.testing.MockClock
) -> None:
    """Heads marked with their acceptance and stopped at once have their attempts given back."""
    journal = inturn.MemoryJournal()
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
            ids = await sup.send_many([(f"k{n}", n) for n in range(jobs)])
            scope.cancel()  # before, or as, their actors run them
    for job_id in ids:
        assert await journaled(journal, job_id) == ("queued", 0)


# -- 2: a refused send's unique key ------------------------------------------------


async def test_defect2_a_send_is_not_refused_as_a_duplicate_of_a_job_that_never_existed() -> None:
    journal = GatingJournal(inturn.MemoryJournal())
    first_write = journal.hold_writes(limit=1, fails=True)  # then raises JournalError
    script = Script()
    results: dict[str, object] = {}

    async def send(sup, name, key, payload):
        try:
            results[name] = await sup.send(key, payload, unique="u")
        except Exception as exc:
            results[name] = exc

    async with inturn.open_supervisor(script, journal=journal) as sup:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, sup, "a", "k", 1)
            await trio.testing.wait_all_tasks_blocked()  # a waits in its write
            nursery.start_soon(send, sup, "b", "k2", "hold")
            await trio.testing.wait_all_tasks_blocked()
            first_write.release()
        assert isinstance(results["b"], int), results
        assert isinstance(results["a"], inturn.JournalError), results
        with pytest.raises(inturn.DuplicateError):
            await sup.send("k3", 3, unique="u")
        script.release("hold")


# -- 3: operator reads yield -------------------------------------------------------

READS: dict[str, Callable[[Any], Awaitable[object]]] = {
    "sup.keys": lambda sup: sup.keys(),
    "sup.job": lambda sup: sup.job(1),
    "sup.dead_letters": lambda sup: sup.dead_letters(),
    "sup.purge_dead": lambda sup: sup.purge_dead(older_than=0),
    "op.keys": lambda op: op.keys(),
    "op.job": lambda op: op.job(1),
    "op.dead_letters": lambda op: op.dead_letters(),
    "op.purge_dead": lambda op: op.purge_dead(older_than=0),
}


async def spins_during(call) -> int:
    """How often a sibling task ran while *call* was awaited 200 times."""
    spins = 0

    async def spin(task_status=trio.TASK_STATUS_IGNORED):
        nonlocal spins
        task_status.started()
        while True:
            spins += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        await nursery.start(spin)
        before = spins
        for _ in range(200):
            await call()
        during = spins - before
        nursery.cancel_scope.cancel()
    return during


@pytest.mark.parametrize("name", list(READS))
async def test_defect3_operator_reads_yield(name):
    journal = inturn.MemoryJournal()
    read = READS[name]
    if name.startswith("sup."):
        async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
            spins = await spins_during(lambda: read(sup))
    else:
        async with inturn.open_supervisor(Recorder(), journal=journal):
            pass
        async with inturn.operate(journal) as op:
            spins = await spins_during(lambda: read(op))
    assert spins > 0, f"{name}() never let another task run in 200 calls"


# -- 4: leaving the block after a pause while the head ran ---------------------------


@pytest.fixture(params=["memory", "sqlite"])
def kind(request):
    return request.param


@pytest.fixture
def clock(kind):
    """The autojump clock on MemoryJournal; the real clock on SQLite (its writes wait for a thread)."""
    return trio.testing.MockClock(autojump_threshold=0) if kind == "memory" else None


@pytest.mark.parametrize("failure", ["attempt_fails_and_retries", "completion_write_fails"])
async def test_defect4_leaving_the_block_does_not_hang_after_a_pause_while_the_head_ran(
    kind, clock, tmp_path: Path, failure
) -> None:
    inner = inturn.MemoryJournal() if kind == "memory" else inturn.SQLiteJournal(tmp_path / "j.db")
    journal = FaultyJournal(inner)
    if failure == "completion_write_fails":
        journal.fail = lambda changes: (
            journal.failures == 0 and any(isinstance(change, Complete) for change in changes)
        )
    started, release = trio.Event(), trio.Event()

    async def handler(job):
        started.set()
        await release.wait()
        if failure == "attempt_fails_and_retries" and job.attempt == 1:
            raise ValueError("boom")

    retry = inturn.Retry(initial_delay=0.05, max_delay=0.05, jitter=0.0)
    with trio.fail_after(GUARD if clock is not None else REAL_GUARD):
        async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
            await sup.send("k", "x")
            await started.wait()
            await sup.pause("k")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.wait_idle)
                await trio.testing.wait_all_tasks_blocked()  # wait_idle waits
                release.set()  # now the attempt fails, or its completion's write


# -- 5: nothing starts once pause() has returned --------------------------------------


async def pause_between_two_jobs() -> list[tuple[int, bool]]:
    """Pause "k" right after its first job returned; (job id, paused) of every handler start."""
    paused = False
    starts: list[tuple[int, bool]] = []
    first_returned, release = trio.Event(), trio.Event()

    async def handler(job):
        starts.append((job.id, paused))
        if job.payload == 1:
            first_returned.set()
        else:
            await release.wait()  # so the key still has a job when the pause lands

    async with inturn.open_supervisor(handler) as sup:
        await sup.send_many([("k", 1), ("k", 2)])
        if not first_returned.is_set():
            await first_returned.wait()
        await sup.pause("k")
        paused = True
        await trio.testing.wait_all_tasks_blocked()
        paused = False
        release.set()
        await sup.resume("k")
        await sup.wait_idle()
    return starts


async def test_defect5_no_handler_starts_after_pause_returns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Trio orders a batch of runnable tasks at random: try the race many times.
    for attempt in range(20):
        starts = await pause_between_two_jobs()
        assert (2, True) not in starts, f"try {attempt}: job 2 started after pause() returned"
        assert [job_id for job_id, _ in starts] == [1, 2], f"try {attempt}: {starts}"


# -- 6: two skips of one queued job on SQLite -------------------------------------------


@pytest.mark.parametrize("attempt", range(20))
async def test_defect6_two_concurrent_skips_of_a_queued_job_on_sqlite(
    tmp_path: Path, attempt
) -> None:
    script = Script()
    recorder = Recorder(script)
    outcomes: list[BaseException | None] = []

    async def skip(sup, job_id):
        try:
            await sup.skip(job_id)
        except Exception as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    journal = inturn.SQLiteJournal(tmp_path / "j.db")
    with trio.fail_after(REAL_GUARD):
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            head = await sup.send("k", "hold")
            victim = await sup.send("k", "victim")
            await script.started("hold").wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(skip, sup, victim)
                nursery.start_soon(skip, sup, victim)
            kinds = sorted(type(outcome).__name__ for outcome in outcomes)
            assert kinds == ["JobStateError", "NoneType"], outcomes
            script.release("hold")
            await sup.wait_idle()
            assert [dead.id for dead in await sup.dead_letters()] == [victim]
    assert ran(recorder) == [head]


# -- 7: a skip landing while the job's page is read --------------------------------------


async def test_defect7_a_job_skipped_while_its_page_loads_never_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = GatingJournal(inturn.MemoryJournal())
    first_load = journal.hold_loads(limit=1)  # read when called, returned once released
    script = Script()
    recorder = Recorder(script)
    escalated = None
    ids: list[int] = []
    victim = 0
    try:
        with trio.fail_after(GUARD):
            async with inturn.open_supervisor(recorder, journal=journal, window=4) as sup:
                ids = [await sup.send("k", "hold")] + [await sup.send("k", n) for n in range(8)]
                await script.started("hold").wait()
                script.release("hold")
                await first_load.wait_held()  # the page is read, not yet returned
                victim = journal.pages[0][0]
                await sup.skip(victim)  # its Discard is journaled
                first_load.release()
                await sup.wait_idle()
    except inturn.JournalError as exc:
        escalated = exc
    assert ran(recorder) == [job_id for job_id in ids if job_id != victim]
    assert escalated is None


# -- 8: purge_dead racing requeue --------------------------------------------------------


async def test_defect8_purge_dead_racing_a_requeue_purges_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = GatingJournal(inturn.MemoryJournal())
    broken = True

    async def handler(job):
        if broken:
            raise inturn.PermanentError("down")

    recorder = Recorder(handler)
    purged: list[object] = []

    async def purge(sup):
        try:
            purged.append(await sup.purge_dead(older_than=0))
        except Exception as exc:
            purged.append(exc)

    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        first = await sup.send("a", 1)
        await sup.send("b", 2)
        await sup.wait_idle()
        broken = False
        read = journal.hold_reads("dead_letters", limit=1)  # the purge's
        async with trio.open_nursery() as nursery:
            nursery.start_soon(purge, sup)
            await read.wait_held()  # the purge has read both dead letters
            requeued = await sup.requeue(first)
            read.release()
        assert purged == [1], purged
        await sup.wait_idle()
        assert await sup.dead_letters() == []
    assert ran(recorder)[-1] == requeued


# -- 10: time and attempts survive a restart truthfully -----------------------------------


async def test_defect10_a_backoff_is_honoured_after_a_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A head stopped while it waits out a 60 s backoff waits out the rest of it under the next supervisor.

    The journal keeps the deadline in Unix time, which the mock clock's jumps
    do not move: here all 60 s are still to wait.
    """
    journal = inturn.MemoryJournal()
    retry = inturn.Retry(initial_delay=60.0, max_delay=60.0, jitter=0.0)
    script = Script()
    with trio.move_on_after(5.0):  # stopped during the backoff
        async with inturn.open_supervisor(script, journal=journal, retry=retry) as sup:
            job_id = await sup.send("k", "boom-once")
            await trio.sleep_forever()
    recorder = Recorder(script)
    reopened = trio.current_time()
    async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
        pass
    [call] = recorder.calls
    assert (call.job.id, call.job.attempt) == (job_id, 2)
    assert 59.0 < call.start - reopened <= 60.0  # not at once


async def crashed_during_the_last_attempt(journal: inturn.Journal, errors: int) -> None:
    """Leave *journal* as a process killed during attempt 4 of job 1 leaves it."""
    await journal.open()
    changes: list[inturn.journal.Change] = [Append(job_id=1, key="k", data=b'"pay"')]
    for attempt in range(1, 5):
        changes.append(MarkAttempt(1, attempt))
        if attempt <= errors:
            changes.append(Retrying(1, f"GatewayUnavailable: down ({attempt})", 0.0))
    await journal.write(changes)
    await journal.aclose()


@pytest.mark.parametrize("errors", [3, 0])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_defect10_a_dead_letter_keeps_the_last_error_and_the_stopped_attempt_apart(
    kind: str, errors: int, tmp_path: Path
) -> None:
    """A job killed during its last attempt is a dead letter whose last error is its handler's, and which says the process stopped during attempt 4."""
    journal: inturn.Journal = (
        inturn.MemoryJournal() if kind == "memory" else inturn.SQLiteJournal(tmp_path / "j.db")
    )
    await crashed_during_the_last_attempt(journal, errors)
    recorder = Recorder()
    async with inturn.open_supervisor(
        recorder, journal=journal, retry=inturn.Retry(max_attempts=4)
    ) as sup:
        await sup.wait_idle()
        [dead] = await sup.dead_letters()
    assert recorder.calls == []
    expected = (
        "GatewayUnavailable: down (3)"
        if errors
        else "inturn.errors.PermanentError: the process stopped during each of its 4 attempts"
    )
    assert (dead.id, dead.attempts, dead.last_error, dead.stopped_during) == (1, 4, expected, 4)


@pytest.mark.parametrize("many", [False, True], ids=["send", "send_many"])
@pytest.mark.parametrize(
    "first", ["halt", "send"], ids=["halt-commits-first", "send-commits-first"]
)
async def test_defect1_a_pause_racing_a_send_leaves_no_attempt_marked(
    first: str, many: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """A send whose start goes with its acceptance, racing a pause of its key: either the journal
    supersedes the start or the supervisor gives it back; the paused job shows 0 attempts.
    (`send` and `send_many` journal a job each their own way.)"""
    from inturn.journal import Halt

    journal = GatingJournal(inturn.MemoryJournal())
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal, max_concurrency=1) as sup:
        await sup.send("k", 0)
        await sup.wait_idle()
        appends, halts = journal.hold_writes(any_of(Append)), journal.hold_writes(any_of(Halt))
        async with trio.open_nursery() as nursery:
            if many:
                nursery.start_soon(sup.send_many, [("k", 1)])
            else:
                nursery.start_soon(sup.send, "k", 1)
            await appends.wait_held()  # the send's write waits, its start in it
            nursery.start_soon(sup.pause, "k")  # the core is paused at once
            await halts.wait_held()
            for hold in [halts, appends] if first == "halt" else [appends, halts]:
                hold.release()
                await trio.testing.wait_all_tasks_blocked()
        info = await sup.job(2)
        assert info is not None
        assert (info.state, info.attempts) == ("queued", 0)
        await sup.resume("k")
        await sup.wait_idle()
    assert [(call.job.id, call.job.attempt) for call in recorder.calls] == [(1, 1), (2, 1)]


async def test_a_job_another_writer_completed_while_it_ran_is_superseded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A running job that another writer completes first is superseded when its handler returns:
    counted as discarded, its ``ask`` told, and the job behind it (whose start went in the same
    write) runs as attempt 1."""
    journal = inturn.MemoryJournal()
    attempts: list[tuple[object, int]] = []

    async def handler(job: inturn.Job) -> str:
        attempts.append((job.payload, job.attempt))
        if job.payload == "first":
            await journal.write([Complete(job.id)])  # another writer of the same journal
        return f"ran {job.payload}"

    with trio.fail_after(GUARD), structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.send, "k", "second")  # behind, while the first runs
                with pytest.raises(inturn.JobDiscarded) as discarded:
                    await sup.ask("k", "first")
            assert await sup.ask("k", "third") == "ran third"
            stats = sup.stats()

    assert "another writer" in str(discarded.value.__cause__)
    assert attempts == [("first", 1), ("second", 1), ("third", 1)]
    assert (stats.completed, stats.discarded) == (2, 1)
    assert [(log["event"], log["job_id"]) for log in logs if log["event"] == "job.superseded"] == [
        ("job.superseded", 1)
    ]
    assert journal.unfinished() == []
