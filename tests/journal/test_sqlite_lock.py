"""Issue 10, defects 1 and 5: one supervisor per SQLite file, whatever name opens it; opening errors are JournalErrors.

The lock is an ``flock`` on the database file itself: a symlink or a hard
link reaches the same file and the same lock, and no lock file exists that
someone could delete.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import inturn
from inturn.journal import Append

from . import tmpfs


async def nothing(job: inturn.Job) -> None:
    pass


HOLDER = """
import sys, trio, inturn
async def main():
    journal = inturn.SQLiteJournal(sys.argv[1])
    await journal.open()
    await journal.write([inturn.journal.Append(job_id=1, key="k", data=b"1")])
    print("held", flush=True)
    await trio.sleep_forever()
trio.run(main)
"""


def names_of(path: Path) -> dict[str, Path]:
    """The same file under three more names: a symlink, a hard link, a relative path."""
    symlink = path.with_name("via-symlink.db")
    symlink.symlink_to(path)
    hard = path.with_name("via-hardlink.db")
    os.link(path, hard)
    relative = Path(os.path.relpath(path))
    return {"symlink": symlink, "hard link": hard, "relative path": relative}


async def test_another_name_for_a_held_file_is_locked(tmp_path: Path) -> None:
    """While one journal holds the file, opening it by symlink, hard link or relative path raises JournalLocked."""
    path = tmp_path / "jobs.db"
    first = inturn.SQLiteJournal(path)
    await first.open()
    try:
        for how, name in names_of(path).items():
            with pytest.raises(inturn.JournalLocked):
                await inturn.SQLiteJournal(name).open()
            assert how  # each name was tried
    finally:
        await first.aclose()
    os.unlink(tmp_path / "via-hardlink.db")  # one name again
    again = inturn.SQLiteJournal(tmp_path / "via-symlink.db")
    await again.open()  # free once closed
    await again.aclose()


async def test_a_second_process_cannot_open_the_file_by_any_name(tmp_path: Path) -> None:
    """A real second process: a supervisor via a symlink or a hard link gets JournalLocked, and nothing it could delete frees the lock."""
    path = tmp_path / "jobs.db"
    holder = subprocess.Popen(  # noqa: ASYNC220 (a moment's block, before any other task runs)
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        names = names_of(path)
        lock_file = tmp_path / "jobs.db.lock"  # the old lock, one rm away from two holders
        assert not lock_file.exists()
        for name in names.values():
            with pytest.raises(inturn.JournalLocked):
                async with inturn.open_supervisor(nothing, journal=inturn.SQLiteJournal(name)):
                    pass  # pragma: no cover
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    (tmp_path / "via-hardlink.db").unlink()
    journal = inturn.SQLiteJournal(tmp_path / "via-symlink.db")
    with trio.fail_after(10):
        recovery = await journal.open()
    await journal.aclose()
    assert [job.id for job in recovery.jobs] == [1]  # what the killed holder committed


async def test_a_hard_linked_file_is_refused_untouched(tmp_path: Path) -> None:
    """SQLite names the WAL after the path, so a second name would miss committed jobs: JournalError, nothing changed."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"x")])
    await journal.aclose()
    os.link(path, tmp_path / "other.db")
    before = path.read_bytes()
    for name in (path, tmp_path / "other.db"):
        with pytest.raises(inturn.JournalError, match="2 hard links"):
            await inturn.SQLiteJournal(name).open()
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "where",
    ["missing directory", "under a file", "a directory", "read-only filesystem"],
)
async def test_a_path_that_cannot_be_opened_is_a_journal_error_naming_it(
    tmp_path: Path, where: str
) -> None:
    """open_supervisor and operate raise JournalError naming the path and the cause, never a raw OSError."""
    if where == "missing directory":
        path = tmp_path / "no-such-dir" / "jobs.db"
    elif where == "under a file":
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "jobs.db"
    elif where == "a directory":
        path = tmp_path / "dir"
        path.mkdir()
    else:
        path = read_only_mount(tmp_path) / "jobs.db"
    for attempt in (supervise, operate):
        with pytest.raises(inturn.JournalError) as refusal:
            await attempt(path)
        assert str(path) in str(refusal.value)
        assert "cannot open" in str(refusal.value)
        assert type(refusal.value) is inturn.JournalError


async def supervise(path: Path) -> None:
    async with inturn.open_supervisor(nothing, journal=inturn.SQLiteJournal(path)):
        pass  # pragma: no cover


async def operate(path: Path) -> None:
    async with inturn.operate(inturn.SQLiteJournal(path)):
        pass  # pragma: no cover


def read_only_mount(tmp_path: Path) -> Path:
    """A real read-only filesystem: a tmpfs mounted read-only (the tests run as root)."""
    folder = tmpfs.mount(tmp_path / "ro", "ro,size=1m")
    _mounts.append(folder)
    return folder


_mounts: list[Path] = []


@pytest.fixture(autouse=True)
def _unmount() -> object:
    yield None
    while _mounts:
        tmpfs.unmount(_mounts.pop())  # busy if something left a file open on it


async def test_ids_and_jobs_survive_the_lock_change(tmp_path: Path) -> None:
    """The lock shares the database file: writing, closing and reopening lose nothing."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"x")])
    await journal.aclose()
    recovery = await journal.open()
    await journal.aclose()
    assert [job.data for job in recovery.jobs] == [b"x"]
