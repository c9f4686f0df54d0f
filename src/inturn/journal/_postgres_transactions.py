"""Transactional steps on PostgreSQL: the functions of a group's transactions, run set-based.

`_transactions` says what a transactional step is; this module runs the
functions on the journal's connection.  Round trips are what cost here, and
a group of a busy journal holds many transactional steps (one per key that
is running one): so a group's steps share one fence (one ``SELECT ... FOR
UPDATE`` of their jobs), one savepoint around all their functions (a psycopg
transaction block, in which ``commit()`` and ``rollback()`` raise), one
switch of ``search_path`` to the connection's own and back, and one
``executemany`` of their records (`transact_all`); and their functions run
in psycopg's pipeline mode, so that the statements whose results no function
reads (an ``INSERT``, an ``UPDATE``) reach the server together.  The loop of
`_sql_apply` takes the plain way for a lone one (`run_and_record`).

A function that raises rolls the savepoint back, and with it the writes of
the functions that ran before it in the set.  Pipelined, an error shows where
the pipeline next waits for a result, which may be in another function: the
set runs again a function at a time, to learn whose it was.  That function's
request is refused with its exception, and the others run again without it.
A function may so run more than once before its transaction commits, which
the docs of `Job.transaction` say; raising is the rare way, and the common
one pays no savepoint and no round trip a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from ._postgres_fleet import OWNER
from ._postgres_schema import one_row
from ._thread import Request
from ._transactions import SAVEPOINT, Run, ended
from .records import Transaction

if TYPE_CHECKING:
    import psycopg

__all__ = ["Failed", "Unattributed", "lone_transaction", "run_in_savepoint", "transact_all"]


class Unattributed(Exception):
    """Something raised while a set's functions ran pipelined: the savepoint is rolled back,
    and the set runs again one function at a time, to learn whose it was."""


class Failed(Exception):
    """The function at *position* of a set raised *error*; the savepoint is rolled back."""

    def __init__(self, position: int, error: Exception) -> None:
        super().__init__(position, error)
        self.position, self.error = position, error


def lone_transaction(request: Request) -> bool:
    return len(request.changes) == 1 and isinstance(request.changes[0], Transaction)


def run_in_savepoint(
    connection: psycopg.Connection[Any],
    name: str,
    work: Sequence[tuple[Transaction, Run]],
    *,
    pipelined: bool = False,
) -> list[bytes]:
    """Each function of *work*, in order, in one savepoint, with the connection's own
    ``search_path``; then each result recorded as its step.  The results.

    *pipelined*: in psycopg's pipeline mode, so that statements whose results no function
    reads go to the server together, not a round trip each.  An error then surfaces where
    the pipeline syncs, which may be in a later function than the statement's own: any
    exception is `Unattributed`.

    Raises `Failed` for a function that raised (nothing of the set kept); the driver's
    error if the connection failed (the journal's to handle); a `RuntimeError`
    (`_transactions.ended`) if a function ended the journal's transaction.
    """
    try:
        with connection.transaction(savepoint_name=SAVEPOINT):
            journal_path, _ = one_row(connection, _USER_PATH)
            if pipelined:
                try:
                    with connection.pipeline():
                        results = [run(connection) for _, run in work]
                except Exception as exc:
                    raise Unattributed from exc
            else:
                results = []
                for position, (_, run) in enumerate(work):
                    try:
                        results.append(run(connection))
                    except Exception as exc:
                        raise Failed(position, exc) from None
                    if connection.info.transaction_status != _IN_TRANSACTION:
                        raise ended(name)
            if connection.info.transaction_status != _IN_TRANSACTION:
                raise ended(name)
            connection.execute(_JOURNAL_PATH, (journal_path,))
            connection.cursor().executemany(
                "INSERT INTO steps (job_id, n, name, data)"
                " VALUES (%s, (SELECT COUNT(*) FROM steps WHERE job_id = %s), %s, %s)",
                [
                    (change.job_id, change.job_id, change.name, data)
                    for (change, _), data in zip(work, results, strict=True)
                ],
            )
    except Exception as exc:
        if connection.broken or connection.closed:
            raise (exc.error if isinstance(exc, Failed) else exc) from None
        if connection.info.transaction_status not in _STILL_IN_TRANSACTION:
            raise ended(name) from exc
        raise
    return results


def transact_all(
    connection: psycopg.Connection[Any], requests: list[Request], process: int | None, name: str
) -> list[Request]:
    """Apply the lone `Transaction`s of several requests, set-based; the requests not applied.

    Those the fence refuses go through the loop again, to learn why (superseded, or
    another member's key).  *process* is the fleet member's, None for a single holder.
    """
    changes = [cast(Transaction, request.changes[0]) for request in requests]
    owned, mine = ("", ()) if process is None else (" AND " + OWNER, (process, process))
    found = {
        job_id: (attempts, data)
        for job_id, attempts, data in connection.execute(
            "SELECT jobs.id, jobs.attempts, steps.data"
            " FROM unnest(%s::bigint[], %s::text[]) AS asked (id, name)"
            " JOIN jobs ON jobs.id = asked.id"
            " LEFT JOIN steps ON steps.job_id = asked.id AND steps.name = asked.name"
            " WHERE jobs.state = 'pending'" + owned + " FOR UPDATE OF jobs",
            ([change.job_id for change in changes], [change.name for change in changes], *mine),
        )
    }
    missed: list[Request] = []
    work: list[tuple[Request, Transaction]] = []
    for request, change in zip(requests, changes, strict=True):
        row = found.get(change.job_id)
        if row is None or row[0] > change.attempt or request.run is None:
            missed.append(request)
        elif row[1] is not None:  # recorded before: not run again
            request.result = bytes(row[1])
        else:
            work.append((request, change))
    pipelined = True
    while work:
        try:
            results = run_in_savepoint(
                connection,
                name,
                [(change, cast(Run, request.run)) for request, change in work],
                pipelined=pipelined,
            )
        except Unattributed:
            pipelined = False  # again, a function at a time: whose was it?
            continue
        except Failed as failed:  # refused alone; the others run again without it
            request, _ = work.pop(failed.position)
            request.error = failed.error
            continue
        for (request, _), data in zip(work, results, strict=True):
            request.result = data
        break
    return missed


_USER_PATH: Final = (
    "SELECT current_setting('search_path'), set_config('search_path', reset_val, true)"
    " FROM pg_settings WHERE name = 'search_path'"
)
"""The journal's ``search_path``, then the connection's default in its place for the span of the
functions (transaction-local: the rollback of the savepoint restores the journal's, else
`_JOURNAL_PATH` does)."""

_JOURNAL_PATH: Final = "SELECT set_config('search_path', %s, true)"

_IN_TRANSACTION: Final = 2
"""``psycopg.pq.TransactionStatus.INTRANS``: a transaction block, no error."""

_STILL_IN_TRANSACTION: Final = (2, 3)
"""INTRANS, INERROR: the journal's transaction is still open (an error only aborts it until
the rollback of a savepoint)."""
