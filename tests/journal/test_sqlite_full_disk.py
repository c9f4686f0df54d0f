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

import inturn

from . import tmpfs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    folder = tmpfs.mount(tmp_path / "disk", "size=4m")
    try:
        yield folder
    finally:
        tmpfs.unmount(folder)  # busy if the journal left its file open after it was closed


def fill(folder: Path) -> Path:
    """Fill the disk to the last byte; the filler's path."""
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
