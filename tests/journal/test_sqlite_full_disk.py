"""Issue 10, defect 4: a full disk refuses sends; the journal works again once space returns.

A real disk: a 4 MiB tmpfs (the tests run as root), filled with a file while
a supervisor runs.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import Append, Backlog, Complete, MarkAttempt, sqlite as sqlite_journal

from . import tmpfs
from .test_sqlite_marked import marked, row_ids


def mounted(tmp_path: Path, size: str) -> Iterator[Path]:
    folder = tmpfs.mount(tmp_path / "disk", f"size={size}")
    try:
        yield folder
    finally:
        tmpfs.unmount(folder)  # busy if the journal left its file open after it was closed


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from mounted(tmp_path, "4m")


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the disk to the last byte but *leave*; the filler's path."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, os.path.getsize(filler) - leave)
    return filler


async def test_a_full_disk_refuses_sends_and_the_service_goes_on_when_space_returns(
    small_disk: Path,
) -> None:
    """Sends on a full disk raise JournalError saying so, nothing half-written; once space returns, sends and the jobs accepted before run, none lost."""
    ran: list[int] = []
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await gate.wait()
        ran.append(int(str(job.payload)))

    journal = inturn.SQLiteJournal(small_disk / "jobs.db")
    refusals: list[str] = []
    async with inturn.open_supervisor(handler, journal=journal, max_restarts=1000) as sup:
        accepted = [await sup.send(f"k{n % 5}", n) for n in range(20)]
        filler = fill(small_disk)
        for n in range(20, 60):
            try:
                accepted.append(await sup.send(f"k{n % 5}", "x" * 20_000 + str(n)))
            except inturn.JournalError as exc:
                refusals.append(str(exc))
        filler.unlink()  # space returns
        for n in range(60, 70):
            await sup.send(f"k{n % 5}", n)
        gate.set()
        await sup.wait_idle()
    assert refusals
    assert all("disk full, nothing stored" in text for text in refusals), refusals
    recovery = await journal.open()  # the file is sound, and nothing is left over
    await journal.aclose()
    assert list(recovery.jobs) == []
    assert sorted(n for n in ran if n < 20) == list(range(20))  # accepted before: all ran
    assert sorted(n for n in ran if n >= 60) == list(range(60, 70))


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """Room for the write-ahead log to reach its checkpoint (1,000 pages) with room to spare."""
    yield from mounted(tmp_path, "16m")


async def test_a_disk_with_room_for_a_completion_but_not_the_deletes_keeps_completing(
    disk: Path,
) -> None:
    """The commit that would delete the marked rows does not fit on the disk, a lone
    completion does: the completion commits without the deletes, no attempt is cut
    short, and the rows are deleted once there is room."""
    every = sqlite_journal._DELETE_EVERY
    runs: list[int] = []
    gate = trio.Event()
    crashes: list[inturn.Event] = []

    async def handler(job: inturn.Job) -> None:
        runs.append(job.id)
        if job.payload == "last":
            await gate.wait()

    def on_event(event: inturn.Event) -> None:
        if event.name == "actor.crashed":
            crashes.append(event)

    path = disk / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    async with inturn.open_supervisor(handler, journal=journal, on_event=on_event) as sup:
        for n in range(every - 1):  # one at a time: each completion is marked
            await sup.send("k", n)
            await sup.wait_idle()
        assert len(marked(path)) == every - 1
        last = await sup.send("k", "last")
        await trio.testing.wait_all_tasks_blocked()  # it runs, its start committed
        filler = fill(disk, leave=12 * 1024)  # three pages: a completion fits, the deletes not
        gate.set()
        await sup.wait_idle()  # its completion brings the marked rows to `_DELETE_EVERY`
        assert runs.count(last) == 1
        assert crashes == []
        assert len(marked(path)) == every  # the deletes wait
        filler.unlink()  # room again: the next deletes are done
        for n in range(every):
            await sup.send("k", n)
            await sup.wait_idle()
        assert marked(path) == []
    assert crashes == []
    assert len(runs) == 2 * every
    recovery = await journal.open()
    await journal.aclose()
    assert list(recovery.jobs) == []


async def test_rows_a_full_disk_kept_marked_are_completed_jobs_when_it_opens_on_that_disk(
    disk: Path,
) -> None:
    """The journal closes on a full disk, its marked rows not deleted, and opens on it
    again: their jobs are not recovered, and the rows are deleted once there is room."""
    path = disk / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write(
        [*(Append(job_id=n, key="k", data=b"x") for n in range(1, 6)), MarkAttempt(1, 1)]
    )
    for job_id in (1, 2, 3):
        await journal.write([Complete(job_id), MarkAttempt(job_id + 1, 1)])
    filler = fill(disk)
    await journal.aclose()  # cannot delete them: the disk is full
    assert marked(path) == [1, 2, 3]

    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [4]
        assert dict(recovery.backlog) == {"k": Backlog(count=1, last_id=5)}
        assert [job.id for job in await journal.load("k", 0, 10)] == [4, 5]
    finally:
        filler.unlink()  # room again
        await journal.aclose()
    assert marked(path) == []
    assert row_ids(path) == [4, 5]
