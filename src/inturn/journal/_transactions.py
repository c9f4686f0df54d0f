"""Transactional steps: a step's function runs in the transaction that records its result.

Theory of operation
-------------------
`Job.transaction` hands the journal a `Transaction` (job, attempt, name)
and *run*, which calls the user's function on a connection to the journal's
own database and encodes its result.  The journal applies it like any
batch, on its thread and inside the group's transaction, so a transactional
step rides the group commit:

1. the fence: the job is unfinished and no later attempt started (and, in a
   fleet, its key is this member's: the dialect's own check).  Otherwise the
   step is superseded and *run* is not called;
2. a result recorded before (an earlier attempt's, or another process's) is
   the answer, and *run* is not called: once committed, a step never runs
   again;
3. in a savepoint: *run*, then the `Step` row.  If *run* raises, the
   savepoint is rolled back and its exception is the request's verdict.

The journal's transaction holds what the fence read until it commits (a
SQLite file's write lock; in PostgreSQL the job's row, locked, and the
member's heartbeat row, which no other member can take over while it is
locked), so nothing can change the job between the fence and the commit.

The user's code shares the journal's connection for the length of *run*.
On SQLite an authorizer refuses what would break the group's transaction
or the journal's tables: ``BEGIN``/``COMMIT``/``ROLLBACK``, the journal's
savepoint, ``ATTACH``, a ``PRAGMA`` that sets, and any write or schema
change to a table named ``inturn_...`` (`SQLiteGuard`); the journal's own
statements that end a transaction have texts of their own (`COMMIT`), and
should the transaction end all the same, the journal stops (`ended`).  On PostgreSQL,
*run* runs inside a psycopg transaction block, where ``commit()`` and
``rollback()`` raise; SQL that ends the transaction anyway (``COMMIT``)
is found at once and stops the journal (`ended`), as a failed commit does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

import attrs

__all__ = [
    "COMMIT",
    "JOURNAL_PREFIX",
    "RELEASE_STEP",
    "ROLLBACK",
    "ROLLBACK_STEP",
    "SAVEPOINT",
    "SQLiteGuard",
    "Run",
    "TransactionEnded",
    "ended",
]

Run = Callable[[object], bytes]
"""What a journal calls in a transaction: the user's function on the journal's connection,
its result encoded."""

JOURNAL_PREFIX: Final = "inturn_"
"""How the names of the journal's own SQLite tables and indexes begin."""

SAVEPOINT: Final = "inturn_transaction"
"""The savepoint around a transactional step's function and its record."""

COMMIT: Final = "COMMIT /* the journal's */"
ROLLBACK: Final = "ROLLBACK /* the journal's */"
"""How the journal ends its transactions on an SQLite connection a step's function may use.

SQLite consults the authorizer when it prepares a statement, and `sqlite3`
keeps prepared statements by their text: a user's ``COMMIT`` would be the
journal's own, prepared while nothing was refused, and run unasked.  Texts of
the journal's own keep the two apart."""

ROLLBACK_STEP: Final = f"ROLLBACK TO {SAVEPOINT} /* the journal's */"
RELEASE_STEP: Final = f"RELEASE {SAVEPOINT} /* the journal's */"
"""How the journal ends a transactional step's savepoint on SQLite (see `COMMIT`)."""

_TRANSACTION: Final = sqlite3.SQLITE_TRANSACTION
_SAVEPOINT: Final = sqlite3.SQLITE_SAVEPOINT
_PRAGMA: Final = sqlite3.SQLITE_PRAGMA
_DENIED_ALWAYS: Final = frozenset({_TRANSACTION, sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH})
_READS: Final = frozenset(
    {sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)


@attrs.define(eq=False)
class SQLiteGuard:
    """The authorizer of a journal's SQLite connection: allows everything, except while
    user code runs on it (*active*), when it refuses what would break the journal.

    Installed once, when the connection opens: SQLite consults an authorizer
    only while it prepares a statement, so the journal's own statements,
    prepared once and cached, pay nothing for it.
    """

    active: bool = False

    def __call__(
        self,
        action: int,
        first: str | None,
        second: str | None,
        database: str | None,
        trigger: str | None,
    ) -> int:
        if not self.active or action in _READS:
            return sqlite3.SQLITE_OK
        if action in _DENIED_ALWAYS:
            return sqlite3.SQLITE_DENY
        if action == _SAVEPOINT:  # first: BEGIN, RELEASE or ROLLBACK; second: the name
            return sqlite3.SQLITE_DENY if (second or "").lower() == SAVEPOINT else sqlite3.SQLITE_OK
        if action == _PRAGMA:  # first: the pragma; second: its value, if one is set
            return sqlite3.SQLITE_OK if second is None else sqlite3.SQLITE_DENY
        if any(_journal_owned(name) for name in (first, second)):
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def run(self, connection: sqlite3.Connection, run: Run, describe: str) -> bytes:
        """``run(connection)`` in the journal's savepoint, the guard active: its result, with
        the savepoint still open for the step's record (`RELEASE_STEP` ends it).  If *run*
        raises, the savepoint is rolled back and released, and the exception goes on; if
        it ended the journal's transaction, `ended`."""
        connection.execute(f"SAVEPOINT {SAVEPOINT}")
        self.active = True
        try:
            data = run(connection)
        except BaseException as exc:
            self.active = False
            if not connection.in_transaction:
                raise ended(describe) from exc
            connection.execute(ROLLBACK_STEP)
            connection.execute(RELEASE_STEP)
            raise
        finally:
            self.active = False
        if not connection.in_transaction:
            raise ended(describe)
        return data


def _journal_owned(name: str | None) -> bool:
    if name is None:
        return False
    lowered = name.lower()
    return lowered.startswith(JOURNAL_PREFIX) or lowered == "sqlite_sequence"


class TransactionEnded(RuntimeError):
    """A step's function ended the journal's transaction: the journal stops (not the
    request's error alone)."""


def ended(describe: str) -> TransactionEnded:
    """The error that stops a journal whose transaction a step's function ended."""
    return TransactionEnded(
        f"{describe}: a transaction's function ended the journal's transaction (COMMIT or"
        " ROLLBACK on its connection): what reached the database is unknown, so the"
        " journal stops"
    )
