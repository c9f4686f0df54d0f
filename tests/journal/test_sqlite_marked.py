"""SQLiteJournal marks a common completion's row and deletes it later, with others.

A marked row (``completed_at`` set) is a completed job to every reader and
every write, whether the journal's own, an `SQLiteReader`'s on another
connection, or the next `open` after a crash; the journal deletes marked
rows in the commit that brings their number to `_DELETE_EVERY`, and when it
closes.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

import inturn
from inturn.journal import (
    Append,
    Change,
    Complete,
    Discard,
    MarkAttempt,
    Retrying,
    Revive,
    SQLiteReader,
    Step,
    sqlite as sqlite_journal,
)
from inturn.journal._thread import Request

from .test_sqlite import Faults


def marked(path: Path) -> list[int]:
    """The ids of the rows marked completed, as the file holds them."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        rows = connection.execute(
            "SELECT id FROM inturn_jobs WHERE completed_at IS NOT NULL ORDER BY id"
        ).fetchall()
    return [job_id for (job_id,) in rows]


def row_ids(path: Path) -> list[int]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT id FROM inturn_jobs ORDER BY id").fetchall()
    return [job_id for (job_id,) in rows]


async def open_with_jobs(path: Path, count: int) -> inturn.SQLiteJournal:
    """A journal holding jobs 1 to *count* of key ``k``, the first one started."""
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write(
        [
            *(Append(job_id=n, key="k", data=b"%d" % n) for n in range(1, count + 1)),
            MarkAttempt(1, 1),
        ]
    )
    return journal


async def test_a_completed_job_whose_row_waits_is_gone_to_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    journal = await open_with_jobs(path, 3)
    try:
        assert await journal.write([Complete(1), MarkAttempt(2, 1)]) == []
        assert marked(path) == [1]  # marked, not deleted yet

        reader = SQLiteReader(path)  # a connection of its own, as the command line's
        assert reader.job(1) is None
        assert [info.id for info in reader.jobs("k")] == [2, 3]
        [key] = reader.keys(now=0.0)
        assert (key.key, key.head_job_id, key.queued) == ("k", 2, 2)

        # Nothing applies to it any more: each write is superseded, as for a deleted row.
        late: list[Change] = [
            Complete(1),
            Discard(1, "late"),
            MarkAttempt(1, 2),
            Retrying(1, "E", 5.0),
            Step(1, "s", b"x"),
        ]
        for change in late:
            assert await journal.write([change]) == [change]
        assert marked(path) == [1]
        assert reader.job(1) is None

        # The journal's own reads, on its connection, pass it by as well.
        assert await journal.job(1) is None
        assert [info.id for info in await journal.jobs("k")] == [2, 3]
        [key] = await journal.keys(now=0.0)
        assert (key.key, key.head_job_id, key.queued) == ("k", 2, 2)
        assert [job.id for job in await journal.load("k", 0, 10)] == [2, 3]
        assert marked(path) == [1]  # reading wrote nothing
    finally:
        await journal.aclose()


async def test_marked_rows_are_deleted_together_and_when_the_journal_closes(
    tmp_path: Path,
) -> None:
    every = sqlite_journal._DELETE_EVERY
    path = tmp_path / "jobs.db"
    journal = await open_with_jobs(path, every + 3)
    try:
        for job_id in range(1, every):
            await journal.write([Complete(job_id), MarkAttempt(job_id + 1, 1)])
        assert marked(path) == list(range(1, every))
        await journal.write([Complete(every), MarkAttempt(every + 1, 1)])
        assert marked(path) == []  # the commit that brought them to `_DELETE_EVERY`
        assert row_ids(path) == [every + 1, every + 2, every + 3]
        await journal.write([Complete(every + 1), MarkAttempt(every + 2, 1)])
        assert marked(path) == [every + 1]
    finally:
        await journal.aclose()
    assert marked(path) == []  # a clean close leaves none
    assert row_ids(path) == [every + 2, every + 3]


async def test_completions_are_counted_once_whether_marked_deleted_or_waiting(
    tmp_path: Path,
) -> None:
    """overview() counts every completion once: marked rows waiting (read from the rows),
    marked rows deleted together (counted by the commit that deletes them, the group's own
    marks included), rows deleted at once by a large group, and what a close deletes."""
    every = sqlite_journal._DELETE_EVERY
    path = tmp_path / "jobs.db"
    count = 2 * every + 10
    at = 1_900_000_000.0
    journal = await open_with_jobs(path, count + 1)

    def completed() -> int:
        return sum(minute.completed for minute in SQLiteReader(path).overview(now=at).minutes)

    try:
        for job_id in range(1, count):
            await journal.write([Complete(job_id), MarkAttempt(job_id + 1, 1)], now=at)
            if job_id in (every - 1, every, every + 1, count - 1):
                assert completed() == job_id, job_id
        assert completed() == count - 1
    finally:
        await journal.aclose()
    assert marked(path) == []
    assert completed() == count - 1


async def test_rows_a_crash_left_marked_are_completed_jobs_to_the_next_open(
    tmp_path: Path,
) -> None:
    """A file as a crash leaves it: a marked row.  A reader skips it; `open` deletes it, and
    its job is not recovered."""
    path = tmp_path / "jobs.db"
    journal = await open_with_jobs(path, 3)
    await journal.aclose()
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE inturn_jobs SET completed_at = 1.0 WHERE id = 1")
    assert SQLiteReader(path).job(1) is None

    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [2]
        assert dict(recovery.backlog) == {"k": inturn.journal.Backlog(count=1, last_id=3)}
        assert row_ids(path) == [2, 3]
    finally:
        await journal.aclose()


async def test_marked_rows_outlive_a_failed_commit_and_never_come_back(tmp_path: Path) -> None:
    """The commit that would delete them fails: the journal refuses work (what reached the
    disk is unknown), keeps them on closing, and the next open deletes them."""
    every = sqlite_journal._DELETE_EVERY
    path = tmp_path / "jobs.db"
    journal = await open_with_jobs(path, every + 1)
    for job_id in range(1, every):
        await journal.write([Complete(job_id), MarkAttempt(job_id + 1, 1)])
    journal._fault_hook = Faults("commit")
    with pytest.raises(inturn.JournalError, match="commit failed"):
        await journal.write([Complete(every), MarkAttempt(every + 1, 1)])
    journal._fault_hook = None
    await journal.aclose()
    assert marked(path) == list(range(1, every))
    assert SQLiteReader(path).job(1) is None

    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [every]  # its completion never committed
        assert row_ids(path) == [every, every + 1]
    finally:
        await journal.aclose()


@pytest.mark.parametrize("step", ["delete", "commit"])
async def test_deletes_that_do_not_fit_on_the_disk_wait_and_the_group_commits_without_them(
    tmp_path: Path, step: str
) -> None:
    """The disk is full when the marked rows are deleted, or when that commit is made: the
    group commits without the deletes, which wait for `_DELETE_EVERY` completions more (on
    a disk with room for a completion and no more, each commit would fail again)."""
    every = sqlite_journal._DELETE_EVERY
    path = tmp_path / "jobs.db"
    journal = await open_with_jobs(path, 2 * every + 1)
    try:
        for job_id in range(1, every):
            await journal.write([Complete(job_id), MarkAttempt(job_id + 1, 1)])
        journal._fault_hook = Faults(
            step, message="database or disk is full", code=sqlite3.SQLITE_FULL
        )
        assert await journal.write([Complete(every), MarkAttempt(every + 1, 1)]) == []
        assert journal._fault_hook.times == 0  # it did fail once
        journal._fault_hook = None
        assert marked(path) == list(range(1, every + 1))  # the completion committed, marked
        assert [job.id for job in await journal.load("k", 0, 1)] == [every + 1]
        for job_id in range(every + 1, 2 * every):
            await journal.write([Complete(job_id), MarkAttempt(job_id + 1, 1)])
        assert marked(path) == list(range(1, 2 * every))  # not deleted yet
        await journal.write([Complete(2 * every), MarkAttempt(2 * every + 1, 1)])
        assert marked(path) == []
        assert row_ids(path) == [2 * every + 1]
    finally:
        await journal.aclose()


def test_a_completion_rolled_back_with_its_group_is_never_deleted(tmp_path: Path) -> None:
    """A group fails after one of its completions was applied: the whole group is rolled
    back, so that job is unfinished again, though its id waits among those to delete.  A
    later delete of the marked rows leaves it be."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    connection, _ = journal._open_sync()
    try:

        def commit(*batches: list[Change]) -> list[Request]:
            requests = [Request(batch, None, 0.0) for batch in batches]  # type: ignore[arg-type]
            journal._commit_group(connection, requests)
            return requests

        commit([*(Append(job_id=n, key=f"k{n}", data=b"x") for n in (1, 2)), MarkAttempt(1, 1)])
        applies = 0

        def second_apply_fails(step: str) -> None:
            nonlocal applies
            if step == "apply":
                applies += 1
                if applies == 2:
                    raise sqlite3.OperationalError("disk I/O error")

        journal._fault_hook = second_apply_fails
        done, failed = commit([Complete(1)], [MarkAttempt(2, 1)])
        assert isinstance(done.error, inturn.JournalError)  # the whole group is refused
        assert isinstance(failed.error, inturn.JournalError)
        journal._fault_hook = None
        assert journal._completed == []  # its completion was applied, then rolled back

        others = range(3, 3 + sqlite_journal._DELETE_EVERY)  # enough to delete marked rows
        commit([Append(job_id=n, key=f"k{n}", data=b"x") for n in others])
        for job_id in others:
            [request] = commit([Complete(job_id)])
            assert request.error is None
        assert journal._completed == []
        assert row_ids(tmp_path / "jobs.db") == [1, 2]  # job 1 is unfinished: still here
    finally:
        connection.close()
        journal._release_lock()


def test_a_large_group_deletes_its_completed_rows_at_once(tmp_path: Path) -> None:
    """Its completions share the pages the commit writes: marking would only add a statement."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    connection, _ = journal._open_sync()
    try:
        size = sqlite_journal._MARK_BELOW
        sends = [  # started: a completion marks only a started job's row
            [Append(job_id=n, key=f"k{n}", data=b"x"), MarkAttempt(n, 1)]
            for n in range(1, 2 * size + 1)
        ]
        journal._commit_group(connection, [Request(send, None, 0.0) for send in sends])  # type: ignore[arg-type]
        small = [Request([Complete(n)], None, 0.0) for n in range(1, size)]  # type: ignore[arg-type]
        journal._commit_group(connection, small)
        assert marked(tmp_path / "jobs.db") == list(range(1, size))
        large = [Request([Complete(n)], None, 0.0) for n in range(size, 2 * size)]  # type: ignore[arg-type]
        journal._commit_group(connection, large)
        assert marked(tmp_path / "jobs.db") == list(range(1, size))  # deleted, not marked
        assert row_ids(tmp_path / "jobs.db") == [*range(1, size), 2 * size]
    finally:
        connection.close()
        journal._release_lock()


async def test_a_dead_letter_with_a_completion_time_by_hand_stays_a_dead_letter(
    tmp_path: Path,
) -> None:
    """Only a pending row is a marked one: a hand-edited dead letter is read, kept on
    `open`, and revived as any other."""
    path = tmp_path / "jobs.db"
    journal = await open_with_jobs(path, 1)
    await journal.write([Discard(1, "E")])
    await journal.aclose()
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE inturn_jobs SET completed_at = 1.0 WHERE id = 1")
    [letter] = SQLiteReader(path).dead_letters()
    assert letter.id == 1

    await journal.open()
    try:
        assert [info.id for info in await journal.dead_letters()] == [1]
        assert await journal.write([Revive(1)]) == []
        info = await journal.job(1)
        assert info is not None
        assert info.state == "queued"
    finally:
        await journal.aclose()
    revived = SQLiteReader(path).job(1)
    assert revived is not None
    assert revived.state == "queued"
