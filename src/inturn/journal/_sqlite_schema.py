"""The SQLite file format: the schema, its versions, and how a row becomes a job.

Shared by `SQLiteJournal`, which creates and upgrades files, and
`SQLiteReader`, which only reads them, with the few helpers both need on a
connection (checking the path, rolling back, naming an SQLite failure).

Rows: one per unfinished or discarded job (``state`` pending or dead);
completed jobs are deleted, so the file does not grow with the number of jobs
ever run.  A job without a unique key completed in a small commit is first
marked (``completed_at``) and deleted later, with others, by its journal:
marking writes one B-tree page, the row's, where a delete writes the
queued-by-key index's page too, a third of the cost of a commit of one
completion.  A marked row is a completed job to every reader.

``inturn_uniques`` has a row per reserved unique key: its holder, and
(once that job finished, with a ``unique_for`` window) the Unix time it is
reserved until.  Its primary key makes "check the unique key and take it"
one statement (an upsert that takes over only an ended reservation), and
outlives the deleted row of a completed job or a purged dead letter; ended
reservations are deleted as they are taken over, and a few at each commit.
(The partial unique index over pending jobs stays, as a second guard.)  ``AUTOINCREMENT`` records the highest id
ever used, so ids never repeat even after the newest row is deleted.

``seq`` is a job's place in its key's sequence (its id, or the number a
`Due` gave it), NULL while the job is scheduled (``due_at`` set).

Names: every table and index inturn makes begins with ``inturn_`` (`PREFIX`),
a prefix it reserves, so the user's own tables can live in the same file (a
transactional step writes them on the journal's connection): a user's
``jobs``, ``keys`` or ``steps`` never meets inturn's.  inturn never reads,
writes or checks a table it did not make, except that the file's
``PRAGMA user_version`` is inturn's: a database with user tables, no table of
inturn's and user_version 0 is a new journal, and one with another
user_version is refused.  A trigger on one of inturn's tables is refused (it
would run inside inturn's writes); the user's tables may have their own.

Schema versions (``PRAGMA user_version``): 1 had no ``retry_at``, 2 no
``stopped_during`` and no ``commands`` (the operators' inbox, `_sqlite_inbox`); 3 had
no ``seq`` and ``due_at``, did not record which job's discard halted a key
(``halted.job_id`` and ``halted.error``, read as NULL for its halts) and had
no dedup windows (``jobs.unique_for``, ``uniques``: filled from its unfinished
jobs); 4 had no ``completed_at``; 5 named its tables and indexes without the
prefix (``jobs``, ``uniques``, ``steps``, ``halted``, ``commands``), and its
inbox took no jobs to send (``commands.items`` and ``commands.data``); 6 had no
audit trail (``inturn_audit``, and ``inturn_commands.actor``: who sent a command); 7 did
not count finished jobs (``inturn_finished``: completions and discards per minute, for
`Journal.overview`, written in the commits that delete completed rows or discard jobs);
8 had no recurring schedules (``inturn_schedules``); 9 kept no trace context with a job
(``inturn_jobs.trace``, read as NULL for older files' jobs).
`SQLiteJournal.open` upgrades them in one transaction (version 6 renames the
tables, which carries their rows, their ``sqlite_sequence`` row and SQLite's
own indexes along, and makes inturn's indexes again under their new names).
Any other version is refused untouched.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from typing import Final

from ..errors import JournalCorrupt, JournalError
from ._reads import stored
from ._transactions import COMMIT, ROLLBACK

__all__ = [
    "stored",
    "COLUMNS",
    "INDEXES",
    "LIVE_JOBS",
    "LIVE_UNTRACED_JOBS",
    "TRACED_VERSION",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SQLITE_MAX",
    "STARTED",
    "check_path",
    "database_error",
    "rollback",
    "schema_version",
    "upgrade",
]

SCHEMA_VERSION: Final = 10

PREFIX: Final = "inturn_"
"""What the name of every table and index inturn makes begins with: reserved."""

SCHEMA: Final = """
CREATE TABLE inturn_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT,
    unique_key TEXT,
    data BLOB NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'dead')),
    error TEXT,
    accepted_at REAL NOT NULL,
    finished_at REAL,
    retry_at REAL,
    stopped_during INTEGER,
    unique_for REAL,
    seq INTEGER,
    due_at REAL,
    completed_at REAL,
    trace TEXT
);
CREATE UNIQUE INDEX inturn_jobs_unique_pending ON inturn_jobs (unique_key)
    WHERE state = 'pending' AND unique_key IS NOT NULL;
CREATE TABLE inturn_uniques (unique_key TEXT PRIMARY KEY, job_id INTEGER NOT NULL, until REAL);
CREATE TABLE inturn_steps (
    job_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (job_id, name)
);
CREATE TABLE inturn_halted (key TEXT PRIMARY KEY, job_id INTEGER, error TEXT);
CREATE TABLE inturn_commands (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    verb TEXT NOT NULL,
    job_id INTEGER,
    key TEXT,
    older_than REAL,
    submitted_at REAL NOT NULL,
    taken_at REAL,
    answered_at REAL,
    answer TEXT,
    items TEXT,
    data BLOB,
    actor TEXT
);
CREATE TABLE inturn_audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    verb TEXT NOT NULL,
    job_id INTEGER,
    key TEXT,
    head INTEGER,
    older_than REAL,
    outcome TEXT NOT NULL,
    error TEXT,
    result INTEGER
);
CREATE TABLE inturn_finished (
    minute INTEGER PRIMARY KEY,
    completed INTEGER NOT NULL,
    discarded INTEGER NOT NULL
);
CREATE TABLE inturn_schedules (
    name TEXT PRIMARY KEY,
    key TEXT,
    data BLOB NOT NULL,
    cron TEXT,
    every REAL,
    tz TEXT NOT NULL,
    start REAL NOT NULL,
    misfire TEXT NOT NULL,
    unique_for REAL,
    next_at REAL,
    last_tick REAL
);
"""

_Column = tuple[str, str, bool, bool]
"""A column as inturn creates it: name, declared type, NOT NULL, primary key."""

_JOBS: Final[tuple[_Column, ...]] = (
    ("id", "INTEGER", False, True),
    ("key", "TEXT", False, False),
    ("unique_key", "TEXT", False, False),
    ("data", "BLOB", True, False),
    ("attempts", "INTEGER", True, False),
    ("state", "TEXT", True, False),
    ("error", "TEXT", False, False),
    ("accepted_at", "REAL", True, False),
    ("finished_at", "REAL", False, False),
    ("retry_at", "REAL", False, False),  # version 2
    ("stopped_during", "INTEGER", False, False),  # version 3
    ("unique_for", "REAL", False, False),  # version 4
    ("seq", "INTEGER", False, False),  # version 4
    ("due_at", "REAL", False, False),  # version 4
    ("completed_at", "REAL", False, False),  # version 5
    ("trace", "TEXT", False, False),  # version 10
)
_HALTED: Final[tuple[_Column, ...]] = (
    ("key", "TEXT", False, True),
    ("job_id", "INTEGER", False, False),  # version 4
    ("error", "TEXT", False, False),  # version 4
)
_UNIQUES: Final[tuple[_Column, ...]] = (  # version 4
    ("unique_key", "TEXT", False, True),
    ("job_id", "INTEGER", True, False),
    ("until", "REAL", False, False),
)
_STEPS: Final[tuple[_Column, ...]] = (  # version 4
    ("job_id", "INTEGER", True, True),
    ("n", "INTEGER", True, False),
    ("name", "TEXT", True, True),
    ("data", "BLOB", True, False),
)
_COMMANDS: Final[tuple[_Column, ...]] = (
    ("id", "INTEGER", False, True),
    ("verb", "TEXT", True, False),
    ("job_id", "INTEGER", False, False),
    ("key", "TEXT", False, False),
    ("older_than", "REAL", False, False),
    ("submitted_at", "REAL", True, False),
    ("taken_at", "REAL", False, False),
    ("answered_at", "REAL", False, False),
    ("answer", "TEXT", False, False),
    ("items", "TEXT", False, False),  # version 6: what a send sends (`_sent`)
    ("data", "BLOB", False, False),  # version 6
    ("actor", "TEXT", False, False),  # version 7: who sent it, for the audit trail
)
_AUDIT: Final[tuple[_Column, ...]] = (  # version 7
    ("id", "INTEGER", False, True),
    ("at", "REAL", True, False),
    ("actor", "TEXT", True, False),
    ("verb", "TEXT", True, False),
    ("job_id", "INTEGER", False, False),
    ("key", "TEXT", False, False),
    ("head", "INTEGER", False, False),
    ("older_than", "REAL", False, False),
    ("outcome", "TEXT", True, False),
    ("error", "TEXT", False, False),
    ("result", "INTEGER", False, False),
)

_FINISHED: Final[tuple[_Column, ...]] = (  # version 8
    ("minute", "INTEGER", False, True),
    ("completed", "INTEGER", True, False),
    ("discarded", "INTEGER", True, False),
)

_SCHEDULES: Final[tuple[_Column, ...]] = (  # version 9
    ("name", "TEXT", False, True),
    ("key", "TEXT", False, False),
    ("data", "BLOB", True, False),
    ("cron", "TEXT", False, False),
    ("every", "REAL", False, False),
    ("tz", "TEXT", True, False),
    ("start", "REAL", True, False),
    ("misfire", "TEXT", True, False),
    ("unique_for", "REAL", False, False),
    ("next_at", "REAL", False, False),
    ("last_tick", "REAL", False, False),
)

_TRACES_VERSION: Final = 9
"""The step (from version 9 to 10) that keeps each job's trace context (``inturn_jobs.trace``):
named, so the version numbers can be renumbered at a merge without touching it."""
TRACED_VERSION: Final = _TRACES_VERSION + 1
"""The first version that keeps each job's trace context: older files read it as NULL."""

_TABLES_OF_VERSION: Final[dict[int, dict[str, tuple[_Column, ...]]]] = {
    1: {"jobs": _JOBS[:9], "halted": _HALTED[:1]},
    2: {"jobs": _JOBS[:10], "halted": _HALTED[:1]},
    3: {"jobs": _JOBS[:11], "halted": _HALTED[:1], "commands": _COMMANDS[:9]},
    4: {
        "jobs": _JOBS[:14],
        "halted": _HALTED,
        "commands": _COMMANDS[:9],
        "uniques": _UNIQUES,
        "steps": _STEPS,
    },
    5: {
        "jobs": _JOBS[:15],
        "halted": _HALTED,
        "commands": _COMMANDS[:9],
        "uniques": _UNIQUES,
        "steps": _STEPS,
    },
    6: {  # every name under the prefix
        "inturn_jobs": _JOBS[:15],
        "inturn_halted": _HALTED,
        "inturn_commands": _COMMANDS[:11],
        "inturn_uniques": _UNIQUES,
        "inturn_steps": _STEPS,
    },
    7: {  # the operators' audit trail
        "inturn_jobs": _JOBS[:15],
        "inturn_halted": _HALTED,
        "inturn_commands": _COMMANDS,
        "inturn_uniques": _UNIQUES,
        "inturn_steps": _STEPS,
        "inturn_audit": _AUDIT,
    },
    8: {  # jobs finished per minute, for `Journal.overview`
        "inturn_jobs": _JOBS[:15],
        "inturn_halted": _HALTED,
        "inturn_commands": _COMMANDS,
        "inturn_uniques": _UNIQUES,
        "inturn_steps": _STEPS,
        "inturn_audit": _AUDIT,
        "inturn_finished": _FINISHED,
    },
    9: {  # recurring schedules
        "inturn_jobs": _JOBS[:15],
        "inturn_halted": _HALTED,
        "inturn_commands": _COMMANDS,
        "inturn_uniques": _UNIQUES,
        "inturn_steps": _STEPS,
        "inturn_audit": _AUDIT,
        "inturn_finished": _FINISHED,
        "inturn_schedules": _SCHEDULES,
    },
    _TRACES_VERSION + 1: {  # the trace context each job was sent in
        "inturn_jobs": _JOBS,
        "inturn_halted": _HALTED,
        "inturn_commands": _COMMANDS,
        "inturn_uniques": _UNIQUES,
        "inturn_steps": _STEPS,
        "inturn_audit": _AUDIT,
        "inturn_finished": _FINISHED,
        "inturn_schedules": _SCHEDULES,
    },
}
"""The tables of each schema version this code reads, column by column: a
file that has them reads as inturn expects, while a view or another type
could hang a query or hand back values no reader converts."""

_HEADER: Final = b"SQLite format 3\x00"
"""How every SQLite database file begins."""

STARTED: Final = "state = 'pending' AND (attempts > 0 OR retry_at IS NOT NULL)"
"""Pending jobs an attempt started (or a `Retrying` dated): the started index's rows.  A
row marked completed is always one (`_sqlite_apply._COMPLETE` marks no other), so the
reads find the marked rows there and count around them without the table."""

INDEXES: Final = (
    # `load`, recovery, and the heads of keys (`keys`): jobs in their sequences
    "CREATE INDEX IF NOT EXISTS inturn_jobs_queued ON inturn_jobs (key, seq)"
    " WHERE state = 'pending' AND seq IS NOT NULL",
    # scheduled jobs, the earliest due first
    "CREATE INDEX IF NOT EXISTS inturn_jobs_scheduled ON inturn_jobs (due_at, id)"
    " WHERE state = 'pending' AND seq IS NULL",
    # `dead_letters`, with and without a key
    "CREATE INDEX IF NOT EXISTS inturn_jobs_dead ON inturn_jobs (id) WHERE state = 'dead'",
    # `overview` and `keys_by_name`: the jobs an attempt started (running or retrying
    # heads, and the rows marked completed: `STARTED`), few where the jobs are many
    f"CREATE INDEX IF NOT EXISTS inturn_jobs_started ON inturn_jobs (key, seq) WHERE {STARTED}",
    "CREATE INDEX IF NOT EXISTS inturn_jobs_dead_by_key ON inturn_jobs (key, id)"
    " WHERE state = 'dead'",
    # reservations that end, to delete them once they have
    "CREATE INDEX IF NOT EXISTS inturn_uniques_until ON inturn_uniques (until)"
    " WHERE until IS NOT NULL",
    # the audit trail of a key, or of a job
    "CREATE INDEX IF NOT EXISTS inturn_audit_by_key ON inturn_audit (key, id)"
    " WHERE key IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS inturn_audit_by_job ON inturn_audit (job_id, id)"
    " WHERE job_id IS NOT NULL",
    # running schedules, the earliest cursor first
    "CREATE INDEX IF NOT EXISTS inturn_schedules_due ON inturn_schedules (next_at, name)"
    " WHERE next_at IS NOT NULL",
)
"""Created on open if missing, as files made by earlier versions lack some;
an index changes no row, so it needs no version bump."""

LIVE_JOBS: Final = (
    "CREATE TEMP VIEW inturn_jobs AS SELECT * FROM main.inturn_jobs"
    " WHERE completed_at IS NULL OR state <> 'pending'"
)
"""The jobs table as the reads see it, without the rows marked completed and not deleted
yet; it shadows the table by name on a connection of a version-6 file (``temp.inturn_jobs``
over ``main.inturn_jobs``), so what writes says ``main.inturn_jobs``."""
LIVE_UNTRACED_JOBS: Final = LIVE_JOBS.replace("SELECT *", "SELECT *, NULL AS trace")
"""`LIVE_JOBS` of a file of a version that kept no trace context (before 10): read as NULL."""

COLUMNS: Final = (
    "id, CAST(key AS TEXT), CAST(unique_key AS TEXT), CAST(data AS BLOB),"
    " CAST(attempts AS INTEGER), CAST(error AS TEXT), CAST(retry_at AS REAL),"
    " CAST(seq AS INTEGER), CAST(due_at AS REAL), CAST(trace AS TEXT)"
)
"""The columns of a `StoredJob`.  Cast, as a declared type only prefers a type
(SQLite stores text in a BLOB column): a hand-made row still reads as the types
`stored` expects."""

SQLITE_MAX: Final = 2**63 - 1
"""The largest integer SQLite stores: no id is above it, and a larger limit
means no limit."""


def check_path(path: str | os.PathLike[str]) -> str:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or an os.PathLike, not {type(path).__name__}")
    return os.fspath(path)


def rollback(connection: sqlite3.Connection) -> None:
    # If even this fails, closing the connection rolls back.
    if connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.execute(ROLLBACK)


def schema_version(connection: sqlite3.Connection, path: str) -> int:
    """The schema version of the journal at *path* on *connection*, or 0 for a new one.

    A new journal is an empty file, or an SQLite database of user_version 0
    holding nothing under inturn's prefix (the user's own tables may be there).
    Objects other than inturn's are the user's and are not looked at, but for
    a trigger on one of inturn's tables.

    Raises:
        JournalCorrupt: the file is something else, or has inturn's tables
            with other columns, as views, or with triggers.
        JournalError: the file cannot be read.
        sqlite3.Error: the database cannot be read.
    """
    try:
        with open(path, "rb") as file:
            header = file.read(len(_HEADER))
    except OSError as exc:
        raise JournalError(f"{path}: cannot read: {exc}") from exc
    # SQLite's Unix VFS reports a 1-byte file as empty and would write a
    # database over it: only a file with no bytes at all is new.
    if header and header != _HEADER:
        raise JournalCorrupt(path, "not an SQLite database")
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    # SQLite's names are case-insensitive: ``JOBS`` is the table ``jobs``.
    objects = {
        name.lower(): (kind, table.lower())
        for kind, name, table in connection.execute(
            "SELECT type, name, tbl_name FROM main.sqlite_master"
        )
    }
    if version == 0 and not any(name.startswith(PREFIX) for name in objects):
        return 0
    tables = _TABLES_OF_VERSION.get(version, {})
    # inturn makes no trigger: one on its tables would run in its writes.
    triggers = any(kind == "trigger" and on in tables for kind, on in objects.values())
    # An older file's tables take these names as it is upgraded.
    taken = version < SCHEMA_VERSION and any(
        name in objects for name in _MADE_SINCE.get(version, _RESERVED)
    )
    if (
        tables
        and not triggers
        and not taken
        and all(
            objects.get(table, ("", ""))[0] == "table"
            and _columns(connection, table) == set(columns)
            for table, columns in tables.items()
        )
    ):
        return int(version)
    raise JournalCorrupt(
        path,
        f"not an inturn journal of schema version {SCHEMA_VERSION} or older"
        f" (user_version {version})",
    )


def _columns(connection: sqlite3.Connection, table: str) -> set[_Column]:
    return {
        (name, kind.upper(), bool(not_null), bool(key))
        for _, name, kind, not_null, _, key in connection.execute(
            f"PRAGMA main.table_info({table})"
        )
    }


_UPGRADES: Final = {
    1: ("ALTER TABLE jobs ADD COLUMN retry_at REAL",),
    2: (
        "ALTER TABLE jobs ADD COLUMN stopped_during INTEGER",
        "CREATE TABLE commands (id INTEGER PRIMARY KEY AUTOINCREMENT, verb TEXT NOT NULL,"
        " job_id INTEGER, key TEXT, older_than REAL, submitted_at REAL NOT NULL,"
        " taken_at REAL, answered_at REAL, answer TEXT)",
    ),
    3: (  # version 4: what halted a key; dedup windows; places and due times
        "ALTER TABLE jobs ADD COLUMN unique_for REAL",
        "ALTER TABLE jobs ADD COLUMN seq INTEGER",
        "ALTER TABLE jobs ADD COLUMN due_at REAL",
        "UPDATE jobs SET seq = id",  # every job so far runs in id order
        "DROP INDEX IF EXISTS jobs_pending_by_key",  # by (key, seq) now: `INDEXES`
        "ALTER TABLE halted ADD COLUMN job_id INTEGER",
        "ALTER TABLE halted ADD COLUMN error TEXT",
        "CREATE TABLE uniques (unique_key TEXT PRIMARY KEY, job_id INTEGER NOT NULL, until REAL)",
        "CREATE TABLE steps (job_id INTEGER NOT NULL, n INTEGER NOT NULL, name TEXT NOT NULL,"
        " data BLOB NOT NULL, PRIMARY KEY (job_id, name))",
        "INSERT INTO uniques (unique_key, job_id) SELECT unique_key, id FROM jobs"
        " WHERE state = 'pending' AND unique_key IS NOT NULL",
    ),
    4: ("ALTER TABLE jobs ADD COLUMN completed_at REAL",),  # version 5: completions marked
    5: (  # version 6: every name under the prefix, for the user's tables beside inturn's
        # The old names of inturn's own indexes (`INDEXES` makes them again);
        # SQLite's indexes of primary keys follow their tables.
        *(
            f"DROP INDEX IF EXISTS {index}"
            for index in (
                "jobs_queued",
                "jobs_scheduled",
                "jobs_dead",
                "jobs_dead_by_key",
                "uniques_until",
                "jobs_unique_pending",
            )
        ),
        *(f"ALTER TABLE {table} RENAME TO {PREFIX}{table}" for table in _TABLES_OF_VERSION[5]),
        "CREATE UNIQUE INDEX inturn_jobs_unique_pending ON inturn_jobs (unique_key)"
        " WHERE state = 'pending' AND unique_key IS NOT NULL",
        # and the inbox takes jobs to send (`Operator.send`)
        "ALTER TABLE inturn_commands ADD COLUMN items TEXT",
        "ALTER TABLE inturn_commands ADD COLUMN data BLOB",
    ),
    6: (  # version 7: the operators' audit trail, and who sent each command
        "ALTER TABLE inturn_commands ADD COLUMN actor TEXT",
        "CREATE TABLE inturn_audit (id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,"
        " actor TEXT NOT NULL, verb TEXT NOT NULL, job_id INTEGER, key TEXT, head INTEGER,"
        " older_than REAL, outcome TEXT NOT NULL, error TEXT, result INTEGER)",
    ),
    7: (  # version 8: jobs finished per minute (`Journal.overview`)
        "CREATE TABLE inturn_finished (minute INTEGER PRIMARY KEY, completed INTEGER NOT NULL,"
        " discarded INTEGER NOT NULL)",
    ),
    8: (  # version 9: recurring schedules
        "CREATE TABLE inturn_schedules (name TEXT PRIMARY KEY, key TEXT, data BLOB NOT NULL,"
        " cron TEXT, every REAL, tz TEXT NOT NULL, start REAL NOT NULL, misfire TEXT NOT NULL,"
        " unique_for REAL, next_at REAL, last_tick REAL)",
    ),
    _TRACES_VERSION: ("ALTER TABLE inturn_jobs ADD COLUMN trace TEXT",),  # version 10
}
"""What turns each version into the next."""

_RESERVED: Final = frozenset(
    [
        *_TABLES_OF_VERSION[SCHEMA_VERSION],
        "inturn_jobs_unique_pending",
        *(statement.split()[5] for statement in INDEXES),
    ]
)
"""The names inturn's tables and indexes have now: in an older file, nothing else may have
them, or its upgrade could not rename its tables."""

_SCHEDULES_MADE: Final = frozenset(["inturn_schedules", "inturn_schedules_due"])

_MADE_SINCE: Final = {
    6: frozenset(["inturn_audit", "inturn_audit_by_key", "inturn_audit_by_job", "inturn_finished"])
    | _SCHEDULES_MADE,
    7: frozenset(["inturn_finished"]) | _SCHEDULES_MADE,
    8: _SCHEDULES_MADE,
    _TRACES_VERSION: frozenset(),
}
"""The names a file of version 6 or later has none of: those its upgrade makes."""


def upgrade(connection: sqlite3.Connection, version: int) -> None:
    """Bring a file of *version* to `SCHEMA_VERSION`: one transaction, so a crash leaves it as it was."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for step in range(version, SCHEMA_VERSION):
            for statement in _UPGRADES[step]:
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        rollback(connection)
        raise
    connection.execute(COMMIT)


def database_error(path: str, exc: sqlite3.Error, doing: str) -> JournalError:
    """The inturn error for *exc*: JournalCorrupt if the file is not a sound database."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        return JournalCorrupt(path, str(exc))
    return JournalError(f"{path}: {doing} failed: {exc}")
