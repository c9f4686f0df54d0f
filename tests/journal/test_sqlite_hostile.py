"""Hand-made files: what SQLiteJournal and SQLiteReader do with a file made to look like a journal.

A file that is not a journal (of any size), or that has inturn's tables as
views, with other column types or with triggers, is refused with
JournalCorrupt and left byte for byte as it was.  A journal of the right
tables whose rows hold values of other types (SQLite stores text in a BLOB
column) reads as the types inturn stores.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import inturn
from inturn.journal import SQLiteReader
from inturn.journal._sqlite_schema import SCHEMA, SCHEMA_VERSION
from inturn.testing import Recorder

READS: list[Callable[[SQLiteReader], object]] = [
    lambda reader: reader.keys(now=0.0),
    lambda reader: reader.job(1),
    lambda reader: reader.dead_letters(),
]

RECURSIVE = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
"""Rows without end: a query over a view of them never returns."""

VIEWS = {
    "inturn_jobs": f"CREATE VIEW inturn_jobs (id, key, unique_key, data, attempts, state, error, accepted_at,"
    f" finished_at, retry_at, stopped_during) AS {RECURSIVE}"
    " SELECT i, 'k', NULL, x'00', 0, 'pending', NULL, 0.0, NULL, NULL, NULL FROM n",
    "inturn_halted": f"CREATE VIEW inturn_halted (key) AS {RECURSIVE} SELECT 'k' || i FROM n",
    "inturn_commands": f"CREATE VIEW inturn_commands (id, verb, job_id, key, older_than, submitted_at,"
    f" taken_at, answered_at, answer) AS {RECURSIVE}"
    " SELECT i, 'pause', NULL, 'k', NULL, 0.0, NULL, NULL, NULL FROM n",
}
"""Each of inturn's tables as an endless view with its columns."""

OPEN = """
import sys, trio, inturn
try:
    trio.run(inturn.SQLiteJournal(sys.argv[1]).open)
except inturn.JournalCorrupt as exc:
    print("JournalCorrupt:", exc)
"""


def make(path: Path, script: str) -> bytes:
    """Write an SQLite file made by *script*; return its bytes."""
    connection = sqlite3.connect(path)
    connection.executescript(script)
    connection.close()
    return path.read_bytes()


def schema_with_view(table: str) -> str:
    start = SCHEMA.index(f"CREATE TABLE {table} ")
    end = SCHEMA.index(";", start)
    if table == "inturn_jobs":  # its index goes with it
        end = SCHEMA.index(";", SCHEMA.index("CREATE UNIQUE INDEX")) + 1
        return f"{SCHEMA[:start]}{VIEWS[table]};{SCHEMA[end:]}"
    return f"{SCHEMA[:start]}{VIEWS[table]}{SCHEMA[end:]}"


@pytest.mark.parametrize("table", sorted(VIEWS))
def test_an_endless_view_in_place_of_a_table_is_refused_at_once(tmp_path: Path, table: str) -> None:
    """Opening never queries the view: JournalCorrupt, in a process of its own so a hang fails."""
    path = tmp_path / "jobs.db"
    before = make(path, f"{schema_with_view(table)} PRAGMA user_version = {SCHEMA_VERSION};")
    result = subprocess.run(
        [sys.executable, "-c", OPEN, str(path)], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"JournalCorrupt: {path}: not an inturn journal of schema version" + (
        f" {SCHEMA_VERSION} or older (user_version {SCHEMA_VERSION})\n"
    )
    assert path.read_bytes() == before


HOSTILE_SCHEMAS = {
    "data TEXT": SCHEMA.replace("data BLOB NOT NULL", "data TEXT NOT NULL"),
    "data nullable": SCHEMA.replace("data BLOB NOT NULL", "data BLOB"),
    "id TEXT": SCHEMA.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id TEXT PRIMARY KEY", 1),
    "id not a key": SCHEMA.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id INTEGER", 1),
    "attempts TEXT": SCHEMA.replace("attempts INTEGER", "attempts TEXT"),
    "retry_at TEXT": SCHEMA.replace("retry_at REAL", "retry_at TEXT"),
    "halted key INTEGER": SCHEMA.replace("halted (key TEXT", "halted (key INTEGER"),
    "commands answer BLOB": SCHEMA.replace("answer TEXT", "answer BLOB"),
    "no commands": SCHEMA[: SCHEMA.index("CREATE TABLE inturn_commands")],
    "a trigger": SCHEMA + "CREATE TRIGGER t AFTER INSERT ON inturn_jobs BEGIN SELECT 1; END;",
}
"""inturn's schema with one thing changed, as a hand-made file might have it."""

TEXT_ROW = "INSERT INTO inturn_jobs (id, key, data, accepted_at) VALUES ('1', 'k', 'text', 0.0);"
"""A row whose values a file of the wrong types keeps as text."""


@pytest.mark.parametrize("case", sorted(HOSTILE_SCHEMAS))
async def test_tables_of_other_types_are_refused_untouched(tmp_path: Path, case: str) -> None:
    """The journal, the supervisor and the reader raise JournalCorrupt, not a row's TypeError."""
    path = tmp_path / "jobs.db"
    script = f"{HOSTILE_SCHEMAS[case]} {TEXT_ROW} PRAGMA user_version = {SCHEMA_VERSION};"
    before = make(path, script)
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        await inturn.SQLiteJournal(path).open()
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        async with inturn.open_supervisor(Recorder(), journal=inturn.SQLiteJournal(path)):
            pytest.fail("the body must not run")
    for read in READS:
        with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
            read(SQLiteReader(path))
    assert path.read_bytes() == before


async def test_values_of_other_types_in_typed_columns_read_as_the_types_inturn_stores(
    tmp_path: Path,
) -> None:
    """Text in ``data``, numbers in ``key``, text in ``attempts``: bytes, str and int come out."""
    path = tmp_path / "jobs.db"
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.aclose()
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "INSERT INTO inturn_jobs (key, data, attempts, accepted_at, seq)"
            " VALUES (7, '\"seven\"', '0', '5', '1');"
            "INSERT INTO inturn_jobs (key, data, attempts, state, accepted_at, finished_at)"
            " VALUES ('d', 'dead text', '3', 'dead', 1.0, '2');"
        )
    connection.close()
    reader = SQLiteReader(path)
    job = reader.job(1)
    assert job is not None
    assert (job.key, job.data, job.attempts, job.accepted_at) == ("7", b'"seven"', 0, 5.0)
    [key] = reader.keys(now=10.0)
    assert (key.key, key.head_attempt, key.head_age) == ("7", 0, 5.0)
    [dead] = reader.dead_letters()
    assert (dead.data, dead.attempts, dead.finished_at) == (b"dead text", 3, 2.0)

    seen: list[tuple[object, object]] = []

    async def handler(job: inturn.Job) -> None:
        seen.append((job.key, job.payload))

    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)):
        pass  # recovery runs the unfinished job
    assert seen == [("7", "seven")]


@pytest.mark.parametrize(
    "content",
    [b"x", b"\x00", b"xy", b"SQLite format 3", b"not a journal\n" * 300],
    ids=["1 byte", "1 NUL byte", "2 bytes", "15 bytes of the header", "4200 bytes"],
)
async def test_a_file_that_is_not_sqlite_is_refused_untouched_whatever_its_size(
    tmp_path: Path, content: bytes
) -> None:
    """SQLite takes a 1-byte file for an empty one and would write a journal over it."""
    path = tmp_path / "jobs.db"
    path.write_bytes(content)
    with pytest.raises(inturn.JournalCorrupt) as exc_info:
        await inturn.SQLiteJournal(path).open()
    assert exc_info.value.path == str(path)
    for read in READS:
        with pytest.raises(inturn.JournalCorrupt):
            read(SQLiteReader(path))
    assert path.read_bytes() == content


async def test_an_empty_file_is_a_new_journal(tmp_path: Path) -> None:
    """What a journal makes of a path it creates: the reader refuses it, the journal fills it."""
    path = tmp_path / "jobs.db"
    path.write_bytes(b"")
    with pytest.raises(inturn.JournalCorrupt, match="not an inturn journal"):
        SQLiteReader(path).keys(now=0.0)
    assert path.read_bytes() == b""
    journal = inturn.SQLiteJournal(path)
    await journal.open()
    await journal.write([inturn.journal.Append(job_id=1, key="k", data=b"1")])
    await journal.aclose()
    assert [key.key for key in SQLiteReader(path).keys(now=0.0)] == ["k"]
