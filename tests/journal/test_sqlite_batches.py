"""SQLiteJournal's short ways for the common batches keep every rule of the long way.

A job's acceptance with its first attempt and a completion with its
successor's start skip the savepoint, and an `Append` with its own
`MarkAttempt` is one statement.  These tests break each way's assumptions: a
halted key, a duplicate unique key, a superseded change, a job never
appended, a file whose ids disagree with its ``sqlite_sequence``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import Append, Complete, Halt, MarkAttempt, Resume


@contextlib.asynccontextmanager
async def opened(path: Path) -> AsyncIterator[inturn.SQLiteJournal]:
    journal = inturn.SQLiteJournal(path, durability="normal")
    await journal.open()
    try:
        yield journal
    finally:
        await journal.aclose()


async def attempts(journal: inturn.SQLiteJournal, job_id: int) -> int | None:
    info = await journal.job(job_id)
    return None if info is None else info.attempts


def statements(journal: inturn.SQLiteJournal) -> list[str]:
    """The statements the journal's thread runs from now on (traced on its connection)."""
    assert journal._worker is not None
    seen: list[str] = []
    journal._worker.connection.set_trace_callback(seen.append)
    return seen


async def test_an_acceptance_with_its_start_is_one_statement(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        seen = statements(journal)
        superseded = await journal.write([Append(job_id=1, key="k", data=b"1"), MarkAttempt(1, 1)])
        assert superseded == []
        assert await attempts(journal, 1) == 1
        writes = [sql for sql in seen if sql.split()[0] in {"INSERT", "UPDATE", "SAVEPOINT"}]
        assert len(writes) == 1
        assert writes[0].startswith("INSERT INTO main.inturn_jobs")
    async with opened(tmp_path / "jobs.db") as journal:
        assert await attempts(journal, 1) == 1  # durable as written


async def test_a_completion_with_its_successors_start_takes_no_savepoint(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Append(job_id=1, key="k", data=b"1"), MarkAttempt(1, 1)])
        await journal.write([Append(job_id=2, key="k", data=b"2")])
        seen = statements(journal)
        assert await journal.write([Complete(1), MarkAttempt(2, 1)]) == []
        assert not [sql for sql in seen if sql.startswith("SAVEPOINT")]
        assert await attempts(journal, 1) is None
        assert await attempts(journal, 2) == 1


async def test_a_start_with_its_acceptance_on_a_halted_key_is_superseded(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Halt("k")])
        mark = MarkAttempt(1, 1)
        assert await journal.write([Append(job_id=1, key="k", data=b"1"), mark]) == [mark]
        assert await attempts(journal, 1) == 0
        await journal.write([Resume("k")])
        assert await journal.write([Append(job_id=2, key="k", data=b"2"), MarkAttempt(2, 1)]) == []
        assert await attempts(journal, 2) == 1


async def test_a_start_on_a_key_still_halted_after_another_resumes_is_superseded(
    tmp_path: Path,
) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Halt("k"), Halt("j")])
        await journal.write([Resume("j")])
        mark = MarkAttempt(1, 1)
        assert await journal.write([Append(job_id=1, key="k", data=b"1"), mark]) == [mark]
        assert await journal.write([Append(job_id=2, key="j", data=b"2"), MarkAttempt(2, 1)]) == []


async def test_a_key_halted_before_open_still_supersedes_a_start(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Halt("k")])
    async with opened(tmp_path / "jobs.db") as journal:
        mark = MarkAttempt(1, 1)
        assert await journal.write([Append(job_id=1, key="k", data=b"1"), mark]) == [mark]
        assert await attempts(journal, 1) == 0


async def test_a_resume_in_a_refused_batch_leaves_the_key_halted(tmp_path: Path) -> None:
    """The journal's note that no key is halted must not outlive the batch that made it."""
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Halt("k"), Append(job_id=1, key="a", data=b"1", unique="u")])
        with pytest.raises(inturn.DuplicateError):
            await journal.write([Resume("k"), Append(job_id=2, key="b", data=b"2", unique="u")])
        mark = MarkAttempt(3, 1)
        assert await journal.write([Append(job_id=3, key="k", data=b"3"), mark]) == [mark]
        assert await attempts(journal, 3) == 0


async def test_a_duplicate_in_an_acceptance_with_its_start_leaves_nothing(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Append(job_id=1, key="k", data=b"1", unique="u")])
        with pytest.raises(inturn.DuplicateError):
            await journal.write(
                [Append(job_id=2, key="j", data=b"2", unique="u"), MarkAttempt(2, 1)]
            )
        assert await journal.job(2) is None
        # The refused ids were never used: the next batch may take them.
        assert await journal.write([Append(job_id=2, key="j", data=b"2"), MarkAttempt(2, 1)]) == []
        assert await attempts(journal, 2) == 1


async def test_a_superseded_completion_lets_its_successors_start_apply(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Append(job_id=1, key="k", data=b"1"), MarkAttempt(1, 1)])
        await journal.write([Append(job_id=2, key="k", data=b"2")])
        await journal.write([Complete(1)])  # another writer finished it first
        again = Complete(1)
        assert await journal.write([again, MarkAttempt(2, 1)]) == [again]
        assert await attempts(journal, 2) == 1


async def test_a_start_of_a_job_never_appended_undoes_its_completion(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Append(job_id=1, key="k", data=b"1"), MarkAttempt(1, 1)])
        seen = statements(journal)
        with pytest.raises(inturn.JournalError, match="never appended"):
            await journal.write([Complete(1), MarkAttempt(7, 1)])
        assert await attempts(journal, 1) == 1  # still unfinished
        # Its ids were checked first: it ran in a savepoint, not replayed.
        assert "ROLLBACK TO batch" in seen
        assert "ROLLBACK" not in seen


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param([Complete(1), Append(job_id=2, key="k", data=b"x")], id="plain-batch"),
        pytest.param([Append(job_id=2, key="k", data=b"x")], id="common-send"),
    ],
)
async def test_a_batch_refused_against_the_odds_is_undone_and_spoils_nothing(
    tmp_path: Path, refused: list[inturn.journal.Change]
) -> None:
    """A file whose ``sqlite_sequence`` is behind its ids (edited by hand) breaks the id check.

    A plain batch refused halfway is rolled back with its whole group, and
    the group applied again with savepoints; a common send, which takes the
    writer's short way, is handed to the long one.  Either way the batch
    leaves nothing and fails alone, with an error about the id (not about a
    unique key it never had), and the other batch of its group commits.
    """
    path = tmp_path / "jobs.db"
    async with opened(path) as journal:
        await journal.write(
            [Append(job_id=1, key="k", data=b"1"), Append(job_id=2, key="j", data=b"2")]
        )
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("UPDATE sqlite_sequence SET seq = 1 WHERE name = 'inturn_jobs'")
    async with opened(path) as journal:
        errors: list[inturn.InturnError] = []

        async def write(*changes: inturn.journal.Change) -> None:
            try:
                await journal.write(changes)
            except inturn.InturnError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            # A slow read holds the journal's thread while both batches queue
            # behind it, in this order: they are one group.
            nursery.start_soon(journal._read, lambda connection: time.sleep(0.2))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(write, *refused)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(write, Append(job_id=3, key="m", data=b"3"), MarkAttempt(3, 1))
        [error] = errors
        assert type(error) is inturn.JournalError
        assert "job 2 cannot be stored: UNIQUE constraint failed: inturn_jobs.id" in str(error)
        assert journal.commits == 1
        assert await attempts(journal, 1) == 0  # still pending: a completion is undone
        info = await journal.job(2)
        assert info is not None
        assert info.data == b"2"
        assert await attempts(journal, 3) == 1


async def test_a_resume_rolled_back_with_its_group_leaves_the_key_halted(tmp_path: Path) -> None:
    async with opened(tmp_path / "jobs.db") as journal:
        await journal.write([Halt("k")])
        applied = 0

        def fail_second_batch(step: str) -> None:
            nonlocal applied
            applied += step == "apply"
            if applied == 2:
                raise sqlite3.OperationalError("disk I/O error")

        async def write(*changes: inturn.journal.Change) -> None:
            with pytest.raises(inturn.JournalError, match="write failed"):
                await journal.write(changes)

        journal._fault_hook = fail_second_batch
        async with trio.open_nursery() as nursery:
            nursery.start_soon(journal._read, lambda connection: time.sleep(0.2))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(write, Resume("k"))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(write, Append(job_id=1, key="j", data=b"1"))
        journal._fault_hook = None
        mark = MarkAttempt(1, 1)
        assert await journal.write([Append(job_id=1, key="k", data=b"1"), mark]) == [mark]
