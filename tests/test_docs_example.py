"""The worked examples of docs/testing.md, run as tests.

Each block between a ``# docs/testing.md: begin`` line and the next
``# docs/testing.md: end`` line appears verbatim, in the same order, as a
```python block of docs/testing.md; tests/test_examples.py checks that they
agree, so the guide cannot drift from code that passes.
"""

# docs/testing.md: begin
from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pytest
import trio

import inturn
from inturn.journal import Change, Complete
from inturn.testing import FaultyJournal, Recorder, fail_after_step

# docs/testing.md: end


# docs/testing.md: begin
async def test_one_key_runs_in_order(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(job: inturn.Job) -> object:
        await trio.sleep(1)  # virtual time: the test does not wait a second
        return job.payload

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder) as sup:
        ids = [await sup.send("account-42", n) for n in range(5)]
        await sup.wait_idle()

    recorder.assert_sequential()  # never two at once, in acceptance order
    calls = recorder.by_key()["account-42"]
    assert [call.job.id for call in calls] == ids
    assert [call.job.payload for call in calls] == [0, 1, 2, 3, 4]
    assert [(call.start, call.end) for call in calls] == [
        (0.0, 1.0),
        (1.0, 2.0),
        (2.0, 3.0),
        (3.0, 4.0),
        (4.0, 5.0),
    ]


# docs/testing.md: end


# docs/testing.md: begin
async def test_backoff_elapses_in_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    async def flaky(job: inturn.Job) -> object:
        if job.attempt < 5:
            raise ConnectionError("try again")
        return "done"

    recorder = Recorder(flaky)
    retry = inturn.Retry(max_attempts=5, initial_delay=60, multiplier=1, jitter=0)
    async with inturn.open_supervisor(recorder, retry=retry) as sup:
        assert await sup.ask("k", "payload") == "done"
        assert trio.current_time() == 240.0  # four minutes of backoff, in no real time

    assert [call.start for call in recorder.calls] == [0.0, 60.0, 120.0, 180.0, 240.0]
    assert [call.job.attempt for call in recorder.calls] == [1, 2, 3, 4, 5]


# docs/testing.md: end


# docs/testing.md: begin
async def test_a_scheduled_job_waits_in_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = Recorder()
    async with inturn.open_supervisor(recorder) as sup:
        await sup.send("account-42", "reminder", delay=3600)  # in an hour
        await sup.send("account-42", "now")  # not blocked by the scheduled one
        await sup.wait_idle()  # waits for scheduled jobs too: an hour, virtually

    assert [(call.job.payload, call.start) for call in recorder.calls] == [
        ("now", 0.0),
        ("reminder", 3600.0),
    ]


# docs/testing.md: end


# docs/testing.md: begin
async def test_exhausted_job_is_a_dead_letter(autojump_clock: trio.testing.MockClock) -> None:
    async def broken(job: inturn.Job) -> object:
        raise ConnectionError("still down")

    journal = inturn.MemoryJournal()
    retry = inturn.Retry(max_attempts=3, initial_delay=60, max_delay=3600, jitter=0)
    async with inturn.open_supervisor(broken, journal=journal, retry=retry) as sup:
        with pytest.raises(inturn.JobDiscarded) as caught:
            await sup.ask("k", {"n": 1})
        assert isinstance(caught.value.__cause__, ConnectionError)
        assert trio.current_time() == 60.0 + 120.0
        [dead] = await journal.dead_letters()  # while the supervisor has it open

    assert (dead.key, dead.state, dead.attempts) == ("k", "dead", 3)
    assert dead.last_error == "ConnectionError: still down"


# docs/testing.md: end


# docs/testing.md: begin
async def test_job_runs_again_if_its_completion_is_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def lose_first_completion(changes: Sequence[Change]) -> bool:
        first = journal.failures == 0
        return first and any(isinstance(change, Complete) for change in changes)

    recorder = Recorder()
    journal = FaultyJournal(inturn.MemoryJournal(), fail=lose_first_completion)
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.send("k", "a")
        await sup.send("k", "b")
        await sup.wait_idle()

    # The actor crashed on the failed write and was restarted; "a" ran twice.
    assert journal.failures == 1
    assert [call.job.payload for call in recorder.calls] == ["a", "a", "b"]


# docs/testing.md: end


# docs/testing.md: begin
async def test_a_journal_that_keeps_failing_escalates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def every_completion(changes: Sequence[Change]) -> bool:
        return any(isinstance(change, Complete) for change in changes)

    memory = inturn.MemoryJournal()
    journal = FaultyJournal(memory, fail=every_completion)

    async def run() -> None:
        async with inturn.open_supervisor(Recorder(), journal=journal, max_restarts=3) as sup:
            await sup.send("k", "a")
            await sup.wait_idle()

    with pytest.raises(inturn.JournalError):  # bare, not inside an ExceptionGroup
        await run()
    assert journal.failures == 4  # the first crash, then three restarts
    assert [job.id for job in memory.unfinished()] == [1]  # kept for the next open


# docs/testing.md: end


# docs/testing.md: begin
async def test_a_retry_replays_the_primary_step(autojump_clock: trio.testing.MockClock) -> None:
    primary: list[int] = []
    replica: list[int] = []

    async def apply(job: inturn.Job) -> None:
        await job.step("primary", primary.append, job.payload)
        await job.step("replica", replica.append, job.payload)

    recorder = Recorder(apply)
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_after_step("primary"))
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.send("doc-7", 42)

    assert primary == [42]  # applied once, though the job ran twice
    assert replica == [42, 42]  # ran, its record failed, ran again
    first, retry = recorder.calls
    assert [(step.name, step.replayed) for step in first.steps] == [("primary", False)]
    assert [(step.name, step.replayed) for step in retry.steps] == [
        ("primary", True),  # from the journal: primary.append did not run
        ("replica", False),
    ]


# docs/testing.md: end


# docs/testing.md: begin
async def test_a_transaction_posts_once(autojump_clock: trio.testing.MockClock) -> None:
    def post(db: sqlite3.Connection, account: str, amount: int) -> int:
        db.execute("CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, cents INT)")
        (cents,) = db.execute(
            "INSERT INTO balances VALUES (?, ?) ON CONFLICT (account)"
            " DO UPDATE SET cents = cents + excluded.cents RETURNING cents",
            (account, amount),
        ).fetchone()
        return int(cents)

    async def apply(job: inturn.Job) -> int:
        cents: int = await job.transaction("post", post, job.key, job.payload)
        if job.attempt == 1:
            raise ConnectionError("the notification after it failed")
        return cents

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(apply, journal=journal) as sup:
        assert await sup.ask("acct-1", 250) == 250  # the retry got the recorded result

    rows = journal.database.execute("SELECT account, cents FROM balances").fetchall()
    assert rows == [("acct-1", 250)]  # posted once, though the job ran twice


# docs/testing.md: end


# docs/testing.md: begin
async def test_unfinished_jobs_survive_a_restart(autojump_clock: trio.testing.MockClock) -> None:
    async def slow(job: inturn.Job) -> object:
        await trio.sleep(1)
        return None

    journal = inturn.MemoryJournal()
    first = Recorder(slow)
    with trio.move_on_after(2.5):  # stop the first supervisor while job 3 runs
        async with inturn.open_supervisor(first, journal=journal) as sup:
            for n in range(5):
                await sup.send("k", n)
            await sup.wait_idle()

    # Cancellation marks nothing failed: job 3 gave its attempt back.
    assert [(job.id, job.attempts) for job in journal.unfinished()] == [(3, 0), (4, 0), (5, 0)]

    second = Recorder(slow)
    async with inturn.open_supervisor(second, journal=journal) as sup:
        await sup.wait_idle()  # the replayed jobs run without being sent again

    second.assert_sequential()
    assert [call.job.payload for call in first.calls if call.end is not None] == [0, 1]
    assert [call.job.payload for call in second.calls] == [2, 3, 4]
    assert [call.job.attempt for call in second.calls] == [1, 1, 1]
    assert journal.unfinished() == []


# docs/testing.md: end
