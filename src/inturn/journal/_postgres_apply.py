"""PostgreSQL's statements for the one SQL apply (`_sql_apply`), and its set-based ways.

What `PostgresJournal` adds to the shared loop: for a fleet member, a change
to a job applies only while the member owns the job's key (`members.OWNED`),
a new job's place is taken under its key's row lock, and a member learns
whether to wake the fleet.  Round trips cost more than statements here, so
the runtime's commonest batches go in fewer: a completion with its
successor's start in one statement, a batch of new jobs in one
``executemany`` (`PostgresStatements.whole`); and across a group, the
actors' lone starts (`mark_all`) and members' last completions with their
keys' release (`complete_all`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final, cast

import attrs

from ..errors import JournalError, LeaseLost
from . import _postgres_fleet as members
from ._postgres_schema import one_row
from ._postgres_transactions import Failed, run_in_savepoint
from ._reads import KEEP_MINUTES, audit_row, finished, minute_of
from ._sql_apply import Held, Letter, Refused, apply, refuse_duplicate
from ._sql_schedules import ScheduleSQL
from ._thread import Request
from ._transactions import Run
from ._uniques import Uniques
from .records import (
    Append,
    Audit,
    Complete,
    Discard,
    Due,
    Fire,
    FleetChange,
    Halt,
    MarkAttempt,
    Purge,
    Release,
    Requeue,
    Resume,
    Retrying,
    Revive,
    ScheduleDrop,
    SchedulePause,
    ScheduleSet,
    Step,
    Transaction,
)

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "UNIQUES",
    "Member",
    "PostgresStatements",
    "complete_all",
    "count_finished",
    "last_completion",
    "lone_mark",
    "mark_all",
    "placed_keys",
]

UNIQUES: Final = Uniques("%s", skip_locked=" FOR UPDATE SKIP LOCKED")


SCHEDULES: Final = ScheduleSQL("schedules", "%s")

LEASED: Final = (
    " AND (owner IS NULL OR owner = %s OR NOT EXISTS (SELECT 1 FROM processes"
    " WHERE processes.id = schedules.owner AND expires_at > clock_timestamp()))"
)
"""A fleet member's firing of a schedule: its lease is free, the member's, or an expired
member's."""


@attrs.define(eq=False)
class PostgresStatements:
    """PostgreSQL's `_sql_apply.Statements` for one request, on the transaction under way.

    For a fleet *member*, a change to a job is fenced (`_postgres_fleet.OWNED`)
    unless it is an operator's, and a new job's place is taken under its
    key's row lock.
    """

    connection: psycopg.Connection[Any]
    name: str
    member: Member | None
    fencing: bool
    now: float = attrs.field(factory=time.time)
    """The request's time (its writer's clock: `Journal.write`'s *now*): when its new jobs
    were accepted and its dead letters discarded."""
    uniques: Uniques = UNIQUES
    owned: str = attrs.field(init=False)
    mine: tuple[int, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        fenced = self.member is not None and self.fencing
        self.owned = members.OWNED if fenced else ""
        self.mine = (self.member.process,) * 2 if fenced and self.member else ()

    @classmethod
    def apply(
        cls,
        connection: psycopg.Connection[Any],
        request: Request,
        next_id: int,
        name: str,
        member: Member | None = None,
    ) -> int:
        """`_sql_apply.apply` of *request*; the next free id."""
        fencing = member is not None and not request.operator
        return apply(cls(connection, name, member, fencing, request.now), request, next_id)

    def whole(self, request: Request, next_id: int) -> int | None:
        changes = request.changes
        complete, mark = changes if len(changes) == 2 else (None, None)
        if (
            isinstance(complete, Complete)
            and isinstance(mark, MarkAttempt)
            and complete.job_id != mark.job_id
        ):
            # The runtime's completion with its successor's start: one round trip.
            done, unique, unique_for, marked = one_row(
                self.connection,
                _done("= %s", self.owned) + ", marked AS (" + _MARK + self.owned + " RETURNING id)"
                " SELECT done.id, done.unique_key, done.unique_for, (SELECT count(*) FROM marked)"
                " FROM (SELECT 1) AS one LEFT JOIN done ON true",
                (complete.job_id, *self.mine, mark.attempt, mark.job_id, mark.attempt, *self.mine),
            )
            if done is not None:
                UNIQUES.release(self.connection, unique, unique_for, complete.job_id, request.now)
            for applied, one in ((done is not None, complete), (bool(marked), mark)):
                if not applied:
                    self.not_applied(one, one.job_id, next_id)
                    request.superseded.append(one)
            return next_id
        if len(changes) > 1 and all(_plain(change) for change in changes):
            # A batch of new jobs that take no unique key (send_many): each statement
            # once for all of them, in one round trip.
            for change in changes:
                assert isinstance(change, Append)
                if not self.fresh(change.job_id, next_id):
                    raise Refused(
                        JournalError(f"{self.name}: job id {change.job_id} was used before")
                    )
                next_id = change.job_id + 1
            appends = cast("list[Append]", changes)
            return _append_all(self.connection, appends, self.now, self.member, next_id)
        return None

    def fresh(self, job_id: int, next_id: int) -> bool:
        return job_id >= next_id and (self.member is None or self.member.grants(job_id))

    def not_applied(self, change: FleetChange, job_id: int, next_id: int) -> None:
        if self.member is None:
            if job_id >= next_id:
                raise Refused(JournalError(f"{self.name}: job {job_id} was never appended"))
            return
        if (
            self.fencing
            and not isinstance(change, Purge | Requeue | Revive | Due)
            and self.connection.execute(
                f"SELECT 1 FROM jobs WHERE id = %s AND state = 'pending' AND NOT {members.OWNER}",
                (job_id, *self.mine),
            ).fetchone()
        ):
            raise Refused(LeaseLost(self.name))  # unfinished, and another owns it

    def append(self, change: Append, start: MarkAttempt | None) -> bool:
        place = None if change.due_at is not None else self._placed(change.key, change.job_id)
        inserted = self.connection.execute(
            "INSERT INTO jobs (id, key, unique_key, unique_for, data, accepted_at, seq, due_at,"
            " trace) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (unique_key)"
            " WHERE state = 'pending' AND unique_key IS NOT NULL DO NOTHING",
            (
                change.job_id,
                change.key,
                change.unique,
                change.unique_for,
                change.data,
                self.now,
                place,
                change.due_at,
                change.trace,
            ),
        ).rowcount
        if not inserted:
            refuse_duplicate(self, change.unique)
        return False  # its start is a statement of its own

    def due(self, change: Due) -> bool:
        due = self.connection.execute(
            "SELECT key FROM jobs WHERE id = %s AND state = 'pending' AND seq IS NULL FOR UPDATE",
            (change.job_id,),
        ).fetchone()
        if due is None:
            return False
        self.connection.execute(
            "UPDATE jobs SET seq = %s, due_at = NULL WHERE id = %s",
            (self._placed(due[0], change.seq), change.job_id),
        )
        return True

    def mark(self, change: MarkAttempt) -> bool:
        # Running again: no longer waiting to retry.  A start (attempts rising) is
        # superseded on a halted key.
        return self._fenced(_MARK, (change.attempt, change.job_id, change.attempt))

    def retrying(self, change: Retrying) -> bool:
        return self._fenced(
            "UPDATE jobs SET error = %s, retry_at = %s WHERE id = %s AND state = 'pending'",
            (change.error, change.retry_at, change.job_id),
        )

    def complete(self, change: Complete) -> Held | None:
        done = self.connection.execute(
            _done("= %s", self.owned) + " SELECT unique_key, unique_for FROM done",
            (change.job_id, *self.mine),
        ).fetchone()
        return None if done is None else Held(*done)

    def discard(self, change: Discard) -> Held | None:
        dead = self.connection.execute(
            "UPDATE jobs SET state = 'dead', error = %s, finished_at = %s, retry_at = NULL,"
            " due_at = NULL, stopped_during = %s WHERE id = %s AND state = 'pending'"
            + self.owned
            + " RETURNING unique_key, unique_for",
            (change.error, self.now, change.stopped_during, change.job_id, *self.mine),
        ).fetchone()
        return None if dead is None else Held(*dead)

    def halt_by(self, change: Discard) -> None:
        self.connection.execute(
            "INSERT INTO halted (key, job_id, error) SELECT key, id, error FROM jobs"
            " WHERE id = %s AND key IS NOT NULL ON CONFLICT (key) DO UPDATE"
            " SET job_id = EXCLUDED.job_id, error = EXCLUDED.error"
            " WHERE halted.job_id IS NULL",
            (change.job_id,),
        )

    def purge(self, change: Purge) -> bool:
        connection = self.connection
        sql = "DELETE FROM jobs WHERE id = %s AND state = 'dead'"
        if connection.execute(sql, (change.job_id,)).rowcount != 1:
            return False
        connection.execute("DELETE FROM steps WHERE job_id = %s", (change.job_id,))
        return True

    def step(self, change: Step) -> bool:
        return self._fenced(
            "INSERT INTO steps (job_id, n, name, data)"
            " SELECT id, (SELECT COUNT(*) FROM steps WHERE job_id = %s), %s, %s FROM jobs"
            " WHERE id = %s AND state = 'pending'",
            (change.job_id, change.name, change.data, change.job_id),
            " ON CONFLICT (job_id, name) DO UPDATE SET data = EXCLUDED.data",
        )

    def fence(self, change: Transaction) -> tuple[int, bytes | None] | None:
        # The job's row, locked, and (for a member) its heartbeat's row, renewed by this
        # transaction, which no claim takes over while it is locked: what this reads stays
        # so until the commit.
        row = self.connection.execute(
            "SELECT attempts, (SELECT data FROM steps WHERE job_id = %s AND name = %s)"
            " FROM jobs WHERE id = %s AND state = 'pending'" + self.owned + " FOR UPDATE",
            (change.job_id, change.name, change.job_id, *self.mine),
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def run_and_record(self, change: Transaction, run: Run) -> bytes:
        try:
            [data] = run_in_savepoint(self.connection, self.name, [(change, run)])
        except Failed as failed:
            raise Refused(failed.error) from None
        return data

    def letter(self, job_id: int) -> Letter | None:
        row = self.connection.execute(
            "SELECT unique_key, key FROM jobs WHERE id = %s AND state = 'dead' FOR UPDATE",
            (job_id,),
        ).fetchone()
        return None if row is None else Letter(*row)

    def requeue(self, change: Requeue, letter: Letter) -> None:
        connection = self.connection
        inserted = connection.execute(
            "INSERT INTO jobs (id, key, unique_key, unique_for, data, accepted_at, seq, trace)"
            " SELECT %s, key, unique_key, unique_for, data, %s, %s, trace FROM jobs WHERE id = %s"
            " ON CONFLICT (unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL"
            " DO NOTHING",
            (change.new_id, self.now, self._placed(letter.key, change.new_id), change.job_id),
        ).rowcount
        if not inserted:
            refuse_duplicate(self, letter.unique)
        connection.execute(  # a halt its discard caused names the job it becomes
            "UPDATE halted SET job_id = %s WHERE key = %s AND job_id = %s",
            (change.new_id, letter.key, change.job_id),
        )
        connection.execute("DELETE FROM jobs WHERE id = %s", (change.job_id,))
        connection.execute(  # the steps it made go with it
            "UPDATE steps SET job_id = %s WHERE job_id = %s", (change.new_id, change.job_id)
        )

    def revive(self, change: Revive, letter: Letter) -> None:
        connection, (unique, key) = self.connection, letter
        if (
            unique is not None
            and connection.execute(  # a second guard, as the partial index is
                "SELECT 1 FROM jobs WHERE unique_key = %s AND state = 'pending'", (unique,)
            ).fetchone()
        ):
            refuse_duplicate(self, unique)
        (place,) = one_row(
            connection,
            "UPDATE jobs SET state = 'pending', attempts = 0, error = NULL, retry_at = NULL,"
            " finished_at = NULL, stopped_during = NULL, seq = COALESCE(seq, id), due_at = NULL,"
            " owner = NULL WHERE id = %s RETURNING seq",
            (change.job_id,),
        )
        if self.member is not None:  # back in its own place: its key must be claimable
            self.member.wake |= key is None or members.revive(connection, key, place)
        if change.resume and key is not None:
            connection.execute("DELETE FROM halted WHERE key = %s", (key,))

    def halt(self, change: Halt) -> None:
        self.connection.execute(
            "INSERT INTO halted (key) VALUES (%s) ON CONFLICT DO NOTHING", (change.key,)
        )

    def audit(self, change: Audit, now: float) -> None:
        added = one_row(
            self.connection,
            "INSERT INTO audit (at, actor, verb, job_id, key, head, older_than, outcome, error,"
            " result) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            audit_row(change, now),
        )[0]
        # Ids come from a sequence, gaps and all: at most the newest *keep* are left.
        self.connection.execute("DELETE FROM audit WHERE id <= %s", (added - change.keep,))

    def resume(self, change: Resume) -> None:
        self.connection.execute("DELETE FROM halted WHERE key = %s", (change.key,))
        if self.member is not None:
            self.member.wake = True

    def schedule_set(self, change: ScheduleSet) -> bool:
        return SCHEDULES.set(self.connection, change)

    def schedule_drop(self, change: ScheduleDrop) -> bool:
        return SCHEDULES.drop(self.connection, change)

    def schedule_pause(self, change: SchedulePause) -> bool:
        return SCHEDULES.pause(self.connection, change)

    def fire(self, change: Fire) -> bool:
        if self.member is None:
            return SCHEDULES.fire(self.connection, change)
        # The schedule's lease: held by this member, or by none alive, and taken by this
        # firing; the member's heartbeat, renewed first in this transaction, fences it.
        process = self.member.process
        return SCHEDULES.fire(self.connection, change, LEASED, (process, process))

    def other(self, change: FleetChange, request: Request) -> bool:
        if not isinstance(change, Release) or self.member is None or not self.fencing:
            return False
        # (its row locked with the group's, `placed_keys`)
        released, _ = members.let_go(
            self.connection, self.member.process, [change.key], locked=True
        )
        if released:
            self.member.released.extend(released)
        else:  # a job waits (or the key is not ours): kept
            request.superseded.append(change)
        return True

    def _fenced(self, sql: str, parameters: tuple[object, ...], then: str = "") -> bool:
        """Run *sql*, fenced for a member, followed by *then*; whether it changed one row."""
        statement = sql + self.owned + then
        return self.connection.execute(statement, parameters + self.mine).rowcount == 1

    def _placed(self, key: str | None, at_least: int) -> int:
        """The place of a job joining *key*'s sequence now (a fleet member's: under the key's lock)."""
        member = self.member
        if member is None:
            return at_least
        if key is None:
            member.wake = True
            return at_least
        place, unowned = members.place(self.connection, key, at_least)
        member.wake |= unowned
        return place


@attrs.define(eq=False)
class Member:
    """What `_apply` needs of a fleet member: who it is, its ids, and whether to wake the fleet."""

    process: int
    granted: list[range]
    wake: bool = False
    """A key with no owner, or a keyless job, got work: NOTIFY at commit."""
    released: list[str] = attrs.field(factory=list)
    """Keys let go by `Release`s of the transaction."""

    def grants(self, job_id: int) -> bool:
        return any(job_id in block for block in self.granted)


def placed_keys(group: list[Request]) -> list[str]:
    """The keys whose rows the group's `Append`s (for their places) and `Release`s lock."""
    keys: list[str] = []
    for request in group:
        for change in request.changes:
            if isinstance(change, Release) or (
                isinstance(change, Append) and change.key is not None and change.due_at is None
            ):
                assert change.key is not None
                keys.append(change.key)
    return keys


def _plain(change: FleetChange) -> bool:
    return isinstance(change, Append) and change.unique is None


def _append_all(
    connection: psycopg.Connection[Any],
    appends: list[Append],
    now: float,
    member: Member | None,
    next_id: int,
) -> int:
    """`PostgresStatements.whole` of a batch of `Append`s without unique keys (their ids checked); the next free id."""
    places = [append.job_id for append in appends]
    if member is not None:
        keyed = [n for n, append in enumerate(appends) if append.key and append.due_at is None]
        member.wake |= any(append.key is None and append.due_at is None for append in appends)
        if keyed:
            cursor = connection.cursor()
            cursor.executemany(
                members.PLACE, [(appends[n].key, appends[n].job_id) for n in keyed], returning=True
            )
            for n in keyed:
                place, unowned = cursor.fetchone() or (places[n], False)
                places[n] = int(place)
                member.wake |= bool(unowned)
                cursor.nextset()
    connection.cursor().executemany(
        "INSERT INTO jobs (id, key, unique_for, data, accepted_at, seq, due_at, trace)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        [
            (
                append.job_id,
                append.key,
                append.unique_for,
                append.data,
                now,
                None if append.due_at is not None else place,
                append.due_at,
                append.trace,
            )
            for append, place in zip(appends, places, strict=True)
        ],
    )
    return next_id


def mark_all(
    connection: psycopg.Connection[Any], requests: list[Request], member: Member | None
) -> list[Request]:
    """Apply lone `MarkAttempt`s of several requests in one round trip; the requests not applied.

    Those go through the loop again, to learn why (superseded, or fenced off).
    """
    owned, mine = (members.OWNED, (member.process,) * 2) if member else ("", ())
    marks = [cast(MarkAttempt, request.changes[0]) for request in requests]
    cursor = connection.cursor()
    cursor.executemany(
        _MARK + owned + " RETURNING id",
        [(mark.attempt, mark.job_id, mark.attempt, *mine) for mark in marks],
        returning=True,
    )
    missed = []
    for request in requests:
        if not cursor.fetchall():
            missed.append(request)
        cursor.nextset()
    return missed


def last_completion(request: Request) -> bool:
    """Whether *request* is a member's ``[Complete(job), Release(key)]``."""
    changes = request.changes
    return (
        len(changes) == 2
        and isinstance(changes[0], Complete)
        and isinstance(changes[1], Release)
        and not request.operator
    )


def complete_all(
    connection: psycopg.Connection[Any], requests: list[Request], member: Member
) -> list[Request]:
    """Apply members' last completions and their keys' release, set-based; the requests not applied.

    The keys' rows are locked already, in key order (`_placed_keys`), so what
    waits for them cannot change before the commit.  A completion that did
    not apply goes through the loop again, to learn why; a key a job waits
    for is kept (its `Release` superseded).
    """
    mine = (member.process,) * 2
    ids = [cast(Complete, request.changes[0]).job_id for request in requests]
    done = {
        row[0]: row
        for row in connection.execute(
            _done("= ANY(%s)", members.OWNED) + " SELECT id, unique_key, unique_for FROM done",
            (ids, *mine),
        )
    }
    missed, completed = [], []
    for request in requests:
        row = done.get(cast(Complete, request.changes[0]).job_id)
        if row is None:
            missed.append(request)
            continue
        if row[1] is not None:
            UNIQUES.release(connection, row[1], row[2], row[0], request.now)
        completed.append(request)
    keys = [cast(Release, request.changes[1]).key for request in completed]
    released, _ = members.let_go(connection, member.process, keys, locked=True)
    member.released.extend(released)
    gone = set(released)
    for request, key in zip(completed, keys, strict=True):
        if key not in gone:  # kept: a job waits (or the key is not ours)
            request.superseded.append(request.changes[1])
    return missed


def _done(match: str, owned: str) -> str:
    """The start of a statement that completes the jobs whose id is *match*: they and
    their steps are deleted (``done`` holds each one's id, unique key and window)."""
    return (
        f"WITH done AS (DELETE FROM jobs WHERE id {match} AND state = 'pending'{owned}"
        " RETURNING id, unique_key, unique_for),"
        " gone AS (DELETE FROM steps WHERE job_id IN (SELECT id FROM done))"
    )


def lone_mark(request: Request) -> bool:
    return (
        len(request.changes) == 1
        and isinstance(request.changes[0], MarkAttempt)
        and not request.operator
    )


_MARK: Final = (
    "UPDATE jobs SET attempts = %s, retry_at = NULL WHERE id = %s AND state = 'pending'"
    " AND (%s <= attempts OR key IS NULL"
    "      OR NOT EXISTS (SELECT 1 FROM halted WHERE halted.key = jobs.key))"
)
"""A `MarkAttempt`: a start (attempts rising) is superseded on a halted key."""


def count_finished(connection: psycopg.Connection[Any], group: list[Request], pruned: int) -> int:
    """Count the jobs *group*'s applied batches completed and discarded, in its transaction:
    one upsert a minute into this server process's own row (``pg_backend_pid()``), so
    members never wait on each other's.  The first count of a minute after *pruned*
    deletes the counts beyond the hour kept; return the minute pruned at."""
    tally: dict[int, list[int]] = {}
    for request in group:
        if request.error is None:
            completed, discarded = finished(request.changes, request.superseded)
            if completed or discarded:
                counts = tally.setdefault(minute_of(request.now), [0, 0])
                counts[0] += completed
                counts[1] += discarded
    if not tally:
        return pruned
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO finished (minute, writer, completed, discarded)"
            " VALUES (%s, pg_backend_pid(), %s, %s) ON CONFLICT (minute, writer) DO UPDATE"
            " SET completed = finished.completed + excluded.completed,"
            " discarded = finished.discarded + excluded.discarded",
            [(minute, *counts) for minute, counts in sorted(tally.items())],
        )
    latest = max(tally)
    if latest <= pruned:
        return pruned
    connection.execute("DELETE FROM finished WHERE minute <= %s", (latest - KEEP_MINUTES,))
    return latest
