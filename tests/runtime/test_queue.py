"""A key's queue (issue 12, part 6): `Supervisor.jobs`, `Operator.jobs` and ``inturn jobs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
from inturn.cli import main
from tests.conftest import MakeJournal

SLOW = inturn.Retry(initial_delay=3600.0, max_delay=3600.0, jitter=0.0)


async def test_jobs_lists_a_keys_queue_in_order_head_first(make_journal: MakeJournal) -> None:
    """The head (retrying, with its error and retry time) then the jobs behind it, in send order, beyond the in-memory window too; other keys are not in it.

    On the real clock: under autojump, virtual time would jump to the retry
    while a journal's thread works.
    """

    async def handler(job: inturn.Job) -> None:
        if job.payload == "boom":
            raise ValueError("card declined")

    async with inturn.open_supervisor(
        handler, journal=make_journal(), retry=SLOW, window=2, max_buffered=2
    ) as sup:
        head = await sup.send("k", "boom")
        behind = [await sup.send("k", n) for n in range(5)]
        await sup.send("other", 1)
        with trio.fail_after(10):  # real time: its retry is an hour away
            while (info := await sup.job(head)) is None or info.state != "retrying":  # noqa: ASYNC110
                await trio.sleep(0.01)
        queue = await sup.jobs("k")
        assert [info.id for info in queue] == [head, *behind]
        assert [info.state for info in queue] == ["retrying"] + ["queued"] * 5
        assert queue[0].last_error == "ValueError: card declined"
        assert queue[0].retry_at is not None
        assert [info.id for info in await sup.jobs("k", limit=2)] == [head, behind[0]]
        assert [info.id for info in await sup.jobs("k", after=behind[2])] == behind[3:]
        assert await sup.jobs("nobody") == []
        with pytest.raises(inturn.InvalidKey):
            await sup.jobs("")
        with pytest.raises(ValueError, match="limit"):
            await sup.jobs("k", limit=0)
        with pytest.raises(TypeError):
            await sup.jobs("k", after="1")  # type: ignore[arg-type]
        await sup.shutdown(grace=0)


async def test_a_recovered_head_waiting_to_run_again_reads_as_queued(tmp_path: Path) -> None:
    """A head the last process stopped during is queued here until it starts, as job() says."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    await journal.write(
        [inturn.journal.Append(job_id=1, key="k", data=b"1"), inturn.journal.MarkAttempt(1, 1)]
    )
    await journal.aclose()
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await gate.wait()

    async with inturn.open_supervisor(handler, journal=journal, max_concurrency=1) as sup:
        await sup.pause("k")  # holds it: recovered, not started
        [info] = await sup.jobs("k")
        assert info.state == "queued"
        assert info == await sup.job(1)
        await sup.shutdown(grace=0)


async def test_operate_lists_the_queue_offline_and_live(tmp_path: Path) -> None:
    """operate().jobs reads the same queue with no supervisor, and beside a running one."""
    path = tmp_path / "jobs.db"
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await gate.wait()

    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
        ids = [await sup.send("k", n) for n in range(3)]
        async with inturn.operate(inturn.SQLiteJournal(path)) as op:
            assert op.live
            assert [info.id for info in await op.jobs("k")] == ids
        await sup.shutdown(grace=0)
    async with inturn.operate(inturn.SQLiteJournal(path)) as op:
        assert not op.live
        assert [info.id for info in await op.jobs("k", after=ids[0])] == ids[1:]


def test_the_command_line_lists_a_keys_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """inturn jobs FILE KEY: a table in order, --json, --limit, exit 1 for an empty key, 2 for a bad one."""
    path = tmp_path / "jobs.db"

    async def fill() -> None:
        journal = inturn.SQLiteJournal(path)
        await journal.open()
        await journal.write(
            [inturn.journal.Append(job_id=n, key="k", data=b"%d" % n) for n in range(1, 4)]
        )
        await journal.aclose()

    trio.run(fill)
    assert main(["jobs", str(path), "k"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["ID", "STATE", "ATTEMPTS"]
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3"]
    assert main(["jobs", str(path), "k", "--json", "--limit", "2"]) == 0
    out = capsys.readouterr()
    assert [job["id"] for job in json.loads(out.out)] == [1, 2]
    assert "--limit N shows more" in out.err
    assert main(["jobs", str(path), "empty"]) == 1
    assert "no unfinished jobs of key 'empty'" in capsys.readouterr().err
    assert main(["jobs", str(path), ""]) == 2
