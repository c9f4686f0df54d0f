"""SQLiteJournal: what only a file-backed journal can get wrong."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
from inturn.journal import Append, Complete
from inturn.testing import JournalConformance, Recorder, unfinished_jobs


class TestSQLiteJournalConformance(JournalConformance):
    @pytest.fixture(params=["full", "normal"])
    def journal(self, tmp_path: Path, request: pytest.FixtureRequest) -> inturn.SQLiteJournal:
        return inturn.SQLiteJournal(tmp_path / "jobs.db", durability=request.param)


def file_sizes(folder: Path, prefix: str) -> dict[str, int]:
    return {f.name: f.stat().st_size for f in folder.iterdir() if f.name.startswith(prefix)}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_files_are_private_to_the_user(tmp_path: Path) -> None:
    """The database, its WAL and shared-memory files and the lock file are mode 0600."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"1")])
    try:
        for name in ("jobs.db", "jobs.db-wal", "jobs.db-shm", "jobs.db.lock"):
            assert mode(tmp_path / name) == 0o600, name
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


@pytest.mark.parametrize(
    "setup",
    [
        "CREATE TABLE invoices (id INTEGER); PRAGMA user_version = 0;",
        "CREATE TABLE jobs (id INTEGER); PRAGMA user_version = 99;",
    ],
)
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


class Faults:
    """A fault hook: raise an SQLite error at the chosen steps, a chosen number of times."""

    def __init__(self, step: str, times: int = 1, message: str = "disk I/O error") -> None:
        self.step, self.times, self.message = step, times, message

    def __call__(self, step: str) -> None:
        if step == self.step and self.times > 0:
            self.times -= 1
            raise sqlite3.OperationalError(self.message)


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
