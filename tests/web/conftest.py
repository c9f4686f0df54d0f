"""What the dashboard's tests share: a journal file with a key of each kind, and its source."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import inturn
from inturn.journal import SQLiteReader
from inturn.web import Source, reader_source

TOKEN = "s3cret-token"
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


async def fail_then_hold(job: inturn.Job) -> None:
    if job.payload == "fail":
        raise inturn.PermanentError("declined: card 4111")
    await trio.sleep_forever()


@pytest.fixture
async def journal_file(tmp_path: Path) -> Path:
    """A file holding: a dead letter on "acct" (its key halted), a queued job behind it, a
    scheduled job, and a job on a hostile key; no service runs on it."""
    path = tmp_path / "jobs.db"
    async with inturn.open_supervisor(
        fail_then_hold, journal=inturn.SQLiteJournal(path), on_discard="halt"
    ) as sup:
        with pytest.raises(inturn.JobDiscarded):
            await sup.ask("acct", "fail")
        await sup.send("acct", {"secret": "hunter2"})
        await sup.send(HOSTILE, "x", delay=3600)
        await sup.shutdown(grace=0)
    return path


def source(path: Path) -> Source:
    """The dashboard's source for the file at *path*, as ``inturn web`` makes it."""
    return reader_source(SQLiteReader(path), lambda: inturn.SQLiteJournal(path), answer_within=10)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}
