"""The command line on journals it did not expect: far-off times, hand-made files, read-only dirs.

Each gets a sensible answer or one line on stderr with exit 2, never a
traceback and never a hang.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import inturn
from inturn._cli_text import format_age, stamp
from inturn.journal import Append, Discard, MarkAttempt, Retrying
from inturn.journal._sqlite_schema import SCHEMA, SCHEMA_VERSION

from ..journal.test_sqlite_hostile import VIEWS, make, schema_with_view
from .conftest import Cli
from .test_errors import READS, files
from .test_read import fields


def write_journal(path: Path, retry_at: float) -> None:
    """Job 1 on key k waits to retry at *retry_at*; job 2 on key d is a dead letter."""

    async def write() -> None:
        journal = inturn.SQLiteJournal(path)
        await journal.open()
        await journal.write([Append(job_id=1, key="k", data=b'"one"')])
        await journal.write([MarkAttempt(job_id=1, attempt=1)])
        await journal.write([Retrying(job_id=1, error="Boom", retry_at=retry_at)])
        await journal.write([Append(job_id=2, key="d", data=b'"two"')])
        await journal.write([Discard(job_id=2, error="Dead")])
        await journal.aclose()

    trio.run(write)


# -- times beyond what a date can hold ----------------------------------------------

YEAR = 365 * 86_400


def test_show_prints_a_retry_beyond_the_year_9999(cli: Cli, tmp_path: Path) -> None:
    """A valid retry_at (Retry(initial_delay=1e12) makes one): in years, after the last date."""
    path = tmp_path / "jobs.db"
    write_journal(path, retry_at=1e13)
    result = cli("show", path, 1)
    assert result.code == 0
    assert re.fullmatch(
        r"in 3170\d\dy\d+d \(after 9999-12-31T23:59:59Z\)", fields(result.out)["next retry"]
    )
    result = cli("show", path, 1, "--json")
    assert (result.code, json.loads(result.out)["retry_at"]) == (0, 1e13)
    result = cli("keys", path)
    assert result.code == 0
    assert re.search(r" in 3170\d\dy\d+d ", result.out)
    assert cli("status", path).code == 0


@pytest.mark.parametrize(
    ("seconds", "age"),
    [
        (364 * 86_400, "364d0h"),
        (YEAR, "1y0d"),
        (3 * YEAR + 12 * 86_400 + 3600, "3y12d"),
        (1e13, "317097y335d"),
        (math.inf, "forever"),
        (-math.inf, "0s"),
        (math.nan, "0s"),
    ],
)
def test_ages_of_a_year_or_more_are_in_years(seconds: float, age: str) -> None:
    assert format_age(seconds) == age


@pytest.mark.parametrize(
    ("when", "text"),
    [
        (0.0, "1970-01-01T00:00:00Z"),
        (253_402_300_799.0, "9999-12-31T23:59:59Z"),
        (253_402_300_800.0, "after 9999-12-31T23:59:59Z"),
        (1e300, "after 9999-12-31T23:59:59Z"),
        (math.inf, "after 9999-12-31T23:59:59Z"),
        (-1e13, "before 0001-01-01T00:00:00Z"),
    ],
)
def test_a_time_beyond_the_calendar_is_stamped_by_its_end(when: float, text: str) -> None:
    assert stamp(when) == text


# -- hand-made files ---------------------------------------------------------------------


@pytest.mark.parametrize("table", sorted(VIEWS))
@pytest.mark.parametrize("argv", [["status"], ["keys"], ["show", "1"], ["dead"]], ids=str)
def test_an_endless_view_for_a_table_is_exit_2_at_once(
    tmp_path: Path, table: str, argv: list[str]
) -> None:
    """In a process of its own, so that a hang fails the test instead of stopping the run."""
    path = tmp_path / "jobs.db"
    before = make(path, f"{schema_with_view(table)} PRAGMA user_version = {SCHEMA_VERSION};")
    result = subprocess.run(
        [sys.executable, "-m", "inturn", argv[0], str(path), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"inturn: {path}: not an inturn journal of schema version" + (
        f" {SCHEMA_VERSION} or older (user_version {SCHEMA_VERSION})\n"
    )
    assert path.read_bytes() == before


@pytest.mark.parametrize("argv", READS, ids=str)
@pytest.mark.parametrize(
    "schema",
    [
        SCHEMA.replace("data BLOB", "data TEXT"),
        SCHEMA.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id TEXT PRIMARY KEY", 1),
    ],
    ids=["data TEXT", "id TEXT"],
)
def test_columns_of_other_types_are_exit_2(
    cli: Cli, tmp_path: Path, argv: list[str], schema: str
) -> None:
    path = tmp_path / "jobs.db"
    make(
        path,
        f"{schema} INSERT INTO inturn_jobs (id, key, data, accepted_at) VALUES ('1', 'k', 'text', 0.0);"
        f" PRAGMA user_version = {SCHEMA_VERSION};",
    )
    before = files(tmp_path)
    result = cli(argv[0], path, *argv[1:])
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"inturn: {path}: not an inturn journal")
    assert files(tmp_path) == before


def test_text_in_the_data_column_shows_as_its_bytes(cli: Cli, tmp_path: Path) -> None:
    """SQLite keeps text in a BLOB column as text: it reads as the bytes of that text."""
    path = tmp_path / "jobs.db"
    make(
        path,
        f"{SCHEMA} INSERT INTO inturn_jobs (key, data, accepted_at, seq) VALUES ('k', 'some text', 0.0, 1);"
        f" PRAGMA user_version = {SCHEMA_VERSION};",
    )
    result = cli("show", path, 1)
    assert result.code == 0
    assert fields(result.out)["payload"] == "some text"
    assert cli("keys", path).code == 0


# -- a read-only directory ------------------------------------------------------------------

NOBODY = 65534


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Root writes in any directory: act as nobody meanwhile, so that a directory's mode holds."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.fixture
def sealed(tmp_path: Path) -> Iterator[Path]:
    """A directory for a journal, read-only (mode 0555) to `unprivileged` code once filled."""
    if os.geteuid() != 0:
        directory = tmp_path / "sealed"
        directory.mkdir()
    else:
        try:
            with unprivileged():
                pass
        except PermissionError:
            pytest.skip("root without CAP_SETUID cannot see a directory's mode")
        directory = Path(tempfile.mkdtemp(prefix="inturn-sealed-"))  # nobody can reach /tmp
    try:
        yield directory
    finally:
        directory.chmod(0o755)
        if os.geteuid() == 0:
            shutil.rmtree(directory)


def seal(directory: Path) -> None:
    if os.geteuid() == 0:
        for path in directory.iterdir():
            os.chown(path, NOBODY, -1)  # its files are nobody's, the directory root's
    directory.chmod(0o555)


def test_a_closed_journal_reads_in_a_read_only_directory(cli: Cli, sealed: Path) -> None:
    """No -shm file can be made there: a cleanly closed journal (no -wal) is read as immutable."""
    path = sealed / "jobs.db"
    write_journal(path, retry_at=2e9)
    seal(sealed)
    before = files(sealed)
    with unprivileged():
        status, keys, show, dead = (
            cli("status", path),
            cli("keys", path),
            cli("show", path, 1),
            cli("dead", path),
        )
    assert [status.code, keys.code, show.code, dead.code] == [0, 0, 0, 0]
    assert "dead letters     1" in status.out
    assert keys.out.splitlines()[1].split()[:2] == ["k", "retrying"]
    assert fields(show.out)["payload"] == '"one"'
    assert dead.out.splitlines()[1].split()[:2] == ["2", "d"]
    assert files(sealed) == before


def test_a_journal_with_commits_in_its_wal_file_is_exit_2_there(cli: Cli, sealed: Path) -> None:
    """Its -wal file may hold commits the journal file lacks: not read as immutable; says why."""
    path = sealed / "jobs.db"
    write_journal(path, retry_at=2e9)
    Path(f"{path}-wal").write_bytes(b"\x00" * 32)  # as a supervisor that runs or crashed leaves it
    seal(sealed)
    before = files(sealed)
    with unprivileged():
        result = cli("keys", path)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"inturn: {path}: cannot read: its directory is not writable")
    assert files(sealed) == before


def test_sealing_a_directory_stops_writes_in_it(sealed: Path) -> None:
    """The other tests' premise: the directory is read-only to the reads."""
    seal(sealed)
    with unprivileged(), pytest.raises(PermissionError):
        (sealed / "probe").write_bytes(b"")
    with unprivileged(), pytest.raises(sqlite3.OperationalError):
        sqlite3.connect(sealed / "probe.db").execute("CREATE TABLE t (x)")
