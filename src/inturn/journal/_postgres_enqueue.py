"""A job written into a caller's own PostgreSQL transaction (`inturn.enqueue`): the statements.

Theory of operation
-------------------
A producer that is no member (a Django view, a script) writes a job with
the rest of its transaction: the job exists if and only if its caller
commits.  Three things a member does at once must wait for that commit, or
be done without a lock held until then, since a caller's transaction may
stay open for as long as it likes:

* Its id comes from the ``job_ids`` sequence (`_postgres_schema.producers`),
  which holds no lock: members take their blocks from it too.
* Its place in its key's order is taken at COMMIT, by the deferred trigger
  on ``unplaced``, under the key's row lock, as a member's group commit
  takes places: so places rise in commit order on each key, whoever wrote
  the job, and the key's row is locked only while the caller commits.  The
  trigger sends the wake-up (``NOTIFY``, delivered at commit) when the key
  has no owner.  A keyless job needs no place: it takes its id, and wakes
  the fleet.
* A single holder (no fleet) keeps what it runs in memory and would never
  see such a job: the producer reads ``meta`` ``FOR KEY SHARE`` and refuses
  if a live single holder holds the journal.  That lock, held until the
  caller commits, conflicts only with a single holder's ``FOR UPDATE``
  when it takes the journal: so one that opens meanwhile waits for the
  caller, and reads its job and its id at recovery.  Members and a live
  holder's own writes never wait for it.

A unique key is reserved as a member reserves it, in the ``uniques`` row,
held until the caller commits (a member sending with the same unique key
waits for that commit: the answer depends on it).

Every statement names its tables with the journal's schema, quoted: the
caller's search path is not ours to change (``SET LOCAL`` would outlive
the savepoint the job is written in).

The statements come out of a generator (`steps`), which the sync and the
asyncio drivers (`inturn.producers`) run on their connections: one
sequence of decisions, two kinds of I/O.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Final

import attrs

from ..errors import DuplicateError, JournalError, JournalLocked
from ._postgres_fleet import CHANNEL, DUE
from ._postgres_schema import SCHEMA_VERSION
from ._uniques import Uniques, duplicate

__all__ = ["NewJob", "Query", "Rows", "check", "steps"]


@attrs.frozen
class NewJob:
    """A job a producer writes, its inputs checked (`inturn.producers`)."""

    key: str | None
    data: bytes
    unique: str | None
    unique_for: float | None
    due_at: float | None
    now: float
    """The producer's Unix time: when the job was accepted, and what a dedup window is judged by."""
    trace: str | None = None
    """The trace context it was sent in (`Append.trace`)."""


@attrs.frozen
class Query:
    """One statement for the driver to run."""

    sql: str
    parameters: tuple[object, ...] = ()


Rows = tuple[list[tuple[Any, ...]], int]
"""What a statement returned: its rows (none if it returns none), and its row count."""

Steps = Generator[Query, Rows, int]


def check(schema: str, name: str) -> Generator[Query, Rows, None]:
    """Raise if *schema* holds no journal a producer can write to; change nothing, take no lock.

    Run outside the savepoint: first, when the caller's transaction has yet
    to begin (this begins it), and after `steps` found a table missing, to
    say why.
    """
    rows, _ = yield Query(
        "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
        (f'"{schema}".meta', f'"{schema}".unplaced'),
    )
    meta, unplaced = rows[0]
    if not meta:
        raise JournalError(
            f"{name}: no inturn journal there; open a PostgresJournal(..., schema={schema!r},"
            " fleet=True) on it once to create it"
        )
    if not unplaced:
        raise JournalError(
            f"{name}: the journal is of an older schema version; open a PostgresJournal of this"
            " inturn on it once to upgrade it"
        )


def steps(schema: str, name: str, job: NewJob) -> Steps:
    """The statements that write *job*, inside the savepoint the driver holds; its id.

    Raises (the driver rolls the savepoint back): `JournalLocked` if a live
    single holder holds the journal, `DuplicateError` if *job*'s unique key
    is reserved, `JournalError` for a journal of another version.
    """
    s = f'"{schema}".'
    # The id is taken before the lock: one refused is never used (ids may skip), and a single
    # holder taking the journal meanwhile reads the sequence once it has, after this.
    rows, _ = yield Query(
        f"SELECT meta.version, EXISTS (SELECT 1 FROM {s}processes WHERE id = meta.owner"
        f" AND NOT fleet AND expires_at > clock_timestamp()), nextval('{s}job_ids')"
        f" FROM {s}meta FOR KEY SHARE OF meta"
    )
    version, held, job_id = rows[0]
    if version != SCHEMA_VERSION:
        raise JournalError(
            f"{name}: the journal's schema is version {version}, this inturn writes version"
            f" {SCHEMA_VERSION}; open a PostgresJournal of this inturn on it to upgrade it"
        )
    if held:
        raise JournalLocked(name, HELD)
    uniques = Uniques("%s", prefix=s)
    if job.unique is not None:
        _, taken = yield Query(uniques.take, (job.unique, job_id, job.now, None))
        if not taken:
            raise (yield from _holder(uniques, job.unique))
    queued = job.due_at is None
    insert = (
        f"WITH job AS (INSERT INTO {s}jobs (id, key, unique_key, unique_for, data, accepted_at,"
        " seq, due_at, trace) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (unique_key)"
        " WHERE state = 'pending' AND unique_key IS NOT NULL DO NOTHING RETURNING id, key) "
    )
    row = (
        job_id,
        job.key,
        job.unique,
        job.unique_for,
        job.data,
        job.now,
        job_id if queued and job.key is None else None,  # keyed: placed at COMMIT
        job.due_at,
        job.trace,
    )
    if queued and job.key is not None:
        then = f"INSERT INTO {s}unplaced (job_id, key) SELECT id, key FROM job"
        _, inserted = yield Query(insert + then, row)
    else:  # claimable at commit (keyless), or to be promoted when due (scheduled)
        wake = schema if queued else schema + DUE
        _, inserted = yield Query(
            insert + "SELECT pg_notify(%s, %s) FROM job", (*row, CHANNEL, wake)
        )
    if not inserted:  # a second guard, as the partial unique index is
        assert job.unique is not None
        raise (yield from _holder(uniques, job.unique))
    return int(job_id)


HELD: Final = (
    "the journal is held by a single supervisor (not a fleet), which runs only the jobs it"
    " writes itself; inturn.enqueue writes to a fleet's journal: open every supervisor on it"
    " with PostgresJournal(..., fleet=True)"
)


def _holder(uniques: Uniques, unique: str) -> Generator[Query, Rows, DuplicateError]:
    reservation, pending = uniques.held
    rows, _ = yield Query(reservation, (unique,))
    if not rows:
        rows, _ = yield Query(pending, (unique,))
    return duplicate(unique, rows[0] if rows else None)
