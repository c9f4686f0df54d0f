"""Unique keys' reservations in the SQL journals: the ``uniques`` table.

Theory of operation
-------------------
``uniques`` has one row per reserved unique key: the job that holds it, and
``until``, NULL while that job is unfinished, and once it has finished with a
``unique_for`` window, the Unix time the reservation ends.  A job finishing
without a window deletes its row.  So the table outlives what reserves
through it: the row of a completed job (deleted) and of a purged dead letter.

Taking a key is one statement under the table's primary key: an upsert that
inserts a free key, or takes over a row whose reservation ended (or, for a
dead letter coming back, its own), and otherwise changes nothing.  The
database decides, so two writers can never both take one key.  Every time
here is the writer's (`inturn.Journal.write`'s ``now``).

Ended reservations are deleted as they are taken over, and a few at every
commit (`expire`), oldest first, through a partial index on ``until``: more
than a commit can make, so they never pile up.

`SQLiteJournal` and `PostgresJournal` share these statements; each makes a
`Uniques` with its driver's placeholder and its tables' names (SQLite's carry
the ``inturn_`` prefix; PostgreSQL's live in a schema of their own).
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from ..errors import DuplicateError

__all__ = ["Uniques", "duplicate"]

EXPIRE_AT_ONCE: Final = 64
"""Ended reservations a commit deletes at most: few enough to cost nothing, and
more than one commit makes (one per finished job)."""


@attrs.frozen
class Uniques:
    """The reservation statements, with *mark* as the driver's placeholder (``?``, ``%s``)."""

    mark: str
    uniques: str = "uniques"
    """The name of the reservations' table."""
    jobs: str = "jobs"
    """The name of the jobs' table (or a view of it that shows every pending job)."""
    skip_locked: str = ""
    """What makes `expire` pass over rows another transaction holds (PostgreSQL's ``FOR UPDATE
    SKIP LOCKED``): a producer that took an ended reservation over (`inturn.enqueue`) holds its
    row until its caller commits, and a member's commit must not wait for that."""
    prefix: str = ""
    """What qualifies the tables' names (a producer's ``"schema".``: its search path is the caller's)."""

    def reserve(
        self, connection: Any, unique: str | None, job_id: int, now: float, own: int | None = None
    ) -> DuplicateError | None:
        """*job_id* takes *unique*; or the error naming who reserves it (nothing changed).

        *own* is a dead letter coming back (`Requeue`, `Revive`): its own
        reservation passes to *job_id*.
        """
        if unique is None:
            return None
        taken = connection.execute(self.take, (unique, job_id, now, own)).rowcount
        return None if taken else self.holder(connection, unique)

    @property
    def take(self) -> str:
        """`reserve`'s statement, its parameters (unique, job id, now, own): one row if taken."""
        p = self.mark
        return (
            f"INSERT INTO {self.prefix}{self.uniques} AS uniques (unique_key, job_id)"
            f" VALUES ({p}, {p})"
            " ON CONFLICT (unique_key) DO UPDATE SET job_id = excluded.job_id, until = NULL"
            f" WHERE uniques.until <= {p} OR uniques.job_id = {p}"
        )

    @property
    def held(self) -> tuple[str, str]:
        """`holder`'s statements, each of the unique key: its reservation, else its pending job."""
        p = self.mark
        return (
            f"SELECT job_id, until FROM {self.prefix}{self.uniques} WHERE unique_key = {p}",
            f"SELECT id, NULL FROM {self.prefix}{self.jobs}"
            f" WHERE unique_key = {p} AND state = 'pending'",
        )

    def release(
        self,
        connection: Any,
        unique: str | None,
        unique_for: float | None,
        job_id: int,
        now: float,
    ) -> None:
        """Finished job *job_id* gives *unique* up: at once, or at the end of its window."""
        if unique is None:
            return
        p, table = self.mark, self.uniques
        if unique_for is None:
            connection.execute(
                f"DELETE FROM {table} WHERE unique_key = {p} AND job_id = {p}", (unique, job_id)
            )
        else:
            connection.execute(
                f"UPDATE {table} SET until = {p} WHERE unique_key = {p} AND job_id = {p}",
                (now + unique_for, unique, job_id),
            )

    def expire(self, connection: Any, now: float) -> int:
        """Delete a few reservations that ended by *now*, the oldest first; how many."""
        p, table = self.mark, self.uniques
        return int(
            connection.execute(
                f"DELETE FROM {table} WHERE unique_key IN (SELECT unique_key FROM {table}"
                f" WHERE until <= {p} ORDER BY until LIMIT {p}{self.skip_locked})",
                (now, EXPIRE_AT_ONCE),
            ).rowcount
        )

    def holder(self, connection: Any, unique: str) -> DuplicateError:
        """The `DuplicateError` naming the job that reserves *unique*, and until when."""
        reservation, pending = self.held
        row = (
            connection.execute(reservation, (unique,)).fetchone()
            # a second guard: the pending job itself
            or connection.execute(pending, (unique,)).fetchone()
        )
        return duplicate(unique, row)


def duplicate(unique: str, row: Any) -> DuplicateError:
    """The `DuplicateError` for *unique*, from the row `Uniques.held` found (job id, until)."""
    return DuplicateError(unique, *row) if row is not None else DuplicateError(unique, 0)
