"""`PostgresJournal`: the journal on a PostgreSQL server.

Theory of operation
-------------------
The same shape as `SQLiteJournal`: one dedicated thread owns one connection
(`_thread.JournalThread`), so trio never blocks on the server; every write
waits for its verdict; the thread applies whatever batches are waiting in
one transaction and commits once (group commit).  A batch that breaks a rule
(a duplicate unique key, an unknown job) is refused alone: the statements
are written so that no rule breaks as an SQL error (``ON CONFLICT DO
NOTHING``, row counts), and a batch of several changes runs inside its own
savepoint.

A failure of the server (the connection lost, a statement failing) rolls the
whole transaction back and refuses every batch in it.  If the connection
was lost during COMMIT, what the server kept is unknown, so the journal
refuses all further work rather than pretend nothing happened, as the SQLite
journal does after a failed COMMIT.

One supervisor at a time holds a journal: `open` takes a session-level
advisory lock named after the schema on the journal's connection, which the
server drops when that connection ends, even when the process is killed.
Tables, versions and connecting live in `_postgres_schema`; reads in
`_postgres_reads`; the operators' inbox in `_postgres_inbox`.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs
import trio

from ..errors import DuplicateError, JournalError, JournalLocked
from . import _postgres_inbox as inbox
from ._dialect import Dialect, ThreadedJournal
from ._inbox import await_answer
from ._postgres_reads import POSTGRES_READS, PostgresReader
from ._postgres_schema import (
    COLUMNS,
    check_dsn,
    check_schema,
    connect,
    database_error,
    describe,
    ensure_schema,
    lock_id,
    stored,
)
from ._thread import JournalThread, Read, Request, ThreadedReader, refuse
from .records import (
    Answer,
    Append,
    Backlog,
    Change,
    Command,
    Complete,
    Discard,
    Halt,
    MarkAttempt,
    Purge,
    Recovery,
    Requeue,
    Resume,
    Retrying,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresJournal", "PostgresReader"]

_DIALECT: Final = attrs.evolve(POSTGRES_READS, take=inbox.take, answer=inbox.answer)


class _Refused(Exception):
    """A batch broke a rule; it alone is rolled back."""

    def __init__(self, error: JournalError | DuplicateError) -> None:
        super().__init__(error)
        self.error = error


@attrs.define(eq=False)
class PostgresJournal(ThreadedJournal["psycopg.Connection[Any]"]):
    """A journal on a PostgreSQL server: what is accepted survives a crash of the process or the machine.

    Args:
        dsn: a libpq connection string or URI (``"postgresql://user@host/db"``).
        schema: the PostgreSQL schema that holds the journal's tables, created
            if missing; several journals can share a database under several
            names.
        poll_interval: seconds between two looks at the operators' inbox
            while no command waits.

    Needs the ``postgres`` extra: ``pip install 'inturn[postgres]'``.
    """

    dsn: str = attrs.field(converter=check_dsn)
    schema: str = attrs.field(default="inturn", kw_only=True, converter=check_schema)
    poll_interval: float = attrs.field(
        default=0.5, kw_only=True, validator=attrs.validators.instance_of(float)
    )
    dialect: ClassVar[Dialect[psycopg.Connection[Any]]] = _DIALECT
    commits: int = attrs.field(default=0, init=False)
    """Transactions committed since `open` (group commit makes it < writes)."""
    _worker: JournalThread[psycopg.Connection[Any]] | None = attrs.field(default=None, init=False)
    _next_id: int = attrs.field(default=1, init=False)
    """Ids below this were used: kept on the journal's thread, stored as ``meta.high_id``."""

    @property
    def name(self) -> str:
        """How messages name this journal: server, database and schema, never a password."""
        return describe(self.dsn, self.schema)

    # -- trio side -----------------------------------------------------------

    async def open(self) -> Recovery:
        if self._worker is not None:
            raise JournalError(f"{self.name}: this PostgresJournal is already open")
        connection, recovery = await trio.to_thread.run_sync(self._open_sync)
        self.commits = 0
        self._next_id = recovery.next_id
        self._worker = JournalThread(
            name=f"inturn-postgres:{self.schema}",
            connection=connection,
            commit_group=self._commit_group,
            serve_read=self._serve_read,
            close=self._close,
            describe=self.name,
        )
        self._worker.start()
        return recovery

    # -- operator commands (see `_postgres_inbox`) ---------------------------------

    async def submit(self, command: Command, *, timeout: float) -> Answer:  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
        # From an operator: a connection of our own, not the journal's thread.
        import psycopg

        if self._worker is not None:
            raise JournalError(f"{self.name}: this PostgresJournal is open here; call it directly")
        connection = await trio.to_thread.run_sync(connect, self.dsn, self.schema, self.name)
        try:
            return await await_answer(
                submit=lambda command: inbox.submit(connection, command),
                answered=lambda command_id: inbox.answered(connection, command_id),
                withdraw=lambda command_id: inbox.withdraw(connection, command_id),
                command=command,
                timeout=timeout,
                describe=self.name,
            )
        except psycopg.Error as exc:
            raise database_error(self.name, exc, "submit") from exc
        finally:
            connection.close()

    def reader(self) -> ThreadedReader:
        return ThreadedReader(PostgresReader(self.dsn, schema=self.schema))

    # -- the journal's thread --------------------------------------------------

    def _open_sync(self) -> tuple[psycopg.Connection[Any], Recovery]:
        import psycopg

        connection = connect(self.dsn, self.schema, self.name)
        try:
            ensure_schema(connection, self.schema, self.name)
            (locked,) = connection.execute(
                f"SELECT pg_try_advisory_lock({lock_id(self.schema)})"
            ).fetchone() or (False,)
            if not locked:
                raise JournalLocked(self.name)
            recovery = _recover(connection)
            inbox.reset(connection)
        except psycopg.Error as exc:
            connection.close()
            raise database_error(self.name, exc, "open") from exc
        except BaseException:
            connection.close()
            raise
        return connection, recovery

    def _close(self, connection: psycopg.Connection[Any]) -> None:
        import psycopg

        # Unlock before closing: the server ends a closed session a moment
        # later, and the next opener must not find the lock still held.
        with contextlib.suppress(psycopg.Error):
            if not connection.broken:
                connection.execute(f"SELECT pg_advisory_unlock({lock_id(self.schema)})")
        connection.close()

    def _serve_read(
        self, connection: psycopg.Connection[Any], request: Read[psycopg.Connection[Any]]
    ) -> None:
        import psycopg

        try:
            request.result = request.run(connection)
        except psycopg.Error as exc:
            request.error = database_error(self.name, exc, "read")
            request.error.__cause__ = exc
        except Exception as exc:  # a bug: raise it in the reader, keep serving
            request.error = exc

    def _commit_group(self, connection: psycopg.Connection[Any], group: list[Request]) -> None:
        """Commit *group* in one transaction; set each request's verdict."""
        import psycopg

        next_id = self._next_id
        try:
            connection.execute("BEGIN")
            for request in group:
                # A batch of one change breaks no rule as an SQL error; a batch
                # of several needs a savepoint to be refused alone.
                several = len(request.changes) > 1
                if several:
                    connection.execute("SAVEPOINT batch")
                try:
                    next_id = _apply(connection, request, next_id, self.name)
                except _Refused as refused:
                    if several:
                        connection.execute("ROLLBACK TO SAVEPOINT batch")
                    request.error = refused.error
                    request.superseded.clear()
                if several:
                    connection.execute("RELEASE SAVEPOINT batch")
            if next_id != self._next_id:
                connection.execute("UPDATE meta SET high_id = %s", (next_id - 1,))
        except psycopg.Error as exc:
            _rollback(connection)
            error = database_error(self.name, exc, "write")
            error.__cause__ = exc
            refuse(group, error)
            return
        try:
            connection.execute("COMMIT")
        except psycopg.Error as exc:
            error = database_error(self.name, exc, "commit")
            error.__cause__ = exc
            if connection.broken:
                # What the server kept is unknown now: never carry on as if not.
                assert self._worker is not None
                self._worker.broken = exc
                error = JournalError(f"{error}; journal closed to work")
                error.__cause__ = exc
            else:
                _rollback(connection)
            refuse(group, error)
            return
        self._next_id = next_id
        self.commits += 1


def _rollback(connection: psycopg.Connection[Any]) -> None:
    import psycopg

    if not connection.broken:
        try:
            connection.execute("ROLLBACK")
        except psycopg.Error:
            connection.close()  # closing rolls back


def _recover(connection: psycopg.Connection[Any]) -> Recovery:
    """Each key's head and backlog, and every keyless job: O(keys) rows in memory."""
    with connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        counts = connection.execute(
            "SELECT key, COUNT(*), MIN(id), MAX(id) FROM jobs"
            " WHERE state = 'pending' AND key IS NOT NULL GROUP BY key"
        ).fetchall()
        heads = [row[2] for row in counts]
        rows = connection.execute(
            f"SELECT {COLUMNS} FROM jobs WHERE state = 'pending'"
            " AND (key IS NULL OR id = ANY(%s)) ORDER BY id",
            (heads,),
        ).fetchall()
        halted = frozenset(row[0] for row in connection.execute("SELECT key FROM halted"))
        (high_id,) = connection.execute("SELECT high_id FROM meta").fetchone() or (0,)
    backlog = {
        key: Backlog(count=count - 1, last_id=last) for key, count, _, last in counts if count > 1
    }
    return Recovery(
        next_id=high_id + 1,
        jobs=[stored(row) for row in rows],
        backlog=backlog,
        halted=halted,
    )


def _apply(connection: psycopg.Connection[Any], request: Request, next_id: int, name: str) -> int:
    """Apply one batch inside the current transaction; return the next free id.

    Superseded changes go to ``request.superseded``.  Raises `_Refused` for a
    broken rule; `psycopg.Error` for the server failing.
    """
    now = time.time()

    def settle(applied: bool, change: Change, job_id: int) -> bool:
        if applied:
            return True
        if job_id >= next_id:
            raise _Refused(JournalError(f"{name}: job {job_id} was never appended"))
        request.superseded.append(change)
        return False

    def one(sql: str, parameters: tuple[object, ...], change: Change, job_id: int) -> bool:
        return settle(connection.execute(sql, parameters).rowcount == 1, change, job_id)

    def new_id(job_id: int) -> None:
        if job_id < next_id:
            raise _Refused(JournalError(f"{name}: job id {job_id} was used before"))

    for change in request.changes:
        if isinstance(change, Append):
            new_id(change.job_id)
            inserted = connection.execute(
                "INSERT INTO jobs (id, key, unique_key, data, accepted_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (unique_key)"
                " WHERE state = 'pending' AND unique_key IS NOT NULL DO NOTHING",
                (change.job_id, change.key, change.unique, change.data, now),
            ).rowcount
            if not inserted:
                _refuse_duplicate(connection, change.unique)
            next_id = change.job_id + 1
        elif isinstance(change, MarkAttempt):
            # Running again: no longer waiting to retry.  A start (attempts
            # rising) is superseded on a halted key.
            one(
                "UPDATE jobs SET attempts = %s, retry_at = NULL WHERE id = %s AND state = 'pending'"
                " AND (%s <= attempts OR key IS NULL"
                "      OR NOT EXISTS (SELECT 1 FROM halted WHERE halted.key = jobs.key))",
                (change.attempt, change.job_id, change.attempt),
                change,
                change.job_id,
            )
        elif isinstance(change, Retrying):
            one(
                "UPDATE jobs SET error = %s, retry_at = %s WHERE id = %s AND state = 'pending'",
                (change.error, change.retry_at, change.job_id),
                change,
                change.job_id,
            )
        elif isinstance(change, Complete):
            one(
                "DELETE FROM jobs WHERE id = %s AND state = 'pending'",
                (change.job_id,),
                change,
                change.job_id,
            )
        elif isinstance(change, Discard):
            discarded = one(
                "UPDATE jobs SET state = 'dead', error = %s, finished_at = %s, retry_at = NULL,"
                " stopped_during = %s WHERE id = %s AND state = 'pending'",
                (change.error, now, change.stopped_during, change.job_id),
                change,
                change.job_id,
            )
            if discarded and change.halt:
                connection.execute(
                    "INSERT INTO halted (key) SELECT key FROM jobs"
                    " WHERE id = %s AND key IS NOT NULL ON CONFLICT DO NOTHING",
                    (change.job_id,),
                )
        elif isinstance(change, Purge):
            one(
                "DELETE FROM jobs WHERE id = %s AND state = 'dead'",
                (change.job_id,),
                change,
                change.job_id,
            )
        elif isinstance(change, Requeue):
            new_id(change.new_id)
            dead = connection.execute(
                "SELECT unique_key FROM jobs WHERE id = %s AND state = 'dead' FOR UPDATE",
                (change.job_id,),
            ).fetchone()
            if not settle(dead is not None, change, change.job_id):
                continue
            assert dead is not None
            inserted = connection.execute(
                "INSERT INTO jobs (id, key, unique_key, data, accepted_at)"
                " SELECT %s, key, unique_key, data, %s FROM jobs WHERE id = %s"
                " ON CONFLICT (unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL"
                " DO NOTHING",
                (change.new_id, now, change.job_id),
            ).rowcount
            if not inserted:
                _refuse_duplicate(connection, dead[0])
            connection.execute("DELETE FROM jobs WHERE id = %s", (change.job_id,))
            next_id = change.new_id + 1
        elif isinstance(change, Halt):
            connection.execute(
                "INSERT INTO halted (key) VALUES (%s) ON CONFLICT DO NOTHING", (change.key,)
            )
        elif isinstance(change, Resume):
            connection.execute("DELETE FROM halted WHERE key = %s", (change.key,))
        else:
            raise _Refused(JournalError(f"{name}: not a journal change: {change!r}"))
    return next_id


def _refuse_duplicate(connection: psycopg.Connection[Any], unique: str | None) -> None:
    """Raise `_Refused` with the `DuplicateError` naming *unique*'s holder."""
    holder = connection.execute(
        "SELECT id FROM jobs WHERE unique_key = %s AND state = 'pending'", (unique,)
    ).fetchone()
    raise _Refused(DuplicateError(unique or "", holder[0] if holder is not None else 0))
