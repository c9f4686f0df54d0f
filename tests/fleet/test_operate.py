"""Operators' fixes on a fleet: from another member, from `inturn.operate`, from the command line.

Each reaches the journal, not the member that owns the key: the journal's
compare-and-set decides the race, and the owner finds a skipped job's start
superseded, a paused key's next start refused, a requeued job when it next
runs dry.
"""

from __future__ import annotations

import os
import socket
import sys

import pytest
import trio

import inturn

from .test_members import member


class Gate:
    """A handler whose job "hold" waits until released; every start and end is recorded."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []
        self.holding = trio.Event()
        self.release = trio.Event()
        self.failures = {"flaky"}

    async def __call__(self, job: inturn.Job) -> None:
        payload = str(job.payload)
        self.started.append(payload)
        if payload == "hold":
            self.holding.set()
            await self.release.wait()
        if payload in self.failures:
            self.failures.discard(payload)  # fails once, for good: a dead letter
            raise inturn.PermanentError("flaky")
        self.ended.append(payload)


async def until(condition: object) -> None:
    while not condition():  # type: ignore[operator]  # noqa: ASYNC110 (another task's progress)
        await trio.sleep(0.01)


async def test_fixes_from_operate_reach_a_key_another_member_owns(
    pg_dsn: str, pg_schema: str
) -> None:
    """While member A runs "hold" on k: skip "two", pause k, see A own k; "three" waits for resume."""
    gate = Gate()
    with trio.fail_after(60):
        async with inturn.open_supervisor(gate, journal=member(pg_dsn, pg_schema)) as a:
            await a.send("k", "hold")
            two = await a.send("k", "two")
            await a.send("k", "three")
            await gate.holding.wait()
            async with inturn.operate(member(pg_dsn, pg_schema)) as op:
                [k] = await op.keys()
                assert k.owner == f"{socket.gethostname()}:{os.getpid()}"
                await op.skip(two)
                await op.pause("k")
                gate.release.set()
                await until(lambda: "hold" in gate.ended)
                await until(lambda: a.stats().actors == 0)  # A let the halted key go
                [k] = await op.keys()
                assert (k.halted, k.owner, gate.started) == (True, None, ["hold"])
                await op.resume("k")
                await until(lambda: "three" in gate.ended)
                assert (await op.job(two)).state == "dead"  # type: ignore[union-attr]
    assert gate.started == ["hold", "three"]


async def test_requeue_from_another_member_runs_the_dead_letter_again(
    pg_dsn: str, pg_schema: str
) -> None:
    """A dead letter requeued by member B, at the tail or at its head, runs again wherever k is owned."""
    gate = Gate()
    gate.release.set()
    with trio.fail_after(60):
        async with (
            inturn.open_supervisor(gate, journal=member(pg_dsn, pg_schema)) as a,
            inturn.open_supervisor(gate, journal=member(pg_dsn, pg_schema)) as b,
        ):
            flaky = await a.send("k", "flaky")
            await until(lambda: gate.started == ["flaky"])
            await a.wait_idle()
            [dead] = await b.dead_letters()
            assert dead.id == flaky
            again = await b.requeue(flaky)
            assert again != flaky
            await until(lambda: gate.ended == ["flaky"])
            gate.failures.add("flaky")
            second = await a.send("k", "flaky")
            await until(lambda: gate.started == ["flaky", "flaky", "flaky"])
            await a.wait_idle()
            assert await b.requeue(second, head=True) == second
            await until(lambda: gate.ended == ["flaky", "flaky"])
            assert await b.dead_letters() == []


async def test_the_command_line_reads_and_fixes_a_running_fleet(
    pg_dsn: str, pg_schema: str
) -> None:
    """``inturn keys`` shows the member that owns a key; ``inturn skip`` skips a job behind it."""
    gate = Gate()

    async def inturn_cli(*args: str) -> str:
        command = [sys.executable, "-m", "inturn", *args, pg_dsn, "--schema", pg_schema]
        done = await trio.run_process(command, capture_stdout=True, capture_stderr=True)
        return done.stdout.decode()

    with trio.fail_after(60):
        async with inturn.open_supervisor(gate, journal=member(pg_dsn, pg_schema)) as a:
            await a.send("k", "hold")
            two = await a.send("k", "two")
            await gate.holding.wait()
            listing = await inturn_cli("keys")
            assert "OWNER" in listing.splitlines()[0]
            assert f"{socket.gethostname()}:{os.getpid()}" in listing
            skipped = await trio.run_process(
                [sys.executable, "-m", "inturn", "skip", pg_dsn, str(two), "--schema", pg_schema],
                capture_stdout=True,
            )
            assert skipped.stdout.decode().startswith(f"skipped job {two} of key 'k'")
            gate.release.set()
            await a.wait_idle()
    assert gate.started == ["hold"]


async def test_a_scheduled_job_is_skipped_through_the_journal_and_what_a_fleet_cannot_do_says_so(
    pg_dsn: str, pg_schema: str
) -> None:
    """skip of a scheduled job (its key owned here or not) discards it; ask and a remote retry_now are refused."""
    gate = Gate()
    with trio.fail_after(30):
        async with inturn.open_supervisor(gate, journal=member(pg_dsn, pg_schema)) as a:
            await a.send("k", "hold")
            later = await a.send("k", "later", delay=3600)
            await gate.holding.wait()  # k is owned here
            await a.skip(later)
            assert (await a.job(later)).state == "dead"  # type: ignore[union-attr]
            with pytest.raises(NotImplementedError):
                await a.ask("k", "answer me")
            with pytest.raises(NotImplementedError):
                await a.retry_now("elsewhere")
            gate.release.set()
    assert gate.started == ["hold"]


async def test_a_skip_on_the_owner_of_a_job_sent_after_its_claim_keeps_the_counts(
    pg_dsn: str, pg_schema: str
) -> None:
    """k's owner runs "hold"; "later", sent to k meanwhile, waits in the journal (the owner
    reads it when k runs dry); skipped on the owner, it is gone, and "hold" still runs:
    nothing is queued.  Today ``stats().queued`` is -1."""
    gate = Gate()
    with trio.fail_after(30):
        async with inturn.open_supervisor(gate, journal=member(pg_dsn, pg_schema)) as a:
            await a.send("k", "hold")
            await gate.holding.wait()  # k is owned here
            later = await a.send("k", "later")
            await a.skip(later)
            stats = a.stats()
            gate.release.set()
            await a.wait_idle()
    assert (stats.running, stats.queued, stats.discarded) == (1, 0, 1)
    assert gate.started == ["hold"]
