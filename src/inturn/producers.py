"""Producers outside trio: a job written into the caller's own PostgreSQL transaction.

Theory of operation
-------------------
A web application (Django, Flask, FastAPI) or a script holds a psycopg
connection, not a supervisor.  `enqueue` writes a job to a fleet's journal
(``PostgresJournal(..., fleet=True)``) inside the transaction that
connection has open, and never commits: the job exists if and only if the
caller commits, so "save the order and hand over its job" is one atomic
act (no outbox).  At commit, the job takes its place in its key's order
and a member is woken (`journal._postgres_enqueue` says how, without a
lock held until then).

Every input is checked here, as `Supervisor.send` checks it and with the
same errors, before any statement runs.  The job is written inside a
savepoint: a refusal (a unique key taken, a single holder) rolls back
what the job wrote, and leaves the caller's transaction usable.

psycopg is an optional extra: it is imported when a connection is looked
at, never by ``import inturn``; nothing here needs trio or a supervisor.
"""

from __future__ import annotations

import datetime
import sqlite3
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ._schedule import due_time
from .codec import Codec, JSONCodec, encode_checked
from .errors import JournalError
from .journal._postgres_enqueue import NewJob, Query, Rows, check, steps
from .journal._postgres_schema import check_schema
from .keys import validate_key, validate_unique, validate_unique_for
from .tracing import ambient_trace

if TYPE_CHECKING:
    import psycopg

__all__ = ["enqueue", "enqueue_async"]

MAX_PAYLOAD: Final = 16 * 1024 * 1024
"""The largest encoded payload `enqueue` takes: the supervisor's default ``max_payload``."""

_T = TypeVar("_T")


def enqueue(
    conn: psycopg.Connection[Any],
    key: str | None,
    payload: object,
    *,
    schema: str = "inturn",
    unique: str | None = None,
    unique_for: float | None = None,
    delay: float | None = None,
    at: float | datetime.datetime | None = None,
    codec: Codec | None = None,
) -> int:
    """Write a job for *key* into *conn*'s open transaction; return its id.  Never commits.

    The job exists if and only if the caller commits.  Once it does, a fleet
    on *schema* (``PostgresJournal(..., fleet=True)``; none need be running
    yet) runs it: in its key's order, which is the order in which the jobs
    for that key were committed, whether a member or a producer wrote them.
    *key* None is a job with no key (`Supervisor.submit`'s).  *unique*,
    *unique_for*, *delay* and *at* are `Supervisor.send`'s; *codec* encodes
    *payload* (`JSONCodec` unless given: use the fleet's).

    On a connection in autocommit mode and outside a transaction, the job is
    a transaction of its own: committed when this returns, as any statement
    of such a connection.  Either way it is written inside a savepoint, so
    an error leaves the caller's transaction as it was, and usable.  No
    statement depends on the connection's search path.

    Raises:
        TypeError: *conn* is not a `psycopg.Connection` (a `sqlite3.Connection`
            says what to use instead), or an input of a wrong type (as `send`).
        InvalidKey, ValueError, EncodeError: an input `send` would refuse.
        DuplicateError: another job reserves *unique*.
        JournalLocked: a single holder (not a fleet) holds the journal; it
            would never see the job.
        JournalError: no journal of this version in *schema*, the caller's
            transaction is aborted, or the database failed.

    versionadded:: Unreleased
    """
    job, schema = _prepare(key, payload, schema, unique, unique_for, delay, at, codec)
    psycopg = _psycopg(conn, asynchronous=False)
    name = _name(conn, schema)
    _usable(conn, name)
    try:
        if _idle(conn):
            _run(conn, check(schema, name))  # begins the caller's transaction
        try:
            with conn.transaction():  # a savepoint; in autocommit, a transaction of its own
                return _run(conn, steps(schema, name, job))
        except psycopg.errors.UndefinedTable:  # rolled back: say what is missing
            _run(conn, check(schema, name))
            raise
    except psycopg.errors.TransactionRollback:
        raise  # a serialization failure or a deadlock: the caller's retry handles it
    except psycopg.Error as exc:
        raise _failed(name, exc) from None


async def enqueue_async(
    conn: psycopg.AsyncConnection[Any],
    key: str | None,
    payload: object,
    *,
    schema: str = "inturn",
    unique: str | None = None,
    unique_for: float | None = None,
    delay: float | None = None,
    at: float | datetime.datetime | None = None,
    codec: Codec | None = None,
) -> int:
    """`enqueue` on a `psycopg.AsyncConnection`, for asyncio programs (FastAPI): the same job,
    rules and errors.

    versionadded:: Unreleased
    """
    job, schema = _prepare(key, payload, schema, unique, unique_for, delay, at, codec)
    psycopg = _psycopg(conn, asynchronous=True)
    name = _name(conn, schema)
    _usable(conn, name)
    try:
        if _idle(conn):
            await _run_async(conn, check(schema, name))
        try:
            async with conn.transaction():
                return await _run_async(conn, steps(schema, name, job))
        except psycopg.errors.UndefinedTable:
            await _run_async(conn, check(schema, name))
            raise
    except psycopg.errors.TransactionRollback:
        raise
    except psycopg.Error as exc:
        raise _failed(name, exc) from None


def _prepare(
    key: object,
    payload: object,
    schema: object,
    unique: object,
    unique_for: object,
    delay: object,
    at: object,
    codec: object,
) -> tuple[NewJob, str]:
    """The job, every input checked as `Supervisor.send` checks it; and the schema."""
    if key is not None:
        key = validate_key(key)
    unique = validate_unique(unique)
    window = validate_unique_for(unique_for, unique)
    now = time.time()
    due = None if delay is None and at is None else due_time(delay, at, now)
    schema = check_schema(schema)
    if codec is None:
        codec = JSONCodec()
    elif not (
        callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))
    ):
        raise TypeError(f"codec must have encode() and decode(), not {type(codec).__name__}")
    assert isinstance(key, str | None)
    data = encode_checked(codec, payload, MAX_PAYLOAD)  # type: ignore[arg-type]
    return NewJob(key, data, unique, window, due, now, ambient_trace()), schema


def _psycopg(conn: object, *, asynchronous: bool) -> Any:
    """psycopg, once *conn* is found to be its connection of the right kind; else TypeError."""
    if isinstance(conn, sqlite3.Connection):
        raise TypeError(
            "inturn.enqueue writes into a PostgreSQL transaction (a psycopg connection), not a"
            " sqlite3.Connection; to hand a SQLite journal's supervisor a job from another"
            " program, use inturn.operate(journal)'s send"
        )
    try:
        import psycopg
    except ImportError:  # pragma: no cover (the test environment has the extra)
        raise TypeError(
            f"conn must be a psycopg connection, not {type(conn).__name__}"
            " (pip install 'inturn[postgres]')"
        ) from None
    if asynchronous and not isinstance(conn, psycopg.AsyncConnection):
        hint = "; use inturn.enqueue" if isinstance(conn, psycopg.Connection) else ""
        raise TypeError(f"conn must be a psycopg.AsyncConnection, not {type(conn).__name__}{hint}")
    if not asynchronous and not isinstance(conn, psycopg.Connection):
        hint = (
            "; use await inturn.enqueue_async" if isinstance(conn, psycopg.AsyncConnection) else ""
        )
        raise TypeError(f"conn must be a psycopg.Connection, not {type(conn).__name__}{hint}")
    return psycopg


def _name(conn: Any, schema: str) -> str:
    """How messages name the journal: server, database and schema, never a password."""
    info = conn.info
    return f"postgresql://{info.host}:{info.port}/{info.dbname} (schema {schema})"


def _idle(conn: Any) -> bool:
    """Whether *conn*'s next statement begins the caller's transaction (psycopg's
    ``transaction()`` would begin and commit one of its own instead of a savepoint)."""
    from psycopg.pq import TransactionStatus

    return not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE


def _usable(conn: Any, name: str) -> None:
    from psycopg.pq import TransactionStatus

    if conn.closed:
        raise JournalError(f"{name}: the connection is closed")
    if conn.info.transaction_status == TransactionStatus.INERROR:
        raise JournalError(
            f"{name}: the caller's transaction is aborted (a statement in it failed):"
            " roll it back first"
        )


def _failed(name: str, exc: Exception) -> JournalError:
    """The `JournalError` for a failing statement: its first line and SQLSTATE only (a detail
    line may quote a row, and so the payload)."""
    text = str(exc).strip().splitlines()
    state = getattr(getattr(exc, "diag", None), "sqlstate", None)
    first = text[0] if text else type(exc).__name__
    return JournalError(f"{name}: enqueue failed: {first}" + (f" [{state}]" if state else ""))


def _run(conn: psycopg.Connection[Any], queries: Generator[Query, Rows, _T]) -> _T:
    try:
        query = next(queries)
        while True:
            cursor = conn.execute(query.sql, query.parameters)
            rows = cursor.fetchall() if cursor.description is not None else []
            query = queries.send((rows, cursor.rowcount))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def _run_async(conn: psycopg.AsyncConnection[Any], queries: Generator[Query, Rows, _T]) -> _T:
    try:
        query = next(queries)
        while True:
            cursor = await conn.execute(query.sql, query.parameters)
            rows = await cursor.fetchall() if cursor.description is not None else []
            query = queries.send((rows, cursor.rowcount))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
