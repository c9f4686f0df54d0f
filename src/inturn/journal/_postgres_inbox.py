"""The operators' inbox of a PostgreSQL journal: commands for the supervisor that holds it.

The same protocol as the SQLite inbox (`_sqlite_inbox` explains it): an
operator inserts a row in ``commands`` on a connection of its own and polls
for the answer; the supervisor takes what is waiting every ``poll_interval``
seconds on its journal's thread, carries it out with its `Supervisor`
methods, and writes the answer.  Taking is one ``UPDATE ... RETURNING``, so
two takers never take one command.

All functions here block on the server: they run off trio's thread.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Final

from ._sent import pack, sent_trace, unpack
from .records import Answer, Command

if TYPE_CHECKING:
    import psycopg

__all__ = ["answer", "answered", "reset", "submit", "take", "withdraw"]

_KEEP_ANSWERS: Final = 86_400.0
"""Seconds an answer nobody read (its operator died) stays in the table."""


def submit(connection: psycopg.Connection[Any], command: Command) -> int:
    """Queue *command*; return its id."""
    items, data = pack(command.jobs, command.trace)
    row = connection.execute(
        "INSERT INTO commands (verb, job_id, key, older_than, submitted_at, items, data, actor)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
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
    ).fetchone()
    assert row is not None
    return int(row[0])


def answered(connection: psycopg.Connection[Any], command_id: int) -> Answer | None:
    """The answer to *command_id*, deleting the row, or None while it has none."""
    row = connection.execute(
        "DELETE FROM commands WHERE id = %s AND answered_at IS NOT NULL RETURNING answer",
        (command_id,),
    ).fetchone()
    if row is None:
        return None
    fields = json.loads(row[0])
    return Answer(
        result=fields["result"], error=fields["error"], error_args=tuple(fields["error_args"])
    )


def withdraw(connection: psycopg.Connection[Any], command_id: int) -> bool:
    """Withdraw *command_id* unless a supervisor took it; True if it was withdrawn."""
    deleted = connection.execute(
        "DELETE FROM commands WHERE id = %s AND taken_at IS NULL", (command_id,)
    ).rowcount
    return deleted == 1


def take(connection: psycopg.Connection[Any]) -> list[Command]:
    """For the supervisor: take every command not taken yet, oldest first."""
    rows = connection.execute(
        "UPDATE commands SET taken_at = %s WHERE taken_at IS NULL"
        " RETURNING id, verb, job_id, key, older_than, items, data, actor",
        (time.time(),),
    ).fetchall()
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
        for command_id, verb, job_id, key, older_than, items, data, actor in sorted(
            rows, key=lambda row: row[0]
        )
    ]


def answer(connection: psycopg.Connection[Any], command_id: int, reply: Answer) -> None:
    """For the supervisor: record its answer to *command_id*."""
    text = json.dumps(
        {"result": reply.result, "error": reply.error, "error_args": list(reply.error_args)}
    )
    connection.execute(
        "UPDATE commands SET answered_at = %s, answer = %s WHERE id = %s",
        (time.time(), text, command_id),
    )


def reset(connection: psycopg.Connection[Any]) -> None:
    """When a supervisor opens the journal: what a dead one took unanswered is taken again."""
    connection.execute("UPDATE commands SET taken_at = NULL WHERE answered_at IS NULL")
    connection.execute(
        "DELETE FROM commands WHERE answered_at < %s", (time.time() - _KEEP_ANSWERS,)
    )
