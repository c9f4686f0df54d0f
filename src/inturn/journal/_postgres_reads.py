"""The reads of a PostgreSQL journal, and `PostgresReader`, which makes them without the journal.

As for SQLite (`_sqlite_reads`): what an operator reads and what `load`
pages in are plain functions of a connection.  `PostgresJournal` runs them on
its own thread, between transactions; `PostgresReader` runs them on a
connection of its own, so the ``inturn`` command line reads a journal that a
running supervisor holds, and sees what it has committed.  Each multi-query
read runs in one ``REPEATABLE READ`` transaction, so its queries agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, final

import attrs

from ..errors import JournalError
from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, MemberInfo, Overview, ScheduleInfo
from ._by_name import Range, Source, page_keys
from ._dialect import Dialect, DialectReader
from ._postgres_schema import (
    COLUMNS,
    PG_MAX,
    STARTED,
    TRACED_VERSION,
    check_dsn,
    check_schema,
    connect,
    database_error,
    describe,
    schema_version,
    stored,
)
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
from ._sql_schedules import COLUMNS as SCHEDULE_COLUMNS, ScheduleSQL, schedule_info
from .records import StoredJob

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "POSTGRES_READS",
    "PostgresReader",
    "select_dead_letters",
    "select_job",
    "select_keys",
    "select_members",
    "select_pending",
    "select_scheduled",
]

_T = TypeVar("_T")

_INFO_COLUMNS: Final = (
    "id, key, unique_key, data, attempts, state, error, accepted_at, finished_at, retry_at,"
    " stopped_during, seq, due_at, trace"
)


def select_pending(
    connection: psycopg.Connection[Any], key: str, after: int, limit: int
) -> list[StoredJob]:
    if after >= PG_MAX:
        return []
    rows = connection.execute(
        f"SELECT {COLUMNS} FROM jobs WHERE key = %s AND state = 'pending' AND seq > %s"
        " ORDER BY seq LIMIT %s",
        (key, after, min(limit, PG_MAX)),
    ).fetchall()
    return [stored(row) for row in rows]


def select_keys(
    connection: psycopg.Connection[Any], state: KeyFilter | None, limit: int, now: float
) -> list[KeyInfo]:
    """One pass over the pending-by-key index: O(pending jobs), sorting only the heads."""
    limit = min(limit, PG_MAX)
    halted = "halted.key IS NOT NULL"
    where = key_where(
        state,
        halted=halted,
        halted_by="halted.job_id",
        attempts="head.attempts",
        retry_at="head.retry_at",
    )
    with connection.transaction():  # the two queries see one state of the journal
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        rows = connection.execute(
            f"SELECT heads.key, heads.queued, {halted}, head.id, head.attempts,"
            " head.retry_at, head.error, head.accepted_at, halted.job_id, halted.error"
            " FROM (SELECT key, MIN(seq) AS seq, COUNT(*) AS queued FROM jobs"
            "       WHERE state = 'pending' AND key IS NOT NULL AND seq IS NOT NULL"
            "       GROUP BY key) AS heads"
            " JOIN jobs AS head ON head.key = heads.key AND head.seq = heads.seq"
            " AND head.state = 'pending'"
            f" LEFT JOIN halted ON halted.key = heads.key WHERE {where}"
            " ORDER BY heads.seq LIMIT %s",
            (limit,),
        ).fetchall()
        idle: list[tuple[str, int | None, str | None]] = []
        if len(rows) < limit and key_matches(state, None, True, True):
            paused = " AND job_id IS NULL" if not key_matches(state, None, True) else ""
            idle = connection.execute(  # halted keys without unfinished jobs
                "SELECT key, job_id, error FROM halted WHERE NOT EXISTS (SELECT 1 FROM jobs"
                f" WHERE state = 'pending' AND seq IS NOT NULL AND jobs.key = halted.key){paused}"
                " ORDER BY key LIMIT %s",
                (limit - len(rows),),
            ).fetchall()
        return _with_owners(connection, key_infos(rows, idle, now))


def _with_owners(connection: psycopg.Connection[Any], found: list[KeyInfo]) -> list[KeyInfo]:
    """*found*, each key with its owner in a fleet and how its heartbeat is."""
    owners = {
        key: (name, expired, age)
        for key, name, expired, age in connection.execute(
            f"SELECT keys.key, processes.name, {EXPIRED}, {HEARTBEAT_AGE}"
            " FROM keys JOIN processes ON processes.id = keys.owner"
            " WHERE keys.key = ANY(%s)",
            ([info.key for info in found if info.head_job_id is not None],),
        )
    }
    if owners:
        found = [_owned(info, owners.get(info.key)) for info in found]
    return found


def select_keys_by_name(
    connection: psycopg.Connection[Any],
    state: KeyFilter | None,
    prefix: str,
    after: str | None,
    limit: int,
    now: float,
) -> list[KeyInfo]:
    """Keys by name from the small indexes each filter needs (`_by_name`), in one snapshot."""

    def names(source: Source, span: Range, count: int) -> list[str]:
        where, parameters = span.where('key COLLATE "C"', "%s")
        sql = _NAME_SOURCES[source].format(where=where)
        return [key for (key,) in connection.execute(sql, (*parameters, count))]

    def infos(keys: list[str]) -> dict[str, KeyInfo]:
        rows = connection.execute(_HEADS_OF, (keys,)).fetchall()
        idle = connection.execute(_HALTS_OF, (keys,)).fetchall()
        found = _with_owners(connection, key_infos(rows, idle, now))
        return {info.key: info for info in found}

    with connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return page_keys(
            names, infos, state=state, prefix=prefix, after=after, limit=min(limit, PG_MAX)
        )


_NAME_SOURCES: Final[dict[Source, str]] = {
    "jobs": "SELECT DISTINCT key COLLATE \"C\" FROM jobs WHERE state = 'pending'"
    " AND seq IS NOT NULL AND {where} ORDER BY 1 LIMIT %s",
    "started": f'SELECT DISTINCT key COLLATE "C" FROM jobs WHERE {STARTED}'
    " AND {where} ORDER BY 1 LIMIT %s",
    "halted": 'SELECT key COLLATE "C" FROM halted WHERE {where} ORDER BY 1 LIMIT %s',
    "paused": 'SELECT key COLLATE "C" FROM halted WHERE job_id IS NULL AND {where}'
    " ORDER BY 1 LIMIT %s",
}
"""Each source's first keys in a range (`_by_name`), in code-point order: the indexes made
``COLLATE "C"`` for it serve the order and the range."""

_HEADS_OF: Final = (
    "SELECT heads.key, heads.queued, halted.key IS NOT NULL, head.id, head.attempts,"
    " head.retry_at, head.error, head.accepted_at, halted.job_id, halted.error"
    " FROM (SELECT key, MIN(seq) AS seq, COUNT(*) AS queued FROM jobs"
    "       WHERE state = 'pending' AND seq IS NOT NULL AND key = ANY(%s) GROUP BY key) AS heads"
    " JOIN jobs AS head ON head.key = heads.key AND head.seq = heads.seq"
    " AND head.state = 'pending'"
    " LEFT JOIN halted ON halted.key = heads.key"
)
_HALTS_OF: Final = (
    "SELECT key, job_id, error FROM halted WHERE key = ANY(%s) AND NOT EXISTS"
    " (SELECT 1 FROM jobs WHERE state = 'pending' AND seq IS NOT NULL AND jobs.key = halted.key)"
)


def select_overview(connection: psycopg.Connection[Any], now: float) -> Overview:
    """The counts, each from an index: the jobs and keys in one pass over ``jobs_by_name``
    (index-only where the table is vacuumed), the rest from small ones."""
    with connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        [(due, keys)] = connection.execute(
            'SELECT COALESCE(SUM(n), 0), COUNT(key) FROM (SELECT key COLLATE "C" AS key,'
            " COUNT(*) AS n FROM jobs WHERE state = 'pending' AND seq IS NOT NULL GROUP BY 1) AS k"
        ).fetchall()
        [(scheduled,)] = connection.execute(
            "SELECT COUNT(*) FROM jobs WHERE state = 'pending' AND seq IS NULL"
        ).fetchall()
        [(dead,)] = connection.execute("SELECT COUNT(*) FROM jobs WHERE state = 'dead'").fetchall()
        [(halted, paused, halted_busy)] = connection.execute(
            "SELECT COUNT(job_id), COUNT(*) - COUNT(job_id), COUNT(*) FILTER (WHERE EXISTS"
            " (SELECT 1 FROM jobs WHERE jobs.key = halted.key AND state = 'pending'"
            " AND seq IS NOT NULL)) FROM halted"
        ).fetchall()
        heads = connection.execute(
            "SELECT attempts, retry_at FROM jobs AS head"
            f" WHERE {STARTED} AND key IS NOT NULL AND seq IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM jobs AS before WHERE before.key = head.key"
            " AND before.state = 'pending' AND before.seq IS NOT NULL AND before.seq < head.seq)"
            " AND NOT EXISTS (SELECT 1 FROM halted WHERE halted.key = head.key)"
        ).fetchall()
        oldest = connection.execute(
            "SELECT accepted_at FROM jobs WHERE state = 'pending' AND seq IS NOT NULL"
            " ORDER BY id LIMIT 1"
        ).fetchone()
        counts = connection.execute(
            "SELECT minute, SUM(completed)::bigint, SUM(discarded)::bigint FROM finished"
            " WHERE minute > %s GROUP BY minute",
            (minute_of(now) - 60 * MINUTES,),
        ).fetchall()
    return overview_of(
        keys=int(keys),
        halted=int(halted),
        paused=int(paused),
        halted_busy=int(halted_busy),
        heads=heads,
        jobs=int(due),
        scheduled=int(scheduled),
        dead=int(dead),
        oldest=None if oldest is None else float(oldest[0]),
        counts=[(int(minute), int(c), int(d)) for minute, c, d in counts],
        marked=(),
        now=now,
    )


EXPIRED: Final = "processes.expires_at <= clock_timestamp()"
HEARTBEAT_AGE: Final = "EXTRACT(EPOCH FROM clock_timestamp() - processes.renewed_at)::float8"
"""Seconds since a member's heartbeat was renewed, by the server's clock (NULL if unknown)."""


def _owned(info: KeyInfo, owner: tuple[str, bool, float | None] | None) -> KeyInfo:
    if owner is None:
        return info
    name, expired, age = owner
    return attrs.evolve(
        info, owner=name, owner_expired=bool(expired), owner_heartbeat_age=_age(age)
    )


def _age(seconds: float | None) -> float | None:
    return None if seconds is None else max(0.0, float(seconds))


def select_members(connection: psycopg.Connection[Any]) -> list[MemberInfo]:
    """The fleet's members (``processes`` rows with ``fleet`` set), the oldest first.

    One statement, so each member's keys are counted in the state its row
    shows.  A single holder's row, or a producer's, is not a member.
    """
    rows = connection.execute(
        "SELECT processes.id, processes.name, EXTRACT(EPOCH FROM processes.started_at)::float8,"
        f" {HEARTBEAT_AGE},"
        f" EXTRACT(EPOCH FROM processes.expires_at - clock_timestamp())::float8, {EXPIRED},"
        " (SELECT COUNT(*) FROM keys WHERE keys.owner = processes.id),"
        " (SELECT COUNT(*) FROM jobs WHERE jobs.key IS NULL AND jobs.owner = processes.id"
        "  AND jobs.state = 'pending')"
        " FROM processes WHERE processes.fleet ORDER BY processes.id"
    ).fetchall()
    return [
        MemberInfo(
            id=int(process),
            name=name,
            started_at=float(started),
            heartbeat_age=_age(age),
            expires_in=float(expires_in),
            expired=bool(expired),
            keys=int(keys),
            keyless_jobs=int(keyless),
        )
        for process, name, started, age, expires_in, expired, keys, keyless in rows
    ]


def select_job(connection: psycopg.Connection[Any], job_id: int) -> JobInfo | None:
    if not 0 < job_id <= PG_MAX:
        return None
    row = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    return info(row) if row is not None else None


def select_queue(
    connection: psycopg.Connection[Any], key: str, limit: int, after: int
) -> list[JobInfo]:
    """A key's unfinished jobs in place order: the queued-by-key index, from *after*."""
    if after >= PG_MAX:
        return []
    rows = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM jobs WHERE key = %s AND state = 'pending' AND seq > %s"
        " ORDER BY seq LIMIT %s",
        (key, after, min(limit, PG_MAX)),
    ).fetchall()
    return [info(row) for row in rows]


def select_steps(connection: psycopg.Connection[Any], job_id: int) -> list[tuple[str, bytes]]:
    """A job's steps in the order recorded."""
    if not 0 < job_id <= PG_MAX:
        return []
    rows = connection.execute(
        "SELECT name, data FROM steps WHERE job_id = %s ORDER BY n", (job_id,)
    ).fetchall()
    return [(name, bytes(data)) for name, data in rows]


def select_scheduled(
    connection: psycopg.Connection[Any], key: str | None, limit: int
) -> list[JobInfo]:
    """Scheduled jobs, the earliest due first: the scheduled index."""
    where, parameters = ("", ()) if key is None else (" AND key = %s", (key,))
    rows = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM jobs WHERE state = 'pending' AND seq IS NULL{where}"
        " ORDER BY due_at, id LIMIT %s",
        (*parameters, min(limit, PG_MAX)),
    ).fetchall()
    return [info(row) for row in rows]


_SCHEDULES: Final = ScheduleSQL("schedules", "%s")


def select_schedules(
    connection: psycopg.Connection[Any], after: str, limit: int, name: str | None
) -> list[ScheduleInfo]:
    """Recurring schedules by name, after *after*; or the one named *name*."""
    sql, parameters = (
        _SCHEDULES.listed(after, min(limit, PG_MAX)) if name is None else _SCHEDULES.one(name)
    )
    return [schedule_info(row) for row in connection.execute(sql, parameters).fetchall()]


def select_due_schedules(connection: psycopg.Connection[Any], limit: int) -> list[ScheduleInfo]:
    """Running schedules, the earliest cursor first: the due index."""
    sql, parameters = _SCHEDULES.due(min(limit, PG_MAX))
    return [schedule_info(row) for row in connection.execute(sql, parameters).fetchall()]


def leased_schedules(
    connection: psycopg.Connection[Any], process: int, limit: int
) -> list[ScheduleInfo]:
    """Running schedules fleet member *process* may fire, the earliest cursor first."""
    rows = connection.execute(
        f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE next_at IS NOT NULL"
        " AND (owner IS NULL OR owner = %s OR NOT EXISTS (SELECT 1 FROM processes"
        " WHERE processes.id = schedules.owner AND expires_at > clock_timestamp()))"
        " ORDER BY next_at, name LIMIT %s",
        (process, min(limit, PG_MAX)),
    ).fetchall()
    return [schedule_info(row) for row in rows]


def select_dead_letters(
    connection: psycopg.Connection[Any],
    key: str | None,
    limit: int,
    after: int,
    finished_before: float | None,
) -> list[JobInfo]:
    if after >= PG_MAX:
        return []
    where = "state = 'dead' AND id > %s"
    parameters: list[object] = [after]
    if key is not None:
        where += " AND key = %s"
        parameters.append(key)
    if finished_before is not None:
        where += " AND finished_at < %s"
        parameters.append(finished_before)
    rows = connection.execute(
        f"SELECT {_INFO_COLUMNS} FROM jobs WHERE {where} ORDER BY id LIMIT %s",
        (*parameters, min(limit, PG_MAX)),
    ).fetchall()
    return [info(row) for row in rows]


def select_audit(
    connection: psycopg.Connection[Any],
    after: int,
    before: int | None,
    limit: int,
    key: str | None,
    job_id: int | None,
) -> list[AuditEntry]:
    if after >= PG_MAX or (job_id is not None and job_id > PG_MAX):
        return []
    where, parameters = audit_where(
        after, None if before is None else min(before, PG_MAX), key, job_id, "%s"
    )
    rows = connection.execute(
        f"SELECT {AUDIT_COLUMNS} FROM audit WHERE {where} ORDER BY id DESC LIMIT %s",
        (*parameters, min(limit, PG_MAX)),
    ).fetchall()
    return [audit_entry(row) for row in rows]


# -- the reader ----------------------------------------------------------------


POSTGRES_READS: Final = Dialect(
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
class PostgresReader(DialectReader["psycopg.Connection[Any]"]):
    """Reads a PostgreSQL journal without holding it: the reads of `PostgresJournal`, sync.

    For the ``inturn`` command line and scripts.  Each call connects, reads,
    and closes; it takes no lock, so it works while a supervisor holds the
    journal, and sees what that supervisor has committed.  It never writes and
    creates nothing (but, on a journal of an older version, a temporary view
    of its session): a schema without a journal is an error.

    Every method raises:
        JournalError: the server cannot be reached, or the schema holds no journal.
        JournalCorrupt: the schema holds something else, or a journal of an unknown version.
        TypeError, ValueError: an argument is bad, as for `inturn.Journal`.
    """

    dsn: str = attrs.field(converter=check_dsn)
    schema: str = attrs.field(default="inturn", kw_only=True, converter=check_schema)
    dialect: ClassVar[Dialect[psycopg.Connection[Any]]] = POSTGRES_READS

    def members(self) -> list[MemberInfo]:
        """The fleet's members, the oldest first, expired ones included until the fleet
        forgets them (`MemberInfo`); none for a journal no fleet shares."""
        return self._read(select_members)

    def _read(self, run: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        import psycopg

        name = describe(self.dsn, self.schema)
        connection = connect(self.dsn, self.schema, name)
        try:
            version = schema_version(connection, self.schema, name)
            if version == 0:
                raise JournalError(f"{name}: no journal here (schema {self.schema} is empty)")
            if version < 3:  # an older journal: jobs in id order, halts naming no job
                connection.execute(
                    "CREATE TEMP VIEW halted AS SELECT key, NULL::bigint AS job_id,"
                    f" NULL::text AS error FROM {self.schema}.halted"
                )
                connection.execute(
                    "CREATE TEMP VIEW steps AS SELECT 0::bigint AS job_id, 0 AS n,"
                    " ''::text AS name, ''::bytea AS data WHERE false"
                )
            if version < 4:  # before fleets: no key has an owner
                connection.execute(
                    "CREATE TEMP VIEW keys AS SELECT ''::text AS key, 0::bigint AS owner WHERE false"
                )
            missing = {  # before 3, jobs in id order; before 4, no keyless job has an owner
                1: "id AS seq, NULL::double precision AS due_at, NULL::bigint AS owner, ",
                2: "id AS seq, NULL::double precision AS due_at, NULL::bigint AS owner, ",
                3: "NULL::bigint AS owner, ",
            }.get(version, "")
            if version < TRACED_VERSION:  # and no trace contexts kept
                connection.execute(
                    f"CREATE TEMP VIEW jobs AS SELECT *, {missing}NULL::text AS trace"
                    f" FROM {self.schema}.jobs"
                )
            if version < 8:  # before the audit trail: an empty one
                connection.execute(
                    "CREATE TEMP VIEW audit AS SELECT 0::bigint AS id, 0.0::double precision AS at,"
                    " ''::text AS actor, ''::text AS verb, NULL::bigint AS job_id,"
                    " NULL::text AS key, NULL::boolean AS head,"
                    " NULL::double precision AS older_than, ''::text AS outcome,"
                    " NULL::text AS error, NULL::bigint AS result WHERE false"
                )
            if version < 2:
                connection.execute(
                    "CREATE TEMP VIEW processes AS SELECT 0::bigint AS id, ''::text AS name,"
                    " now() AS started_at, now() AS expires_at, NULL::timestamptz AS renewed_at,"
                    " false AS fleet WHERE false"
                )
            elif version < 9:  # no renewals recorded (and before 4, no fleet)
                fleet = "fleet" if version >= 4 else "false AS fleet"
                connection.execute(
                    "CREATE TEMP VIEW processes AS SELECT id, name, started_at, expires_at,"
                    f" NULL::timestamptz AS renewed_at, {fleet} FROM {self.schema}.processes"
                )
            if version < 10:  # before finished jobs were counted: none
                connection.execute(
                    "CREATE TEMP VIEW finished AS SELECT 0::bigint AS minute, 0 AS writer,"
                    " 0::bigint AS completed, 0::bigint AS discarded WHERE false"
                )
            return run(connection)
        except psycopg.Error as exc:
            raise database_error(name, exc, "read") from exc
        finally:
            connection.close()
