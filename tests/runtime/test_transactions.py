"""Transactional steps (issue 46): a step's writes and its record commit together, once."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import inturn
from inturn.testing import Recorder, make_job
from tests.conftest import MakeJournal

RETRY = inturn.Retry(max_attempts=5, initial_delay=1, multiplier=1, jitter=0)


@attrs.define
class Ledger:
    """A table of the user's own, ``entries``, in the journal's database."""

    journal: inturn.Journal
    table: str = "entries"

    @classmethod
    def beside(cls, journal: inturn.Journal) -> Ledger:
        if isinstance(journal, inturn.PostgresJournal):
            # The user's tables in a schema of theirs, named in full: another test's
            # ledger is elsewhere.
            ledger = cls(journal, f"{journal.schema}_app.entries")
            with ledger.connect() as connection:
                connection.execute(f"CREATE SCHEMA IF NOT EXISTS {journal.schema}_app")
                connection.execute(
                    f"CREATE TABLE {ledger.table} (key text PRIMARY KEY, n integer NOT NULL)"
                )
            return ledger
        return cls(journal)

    def connect(self) -> Any:
        if isinstance(self.journal, inturn.PostgresJournal):
            import psycopg

            return psycopg.connect(self.journal.dsn, autocommit=True)
        assert isinstance(self.journal, inturn.SQLiteJournal)
        return sqlite3.connect(self.journal.path)

    def add(self, connection: Any, key: str, fail: Exception | None = None) -> int:
        """Count one more for *key* (the effect): its count now.  A transaction's function."""
        if isinstance(connection, sqlite3.Connection):
            connection.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, n INTEGER NOT NULL)"
            )
            sql = (
                f"INSERT INTO {self.table} (key, n) VALUES (?, 1)"
                " ON CONFLICT (key) DO UPDATE SET n = n + 1 RETURNING n"
            )
        else:
            sql = (
                f"INSERT INTO {self.table} AS t (key, n) VALUES (%s, 1)"
                " ON CONFLICT (key) DO UPDATE SET n = t.n + 1 RETURNING n"
            )
        (count,) = connection.execute(sql, (key,)).fetchone()
        if fail is not None:
            raise fail
        return int(count)

    def counts(self) -> dict[str, int]:
        if isinstance(self.journal, inturn.MemoryJournal):
            connection = self.journal.database
            exists = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'entries'"
            ).fetchone()
            return dict(connection.execute("SELECT key, n FROM entries")) if exists else {}
        connection = self.connect()
        try:
            if (
                isinstance(connection, sqlite3.Connection)
                and not connection.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'entries'"
                ).fetchone()
            ):
                return {}
            return dict(connection.execute(f"SELECT key, n FROM {self.table}").fetchall())
        finally:
            connection.close()


async def test_a_committed_transaction_never_runs_again(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The attempt fails after its transaction committed: each retry gets the recorded
    result, and the effect happened once."""
    journal = make_journal()
    ledger = Ledger.beside(journal)
    seen: list[tuple[int, object]] = []

    async def handler(job: inturn.Job) -> object:
        count = await job.transaction("apply", ledger.add, job.key)
        seen.append((job.attempt, count))
        if job.attempt < 3:
            raise ConnectionError("after the commit")
        return count

    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        assert await sup.ask("acct", None) == 1
        assert await sup.ask("acct", None) == 2
    assert ledger.counts() == {"acct": 2}
    assert seen == [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (3, 2)]


async def test_a_transaction_that_raises_leaves_nothing_and_runs_again(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Its writes are rolled back with it: the retry's effect is the only one."""
    journal = make_journal()
    ledger = Ledger.beside(journal)
    errors: list[str] = []

    async def handler(job: inturn.Job) -> object:
        fail = ValueError("declined") if job.attempt == 1 else None
        try:
            return await job.transaction("apply", ledger.add, job.key, fail)
        except ValueError as exc:
            errors.append(str(exc))
            raise

    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        assert await sup.ask("acct", None) == 1
    assert errors == ["declined"]
    assert ledger.counts() == {"acct": 1}


async def test_a_restarted_supervisor_gets_the_recorded_result(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The process stops after the transaction, before the job completes: the next
    supervisor's attempt does not apply the effect again."""
    journal = make_journal()
    ledger = Ledger.beside(journal)
    committed = trio.Event()

    async def first(job: inturn.Job) -> None:
        await job.transaction("apply", ledger.add, job.key)
        committed.set()
        await trio.sleep_forever()

    async with inturn.open_supervisor(first, journal=journal) as sup:
        await sup.send("acct", None)
        with trio.fail_after(60):
            await committed.wait()
        await sup.shutdown(grace=0)
    recorder = Recorder(lambda job: job.transaction("apply", ledger.add, job.key))
    async with inturn.open_supervisor(recorder, journal=make_journal()) as sup:
        await sup.wait_idle()
    assert [call.result for call in recorder.calls] == [1]
    assert [step.replayed for step in recorder.calls[0].steps] == [True]
    assert ledger.counts() == {"acct": 1}


async def _async_effect(connection: object) -> None:
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    ("fn", "error", "message"),
    [
        (lambda connection: 2, ValueError, "taken twice"),  # the name of a step taken first
        (_async_effect, TypeError, "plain def function"),
    ],
    ids=["steps-share-names", "async"],
)
async def test_a_transaction_is_refused_at_the_call(
    fn: Any, error: type[Exception], message: str
) -> None:
    errors: list[BaseException] = []

    async def handler(job: inturn.Job) -> None:
        await job.step("once", lambda: 1)
        try:
            await job.transaction("once", fn)
        except error as exc:
            errors.append(exc)

    async with inturn.open_supervisor(handler, journal=inturn.MemoryJournal()) as sup:
        await sup.send("k", None)
    assert len(errors) == 1
    assert message in str(errors[0])


SQLITE_REFUSALS = {
    "commit()": lambda connection: connection.commit(),
    "COMMIT": lambda connection: connection.execute("COMMIT"),
    "ROLLBACK": lambda connection: connection.execute("ROLLBACK"),
    "RELEASE": lambda connection: connection.execute("RELEASE inturn_transaction"),
    "ATTACH": lambda connection: connection.execute("ATTACH ':memory:' AS other"),
    "PRAGMA": lambda connection: connection.execute("PRAGMA synchronous = OFF"),
    "the journal's table": lambda connection: connection.execute(
        "DELETE FROM inturn_steps WHERE job_id > 0"
    ),
    "its sequence": lambda connection: connection.execute("DELETE FROM sqlite_sequence"),
}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("misuse", list(SQLITE_REFUSALS))
async def test_sqlite_refuses_what_would_break_the_journal_s_transaction(
    kind: str, misuse: str, tmp_path: Any, autojump_clock: trio.testing.MockClock
) -> None:
    """Ending the transaction, its savepoint, ATTACH, a PRAGMA that sets: sqlite3's error,
    the function's writes rolled back, and the journal goes on."""
    journal = (
        inturn.MemoryJournal() if kind == "memory" else inturn.SQLiteJournal(tmp_path / "j.db")
    )
    await _breaks_the_rules(journal, SQLITE_REFUSALS[misuse], sqlite3.DatabaseError)


async def test_a_postgres_function_that_commits_stops_the_journal(
    pg_dsn: str, pg_schema: str, autojump_clock: trio.testing.MockClock
) -> None:
    """psycopg refuses commit() in the journal's transaction block; SQL that commits anyway
    is found at once, and the journal stops rather than go on with half a group."""
    import psycopg

    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
    errors: list[BaseException] = []

    async def handler(job: inturn.Job) -> None:
        misuse = job.payload
        try:
            await job.transaction(
                "apply",
                (lambda c: c.commit()) if misuse == "commit()" else (lambda c: c.execute("COMMIT")),
            )
        except Exception as exc:
            errors.append(exc)
            raise

    async def run() -> None:
        retry = inturn.Retry(max_attempts=1)
        async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
            with pytest.raises(inturn.JobDiscarded):
                await sup.ask("a", "commit()")
            await sup.ask("b", "COMMIT")

    with pytest.raises(inturn.JournalError, match=r"refusing work|journal thread failed"):
        await run()
    assert isinstance(errors[0], psycopg.ProgrammingError)
    assert "ended the journal's transaction" in str(errors[1])


async def test_a_transaction_whose_result_the_codec_refuses_is_rolled_back(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """It fails the job for good; its writes are rolled back, and the journal goes on."""
    await _breaks_the_rules(make_journal(), lambda connection: object(), inturn.PermanentError)


async def _breaks_the_rules(journal: inturn.Journal, fn: Any, error: type[Exception]) -> None:
    """A job whose transaction writes an entry, then calls *fn*, which raises *error*, runs
    between two good jobs: only theirs are kept."""
    ledger = Ledger.beside(journal)
    raised: list[BaseException] = []

    def effect_then(connection: Any) -> object:
        ledger.add(connection, "acct")
        return fn(connection)

    async def handler(job: inturn.Job) -> object:
        if job.payload == "bad":
            try:
                return await job.transaction("apply", effect_then)
            except Exception as exc:
                raised.append(exc)
                raise
        return await job.transaction("apply", ledger.add, job.key)

    retry = inturn.Retry(max_attempts=1)
    async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
        # Before and after: the journal's own statements are prepared and kept by then.
        assert await sup.ask("good", None) == 1
        with pytest.raises(inturn.JobDiscarded):
            await sup.ask("bad", "bad")
        assert await sup.ask("good", None) == 2
    assert [isinstance(exc, error) for exc in raised] == [True]
    assert ledger.counts() == {"good": 2}


def test_make_job_runs_transactions_on_the_database_it_is_given() -> None:
    """A handler's unit test: its transaction runs in a savepoint of the test's connection,
    and a retry made with ``attrs.evolve`` replays it."""
    database = sqlite3.connect(":memory:", isolation_level=None)
    database.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, n INTEGER NOT NULL)")
    ledger = Ledger(inturn.MemoryJournal())

    async def handler(job: inturn.Job) -> object:
        return await job.transaction("apply", ledger.add, job.key)

    job = make_job(None, key="acct", database=database)
    assert trio.run(handler, job) == 1
    assert trio.run(handler, attrs.evolve(job, attempt=2)) == 1
    assert dict(database.execute("SELECT key, n FROM entries")) == {"acct": 1}
    with pytest.raises(TypeError, match="database=connection"):
        trio.run(handler, make_job(None))
    database.close()


async def test_a_transaction_whose_commit_fails_is_not_recorded_and_runs_again(
    tmp_path: Any, autojump_clock: trio.testing.MockClock
) -> None:
    """The disk is full at the commit: the transaction raises JournalError, nothing of it
    is kept, and the retry runs the function again, once."""
    from tests.journal.test_sqlite import Faults

    journal = inturn.SQLiteJournal(tmp_path / "j.db")
    ledger = Ledger.beside(journal)
    raised: list[BaseException] = []

    async def handler(job: inturn.Job) -> object:
        if job.attempt == 1:
            journal._fault_hook = Faults("commit", message="database or disk is full", code=13)
        try:
            return await job.transaction("apply", ledger.add, job.key)
        except inturn.JournalError as exc:
            raised.append(exc)
            raise

    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        assert await sup.ask("acct", None) == 1
    assert len(raised) == 1
    assert "disk full" in str(raised[0])
    assert ledger.counts() == {"acct": 1}


async def test_a_transaction_outlives_the_cancellation_of_its_attempt(tmp_path: Any) -> None:
    """The attempt times out while the function runs on the journal's thread: the
    transaction commits all the same (a queued write is never abandoned halfway), and the
    retry gets its result without calling the function again."""
    journal = inturn.SQLiteJournal(tmp_path / "j.db")
    ledger = Ledger.beside(journal)
    calls = 0

    def slow(connection: sqlite3.Connection, key: str) -> int:
        nonlocal calls
        calls += 1
        count = ledger.add(connection, key)
        time.sleep(0.3)  # the function's own time: longer than the attempt may take
        return count

    async def handler(job: inturn.Job) -> object:
        return await job.transaction("apply", slow, job.key)

    retry = inturn.Retry(max_attempts=3, initial_delay=0.01, jitter=0)
    async with inturn.open_supervisor(
        handler, journal=journal, retry=retry, job_timeout=0.1
    ) as sup:
        assert await sup.ask("acct", None) == 1
    assert calls == 1
    assert ledger.counts() == {"acct": 1}
