from __future__ import annotations

import itertools
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import settings

import inturn

# inturn never configures structlog; the application does.  Tests log at debug
# level into a logger that prints nothing, so capture_logs() sees every event.
structlog.configure(
    processors=[],
    wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    logger_factory=structlog.ReturnLoggerFactory(),
    cache_logger_on_first_use=False,
)

settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, max_examples=200)
# CI (which sets CI=true) runs twice as many examples per property.
settings.load_profile("ci" if os.environ.get("CI") else "default")


# -- what no test can observe: fsync ------------------------------------------
#
# The suite kills processes, never the machine, and a killed process's writes
# live on in the kernel's cache: no test can tell a flushed write from one
# that is not.  Yet a run asks for about 34,000 fsyncs of its own files and
# 8,700 WAL flushes of the server, and on a day this machine's disk was slow
# the test that writes most (150 requeues, one commit each) took 57 s instead
# of 1 s, and the whole suite 15 minutes instead of 5.  So the suite's files
# live in memory (/dev/shm, unless TMPDIR names a place), inherited by the
# processes it starts, and its PostgreSQL sessions commit without waiting for
# the flush.  Both are real: the same SQLite files, the same server and
# transactions.

if "TMPDIR" not in os.environ and os.access("/dev/shm", os.W_OK):
    os.environ["TMPDIR"] = tempfile.tempdir = "/dev/shm"

# -- PostgreSQL: the server on 127.0.0.1:5432 (`.ci/run` starts it) -----------

PG_DSN = os.environ.get(
    "INTURN_TEST_DSN",
    "postgresql://postgres@127.0.0.1:5432/test?options=-c%20synchronous_commit%3Doff",
)


def _pg_reachable() -> str | None:
    """None if the test server answers, else why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install -e '.[test]')"
    try:
        psycopg.connect(PG_DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_DSN} is not reachable: {exc}"
    return None


_pg_state: dict[str, str | None] = {}


@pytest.fixture
def pg_dsn() -> str:
    """The test server's DSN; skips without one, but fails under CI, which must have it."""
    if "why" not in _pg_state:
        _pg_state["why"] = _pg_reachable()
    why = _pg_state["why"]
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return PG_DSN


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema of this test's own, dropped afterwards: tests never see each other's rows."""
    import psycopg

    schema = f"t_{os.getpid()}_{next(_schemas)}"
    yield schema
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


_schemas = itertools.count()


# -- journals: every runtime test that takes these runs on each kind ---------

MakeJournal = Callable[[], inturn.Journal]
"""Opens "the same journal" again (after a restart, say)."""

JOURNAL_KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=JOURNAL_KINDS)
def make_journal(request: pytest.FixtureRequest, tmp_path: Path) -> MakeJournal:
    """One MemoryJournal, a new SQLiteJournal on one file, or a new PostgresJournal on one schema."""
    if request.param == "memory":
        memory = inturn.MemoryJournal()
        return lambda: memory
    if request.param == "sqlite":
        path = tmp_path / "jobs.db"
        return lambda: inturn.SQLiteJournal(path)
    dsn = request.getfixturevalue("pg_dsn")
    schema = request.getfixturevalue("pg_schema")
    return lambda: inturn.PostgresJournal(dsn, schema=schema)


@pytest.fixture
def journal(make_journal: MakeJournal) -> inturn.Journal:
    """A fresh journal of each kind."""
    return make_journal()
