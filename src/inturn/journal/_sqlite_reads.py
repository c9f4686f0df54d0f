"""The reads of an SQLite journal, and `SQLiteReader`, which makes them without the journal.

What an operator reads (`keys`, `job`, `dead_letters`) and what `load` pages
in are plain functions of a connection: `SQLiteJournal` runs them on its own
thread, between transactions, and `SQLiteReader` runs them on a read-only
connection of its own.  So the ``inturn`` command line reads a file that a
running supervisor holds without the lock, as WAL lets readers and the one
writer work side by side.  Partial indexes serve every read: pending jobs by
key and id (paging, heads of keys) and dead letters by id and by key.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from typing import ClassVar, Final, TypeVar, final

import attrs

from ..errors import JournalCorrupt, JournalError
from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, ScheduleInfo
from ._dialect import Dialect, DialectReader
from ._reads import AUDIT_COLUMNS, audit_entry, audit_where, info, key_infos, key_matches
from ._sql_schedules import schedule_info
from ._sqlite_apply import SCHEDULES
from ._sqlite_schema import (
    COLUMNS,
    LIVE_JOBS,
    SCHEMA_VERSION,
    SQLITE_MAX,
    check_path,
    database_error,
    rollback,
    schema_version,
    stored,
)
from ._transactions import COMMIT
from .records import StoredJob

__all__ = [
    "SQLITE_READS",
    "SQLiteReader",
    "select_dead_letters",
    "select_job",
    "select_keys",
    "select_pending",
    "select_scheduled",
]

_T = TypeVar("_T")

_INFO_COLUMNS: Final = (
    "id, CAST(key AS TEXT), CAST(unique_key AS TEXT), CAST(data AS BLOB),"
    " CAST(attempts AS INTEGER), state, CAST(error AS TEXT), CAST(accepted_at AS REAL),"
    " CAST(finished_at AS REAL), CAST(retry_at AS REAL), CAST(stopped_during AS INTEGER),"
    " CAST(seq AS INTEGER), CAST(due_at AS REAL)"
)
"""The columns of a `JobInfo`, cast as `COLUMNS` are."""
_HALT_COLUMNS: Final = "CAST(inturn_halted.job_id AS INTEGER), CAST(inturn_halted.error AS TEXT)"
"""What halted a key: the job whose discard did, and its error."""


def select_pending(
    connection: sqlite3.Connection, key: str, after: int, limit: int
) -> list[StoredJob]:
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM inturn_jobs WHERE key = ? AND state = 'pending' AND seq > ?"
        " ORDER BY seq LIMIT ?",
        (key, after, limit),
    ).fetchall()
    return [stored(row) for row in rows]


def select_keys(
    connection: sqlite3.Connection, state: KeyFilter | None, limit: int, now: float
) -> list[KeyInfo]:
    """One pass over the pending-by-key index: O(pending jobs), sorting only the heads."""
    limit = min(limit, SQLITE_MAX)
    halted = "inturn_halted.key IS NOT NULL"
    where = {
        None: "",
        "blocked": f"WHERE head.retry_at IS NOT NULL OR {halted}",
        "running": "WHERE head.retry_at IS NULL AND CAST(head.attempts AS INTEGER) > 0",
        "halted": f"WHERE {halted}",
    }[state]
    with _snapshot(connection):  # the two queries see one state of the file
        rows = connection.execute(
            f"SELECT CAST(heads.key AS TEXT), heads.queued, {halted}, head.id,"
            " CAST(head.attempts AS INTEGER), CAST(head.retry_at AS REAL),"
            " CAST(head.error AS TEXT), CAST(head.accepted_at AS REAL),"
            f" {_HALT_COLUMNS}"
            " FROM (SELECT key, MIN(seq) AS seq, COUNT(*) AS queued FROM inturn_jobs"
            "       WHERE state = 'pending' AND key IS NOT NULL AND seq IS NOT NULL"
            "       GROUP BY key) AS heads"
            " JOIN inturn_jobs AS head ON head.key = heads.key AND head.seq = heads.seq"
            " AND head.state = 'pending'"
            f" LEFT JOIN inturn_halted ON inturn_halted.key = heads.key {where}"
            " ORDER BY heads.seq LIMIT ?",
            (limit,),
        ).fetchall()
        idle: list[tuple[str, int | None, str | None]] = []
        if len(rows) < limit and key_matches(state, None, True):
            idle = connection.execute(  # halted keys without unfinished jobs
                f"SELECT CAST(key AS TEXT), {_HALT_COLUMNS} FROM inturn_halted WHERE NOT EXISTS"
                " (SELECT 1 FROM inturn_jobs WHERE state = 'pending' AND seq IS NOT NULL"
                " AND inturn_jobs.key = inturn_halted.key)"
                " ORDER BY key LIMIT ?",
                (limit - len(rows),),
            ).fetchall()
    return key_infos(rows, idle, now)


def select_job(connection: sqlite3.Connection, job_id: int) -> JobInfo | None:
    if not 0 < job_id <= SQLITE_MAX:
        return None
    row = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM inturn_jobs WHERE id = ?", (job_id,)
    ).fetchone()
    return info(row) if row is not None else None


def select_queue(connection: sqlite3.Connection, key: str, limit: int, after: int) -> list[JobInfo]:
    """A key's unfinished jobs in place order: the queued-by-key index, from *after*."""
    if after >= SQLITE_MAX:
        return []
    rows = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM inturn_jobs WHERE key = ? AND state = 'pending' AND seq > ?"
        " ORDER BY seq LIMIT ?",
        (key, after, min(limit, SQLITE_MAX)),
    ).fetchall()
    return [info(row) for row in rows]


def select_steps(connection: sqlite3.Connection, job_id: int) -> list[tuple[str, bytes]]:
    """A job's steps in the order recorded: the steps table's primary key, then a sort of few."""
    if not 0 < job_id <= SQLITE_MAX:
        return []
    rows = connection.execute(
        "SELECT CAST(name AS TEXT), CAST(data AS BLOB) FROM inturn_steps WHERE job_id = ? ORDER BY n",
        (job_id,),
    ).fetchall()
    return [(name, bytes(data)) for name, data in rows]


def select_scheduled(connection: sqlite3.Connection, key: str | None, limit: int) -> list[JobInfo]:
    """Scheduled jobs, the earliest due first: the scheduled index."""
    where, parameters = ("", ()) if key is None else (" AND key = ?", (key,))
    rows = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM inturn_jobs WHERE state = 'pending' AND seq IS NULL{where}"
        " ORDER BY due_at, id LIMIT ?",
        (*parameters, min(limit, SQLITE_MAX)),
    ).fetchall()
    return [info(row) for row in rows]


def select_schedules(
    connection: sqlite3.Connection, after: str, limit: int, name: str | None
) -> list[ScheduleInfo]:
    """Recurring schedules by name, after *after*; or the one named *name*."""
    sql, parameters = (
        SCHEDULES.listed(after, min(limit, SQLITE_MAX)) if name is None else SCHEDULES.one(name)
    )
    return [schedule_info(row) for row in connection.execute(sql, parameters).fetchall()]


def select_due_schedules(connection: sqlite3.Connection, limit: int) -> list[ScheduleInfo]:
    """Running schedules, the earliest cursor first: the due index."""
    sql, parameters = SCHEDULES.due(min(limit, SQLITE_MAX))
    return [schedule_info(row) for row in connection.execute(sql, parameters).fetchall()]


def select_dead_letters(
    connection: sqlite3.Connection,
    key: str | None,
    limit: int,
    after: int,
    finished_before: float | None,
) -> list[JobInfo]:
    if after >= SQLITE_MAX:
        return []
    where = "state = 'dead' AND id > ?"
    parameters: list[object] = [after]
    if key is not None:
        where += " AND key = ?"
        parameters.append(key)
    if finished_before is not None:
        where += " AND finished_at < ?"
        parameters.append(finished_before)
    rows = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM inturn_jobs WHERE {where} ORDER BY id LIMIT ?",
        (*parameters, min(limit, SQLITE_MAX)),
    ).fetchall()
    return [info(row) for row in rows]


def select_audit(
    connection: sqlite3.Connection,
    after: int,
    before: int | None,
    limit: int,
    key: str | None,
    job_id: int | None,
) -> list[AuditEntry]:
    if after >= SQLITE_MAX or (job_id is not None and job_id > SQLITE_MAX):
        return []
    where, parameters = audit_where(
        after, None if before is None else min(before, SQLITE_MAX), key, job_id, "?"
    )
    rows = connection.execute(
        f"SELECT {AUDIT_COLUMNS} FROM inturn_audit WHERE {where} ORDER BY id DESC LIMIT ?",
        (*parameters, min(limit, SQLITE_MAX)),
    ).fetchall()
    return [audit_entry(row) for row in rows]


@contextlib.contextmanager
def _snapshot(connection: sqlite3.Connection) -> Iterator[None]:
    """A read transaction: every query inside sees the same committed state."""
    connection.execute("BEGIN")
    try:
        yield
    except BaseException:
        rollback(connection)
        raise
    connection.execute(COMMIT)


# -- the read-only reader ----------------------------------------------------


SQLITE_READS: Final = Dialect(
    select_pending,
    select_keys,
    select_job,
    select_queue,
    select_dead_letters,
    select_scheduled,
    select_steps,
    select_audit,
    select_schedules,
    select_due_schedules,
)


@final
@attrs.frozen
class SQLiteReader(DialectReader[sqlite3.Connection]):
    """Reads a journal file without claiming it: the reads of `SQLiteJournal`, sync.

    For the ``inturn`` command line and scripts.  Each call opens the file
    read-only (an SQLite ``mode=ro`` connection), reads, and closes it; it takes
    no lock, so it works while a supervisor holds the file, and sees what that
    supervisor has committed.  It never writes to the journal: it reads a file of
    schema version 1 (before `Retrying`) as it is, with no retry times, and an
    older file under its old table names, and it
    creates no file but the ``-wal`` and ``-shm`` files SQLite's WAL mode needs
    (which a read-only connection cannot remove; the next journal uses them).
    In a directory it cannot write, where those files cannot be made, it reads
    a journal that was closed cleanly (no ``-wal`` file, or an empty one) as
    immutable, and refuses one whose ``-wal`` file holds commits, which it
    cannot read there.

    Every method raises:
        JournalError: *path* does not exist ("no such file") or cannot be read.
        JournalCorrupt: *path* is not an inturn journal.
        TypeError, ValueError: an argument is bad, as for `inturn.Journal`.
    """

    path: str = attrs.field(converter=check_path)
    dialect: ClassVar[Dialect[sqlite3.Connection]] = SQLITE_READS

    def _read(self, run: Callable[[sqlite3.Connection], _T]) -> _T:
        if not os.path.exists(self.path):  # mode=ro would refuse it too; say why
            raise JournalError(f"{self.path}: no such file")
        connection = self._connect()
        try:
            return run(connection)
        except sqlite3.Error as exc:
            raise database_error(self.path, exc, "read") from exc
        finally:
            connection.close()

    def _connect(self) -> sqlite3.Connection:
        """A read-only connection to the journal, its schema checked."""
        try:
            return self._open("mode=ro")
        except sqlite3.Error as exc:
            if not _no_shm(exc):
                raise database_error(self.path, exc, "read") from exc
            if not _wal_empty(self.path):
                raise JournalError(
                    f"{self.path}: cannot read: its directory is not writable, and SQLite"
                    " needs a -shm file there to read the -wal file beside it (the journal is"
                    " open in a supervisor, or was not closed)"
                ) from exc
        # WAL mode keeps its index in a -shm file next to the journal, which
        # a read-only directory cannot hold.  With no -wal file, or an empty
        # one, the journal file alone holds every commit: read it as
        # immutable, which needs no -shm file.
        try:
            return self._open("mode=ro&immutable=1")
        except sqlite3.Error as exc:
            raise database_error(self.path, exc, "read") from exc

    def _open(self, mode: str) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?{mode}"
        try:
            connection = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=5.0)
        except sqlite3.Error as exc:
            raise JournalError(f"{self.path}: cannot open: {exc}") from exc
        try:
            version = schema_version(connection, self.path)
            if version == 0:
                raise JournalCorrupt(self.path, "not an inturn journal (an empty file or database)")
            for view in _VIEWS_OF_OLDER.get(version, ()):
                connection.execute(view)
            if version >= 6:  # a completed job's row may wait, marked, to be deleted
                connection.execute(LIVE_JOBS)
        except BaseException:
            connection.close()
            raise
        return connection


def _views_of_older(version: int) -> tuple[str, ...]:
    """The temporary views through which the reads see a file of an older *version* as
    one of today's: its tables under today's names, what it never recorded as NULL, and
    its jobs, before places, in id order; before version 7, an empty audit trail; before
    version 9, no recurring schedules."""
    no_schedules = f"CREATE TEMP VIEW inturn_schedules AS SELECT {_NO_SCHEDULES} WHERE 0"
    if version >= 7:
        return (no_schedules,)
    no_audit = (f"CREATE TEMP VIEW inturn_audit AS SELECT {_NO_AUDIT} WHERE 0", no_schedules)
    if version == 6:
        return no_audit
    missing = {
        1: ", NULL AS retry_at, NULL AS stopped_during, id AS seq, NULL AS due_at",
        2: ", NULL AS stopped_during, id AS seq, NULL AS due_at",
        3: ", id AS seq, NULL AS due_at",
    }.get(version, "")
    live = " WHERE completed_at IS NULL OR state <> 'pending'" if version == 5 else ""
    views = [f"CREATE TEMP VIEW inturn_jobs AS SELECT *{missing} FROM main.jobs{live}"]
    if version < 4:  # nor what halted its keys, nor steps
        views += [
            "CREATE TEMP VIEW inturn_halted AS"
            " SELECT key, NULL AS job_id, NULL AS error FROM main.halted",
            "CREATE TEMP VIEW inturn_steps AS"
            " SELECT 0 AS job_id, 0 AS n, '' AS name, x'' AS data WHERE 0",
        ]
    else:
        views += [
            "CREATE TEMP VIEW inturn_halted AS SELECT * FROM main.halted",
            "CREATE TEMP VIEW inturn_steps AS SELECT * FROM main.steps",
        ]
    return (*views, *no_audit)


_NO_AUDIT: Final = (
    "0 AS id, 0.0 AS at, '' AS actor, '' AS verb, NULL AS job_id, NULL AS key, NULL AS head,"
    " NULL AS older_than, '' AS outcome, NULL AS error, NULL AS result"
)

_NO_SCHEDULES: Final = (
    "'' AS name, NULL AS key, x'' AS data, NULL AS cron, NULL AS every, '' AS tz,"
    " 0.0 AS start, '' AS misfire, NULL AS unique_for, NULL AS next_at, NULL AS last_tick"
)

_VIEWS_OF_OLDER: Final = {version: _views_of_older(version) for version in range(1, SCHEMA_VERSION)}
"""`_views_of_older` of each older version."""


def _no_shm(exc: sqlite3.Error) -> bool:
    """Whether *exc* is SQLite failing to make a -shm file (older versions say only CANTOPEN)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code == sqlite3.SQLITE_READONLY_DIRECTORY or (
        code is not None and code & 0xFF == sqlite3.SQLITE_CANTOPEN
    )


def _wal_empty(path: str) -> bool:
    try:
        return os.path.getsize(path + "-wal") == 0
    except FileNotFoundError:
        return True
    except OSError:  # cannot tell: it may hold commits
        return False
