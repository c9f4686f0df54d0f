"""SQLiteJournal and SQLiteReader: what only a file-backed journal can get wrong."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import (
    Append,
    Complete,
    Discard,
    Halt,
    MarkAttempt,
    Purge,
    Resume,
    Retrying,
    SQLiteReader,
    _sqlite_reads,
)
from inturn.journal._sqlite_schema import SCHEMA_VERSION
from inturn.testing import JournalConformance, OperatorReadsConformance, Recorder, unfinished_jobs


class TestSQLiteJournalConformance(JournalConformance, OperatorReadsConformance):
    @pytest.fixture(params=["full", "normal"])
    def journal(self, tmp_path: Path, request: pytest.FixtureRequest) -> inturn.SQLiteJournal:
        return inturn.SQLiteJournal(tmp_path / "jobs.db", durability=request.param)


def file_sizes(folder: Path, prefix: str) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in folder.iterdir() if f.name.startswith(prefix)}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_files_are_private_to_the_user(tmp_path: Path) -> None:
    """The database, its WAL and shared-memory files are mode 0600, and there is no lock file."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    try:
        for name in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):
            assert mode(tmp_path / name) == 0o600, name
        assert not (tmp_path / "jobs.db.lock").exists()
    finally:
        await journal.aclose()


async def test_ids_never_repeat_after_the_newest_job_is_deleted(tmp_path: Path) -> None:
    """Completing (deleting) the newest job does not let its id be handed out again."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    await journal.write(
        [Append(job_id=1, key="k", data=b"1"), Append(job_id=2, key="k", data=b"2")]
    )
    await journal.write([Complete(2)])
    await journal.aclose()
    recovery = await journal.open()
    try:
        assert recovery.next_id == 3
        with pytest.raises(inturn.JournalError, match="used before"):
            await journal.write([Append(job_id=2, key="k", data=b"again")])
    finally:
        await journal.aclose()


async def test_a_file_that_is_not_a_journal_is_refused_untouched(tmp_path: Path) -> None:
    """Opening a file that is not SQLite raises JournalCorrupt naming it, and changes nothing."""
    path = tmp_path / "notes.txt"
    content = b"these are not the rows you are looking for\n" * 100
    path.write_bytes(content)
    with pytest.raises(inturn.JournalCorrupt) as exc_info:
        await inturn.SQLiteJournal(path).open()
    assert exc_info.value.path == str(path)
    assert str(path) in str(exc_info.value)
    assert path.read_bytes() == content


V1_SCHEMA = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT,
    unique_key TEXT,
    data BLOB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
    error TEXT,
    accepted_at REAL NOT NULL,
    finished_at REAL
);
CREATE UNIQUE INDEX jobs_unique_pending ON jobs (unique_key)
    WHERE state = 'pending' AND unique_key IS NOT NULL;
CREATE TABLE halted (key TEXT PRIMARY KEY);
"""
"""The schema of version 1, as inturn 0.1 wrote it (before Retrying)."""

OTHER_DATABASES = [
    # the user's own tables beside a user_version of the user's: not inturn's to change
    "CREATE TABLE invoices (id INTEGER); PRAGMA user_version = 3;",
    # a name under inturn's prefix, in a file that is no journal
    "CREATE TABLE invoices (id INTEGER); CREATE TABLE inturn_jobs (id INTEGER);",
    "CREATE TABLE jobs (id INTEGER); PRAGMA user_version = 99;",
    # version 1 in name only: not the tables version 1 had
    "CREATE TABLE jobs (id INTEGER); CREATE TABLE halted (key TEXT); PRAGMA user_version = 1;",
    f"{V1_SCHEMA} PRAGMA user_version = 9;",  # a version from the future
]


@pytest.mark.parametrize("setup", OTHER_DATABASES)
async def test_another_database_is_refused_untouched(tmp_path: Path, setup: str) -> None:
    """An SQLite file of another schema (or version) raises JournalCorrupt and is not altered."""
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(setup)
    connection.close()
    before = path.read_bytes()
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        await inturn.SQLiteJournal(path).open()
    assert path.read_bytes() == before


async def test_a_second_opener_gets_journal_locked_until_the_first_closes(tmp_path: Path) -> None:
    """Two journals on one file at once: the second raises JournalLocked; after aclose it opens."""
    path = tmp_path / "jobs.db"
    first = inturn.SQLiteJournal(path)
    await first.open()
    second = inturn.SQLiteJournal(path)
    with pytest.raises(inturn.JournalLocked) as exc_info:
        await second.open()
    assert exc_info.value.path == str(path)
    await first.aclose()
    recovery = await second.open()
    await second.aclose()
    assert (recovery.next_id, list(recovery.jobs)) == (1, [])


def test_durability_must_be_full_or_normal(tmp_path: Path) -> None:
    """An unknown durability is a ValueError at construction."""
    with pytest.raises(ValueError, match="durability"):
        inturn.SQLiteJournal(tmp_path / "jobs.db", durability="fast")  # type: ignore[arg-type]


async def test_concurrent_writes_share_commits(tmp_path: Path) -> None:
    """Writes that wait together are committed together: fewer commits than writes."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db", durability="normal")
    await journal.open()
    ids = iter(range(1, 201))

    async def write_next() -> None:
        # The id is taken when the task runs, so ids reach the journal in order,
        # as they do from a supervisor.
        job_id = next(ids)
        await journal.write([Append(job_id=job_id, key=f"k{job_id % 7}", data=b"x")])

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(200):
                nursery.start_soon(write_next)
        assert 0 < journal.commits < 200
    finally:
        await journal.aclose()
    assert [job.id for job in await unfinished_jobs(journal)] == list(range(1, 201))


async def test_a_refused_batch_does_not_spoil_its_group(tmp_path: Path) -> None:
    """In one group commit, a batch with a duplicate unique key is refused alone."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    errors: list[BaseException] = []

    ids = iter(range(1, 4))

    async def write(unique: str) -> None:
        job_id = next(ids)  # taken when the task runs: ids reach the journal in order
        try:
            await journal.write([Append(job_id=job_id, key="k", data=b"x", unique=unique)])
        except inturn.DuplicateError as exc:
            errors.append(exc)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write, "a")
            nursery.start_soon(write, "a")
            nursery.start_soon(write, "b")
    finally:
        await journal.aclose()
    jobs = await unfinished_jobs(journal)
    assert len(errors) == 1
    assert {job.unique for job in jobs} == {"a", "b"}
    assert errors[0].job_id in {job.id for job in jobs}  # type: ignore[attr-defined]


async def test_a_supervisor_recovers_from_a_file(tmp_path: Path) -> None:
    """Cancel a supervisor mid-run; a new journal on the same file finishes the rest in order."""
    path = tmp_path / "jobs.db"

    async def slow(job: inturn.Job) -> None:
        await trio.sleep(1)

    first = Recorder(slow)

    with trio.move_on_after(2.5):
        async with inturn.open_supervisor(first, journal=inturn.SQLiteJournal(path)) as sup:
            await sup.send_many([(key, n) for n in range(5) for key in ("a", "b")])

    second = Recorder()
    async with inturn.open_supervisor(second, journal=inturn.SQLiteJournal(path)) as sup:
        pass

    done_first = {call.job.id for call in first.calls if call.end is not None}
    assert 0 < len(done_first) < 10
    rerun = [call.job.id for call in second.calls]
    assert sorted(done_first | set(rerun)) == list(range(1, 11))
    assert not done_first & set(rerun)
    second.assert_sequential()


def sqlite_error(message: str, code: int | None = None) -> sqlite3.OperationalError:
    """An error as SQLite raises it: with its result *code*, if given."""
    error = sqlite3.OperationalError(message)
    if code is not None:
        error.sqlite_errorcode = code
    return error


class Faults:
    """A fault hook: raise an SQLite error at the chosen steps, a chosen number of times."""

    def __init__(
        self, step: str, times: int = 1, message: str = "disk I/O error", *, code: int | None = None
    ) -> None:
        self.step, self.times, self.message, self.code = step, times, message, code

    def __call__(self, step: str) -> None:
        if step == self.step and self.times > 0:
            self.times -= 1
            raise sqlite_error(self.message, self.code)


async def test_a_failed_write_refuses_the_send_and_keeps_serving(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A write that fails (disk full) makes send raise JournalError with nothing stored; accepted jobs still run."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await release.wait()

    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        first = await sup.send("k", "accepted")
        await trio.testing.wait_all_tasks_blocked()
        journal._fault_hook = Faults("apply", message="database or disk is full")
        with pytest.raises(inturn.JournalError, match="disk is full") as exc_info:
            await sup.send("k", "refused")
        assert isinstance(exc_info.value.__cause__, sqlite3.OperationalError)
        assert sup.stats().queued + sup.stats().running == 1
        release.set()
        await sup.wait_idle()

    assert [call.job.id for call in recorder.calls] == [first]
    recovery = await journal.open()
    await journal.aclose()
    assert list(recovery.jobs) == []
    assert recovery.next_id == first + 1  # the refused job left no trace


async def test_a_failed_commit_makes_the_journal_refuse_all_further_work(tmp_path: Path) -> None:
    """After a failed COMMIT the journal refuses every write until it is reopened."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    journal._fault_hook = Faults("commit")
    with pytest.raises(inturn.JournalError, match="commit failed"):
        await journal.write([Append(job_id=2, key="k", data=b"2")])
    journal._fault_hook = None
    with pytest.raises(inturn.JournalError, match="refusing work"):
        await journal.write([Append(job_id=3, key="k", data=b"3")])
    await journal.aclose()

    recovery = await journal.open()  # reopening reads what is really on disk
    try:
        assert [job.id for job in recovery.jobs] == [1]
        await journal.write([Append(job_id=recovery.next_id, key="k", data=b"4")])
    finally:
        await journal.aclose()


async def test_a_failed_completion_reruns_the_job(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """If recording a completion fails, the key's actor restarts and the job runs again (at least once)."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    recorder = Recorder()
    faults = Faults("apply", times=0)

    async def handler(job: inturn.Job) -> None:
        if len(recorder.calls) == 1:
            faults.times = 1  # the next write, this job's Complete, fails
        await trio.lowlevel.checkpoint()

    recorder.handler = handler
    journal._fault_hook = faults
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.send_many([("k", 1), ("k", 2)])  # both journaled before any handler runs
        await sup.wait_idle()
        assert sup.stats().completed == 2

    assert [call.job.payload for call in recorder.calls] == [1, 1, 2]


async def test_the_file_does_not_grow_with_jobs_processed(tmp_path: Path) -> None:
    """Completed jobs are deleted: 10,000 jobs through a 100-job working set leave a small file."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path, durability="normal")
    payload = "x" * 200  # 10,000 of these kept would be over 2 MB
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        for _ in range(100):
            await sup.send_many([(f"k{n}", payload) for n in range(100)])
            await sup.wait_idle()
        assert sup.stats().completed == 10_000

    sizes = file_sizes(tmp_path, "jobs.db")
    assert sum(sizes.values()) < 512 * 1024, sizes


async def test_a_bug_on_the_journal_thread_fails_writes_instead_of_hanging(tmp_path: Path) -> None:
    """An unexpected error on the writer thread refuses the waiting write and all later ones."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()

    def bug(step: str) -> None:
        raise RuntimeError("a bug")

    journal._fault_hook = bug
    try:
        with pytest.raises(inturn.JournalError, match="journal thread failed: a bug"):
            await journal.write([Append(job_id=1, key="k", data=b"1")])
        journal._fault_hook = None
        with pytest.raises(inturn.JournalError, match="refusing work"):
            await journal.write([Append(job_id=1, key="k", data=b"1")])
    finally:
        await journal.aclose()


async def test_writes_after_aclose_are_refused(tmp_path: Path) -> None:
    """Once aclose has begun, a write raises JournalError instead of waiting on a stopped thread."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    await journal.aclose()
    with pytest.raises(inturn.JournalError, match="not open"):
        await journal.write([Append(job_id=1, key="k", data=b"1")])


def test_one_journal_object_serves_two_trio_runs(tmp_path: Path) -> None:
    """Reopened in a new trio.run, the journal answers writes in that run, not the finished one."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    seen: list[int] = []

    async def append_one() -> None:
        recovery = await journal.open()
        seen.append(recovery.next_id)
        with trio.fail_after(10):
            await journal.write([Append(job_id=recovery.next_id, key="k", data=b"x")])
        await journal.aclose()

    trio.run(append_one)
    trio.run(append_one)
    assert seen == [1, 2]


# -- schema version 1 -------------------------------------------------------


def make_version_1_file(path: Path) -> None:
    """A journal as version 1 left it: a running head, a dead letter, a halted key."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.executescript(f"BEGIN; {V1_SCHEMA} PRAGMA user_version = 1; COMMIT;")
        connection.executescript(
            """
            BEGIN;
            INSERT INTO jobs (id, key, unique_key, data, attempts, accepted_at)
                VALUES (1, 'k', 'u', x'00ff', 2, 100.0);
            INSERT INTO jobs (id, key, data, attempts, state, error, accepted_at, finished_at)
                VALUES (2, 'k', x'01', 3, 'dead', 'ValueError: boom', 100.5, 200.0);
            INSERT INTO jobs (id, key, data, accepted_at) VALUES (3, 'k', x'02', 101.0);
            INSERT INTO jobs (id, key, data, accepted_at) VALUES (4, NULL, x'03', 102.0);
            INSERT INTO halted (key) VALUES ('k'), ('idle');
            COMMIT;
            """
        )
    finally:
        connection.close()


def version_and_columns(path: Path) -> tuple[int, list[str]]:
    connection = sqlite3.connect(path)
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        table = "inturn_jobs" if version >= 6 else "jobs"  # renamed by version 6
        columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
    finally:
        connection.close()
    return version, columns


async def test_a_version_1_file_is_upgraded_on_open_and_keeps_its_jobs(tmp_path: Path) -> None:
    """Opening a version-1 journal adds the columns of versions 2 to 5 (what halted a key, dedup windows, places and due times, marked completions), renames its tables (version 6), adds the audit trail, the finished-job counters (version 8) and the schedules (version 9), and sets the version; its jobs, dead letters and halts are kept, in id order."""
    path = tmp_path / "jobs.db"
    make_version_1_file(path)
    journal = inturn.SQLiteJournal(path)
    recovery = await journal.open()
    try:
        assert version_and_columns(path) == (
            SCHEMA_VERSION,
            [
                *("id", "key", "unique_key", "data", "attempts", "state", "error"),
                *("accepted_at", "finished_at", "retry_at", "stopped_during", "unique_for"),
                *("seq", "due_at", "completed_at", "trace"),
            ],
        )
        assert [(job.id, job.attempts, job.unique) for job in recovery.jobs] == [
            (1, 2, "u"),
            (4, 0, None),
        ]
        assert dict(recovery.backlog) == {"k": inturn.journal.Backlog(count=1, last_id=3)}
        assert (recovery.next_id, recovery.halted) == (5, frozenset({"k", "idle"}))
        head = await journal.job(1)
        assert head is not None
        assert (head.state, head.accepted_at, head.retry_at, head.data) == (
            "running",
            100.0,
            None,
            b"\x00\xff",
        )
        [dead] = await journal.dead_letters()
        assert (dead.id, dead.state, dead.attempts, dead.last_error, dead.finished_at) == (
            2,
            "dead",
            3,
            "ValueError: boom",
            200.0,
        )
        await journal.write([Retrying(1, "ValueError: again", 500.0)])
        [key, idle] = await journal.keys(now=160.0)
        assert (key.key, key.head_state, key.next_retry_at, key.head_age, key.queued) == (
            "k",
            "retrying",
            500.0,
            60.0,
            2,
        )
        assert idle.key == "idle"
    finally:
        await journal.aclose()
    recovery = await journal.open()  # version 6 now: opens as it is
    await journal.aclose()
    assert [job.id for job in recovery.jobs] == [1, 4]
    assert version_and_columns(path)[0] == SCHEMA_VERSION


async def test_a_version_2_file_is_upgraded_on_open(tmp_path: Path) -> None:
    """Opening a version-2 journal adds stopped_during, places, due times, what halted a key and marked completions, and renames its tables (version 6); a reader reads version 2 as it is."""
    path = tmp_path / "jobs.db"
    make_version_1_file(path)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.executescript(
        "BEGIN; ALTER TABLE jobs ADD COLUMN retry_at REAL; PRAGMA user_version = 2; COMMIT;"
    )
    connection.close()
    [dead] = SQLiteReader(path).dead_letters()
    assert (dead.id, dead.stopped_during, version_and_columns(path)[0]) == (2, None, 2)
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    try:
        assert version_and_columns(path)[1][-6:] == [
            "stopped_during",
            "unique_for",
            "seq",
            "due_at",
            "completed_at",
            "trace",
        ]
        await journal.write([MarkAttempt(1, 3), Discard(1, "E", stopped_during=3)])
        info = await journal.job(1)
        assert info is not None
        assert (info.state, info.stopped_during, info.last_error) == ("dead", 3, "E")
    finally:
        await journal.aclose()
    assert version_and_columns(path)[0] == SCHEMA_VERSION


async def test_a_reader_reads_a_version_1_file_without_upgrading_it(tmp_path: Path) -> None:
    """SQLiteReader reads a version-1 journal as it is, with no retry times, and leaves it at version 1."""
    path = tmp_path / "jobs.db"
    make_version_1_file(path)
    before = version_and_columns(path)
    reader = SQLiteReader(path)
    keys = reader.keys(now=100.0)
    assert [(k.key, k.head_job_id, k.head_state, k.next_retry_at) for k in keys] == [
        ("k", 1, "running", None),
        ("idle", None, None, None),
    ]
    assert [k.key for k in reader.keys(state="blocked", now=100.0)] == ["k", "idle"]
    job = reader.job(3)
    assert job is not None
    assert (job.state, job.retry_at) == ("queued", None)
    assert [(info.id, info.last_error) for info in reader.dead_letters()] == [
        (2, "ValueError: boom")
    ]
    assert version_and_columns(path) == before


# -- schema version 3 -------------------------------------------------------

VERSION_3 = Path(__file__).parent / "data" / "version-3.db"
"""A journal file inturn wrote at schema version 3 (commit 9ec8634), with its own
`SQLiteJournal`: key "k" halted by the discard of job 1 ("ValueError: one"),
job 2 queued behind it; key "p" paused, job 3 queued; keyless job 4; job 5
completed; dead letter 6 of key "d".  Jobs 1 to 6 hold unique keys "u-1" to
"u-6"."""


def uniques(path: str | Path) -> list[tuple[str, int, float | None]]:
    """The unique keys reserved in the file: key, holder, until."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute("SELECT * FROM inturn_uniques ORDER BY unique_key").fetchall()
    finally:
        connection.close()


async def test_ended_reservations_are_deleted_as_commits_go_on(tmp_path: Path) -> None:
    """Reservations whose windows ended do not stay in the file: each commit deletes some, and a key taken again takes its row over."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    try:
        for n in range(1, 201):  # 200 keys, each reserved for 10 s after its job completed
            await journal.write(
                [Append(job_id=n, key="k", data=b"", unique=f"u{n}", unique_for=10.0), Complete(n)],
                now=float(n),
            )
        assert len(uniques(journal.path)) <= 11  # each commit deleted those ended by then
        await journal.write([Append(job_id=500, key="k", data=b"", unique="u200")], now=300.0)
        for _ in range(3):
            await journal.write([Halt("h")], now=300.0)
        assert uniques(journal.path) == [("u200", 500, None)]
    finally:
        await journal.aclose()


def version_3_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.db"
    shutil.copyfile(VERSION_3, path)
    return path


async def test_a_version_3_file_is_upgraded_on_open(tmp_path: Path) -> None:
    """Opening a version-3 journal (a real file) sets version 6 and keeps its jobs, dead letters and halts; its halts name no job, a new halting discard does."""
    path = version_3_file(tmp_path)
    journal = inturn.SQLiteJournal(path)
    recovery = await journal.open()
    try:
        assert version_and_columns(path)[0] == SCHEMA_VERSION
        assert [(job.id, job.unique) for job in recovery.jobs] == [
            (2, "u-2"),
            (3, "u-3"),
            (4, "u-4"),
        ]
        assert (recovery.next_id, recovery.halted) == (7, frozenset({"k", "p"}))
        assert uniques(path) == [("u-2", 2, None), ("u-3", 3, None), ("u-4", 4, None)]
        assert [(info.id, info.last_error) for info in await journal.dead_letters()] == [
            (1, "ValueError: one"),
            (6, "ValueError: six"),
        ]
        keys = await journal.keys(now=0.0)
        assert [(k.key, k.halted, k.halted_by, k.halt_error) for k in keys] == [
            ("k", True, None, None),  # version 3 did not record it
            ("p", True, None, None),
        ]
        # its unfinished jobs' unique keys are still held; the others are free
        for unique, holder in [("u-2", 2), ("u-3", 3), ("u-4", 4)]:
            with pytest.raises(inturn.DuplicateError) as caught:
                await journal.write([Append(job_id=9, key="x", data=b"", unique=unique)])
            assert (caught.value.job_id, caught.value.until) == (holder, None)
        await journal.write(
            [Append(job_id=n, key="x", data=b"", unique=f"u-{n - 6}") for n in (7, 11, 12)]
        )
        await journal.write([Resume("k"), MarkAttempt(2, 1), Discard(2, "E: two", halt=True)])
        [_, halted] = await journal.keys(state="halted", now=0.0)  # k has no jobs left
        assert (halted.key, halted.halted_by, halted.halt_error) == ("k", 2, "E: two")
    finally:
        await journal.aclose()
    assert [(k.key, k.halted_by) for k in SQLiteReader(path).keys(now=0.0)] == [
        ("p", None),
        ("x", None),
        ("k", 2),
    ]


def test_a_reader_reads_a_version_3_file_without_upgrading_it(tmp_path: Path) -> None:
    """SQLiteReader reads a version-3 journal as it is: its halted keys name no job."""
    path = version_3_file(tmp_path)
    before = path.read_bytes()
    keys = SQLiteReader(path).keys(now=0.0)
    assert [(k.key, k.head_job_id, k.halted, k.halted_by, k.halt_error) for k in keys] == [
        ("k", 2, True, None, None),
        ("p", 3, True, None, None),
    ]
    assert path.read_bytes() == before


# -- SQLiteReader -------------------------------------------------------------

READS: list[Callable[[SQLiteReader], object]] = [
    lambda reader: reader.keys(now=0.0),
    lambda reader: reader.job(1),
    lambda reader: reader.dead_letters(),
]


async def test_a_reader_sees_what_a_running_journal_committed(tmp_path: Path) -> None:
    """While a journal holds the file, SQLiteReader reads what its own reads return, and each new write once it returns."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    reader = SQLiteReader(path)
    try:
        await journal.write(
            [
                Append(job_id=1, key="a", data=b"1", unique="u"),
                Append(job_id=2, key="b", data=b"2"),
                Append(job_id=3, key="a", data=b"3"),
                Append(job_id=4, key=None, data=b"4"),
                MarkAttempt(1, 1),
                Retrying(1, "ValueError: one", 1e9),
                MarkAttempt(2, 1),
                Discard(2, "ValueError: two"),
                Halt("a"),
                Halt("idle"),
            ]
        )
        now = time.time()
        for state in (None, "blocked", "running", "halted"):
            assert reader.keys(state=state, now=now) == await journal.keys(state=state, now=now)
        for job_id in range(6):
            assert reader.job(job_id) == await journal.job(job_id)
        assert reader.dead_letters() == await journal.dead_letters()
        assert [info.id for info in reader.dead_letters()] == [2]

        await journal.write([Append(job_id=5, key="c", data=b"5"), Purge(2)])
        assert reader.job(5) is not None
        assert reader.dead_letters() == []
        # it took no lock: the journal is still the only one that may open the file
        with pytest.raises(inturn.JournalLocked):
            await inturn.SQLiteJournal(path).open()
    finally:
        await journal.aclose()
    assert [k.key for k in reader.keys(now=now)] == ["a", "c", "idle"]  # closed: still reads


async def test_a_reader_finds_a_journal_at_a_path_with_uri_characters(tmp_path: Path) -> None:
    """A path with a space, ?, # and % in it reads the journal there (the URI is quoted)."""
    folder = tmp_path / "on call 100% ?#"
    folder.mkdir()
    path = folder / "jobs?.db#"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    await journal.aclose()
    assert [k.key for k in SQLiteReader(path).keys(now=0.0)] == ["k"]
    # A read-only reader may leave the WAL files it needed (private, like the
    # journal's own); it creates nothing else.
    names = {p.name for p in folder.iterdir()}
    assert names <= {"jobs?.db#", "jobs?.db#-wal", "jobs?.db#-shm"}, names
    assert all(mode(folder / name) == 0o600 for name in names)
    await journal.open()  # and the journal opens as before
    await journal.aclose()


def test_a_reader_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    """SQLiteReader on a path that does not exist raises JournalError "no such file" and creates no file."""
    for path in (tmp_path / "jobs.db", tmp_path / "missing" / "jobs.db"):
        for read in READS:
            with pytest.raises(inturn.JournalError, match="no such file") as exc_info:
                read(SQLiteReader(path))
            assert str(path) in str(exc_info.value)
            assert not isinstance(exc_info.value, inturn.JournalCorrupt)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("setup", ["not sqlite", "empty file", "empty database", *OTHER_DATABASES])
def test_a_reader_refuses_a_file_that_is_not_a_journal_untouched(
    tmp_path: Path, setup: str
) -> None:
    """SQLiteReader on a file that is not an inturn journal raises JournalCorrupt naming it; the folder is unchanged."""
    path = tmp_path / "other.db"
    if setup == "not sqlite":
        path.write_bytes(b"these are not the rows you are looking for\n" * 100)
    elif setup == "empty file":
        path.write_bytes(b"")
    else:
        connection = sqlite3.connect(path)
        connection.executescript("" if setup == "empty database" else setup)
        connection.execute("VACUUM")  # so that the file exists, with a header
        connection.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for read in READS:
        with pytest.raises(inturn.JournalCorrupt) as exc_info:
            read(SQLiteReader(path))
        assert exc_info.value.path == str(path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


BAD_READS: list[tuple[Callable[[Any], object], type[Exception]]] = [
    (lambda reader: reader.keys(state="stuck", now=0.0), ValueError),
    (lambda reader: reader.keys(limit=0, now=0.0), ValueError),
    (lambda reader: reader.keys(limit=1.5, now=0.0), TypeError),
    (lambda reader: reader.keys(now="now"), TypeError),
    (lambda reader: reader.job("1"), TypeError),
    (lambda reader: reader.job(True), TypeError),
    (lambda reader: reader.dead_letters(key=1), TypeError),
    (lambda reader: reader.dead_letters(limit=0), ValueError),
    (lambda reader: reader.dead_letters(after=-1), ValueError),
    (lambda reader: reader.dead_letters(finished_before="x"), TypeError),
]


@pytest.mark.parametrize(("read", "error"), BAD_READS)
def test_a_reader_checks_its_arguments_first(
    tmp_path: Path, read: Callable[[Any], object], error: type[Exception]
) -> None:
    """SQLiteReader raises TypeError or ValueError for a bad argument, as a journal does, before it looks at the file."""
    with pytest.raises(error):
        read(SQLiteReader(tmp_path / "missing.db"))


def test_a_reader_of_huge_ids_and_limits_finds_nothing_or_everything(tmp_path: Path) -> None:
    """Ids and limits beyond SQLite's integers read as no such job and no limit, not as an overflow."""
    path = tmp_path / "jobs.db"

    async def write() -> None:
        journal = inturn.SQLiteJournal(path)
        await journal.open()
        await journal.write([Append(job_id=1, key="k", data=b""), Discard(1, "E")])
        await journal.aclose()

    trio.run(write)
    reader = SQLiteReader(path)
    assert reader.job(2**64) is None
    assert reader.job(-(2**64)) is None
    assert reader.dead_letters(after=2**64) == []
    assert [info.id for info in reader.dead_letters(limit=2**64)] == [1]
    assert [k.key for k in reader.keys(limit=2**64, now=0.0)] == []


# -- SQLiteJournal: reads and the new changes ----------------------------------


async def test_purge_of_a_job_that_is_not_a_dead_letter_is_superseded(tmp_path: Path) -> None:
    """A Purge of a queued job comes back superseded, alone and in a batch; of an unknown one it names the file and the rule."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    try:
        await journal.write([Append(job_id=1, key="k", data=b"")])
        assert await journal.write([Purge(1)]) == [Purge(1)]
        assert await journal.write([MarkAttempt(1, 1), Purge(1)]) == [Purge(1)]
        with pytest.raises(inturn.JournalError, match=r"jobs\.db: job 7 was never appended$"):
            await journal.write([MarkAttempt(1, 1), Purge(7)])
        info = await journal.job(1)
        assert info is not None
        assert (info.state, info.attempts) == ("running", 1)
    finally:
        await journal.aclose()


async def test_reads_after_a_failed_commit_are_refused(tmp_path: Path) -> None:
    """After a failed COMMIT the journal refuses reads too, as what is on disk is unknown."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    try:
        journal._fault_hook = Faults("commit")
        with pytest.raises(inturn.JournalError, match="commit failed"):
            await journal.write([Append(job_id=1, key="k", data=b"1")])
        for read in (journal.keys(now=0.0), journal.job(1), journal.dead_letters()):
            with pytest.raises(inturn.JournalError, match="refusing work"):
                await read
    finally:
        await journal.aclose()


async def test_reads_queued_behind_writes_see_them(tmp_path: Path) -> None:
    """Reads issued while writes are in flight are served after the writes queued before them."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db", durability="normal")
    await journal.open()
    seen: list[tuple[int, int | None]] = []

    ids = iter(range(1, 51))

    async def write_then_read() -> None:
        job_id = next(ids)  # taken when the task runs: ids reach the journal in order
        await journal.write([Append(job_id=job_id, key=f"k{job_id}", data=b"")])
        info = await journal.job(job_id)
        seen.append((job_id, info.id if info is not None else None))

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(write_then_read)
        assert sorted(seen) == [(n, n) for n in range(1, 51)]
        assert len(await journal.keys(limit=1000, now=0.0)) == 50
    finally:
        await journal.aclose()


async def test_every_read_query_uses_an_index(tmp_path: Path) -> None:
    """No read scans the jobs table: keys, job and dead_letters each search an index (so 100k keys cost a pass, not a square)."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b""), Discard(1, "E"), Halt("h")])
    await journal.aclose()
    connection = sqlite3.connect(path, isolation_level=None)
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        for state in (None, "blocked", "running", "halted"):
            _sqlite_reads.select_keys(connection, state, 10, 0.0)
        _sqlite_reads.select_job(connection, 1)
        _sqlite_reads.select_pending(connection, "k", 0, 10)
        for key in (None, "k"):
            for before in (None, 1.0):
                _sqlite_reads.select_dead_letters(connection, key, 10, 0, before)
        plans = {
            statement: [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}")]
            for statement in statements
            if statement.startswith("SELECT")
        }
    finally:
        connection.close()
    assert len(plans) == 4 * 2 - 3 + 1 + 1 + 4  # halted-empty query once per filter but "running"
    for statement, plan in plans.items():
        scans = [step for step in plan if re.match(r"SCAN (jobs|head)\b", step)]
        assert scans == [], f"{statement}\n scans: {scans}"
        assert any("INDEX" in step or "PRIMARY KEY" in step for step in plan), plan


class FailingReads:
    """A connection whose reads of the jobs at open fail with SQLite's *code* (a mock: an I/O
    error of a real disk cannot be had on demand)."""

    def __init__(self, connection: sqlite3.Connection, code: int, message: str) -> None:
        self.connection, self.code, self.message = connection, code, message

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.startswith("SELECT key, COUNT(*)"):
            raise sqlite_error(self.message, self.code)
        return self.connection.execute(sql, *args)


@pytest.mark.parametrize(
    ("code", "message", "corrupt"),
    [
        (sqlite3.SQLITE_IOERR_READ, "disk I/O error", False),
        (sqlite3.SQLITE_NOMEM, "out of memory", False),
        (sqlite3.SQLITE_CORRUPT, "database disk image is malformed", True),
        (sqlite3.SQLITE_ERROR, "no such column: seq", True),
    ],
)
async def test_an_error_of_the_disk_while_recovering_is_no_corruption(
    tmp_path: Path, code: int, message: str, corrupt: bool
) -> None:
    """`JournalCorrupt` says the file is no sound journal, and an operator may set it aside: an
    I/O error or no memory while it is read at open is a `JournalError` that says so."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    await journal.aclose()
    connection = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    try:
        failing = FailingReads(connection, code, message)
        with pytest.raises(inturn.JournalError, match=message) as exc_info:
            journal._recover(failing)  # type: ignore[arg-type]
    finally:
        connection.close()
    assert isinstance(exc_info.value, inturn.JournalCorrupt) is corrupt


async def test_each_write_of_a_refused_group_raises_an_exception_of_its_own(
    tmp_path: Path,
) -> None:
    """A group commit refused whole refuses each write in it with its own `JournalError`: an
    exception raised in several tasks would carry every earlier raise's frames (and their
    locals) into the next one's traceback."""
    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    await journal.open()
    busy, free = threading.Event(), threading.Event()
    caught: dict[str, inturn.JournalError] = {}

    def hold(connection: object) -> None:  # on the journal's thread: the writes queue up
        busy.set()
        free.wait(10)

    async def first_writer() -> None:
        try:
            await journal.write([Append(job_id=1, key="k", data=b"1")])
        except inturn.JournalError as exc:
            caught["first_writer"] = exc

    async def second_writer() -> None:
        try:
            await journal.write([Append(job_id=2, key="k", data=b"2")])
        except inturn.JournalError as exc:
            caught["second_writer"] = exc

    try:
        async with trio.open_nursery() as nursery:
            assert journal._worker is not None
            nursery.start_soon(journal._worker.read, hold)
            await trio.to_thread.run_sync(busy.wait)
            nursery.start_soon(first_writer)
            nursery.start_soon(second_writer)
            await trio.testing.wait_all_tasks_blocked()  # both queued: one group
            journal._fault_hook = Faults("apply")
            free.set()
    finally:
        await journal.aclose()
    first, second = caught["first_writer"], caught["second_writer"]
    assert first is not second
    assert (type(first), str(first)) == (type(second), str(second))
    assert "disk I/O error" in str(first)
    assert first.__cause__ is second.__cause__  # the one SQLite error, on the thread
    for name, exc in caught.items():
        frames = {frame.f_code.co_name for frame, _ in traceback.walk_tb(exc.__traceback__)}
        assert name in frames
        assert frames.isdisjoint(set(caught) - {name})
