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
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from typing import ClassVar, Final, TypeVar, final

import attrs

from ..errors import JournalCorrupt, JournalError
from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from ._by_name import Range, Source, page_keys
from ._dialect import Dialect, DialectReader
from ._reads import (
    AUDIT_COLUMNS,
    MINUTES,
    audit_entry,
    audit_where,
    info,
    key_infos,
    key_matches,
    key_where,
    minute_of,
    overview_of,
)
from ._sql_schedules import schedule_info
from ._sqlite_apply import SCHEDULES
from ._sqlite_schema import (
    COLUMNS,
    LIVE_JOBS,
    LIVE_UNTRACED_JOBS,
    SQLITE_MAX,
    STARTED,
    TRACED_VERSION,
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
    " CAST(seq AS INTEGER), CAST(due_at AS REAL), CAST(trace AS TEXT)"
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
    where = key_where(
        state,
        halted=halted,
        halted_by="inturn_halted.job_id",
        attempts="CAST(head.attempts AS INTEGER)",
        retry_at="head.retry_at",
    )
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
            f" LEFT JOIN inturn_halted ON inturn_halted.key = heads.key WHERE {where}"
            " ORDER BY heads.seq LIMIT ?",
            (limit,),
        ).fetchall()
        idle: list[tuple[str, int | None, str | None]] = []
        if len(rows) < limit and key_matches(state, None, True, True):
            paused = " AND job_id IS NULL" if not key_matches(state, None, True) else ""
            idle = connection.execute(  # halted keys without unfinished jobs
                f"SELECT CAST(key AS TEXT), {_HALT_COLUMNS} FROM inturn_halted WHERE NOT EXISTS"
                " (SELECT 1 FROM inturn_jobs WHERE state = 'pending' AND seq IS NOT NULL"
                f" AND inturn_jobs.key = inturn_halted.key){paused}"
                " ORDER BY key LIMIT ?",
                (limit - len(rows),),
            ).fetchall()
    return key_infos(rows, idle, now)


def select_keys_by_name(
    connection: sqlite3.Connection,
    state: KeyFilter | None,
    prefix: str,
    after: str | None,
    limit: int,
    now: float,
) -> list[KeyInfo]:
    """Keys by name from the small indexes each filter needs (`_by_name`), in one snapshot."""

    def names(source: Source, span: Range, count: int) -> list[str]:
        where, parameters = span.where("key", "?")
        sql = _NAME_SOURCES[source].format(where=where)
        return [key for (key,) in connection.execute(sql, (*parameters, count))]

    def infos(keys: list[str]) -> dict[str, KeyInfo]:
        chosen = json.dumps(keys)
        rows = connection.execute(_HEADS_OF, (chosen,)).fetchall()
        idle = connection.execute(_HALTS_OF, (chosen,)).fetchall()
        return {info.key: info for info in key_infos(rows, idle, now)}

    with _snapshot(connection):
        return page_keys(
            names, infos, state=state, prefix=prefix, after=after, limit=min(limit, SQLITE_MAX)
        )


_NAME_SOURCES: Final[dict[Source, str]] = {
    "jobs": "SELECT DISTINCT CAST(key AS TEXT) FROM inturn_jobs WHERE state = 'pending'"
    " AND seq IS NOT NULL AND {where} ORDER BY key LIMIT ?",
    "started": f"SELECT DISTINCT CAST(key AS TEXT) FROM inturn_jobs WHERE {STARTED}"
    " AND {where} ORDER BY key LIMIT ?",
    "halted": "SELECT CAST(key AS TEXT) FROM inturn_halted WHERE {where} ORDER BY key LIMIT ?",
    "paused": "SELECT CAST(key AS TEXT) FROM inturn_halted WHERE job_id IS NULL AND {where}"
    " ORDER BY key LIMIT ?",
}
"""Each source's first keys in a range (`_by_name`), by the index that serves it."""

_HEADS_OF: Final = (
    "SELECT CAST(heads.key AS TEXT), heads.queued, inturn_halted.key IS NOT NULL, head.id,"
    " CAST(head.attempts AS INTEGER), CAST(head.retry_at AS REAL),"
    " CAST(head.error AS TEXT), CAST(head.accepted_at AS REAL),"
    f" {_HALT_COLUMNS}"
    " FROM (SELECT key, MIN(seq) AS seq, COUNT(*) AS queued FROM inturn_jobs"
    "       WHERE state = 'pending' AND seq IS NOT NULL"
    "       AND key IN (SELECT value FROM json_each(?)) GROUP BY key) AS heads"
    " JOIN inturn_jobs AS head ON head.key = heads.key AND head.seq = heads.seq"
    " AND head.state = 'pending'"
    " LEFT JOIN inturn_halted ON inturn_halted.key = heads.key"
)
"""The `key_infos` heads of the keys given (a JSON array) with unfinished jobs."""
_HALTS_OF: Final = (
    f"SELECT CAST(key AS TEXT), {_HALT_COLUMNS} FROM inturn_halted"
    " WHERE key IN (SELECT value FROM json_each(?)) AND NOT EXISTS"
    " (SELECT 1 FROM inturn_jobs WHERE state = 'pending' AND seq IS NOT NULL"
    " AND inturn_jobs.key = inturn_halted.key)"
)
"""The halted keys given (a JSON array) without unfinished jobs."""


def select_overview(connection: sqlite3.Connection, now: float) -> Overview:
    """The counts from indexes alone (`STARTED` rows aside): see `_OVERVIEW`."""
    with _snapshot(connection):
        modern = connection.execute(
            "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'inturn_jobs'"
        ).fetchone()
        # Counted on the table's indexes, the rows marked completed (all started:
        # `STARTED`) counted apart and taken off; a file before version 6 through its view.
        table = "main.inturn_jobs" if modern else "inturn_jobs"
        marked = (
            connection.execute(
                f"SELECT CAST(completed_at AS REAL), seq IS NULL FROM main.inturn_jobs"
                f" WHERE {STARTED} AND completed_at IS NOT NULL"
            ).fetchall()
            if modern
            else []
        )
        [(due, keys)] = connection.execute(
            f"SELECT COUNT(*), COUNT(DISTINCT key) FROM {table}"
            " WHERE state = 'pending' AND seq IS NOT NULL"
        )
        [(scheduled,)] = connection.execute(
            f"SELECT COUNT(*) FROM {table} WHERE state = 'pending' AND seq IS NULL"
        )
        [(dead,)] = connection.execute(f"SELECT COUNT(*) FROM {table} WHERE state = 'dead'")
        [(gone,)] = connection.execute(_KEYS_MARKED_ONLY) if modern else [(0,)]
        [(halted, paused, halted_busy)] = connection.execute(_HALTS)
        heads = connection.execute(_STARTED_HEADS).fetchall()
        oldest = connection.execute(
            "SELECT CAST(accepted_at AS REAL) FROM inturn_jobs"
            " WHERE state = 'pending' AND seq IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()
        counts = connection.execute(
            "SELECT CAST(minute AS INTEGER), CAST(completed AS INTEGER),"
            " CAST(discarded AS INTEGER) FROM inturn_finished WHERE minute > ?",
            (minute_of(now) - 60 * MINUTES,),
        ).fetchall()
    marked_due = sum(1 for _, unplaced in marked if not unplaced)
    return overview_of(
        keys=keys - gone,
        halted=halted or 0,
        paused=paused or 0,
        halted_busy=halted_busy or 0,
        heads=heads,
        jobs=due - marked_due,
        scheduled=scheduled - (len(marked) - marked_due),
        dead=dead,
        oldest=None if oldest is None else oldest[0],
        counts=counts,
        marked=[at for at, _ in marked],
        now=now,
    )


_KEYS_MARKED_ONLY: Final = (
    "SELECT COUNT(DISTINCT key) FROM main.inturn_jobs AS marked"
    f" WHERE {STARTED} AND completed_at IS NOT NULL AND key IS NOT NULL AND seq IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM inturn_jobs AS live WHERE live.key = marked.key"
    " AND live.state = 'pending' AND live.seq IS NOT NULL)"
)
"""Keys the table's count finds whose every job is a row marked completed: no key."""
_HALTS: Final = (
    "SELECT COUNT(job_id), COUNT(*) - COUNT(job_id), SUM(EXISTS (SELECT 1 FROM inturn_jobs"
    " WHERE inturn_jobs.key = inturn_halted.key AND state = 'pending' AND seq IS NOT NULL))"
    " FROM inturn_halted"
)
"""Halted keys, paused ones, and halted keys with unfinished jobs."""
_STARTED_HEADS: Final = (
    "SELECT CAST(attempts AS INTEGER), CAST(retry_at AS REAL) FROM inturn_jobs AS head"
    f" WHERE {STARTED} AND key IS NOT NULL AND seq IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM inturn_jobs AS before WHERE before.key = head.key"
    " AND before.state = 'pending' AND before.seq IS NOT NULL AND before.seq < head.seq)"
    " AND NOT EXISTS (SELECT 1 FROM inturn_halted WHERE inturn_halted.key = head.key)"
)
"""The heads an attempt started, of keys not halted: few, from the started index."""


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
    select_keys_by_name,
    select_overview,
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
                connection.execute(LIVE_JOBS if version >= TRACED_VERSION else LIVE_UNTRACED_JOBS)
        except BaseException:
            connection.close()
            raise
        return connection


def _views_of_older(version: int) -> tuple[str, ...]:
    """The temporary views through which the reads see a file of an older *version* as
    one of today's: its tables under today's names, what it never recorded as NULL, and
    its jobs, before places, in id order; before version 7, an empty audit trail; before
    version 8, no finished jobs counted; before version 9, no recurring schedules."""
    no_schedules = (f"CREATE TEMP VIEW inturn_schedules AS SELECT {_NO_SCHEDULES} WHERE 0",)
    if version == 8:
        return no_schedules
    no_finished = (
        "CREATE TEMP VIEW inturn_finished AS SELECT 0 AS minute, 0 AS completed,"
        " 0 AS discarded WHERE 0",
        *no_schedules,
    )
    if version == 7:
        return no_finished
    no_audit = (f"CREATE TEMP VIEW inturn_audit AS SELECT {_NO_AUDIT} WHERE 0", *no_finished)
    if version == 6:
        return no_audit
    missing = {
        1: ", NULL AS retry_at, NULL AS stopped_during, id AS seq, NULL AS due_at",
        2: ", NULL AS stopped_during, id AS seq, NULL AS due_at",
        3: ", id AS seq, NULL AS due_at",
    }.get(version, "") + ", NULL AS trace"
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

_VIEWS_OF_OLDER: Final = {version: _views_of_older(version) for version in range(1, 9)}
"""`_views_of_older` of each older version (9 lacks only the trace context:
`LIVE_UNTRACED_JOBS`)."""


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
