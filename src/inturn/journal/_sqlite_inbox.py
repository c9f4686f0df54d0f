"""The operators' inbox of an SQLite journal: commands for the supervisor that holds it.

Theory of operation
-------------------
An operator (the ``inturn`` command line, a script) cannot change a file a
supervisor holds: that supervisor decides for its keys.  It inserts a row in
``inturn_commands`` instead, on a connection of its own and through SQLite's own
locking (WAL lets it write between the supervisor's transactions), then polls
the row for its answer.  The supervisor polls the table every
``poll_interval`` seconds on its journal's thread, marks what it finds as
taken, carries each command out with its `Supervisor` methods, and writes the
answer.  A command nobody took before the operator gave up is withdrawn, so a
fix never happens behind the back of the one who asked for it; one taken by
a supervisor that died unanswered is taken again by the next one.

All functions here run on a thread, never on trio's: they block on SQLite.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Final

from ..errors import JournalError
from ._sent import pack, sent_trace, unpack
from ._sqlite_schema import SCHEMA_VERSION, database_error, schema_version
from .records import Answer, Command

__all__ = ["answer", "connect", "reset", "submit", "take", "withdraw"]

_KEEP_ANSWERS: Final = 86_400.0
"""Seconds an answer nobody read (its operator died) stays in the file."""


def connect(path: str) -> sqlite3.Connection:
    """An operator's connection to the journal at *path*, which must have an inbox."""
    try:
        connection = sqlite3.connect(
            path, isolation_level=None, timeout=10.0, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: cannot open: {exc}") from exc
    try:
        version = schema_version(connection, path)
    except sqlite3.Error as exc:
        connection.close()
        raise database_error(path, exc, "read") from exc
    except BaseException:
        connection.close()
        raise
    if version != SCHEMA_VERSION:
        connection.close()
        raise JournalError(
            f"{path}: the supervisor holding this journal is older (schema version {version})"
            " and takes no commands; use the API in that process"
        )
    return connection


def submit(connection: sqlite3.Connection, command: Command) -> int:
    """Queue *command*; return its id."""
    items, data = pack(command.jobs, command.trace)
    cursor = connection.execute(
        "INSERT INTO inturn_commands (verb, job_id, key, older_than, submitted_at, items, data, actor)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            command.verb,
            command.job_id,
            command.key,
            command.older_than,
            time.time(),
            items,
            data,
            command.actor,
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def answered(connection: sqlite3.Connection, command_id: int) -> Answer | None:
    """The answer to *command_id*, deleting the row, or None while it has none."""
    row = connection.execute(
        "SELECT answer FROM inturn_commands WHERE id = ? AND answered_at IS NOT NULL", (command_id,)
    ).fetchone()
    if row is None:
        return None
    connection.execute("DELETE FROM inturn_commands WHERE id = ?", (command_id,))
    fields = json.loads(row[0])
    return Answer(
        result=fields["result"], error=fields["error"], error_args=tuple(fields["error_args"])
    )


def withdraw(connection: sqlite3.Connection, command_id: int) -> bool:
    """Withdraw *command_id* unless a supervisor took it; True if it was withdrawn."""
    deleted = connection.execute(
        "DELETE FROM inturn_commands WHERE id = ? AND taken_at IS NULL", (command_id,)
    ).rowcount
    return deleted == 1


def take(connection: sqlite3.Connection) -> list[Command]:
    """For the supervisor: take every command not taken yet, oldest first."""
    select = (
        "SELECT id, verb, job_id, key, older_than, items, data, actor FROM inturn_commands"
        " WHERE taken_at IS NULL ORDER BY id"
    )
    if connection.execute(select).fetchone() is None:
        return []  # the usual poll: a read, no write lock
    connection.execute("BEGIN IMMEDIATE")
    try:
        rows = connection.execute(select).fetchall()
        connection.execute(
            "UPDATE inturn_commands SET taken_at = ? WHERE taken_at IS NULL", (time.time(),)
        )
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return [
        Command(
            id=command_id,
            verb=verb,
            job_id=job_id,
            key=key,
            older_than=older_than,
            jobs=unpack(items, data),
            actor=actor,
            trace=sent_trace(items),
        )
        for command_id, verb, job_id, key, older_than, items, data, actor in rows
    ]


def answer(connection: sqlite3.Connection, command_id: int, reply: Answer) -> None:
    """For the supervisor: record its answer to *command_id*."""
    text = json.dumps(
        {"result": reply.result, "error": reply.error, "error_args": list(reply.error_args)}
    )
    connection.execute(
        "UPDATE inturn_commands SET answered_at = ?, answer = ? WHERE id = ?",
        (time.time(), text, command_id),
    )


def reset(connection: sqlite3.Connection) -> None:
    """When a supervisor opens the file: what a dead one took unanswered is taken again."""
    connection.execute("UPDATE inturn_commands SET taken_at = NULL WHERE answered_at IS NULL")
    connection.execute(
        "DELETE FROM inturn_commands WHERE answered_at < ?", (time.time() - _KEEP_ANSWERS,)
    )
