"""Requeue in place (issue 12, part 1): fix a halted key without breaking its order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
from inturn.cli import main
from tests.conftest import MakeJournal

ONCE = inturn.Retry(max_attempts=1)


async def test_requeue_at_the_head_runs_the_dead_letter_first_and_keeps_the_order(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """A head discarded under on_discard="halt" parks its key; requeue(head=True) runs it first, under its own id, then the jobs behind it in order, and the key is resumed."""
    ran: list[object] = []
    broken = True

    async def handler(job: inturn.Job) -> None:
        if job.payload == "fragile" and broken:
            raise ValueError("gateway down")
        ran.append(job.payload)

    journal = make_journal()
    async with inturn.open_supervisor(
        handler, journal=journal, retry=ONCE, on_discard="halt"
    ) as sup:
        dead = await sup.send("acct", "fragile")
        for n in range(3):
            await sup.send("acct", n)
        await sup.wait_idle()
        assert ran == []  # halted behind its dead head
        assert sup.stats().halted_keys == frozenset({"acct"})
        broken = False
        assert await sup.requeue(dead, head=True) == dead
        await sup.wait_idle()
        assert sup.stats().halted_keys == frozenset()
        assert await sup.job(dead) is None  # completed
    assert ran == ["fragile", 0, 1, 2]


async def test_requeue_at_the_head_survives_a_restart(tmp_path: Path) -> None:
    """Journaled in one step: a supervisor that stops right after finds the revived job first and the key resumed."""
    path = tmp_path / "jobs.db"
    ran: list[object] = []

    async def fail(job: inturn.Job) -> None:
        raise ValueError("down")

    async def collect(job: inturn.Job) -> None:
        ran.append(job.payload)

    journal = inturn.SQLiteJournal(path)
    async with inturn.open_supervisor(fail, journal=journal, retry=ONCE, on_discard="halt") as sup:
        dead = await sup.send("k", "first")
        await sup.send("k", "second")
        with trio.fail_after(10):
            while not sup.stats().halted_keys:  # noqa: ASYNC110 (real time, a file)
                await trio.sleep(0.01)
        await sup.shutdown(grace=0)
    async with inturn.operate(inturn.SQLiteJournal(path)) as op:
        assert await op.requeue(dead, head=True) == dead
    async with inturn.open_supervisor(collect, journal=journal) as sup:
        await sup.wait_idle()
    assert ran == ["first", "second"]


async def test_requeue_at_the_head_refuses_what_requeue_refuses(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No such job, or one completed: JobNotFound; a held unique key: DuplicateError; an unfinished job: JobStateError. (A second Revive of one job is superseded: the kit checks it on every journal.)"""
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            raise inturn.PermanentError("no")
        await gate.wait()

    async with inturn.open_supervisor(handler) as sup:
        dead = await sup.send("k", "bad", unique="u")
        while (info := await sup.job(dead)) is None or info.state != "dead":  # noqa: ASYNC110
            await trio.sleep(0.01)
        holder = await sup.send("other", "holds u", unique="u")  # free once k's job died
        with pytest.raises(inturn.JobNotFound):
            await sup.requeue(999, head=True)
        with pytest.raises(inturn.DuplicateError) as duplicate:
            await sup.requeue(dead, head=True)
        assert duplicate.value.job_id == holder
        with pytest.raises(inturn.JobStateError):
            await sup.requeue(holder, head=True)  # unfinished, not a dead letter
        gate.set()
        await sup.wait_idle()
        assert await sup.requeue(dead, head=True) == dead  # u is free now
        await sup.wait_idle()
        with pytest.raises(inturn.JobNotFound):
            await sup.requeue(holder, head=True)  # completed: gone


def test_the_command_line_requeues_at_the_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inturn requeue --head FILE ID: one line saying so; the job keeps its id and its key is resumed."""
    path = tmp_path / "jobs.db"

    async def fill() -> int:
        async def fail(job: inturn.Job) -> None:
            raise inturn.PermanentError("no")

        journal = inturn.SQLiteJournal(path)
        async with inturn.open_supervisor(fail, journal=journal, on_discard="halt") as sup:
            job_id = await sup.send("k", 1)
            await sup.send("k", 2)
            with trio.fail_after(10):
                while not sup.stats().halted_keys:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            await sup.shutdown(grace=0)
        return job_id

    dead = trio.run(fill)
    assert main(["requeue", "--head", str(path), str(dead)]) == 0
    assert capsys.readouterr().out == f"requeued job {dead} in its own place, its key resumed\n"
    assert main(["jobs", str(path), "k", "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)
    assert [job["id"] for job in jobs] == [dead, dead + 1]
    assert main(["keys", str(path), "--halted"]) == 1


async def test_a_live_operator_requeues_at_the_head(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """operate() beside a running supervisor sends requeue(head=True) to it (the requeue_head command): the key runs the job first again."""
    ran: list[object] = []
    broken = True

    async def handler(job: inturn.Job) -> None:
        if broken:
            raise ValueError("down")
        ran.append(job.payload)

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        handler, journal=journal, retry=ONCE, on_discard="halt"
    ) as sup:
        dead = await sup.send("k", "first")
        await sup.send("k", "second")
        while not sup.stats().halted_keys:  # noqa: ASYNC110 (virtual time)
            await trio.sleep(0.01)
        broken = False
        async with inturn.operate(journal) as op:
            assert op.live
            assert await op.requeue(dead, head=True) == dead
        await sup.wait_idle()
    assert ran == ["first", "second"]
