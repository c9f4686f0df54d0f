"""The PostgreSQL layout: the schema, its version, connecting, and how a row becomes a job.

Shared by `PostgresJournal`, which creates the tables, and `PostgresReader`,
which only reads them.  Everything lives in one PostgreSQL schema of inturn's
own (``inturn`` unless told otherwise), so a database can hold several
journals and other applications' tables beside them.

Rows: one per unfinished or discarded job (``state`` pending or dead), as in
the SQLite file; completed jobs are deleted, so the table does not grow with
the number of jobs ever run.  ``uniques`` has a row per reserved unique key,
as in the SQLite file: its primary key makes "check the unique key and take
it" one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` (the reservation ended),
which two writers cannot both win, and it outlives a completed job's row or
a purged dead letter.  (The partial unique index over pending jobs stays, as
a second guard.)  Ids never repeat, even after the newest row is deleted: a
single holder, alone with the ids while it holds the journal, counts them in
memory and records the highest it used in ``meta.high_id`` and in the
``job_ids`` sequence; fleet members and producers (`inturn.enqueue`) take
them from ``job_ids``, which holds no lock until commit (`producers`).  Times are Unix seconds, as the runtime reads them.

The holder's lease: ``processes`` has one row per process incarnation that
opened the journal, with the time (the server's clock) its lease expires;
``processes.id`` names the incarnation within the schema (``keys.owner``,
``meta.owner``), ``processes.incarnation`` (a random UUID the process draws)
across schemas: ids restart with a schema dropped and created again, and a
process left running from before must not take a new incarnation's row for
its own (`renewal_lost`);
``meta.owner`` names the incarnation holding the journal and ``meta.epoch``
counts the takeovers, so a holder that stalled past its lease and woke up
finds another owner or epoch there, and writes nothing (`PostgresJournal`).

``jobs.seq`` is a job's place in its key's sequence (its id, or the number
a `Due` gave it), NULL while the job is scheduled (``due_at`` set).

A fleet (`_postgres_fleet`) adds ``keys``: per key with work, the place of
its newest job, its owner among the members (``processes`` rows with
``fleet`` set) and the epoch of that ownership; ``jobs.owner`` owns a keyless
job; ``meta.fleet_synced`` is false once a single holder wrote, so that the
next member gives its keys their rows.

``meta.version`` is the schema version: 1 had no lease (an advisory lock
held the journal), 2 no ``seq`` and ``due_at``, did not record which job's
discard halted a key (``halted.job_id`` and ``halted.error``) and had no dedup
windows (``jobs.unique_for``, ``uniques``), 3 had no fleet, 4 told
incarnations apart by id only (no ``processes.incarnation``), 5 had no
``job_ids`` and ``unplaced`` (`producers`), 6 had an inbox that took no jobs
to send (``commands.items``, ``commands.data``), 7 had no audit trail
(``audit``, ``commands.actor``: who sent a command), 8 did not record when a
heartbeat was last renewed (``processes.renewed_at``, for `inturn members`), 9 did not
count finished jobs nor index keys by name (``finished``, ``jobs_started``,
``jobs_by_name``, ``halted_by_name``: `Journal.overview`, `keys_by_name`), 10
had no recurring schedules (``schedules``), 11 kept no trace context with a job
(``jobs.trace``); each is upgraded
in place; a schema of a version this code does not know is refused
untouched, with the version in the message.

psycopg is an extra (``pip install 'inturn[postgres]'``): it is imported here,
when a journal first connects, never by ``import inturn``.
"""

from __future__ import annotations

import datetime
import re
import uuid
from typing import TYPE_CHECKING, Any, Final

from ..errors import JournalCorrupt, JournalError, JournalGone, LeaseLost
from ._reads import stored

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "stored",
    "COLUMNS",
    "PG_MAX",
    "SCHEMA_VERSION",
    "TRACED_VERSION",
    "STARTED",
    "HIGH_ID",
    "producers",
    "check_dsn",
    "check_schema",
    "connect",
    "database_error",
    "describe",
    "ensure_schema",
    "interval",
    "one_row",
    "lock_id",
    "renewal_lost",
    "schema_version",
    "unregister",
]

SCHEMA_VERSION: Final = 12

_TABLES: Final = """
CREATE TABLE meta (
    version integer NOT NULL,
    high_id bigint NOT NULL DEFAULT 0,
    owner bigint,
    epoch bigint NOT NULL DEFAULT 0,
    token bigint,
    fleet_synced boolean NOT NULL DEFAULT true
);
CREATE TABLE processes (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL,
    renewed_at timestamptz DEFAULT clock_timestamp(),
    fleet boolean NOT NULL DEFAULT false,
    token bigint,
    incarnation uuid
);
CREATE TABLE jobs (
    id bigint PRIMARY KEY,
    key text,
    unique_key text,
    data bytea NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
    error text,
    accepted_at double precision NOT NULL,
    finished_at double precision,
    retry_at double precision,
    stopped_during integer,
    unique_for double precision,
    seq bigint,
    due_at double precision,
    owner bigint,
    trace text
);
CREATE UNIQUE INDEX jobs_unique_pending ON jobs (unique_key)
    WHERE state = 'pending' AND unique_key IS NOT NULL;
CREATE TABLE uniques (unique_key text PRIMARY KEY, job_id bigint NOT NULL, until double precision);
CREATE TABLE steps (
    job_id bigint NOT NULL,
    n integer NOT NULL,
    name text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (job_id, name)
);
CREATE INDEX uniques_until ON uniques (until) WHERE until IS NOT NULL;
CREATE INDEX jobs_queued ON jobs (key, seq) WHERE state = 'pending' AND seq IS NOT NULL;
CREATE INDEX jobs_scheduled ON jobs (due_at, id) WHERE state = 'pending' AND seq IS NULL;
CREATE INDEX jobs_dead ON jobs (id) WHERE state = 'dead';
CREATE INDEX jobs_dead_by_key ON jobs (key, id) WHERE state = 'dead';
CREATE TABLE halted (key text PRIMARY KEY, job_id bigint, error text);
CREATE TABLE commands (
    id bigserial PRIMARY KEY,
    verb text NOT NULL,
    job_id bigint,
    key text,
    older_than double precision,
    submitted_at double precision NOT NULL,
    taken_at double precision,
    answered_at double precision,
    answer text,
    items text,
    data bytea,
    actor text
);
"""

_AUDIT: Final = """
CREATE TABLE audit (
    id bigserial PRIMARY KEY,
    at double precision NOT NULL,
    actor text NOT NULL,
    verb text NOT NULL,
    job_id bigint,
    key text,
    head boolean,
    older_than double precision,
    outcome text NOT NULL,
    error text,
    result bigint
);
CREATE INDEX audit_by_key ON audit (key, id) WHERE key IS NOT NULL;
CREATE INDEX audit_by_job ON audit (job_id, id) WHERE job_id IS NOT NULL;
"""
"""The operators' audit trail (version 8): one row per fix (`Audit`), the newest kept."""

_DASHBOARD_SQL: Final = """
CREATE TABLE finished (
    minute bigint NOT NULL,
    writer integer NOT NULL,
    completed bigint NOT NULL,
    discarded bigint NOT NULL,
    PRIMARY KEY (minute, writer)
);
CREATE INDEX jobs_started ON jobs (key COLLATE "C", seq) WHERE {started};
CREATE INDEX jobs_by_name ON jobs (key COLLATE "C") WHERE state = 'pending' AND seq IS NOT NULL;
CREATE INDEX halted_by_name ON halted (key COLLATE "C");
"""
"""What `Journal.overview` and `keys_by_name` read (version 10): jobs finished per minute
and per writer (a server process: ``pg_backend_pid()``), so fleet members never update
one row, summed as they are read; the jobs an attempt started (`STARTED`: few); and
keys in code-point order (``COLLATE "C"``) for pages of keys by name."""

STARTED: Final = "state = 'pending' AND (attempts > 0 OR retry_at IS NOT NULL)"
"""Pending jobs an attempt started (or a `Retrying` dated): the rows of ``jobs_started``."""

_DASHBOARD: Final = _DASHBOARD_SQL.format(started=STARTED)
_SCHEDULES: Final = """
CREATE TABLE schedules (
    name text PRIMARY KEY,
    key text,
    data bytea NOT NULL,
    cron text,
    every double precision,
    tz text NOT NULL,
    start double precision NOT NULL,
    misfire text NOT NULL,
    unique_for double precision,
    next_at double precision,
    last_tick double precision,
    owner bigint
);
CREATE INDEX schedules_due ON schedules (next_at, name) WHERE next_at IS NOT NULL;
"""
"""Recurring schedules (`_sql_schedules`); ``owner`` is the fleet member holding a schedule's
lease (`_postgres_apply`)."""

_FLEET: Final = """
CREATE TABLE keys (
    key text PRIMARY KEY,
    last_place bigint NOT NULL DEFAULT 0,
    owner bigint,
    epoch bigint NOT NULL DEFAULT 0
);
CREATE INDEX keys_claimable ON keys (key) WHERE owner IS NULL;
CREATE INDEX keys_owned ON keys (owner) WHERE owner IS NOT NULL;
CREATE SEQUENCE epochs;
CREATE INDEX jobs_keyless_claimable ON jobs (seq)
    WHERE key IS NULL AND state = 'pending' AND seq IS NOT NULL AND owner IS NULL;
CREATE INDEX jobs_keyless_owned ON jobs (owner) WHERE key IS NULL AND owner IS NOT NULL;
"""
"""Fleet mode's tables (version 4): who owns each key with work, and the fencing epochs."""


def producers(schema: str) -> str:
    """What `inturn.enqueue` needs (version 6, `_postgres_enqueue`): ids from a sequence, and places taken at COMMIT.

    ``job_ids`` hands out the ids of members' blocks and of enqueued jobs:
    ``nextval`` holds no lock until its transaction ends, so a caller's long
    transaction that took an id blocks no member (``meta.high_id`` was a row
    lock).  A single holder, alone while it holds the journal, keeps it at
    ``meta.high_id`` as it commits (``setval``), so whoever takes ids after it
    starts above every id it used.

    ``unplaced`` lists the keyed jobs a transaction enqueued, and the
    deferred trigger on it gives them their places at COMMIT, under their
    keys' row locks taken in key order (as a member's group commit takes
    them): the key's row is locked only for the commit, so places rise in
    commit order, and a caller's open transaction stalls no member.  The
    function runs with the journal's own search path, whatever the caller's.
    """
    return f"""
CREATE SEQUENCE job_ids;
CREATE TABLE unplaced (job_id bigint PRIMARY KEY, key text NOT NULL);
CREATE FUNCTION place_enqueued() RETURNS trigger LANGUAGE plpgsql SET search_path = "{schema}" AS $$
DECLARE
    job record;
    placed bigint;
    unowned boolean;
    wake boolean := false;
BEGIN
    -- The first firing of a transaction places all its jobs; the later ones find none.
    IF NOT EXISTS (SELECT 1 FROM unplaced) THEN
        RETURN NULL;
    END IF;
    INSERT INTO keys (key) SELECT key FROM (SELECT DISTINCT key FROM unplaced) AS enqueued
        ORDER BY key COLLATE "C" ON CONFLICT (key) DO UPDATE SET last_place = keys.last_place;
    FOR job IN SELECT job_id, key FROM unplaced ORDER BY job_id LOOP
        UPDATE keys SET last_place = GREATEST(last_place + 1, job.job_id) WHERE key = job.key
            RETURNING last_place, owner IS NULL INTO placed, unowned;
        UPDATE jobs SET seq = placed WHERE id = job.job_id AND state = 'pending' AND seq IS NULL;
        wake := wake OR unowned;
    END LOOP;
    DELETE FROM unplaced;
    IF wake THEN
        PERFORM pg_notify('inturn', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER place_enqueued AFTER INSERT ON unplaced
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION place_enqueued();
"""


ISSUED: Final = "(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM job_ids)"
"""The highest id ``job_ids`` has handed out (0 if none)."""

HIGH_ID: Final = f"SELECT GREATEST(high_id, {ISSUED}) FROM meta"
"""The highest id ever used, by a single holder (``meta.high_id``) or from ``job_ids``."""

_MEMBERS_VERSION: Final = 8
"""The step (from version 8 to 9) that records heartbeats' renewals (``processes.renewed_at``):
named, so the version numbers can be renumbered at a merge without touching it."""

_DASHBOARD_VERSION: Final = 9
"""The step (from version 9 to 10) that counts finished jobs (``finished``) and indexes keys
by name (`_DASHBOARD`)."""

_SCHEDULES_VERSION: Final = 10
"""The step (from version 10 to 11) that adds recurring schedules: named, so the version
numbers can be renumbered at a merge without touching it."""

_TRACES_VERSION: Final = 11
"""The step (from version 11 to 12) that keeps each job's trace context (``jobs.trace``): named,
so the version numbers can be renumbered at a merge without touching it."""

TRACED_VERSION: Final = _TRACES_VERSION + 1
"""The first version that keeps each job's trace context: a reader reads it as NULL before."""

_UPGRADES: Final = {
    1: (
        "ALTER TABLE meta ADD COLUMN owner bigint, ADD COLUMN epoch bigint NOT NULL DEFAULT 0,"
        " ADD COLUMN token bigint",
        "CREATE TABLE processes (id bigserial PRIMARY KEY, name text NOT NULL,"
        " started_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
        " expires_at timestamptz NOT NULL)",
    ),
    2: (  # version 3: what halted a key; dedup windows; places and due times
        "ALTER TABLE jobs ADD COLUMN unique_for double precision, ADD COLUMN seq bigint,"
        " ADD COLUMN due_at double precision",
        "UPDATE jobs SET seq = id",  # every job so far runs in id order
        "DROP INDEX IF EXISTS jobs_pending_by_key",
        "CREATE INDEX jobs_queued ON jobs (key, seq) WHERE state = 'pending' AND seq IS NOT NULL",
        "CREATE INDEX jobs_scheduled ON jobs (due_at, id) WHERE state = 'pending' AND seq IS NULL",
        "ALTER TABLE halted ADD COLUMN job_id bigint, ADD COLUMN error text",
        "CREATE TABLE uniques (unique_key text PRIMARY KEY, job_id bigint NOT NULL,"
        " until double precision)",
        "CREATE INDEX uniques_until ON uniques (until) WHERE until IS NOT NULL",
        "CREATE TABLE steps (job_id bigint NOT NULL, n integer NOT NULL, name text NOT NULL,"
        " data bytea NOT NULL, PRIMARY KEY (job_id, name))",
        "INSERT INTO uniques (unique_key, job_id) SELECT unique_key, id FROM jobs"
        " WHERE state = 'pending' AND unique_key IS NOT NULL",
    ),
    3: (  # version 4: fleet mode
        "ALTER TABLE meta ADD COLUMN fleet_synced boolean NOT NULL DEFAULT false",
        "ALTER TABLE processes ADD COLUMN fleet boolean NOT NULL DEFAULT false,"
        " ADD COLUMN token bigint",
        "ALTER TABLE jobs ADD COLUMN owner bigint",
        *(statement for statement in _FLEET.split(";") if statement.strip()),
    ),
    4: (  # version 5: an incarnation's identity outlives no schema
        "ALTER TABLE processes ADD COLUMN incarnation uuid",
    ),
    # (5: version 6, transactional enqueue: `_PRODUCERS_VERSION`, below)
    6: (  # version 7, `Operator.send`: the inbox takes jobs to send (`_sent`)
        "ALTER TABLE commands ADD COLUMN items text, ADD COLUMN data bytea",
    ),
    7: (  # version 8: the operators' audit trail, and who sent each command
        "ALTER TABLE commands ADD COLUMN actor text",
        *(statement for statement in _AUDIT.split(";") if statement.strip()),
    ),
    _MEMBERS_VERSION: (  # version 9, `inturn members`: when each heartbeat was last renewed
        "ALTER TABLE processes ADD COLUMN renewed_at timestamptz DEFAULT clock_timestamp()",
        "UPDATE processes SET renewed_at = NULL",  # unknown until the next renewal
    ),
    _DASHBOARD_VERSION: tuple(  # version 10: what the dashboard reads
        statement for statement in _DASHBOARD.split(";") if statement.strip()
    ),
    _SCHEDULES_VERSION: tuple(  # version 11: recurring schedules
        statement for statement in _SCHEDULES.split(";") if statement.strip()
    ),
    _TRACES_VERSION: ("ALTER TABLE jobs ADD COLUMN trace text",),  # version 12
}

_PRODUCERS_VERSION: Final = 5
"""The step (from version 5 to 6) that adds `producers` (transactional enqueue): a step of its
own, so the version numbers can be renumbered at a merge without touching it."""

"""What turns each version into the next."""

_TABLES_ADDED: Final = {
    2: {"processes"},
    3: {"uniques", "steps"},
    4: {"keys"},
    _PRODUCERS_VERSION + 1: {"unplaced"},
    8: {"audit"},
    _DASHBOARD_VERSION + 1: {"finished"},
    _SCHEDULES_VERSION + 1: {"schedules"},
}
"""The tables each version added: a schema of an older version has none of them."""

COLUMNS: Final = "id, key, unique_key, data, attempts, error, retry_at, seq, due_at, trace"

PG_MAX: Final = 2**63 - 1
"""The largest bigint: no id is above it, and a larger limit means no limit."""

_CREATE_LOCK: Final = 0x696E7463  # "intc": held while a schema is checked or created
_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_dsn(dsn: object) -> str:
    if not isinstance(dsn, str):
        raise TypeError(f"dsn must be a str, not {type(dsn).__name__}")
    if not dsn:
        raise ValueError("dsn must not be empty (use 'postgresql://...' or 'host=... dbname=...')")
    return dsn


def check_schema(schema: object) -> str:
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a str, not {type(schema).__name__}")
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValueError(
            "schema must be 1-63 lowercase letters, digits and underscores, not starting with"
            f" a digit or 'pg_', not {schema!r}"
        )
    return schema


def describe(dsn: str, schema: str) -> str:
    """How messages name a journal: its server, database and schema, never a password."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover (the test environment has the extra)
        return f"postgresql (schema {schema})"
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:  # a malformed DSN: connecting will say what is wrong
        return f"postgresql (schema {schema})"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    database = parts.get("dbname") or parts.get("user") or ""
    return f"postgresql://{host}:{port}/{database} (schema {schema})"


def lock_id(schema: str) -> str:
    """SQL for the advisory lock (two ints) held while *schema* is checked or created."""
    return f"{_CREATE_LOCK}, hashtext('{schema}')"


def connect(
    dsn: str, schema: str, name: str, *, idle_in_transaction: float | None = None
) -> psycopg.Connection[Any]:
    """A connection in autocommit mode whose search path is *schema* alone.

    With *idle_in_transaction* (seconds), the server ends the session when a
    transaction of it waits that long for its next statement: a process
    stalled inside one (SIGSTOP, a pause of the machine) holds its row locks
    no longer than that.
    """
    try:
        import psycopg
    except ImportError:  # pragma: no cover (the test environment has the extra)
        raise JournalError(
            "PostgresJournal needs psycopg 3: pip install 'inturn[postgres]'"
        ) from None
    try:
        # Operators find inturn's sessions in pg_stat_activity by this name,
        # unless the DSN chose another.
        if "application_name" not in psycopg.conninfo.conninfo_to_dict(dsn):
            dsn = psycopg.conninfo.make_conninfo(dsn, application_name=f"inturn:{schema}")
        connection = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise JournalError(f"{name}: cannot connect: {_first_line(exc)}") from exc
    try:
        connection.execute(f"SET search_path TO {schema}")
        if idle_in_transaction is not None:
            milliseconds = max(1, round(idle_in_transaction * 1000))
            connection.execute(f"SET idle_in_transaction_session_timeout = {milliseconds:d}")
    except psycopg.Error as exc:
        connection.close()
        raise database_error(name, exc, "connect") from exc
    return connection


def schema_version(connection: psycopg.Connection[Any], schema: str, name: str) -> int:
    """The journal version in *schema*, or 0 if the schema is missing or empty.

    Raises:
        JournalCorrupt: the schema holds other tables, or a journal of a version
            this code does not know.
    """
    tables = {
        row[0]
        for row in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
    }
    if not tables:
        return 0
    if not {"meta", "jobs", "halted", "commands"} <= tables:
        raise JournalCorrupt(name, "not an inturn journal (the schema has other tables)")
    row = connection.execute("SELECT version FROM meta").fetchone()
    version = None if row is None else row[0]
    if version == SCHEMA_VERSION or (
        version in (*_UPGRADES, _PRODUCERS_VERSION)
        and not any(tables & added for since, added in _TABLES_ADDED.items() if since > version)
    ):
        return int(version)
    raise JournalCorrupt(
        name,
        f"unknown schema version {version} (this inturn reads versions 1 to {SCHEMA_VERSION})",
    )


def ensure_schema(connection: psycopg.Connection[Any], schema: str, name: str) -> None:
    """Create *schema* and its tables if missing, or upgrade them; refuse a foreign or unknown one.

    One transaction: a crash leaves the schema as it was.
    """
    import psycopg

    try:
        with connection.transaction():
            # Two processes creating one schema at once: one creates, one waits.
            connection.execute(f"SELECT pg_advisory_xact_lock({lock_id(schema)})")
            version = schema_version(connection, schema, name)
            if version == 0:
                connection.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                connection.execute(_TABLES)
                connection.execute(_AUDIT)
                connection.execute(_SCHEDULES)
                connection.execute(_FLEET)
                connection.execute(_DASHBOARD)
                connection.execute(producers(schema))
                connection.execute("INSERT INTO meta (version) VALUES (%s)", (SCHEMA_VERSION,))
            for step in range(version or SCHEMA_VERSION, SCHEMA_VERSION):
                if step == _PRODUCERS_VERSION:
                    # ids from here on start above every id used so far
                    connection.execute(producers(schema))
                    connection.execute(
                        "SELECT setval('job_ids', GREATEST(high_id, 1), high_id > 0) FROM meta"
                    )
                for statement in _UPGRADES.get(step, ()):
                    connection.execute(statement)
                connection.execute("UPDATE meta SET version = %s", (step + 1,))
    except psycopg.Error as exc:
        raise database_error(name, exc, "open") from exc


def one_row(
    connection: psycopg.Connection[Any], sql: str, parameters: tuple[object, ...] = ()
) -> tuple[Any, ...]:
    """The one row *sql* returns."""
    row = connection.execute(sql, parameters).fetchone()
    assert row is not None, sql
    return tuple(row)


def renewal_lost(
    connection: psycopg.Connection[Any], process: int, incarnation: uuid.UUID, name: str
) -> LeaseLost:
    """Why the renewal of incarnation (*process*, *incarnation*) found no row of its own.

    A row with its id but another incarnation is a new process's in a schema
    dropped and created again since (ids restart with it): `JournalGone`.
    No row at all is an incarnation whose lease ran out and was forgotten, or
    a schema created again that has not reached its id: `LeaseLost`.
    """
    row = connection.execute(
        "SELECT incarnation FROM processes WHERE id = %s", (process,)
    ).fetchone()
    return LeaseLost(name) if row is None or row[0] == incarnation else JournalGone(name)


def unregister(connection: psycopg.Connection[Any], process: int, incarnation: uuid.UUID) -> bool:
    """Forget incarnation (*process*, *incarnation*) as it leaves: whether its row was there.

    Not there, what it held is another's (it was forgotten, or its schema
    created again), and it gives nothing back.
    """
    return (
        connection.execute(
            "DELETE FROM processes WHERE id = %s AND incarnation = %s", (process, incarnation)
        ).rowcount
        == 1
    )


def interval(seconds: float) -> datetime.timedelta:
    """*seconds* as the server's interval type."""
    return datetime.timedelta(seconds=seconds)


def database_error(name: str, exc: Exception, doing: str) -> JournalError:
    """The inturn error for a psycopg failure, on one line."""
    return JournalError(f"{name}: {doing} failed: {_first_line(exc)}")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
