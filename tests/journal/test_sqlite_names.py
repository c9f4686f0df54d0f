"""inturn's tables under their reserved prefix, and the user's own tables beside them.

A journal file may hold the user's tables (a transactional step writes them
on the journal's connection): inturn names its own ``inturn_*``, makes them
beside the user's in a database of user_version 0, and never changes a table
it did not make.  Files of schema versions 1 to 5 named inturn's tables
``jobs``, ``halted``, ...: opening one renames them in place, and every job,
dead letter, halt, step, reservation and the id counter come through.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

import inturn
from inturn.journal import Append, Audit, SQLiteReader
from inturn.journal._sqlite_schema import _UPGRADES, INDEXES, SCHEMA, SCHEMA_VERSION
from inturn.testing import Recorder

from .test_sqlite import make_version_1_file

DATA = Path(__file__).parent / "data"

INTURN_TABLES = {
    "inturn_jobs",
    "inturn_uniques",
    "inturn_steps",
    "inturn_halted",
    "inturn_commands",
    "inturn_schedules",
    "inturn_audit",
    "inturn_finished",
}


def version_1(path: Path) -> None:
    make_version_1_file(path)


def version_2(path: Path) -> None:
    make_version_1_file(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.executescript(
            "BEGIN; ALTER TABLE jobs ADD COLUMN retry_at REAL; PRAGMA user_version = 2; COMMIT;"
        )


def real_file(version: int) -> Callable[[Path], None]:
    def copy(path: Path) -> None:
        shutil.copyfile(DATA / f"version-{version}.db", path)

    return copy


def version_6(path: Path) -> None:
    """The real version-5 file as version 6 left it: its upgrade step then, which is
    today's step 5, and the indexes of version 6 (none of the audit trail's)."""
    real_file(5)(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("BEGIN IMMEDIATE")
        for statement in _UPGRADES[5]:
            connection.execute(statement)
        for index in INDEXES:
            if (
                "inturn_audit" not in index
                and "inturn_jobs_started" not in index
                and "inturn_schedules" not in index
            ):
                connection.execute(index)
        connection.execute("PRAGMA user_version = 6")
        connection.execute("COMMIT")


def version_7(path: Path) -> None:
    """Version 6 as version 7 left it: today's step 6 (the audit trail) and its indexes."""
    version_6(path)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("BEGIN IMMEDIATE")
        for statement in _UPGRADES[6]:
            connection.execute(statement)
        for index in INDEXES:
            if "inturn_audit" in index:
                connection.execute(index)
        connection.execute("PRAGMA user_version = 7")
        connection.execute("COMMIT")


OLD_FILES: dict[int, Callable[[Path], None]] = {
    1: version_1,
    2: version_2,
    3: real_file(3),
    4: real_file(4),
    5: real_file(5),
    6: version_6,
    7: version_7,
}
"""A journal file of each older schema version.  Versions 3 to 5 are real files their
inturn wrote (``data/version-N.db``; version 4 at commit 3866098, version 5 at 58e3346,
each with its own `SQLiteJournal.write`); versions 4 and 5 hold every kind of row: a key halted
by a discard with a job behind, a paused key whose job recorded a step, a keyless job, a
reservation held for a window after its job completed, a dead letter with a step, a
scheduled job, a job waiting to retry, and a completed job (the highest id, gone but for
``sqlite_sequence``); version 5 also a completed job's row marked and not yet deleted."""


def reads(path: Path, high: int) -> dict[str, object]:
    """Everything an operator can read of the file, for jobs 1 to *high*."""
    reader = SQLiteReader(path)
    return {
        "keys": reader.keys(now=0.0),
        "jobs": [reader.job(job_id) for job_id in range(1, high + 1)],
        "steps": [reader.steps(job_id) for job_id in range(1, high + 1)],
        "dead letters": reader.dead_letters(),
        "scheduled": reader.scheduled(),
        "audit": reader.audit(),
        "overview": reader.overview(now=0.0),
        "keys by name": reader.keys_by_name(limit=1000, now=0.0),
    }


def catalog(path: Path) -> tuple[int, dict[str, tuple[str, str]], list[tuple[str, int]]]:
    """The file's user_version, its objects (name: type, table), and ``sqlite_sequence``."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        objects = {
            name: (kind, table)
            for kind, name, table in connection.execute(
                "SELECT type, name, tbl_name FROM sqlite_master"
            )
        }
        sequence = connection.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    return version, objects, sequence


@pytest.mark.parametrize("version", sorted(OLD_FILES))
async def test_an_older_file_is_renamed_in_place_and_keeps_every_job(
    tmp_path: Path, version: int
) -> None:
    """Opening a file of versions 1 to 7 renames every table and index under the prefix (before 6) and adds the audit trail, empty, and the finished-job counters; what an operator reads of it is what the reader read before, and the id counter goes on from where it was."""
    path = tmp_path / "jobs.db"
    OLD_FILES[version](path)
    _, _, [(_, high)] = catalog(path)
    before = reads(path, high)
    journal = inturn.SQLiteJournal(path)
    recovery = await journal.open()
    try:
        assert recovery.next_id == high + 1
        after_version, objects, sequence = catalog(path)
        assert after_version == SCHEMA_VERSION == 10
        assert sequence == [("inturn_jobs", high)]
        assert {name for name, (kind, _) in objects.items() if kind == "table"} == {
            *INTURN_TABLES,
            "sqlite_sequence",
        }
        indexes = {name: table for name, (kind, table) in objects.items() if kind == "index"}
        assert all(name.startswith(("inturn_", "sqlite_autoindex_inturn_")) for name in indexes)
        assert set(indexes.values()) <= INTURN_TABLES
        assert reads(path, high) == before
        # a new job takes the next id, never one a completed job had
        await journal.write([Append(job_id=high + 1, key="new", data=b"new")])
        assert before["audit"] == [] == await journal.audit()
        await journal.write([Audit(actor="ann", verb="pause", outcome="done", key="new")])
    finally:
        await journal.aclose()
    new = SQLiteReader(path).job(high + 1)
    assert new is not None
    assert new.data == b"new"
    after = reads(path, high)
    assert [info.key for info in after["keys"] if info.key != "new"] == [  # type: ignore[attr-defined]
        info.key
        for info in before["keys"]  # type: ignore[attr-defined]
    ]
    assert [(entry.actor, entry.verb, entry.key) for entry in SQLiteReader(path).audit()] == [
        ("ann", "pause", "new")
    ]
    unchanged = {"keys", "audit", "overview", "keys by name"}  # the new key and fix show there
    assert {name: read for name, read in after.items() if name not in unchanged} == {
        name: read for name, read in before.items() if name not in unchanged
    }


@pytest.mark.parametrize("version", [4, 5])
async def test_reservations_of_an_older_file_hold_after_the_rename(
    tmp_path: Path, version: int
) -> None:
    """A unique key held by an unfinished job, and one held for a window after its job completed, are still refused; a released one is free."""
    path = tmp_path / "jobs.db"
    OLD_FILES[version](path)
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    try:
        for unique, holder in [("u-2", 2), ("u-5", 5), ("u-7", 7)]:
            with pytest.raises(inturn.DuplicateError) as caught:
                await journal.write(
                    [Append(job_id=20, key="x", data=b"", unique=unique)], now=200.0
                )
            assert caught.value.job_id == holder
        await journal.write([Append(job_id=20, key="x", data=b"", unique="u-6")], now=200.0)
    finally:
        await journal.aclose()


def test_an_older_file_with_a_table_under_the_new_names_is_refused_untouched(
    tmp_path: Path,
) -> None:
    """Its upgrade could not rename inturn's tables: JournalCorrupt, the file as it was."""
    path = tmp_path / "jobs.db"
    real_file(5)(path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE inturn_steps (id INTEGER)")
        connection.commit()
    before = path.read_bytes()
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        trio.run(inturn.SQLiteJournal(path).open)
    assert path.read_bytes() == before


def test_a_version_6_file_with_a_table_named_as_the_audit_trail_is_refused_untouched(
    tmp_path: Path,
) -> None:
    """Its upgrade could not make ``inturn_audit``: JournalCorrupt, the file as it was."""
    path = tmp_path / "jobs.db"
    version_6(path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE inturn_audit (id INTEGER)")
        connection.commit()
    before = path.read_bytes()
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        trio.run(inturn.SQLiteJournal(path).open)
    assert path.read_bytes() == before


# -- the user's tables beside inturn's ----------------------------------------

USER_SCHEMA = """
CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL);
CREATE TABLE keys (key TEXT PRIMARY KEY, owner TEXT);
CREATE TABLE steps (job_id INTEGER, n INTEGER, done INTEGER DEFAULT 0);
CREATE INDEX jobs_queued ON jobs (title);
CREATE VIEW halted AS SELECT key FROM keys WHERE owner IS NULL;
CREATE TABLE audit (what TEXT);
CREATE TRIGGER jobs_audit AFTER INSERT ON jobs BEGIN INSERT INTO audit VALUES (new.title); END;
INSERT INTO jobs (title) VALUES ('write the report'), ('file the taxes');
INSERT INTO keys VALUES ('k', 'ann'), ('idle', NULL);
INSERT INTO steps VALUES (1, 0, 1), (2, 1, 0);
"""
"""A user's database with the names inturn's tables and indexes had before version 6, an
index, a view and a trigger of its own, and rows."""

USER_OBJECTS = ("jobs", "keys", "steps", "jobs_queued", "halted", "audit", "jobs_audit")


def user_state(path: Path) -> tuple[object, ...]:
    """The user's objects as SQLite keeps them, and every row of the user's tables."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        schema = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'inturn_%'"
            " AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        rows = [
            connection.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("jobs", "keys", "steps", "audit", "halted")
        ]
        sequence = connection.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'"
        ).fetchall()
    return schema, rows, sequence


def user_database(path: Path) -> tuple[object, ...]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.executescript(USER_SCHEMA)
    state = user_state(path)
    assert [name for _, name, _, _ in state[0]] == sorted(USER_OBJECTS)  # type: ignore[attr-defined]
    return state


async def test_a_journal_is_made_beside_the_users_tables_and_never_touches_them(
    tmp_path: Path,
) -> None:
    """A database of the user's tables (user_version 0) is a new journal: inturn's tables go beside them, jobs run in order per key, and the user's tables, view, index and trigger keep their schema and rows, across a reopen and reads."""
    path = tmp_path / "app.db"
    before = user_database(path)
    recorder = Recorder()
    for run in range(2):  # made, then reopened as a journal of version 6 with user tables
        journal = inturn.SQLiteJournal(path)
        async with inturn.open_supervisor(recorder, journal=journal) as supervisor:
            await supervisor.send_many(
                [(key, f"{key}-{run}-{n}") for n in range(5) for key in ("jobs", "keys", "a")]
            )
            await supervisor.send("steps", "unique", unique=f"once-{run}")
            with pytest.raises(inturn.DuplicateError):
                await supervisor.send("steps", "again", unique=f"once-{run}")
            await supervisor.wait_idle()
        assert user_state(path) == before
    by_key = recorder.by_key()
    for key in ("jobs", "keys", "a"):
        assert [call.job.payload for call in by_key[key]] == [
            f"{key}-{run}-{n}" for run in range(2) for n in range(5)
        ]
    version, objects, sequence = catalog(path)
    assert version == SCHEMA_VERSION
    assert set(objects) >= INTURN_TABLES
    assert ("inturn_jobs", 32) in sequence  # beside the user's own counter
    assert SQLiteReader(path).keys(now=0.0) == []
    assert user_state(path) == before


async def test_a_users_table_added_to_a_journal_is_left_alone(tmp_path: Path) -> None:
    """Tables, views, indexes and triggers the user adds to a journal's file later do not stop it opening."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([Append(job_id=1, key="k", data=b"one")])
    await journal.aclose()
    before = user_database(path)
    recovery = await journal.open()
    try:
        assert [job.id for job in recovery.jobs] == [1]
    finally:
        await journal.aclose()
    assert user_state(path) == before


@pytest.mark.parametrize("table", sorted(INTURN_TABLES))
def test_a_trigger_on_one_of_inturns_tables_is_refused_untouched(
    tmp_path: Path, table: str
) -> None:
    """It would run inside inturn's writes: JournalCorrupt, whatever user tables are beside."""
    path = tmp_path / "jobs.db"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.executescript(
            f"{USER_SCHEMA} {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};"
            f" CREATE TRIGGER sneaky AFTER DELETE ON {table} BEGIN SELECT 1; END;"
        )
    before = path.read_bytes()
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        trio.run(inturn.SQLiteJournal(path).open)
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        SQLiteReader(path).keys(now=0.0)
    assert path.read_bytes() == before


async def test_an_older_file_with_user_tables_is_upgraded_around_them(tmp_path: Path) -> None:
    """The rename of a version-5 file changes inturn's tables only: the user's table, index, view and trigger keep their schema and rows."""
    path = tmp_path / "jobs.db"
    real_file(5)(path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.executescript(
            "CREATE TABLE keys (key TEXT PRIMARY KEY, owner TEXT);"
            "CREATE INDEX keys_by_owner ON keys (owner);"
            "CREATE VIEW owners AS SELECT DISTINCT owner FROM keys;"
            "CREATE TABLE audit (what TEXT);"
            "CREATE TRIGGER keys_audit AFTER INSERT ON keys"
            " BEGIN INSERT INTO audit VALUES (new.key); END;"
            "INSERT INTO keys VALUES ('k', 'ann');"
        )

    def user() -> list[object]:
        with contextlib.closing(sqlite3.connect(path)) as connection:
            return [
                connection.execute(
                    "SELECT type, name, tbl_name, sql FROM sqlite_master"
                    " WHERE name IN ('keys', 'keys_by_owner', 'owners', 'audit', 'keys_audit')"
                    " ORDER BY name"
                ).fetchall(),
                connection.execute("SELECT * FROM keys").fetchall(),
                connection.execute("SELECT * FROM audit").fetchall(),
            ]

    before = user()
    journal = inturn.SQLiteJournal(path)
    recovery = await journal.open()
    await journal.aclose()
    assert [job.id for job in recovery.jobs] == [2, 3, 4, 8]
    assert catalog(path)[0] == SCHEMA_VERSION
    assert user() == before
