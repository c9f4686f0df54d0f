"""SQLite's statements for the one SQL apply (`_sql_apply`), and its short way for the commonest batches.

What `SQLiteJournal` adds to the shared loop: a completed job's row may be
marked and deleted later (`_COMPLETE`); an `Append` followed by its own
`MarkAttempt` is one ``INSERT`` with the attempt set, unless its key may be
halted; and flags of what the file holds (`Usage`) spare a commit the work
that finds nothing.  `apply_common` carries the runtime's commonest batches
out in one statement or two (``test_sqlite_common`` holds it equal to the
loop on any group of them and of batches near them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

import attrs

from ..errors import JournalError
from ._reads import KEEP_MINUTES, audit_row, minute_of
from ._sql_apply import Held, Letter, Refused, apply, refuse_duplicate
from ._sql_schedules import ScheduleSQL
from ._sqlite_schema import STARTED
from ._thread import Request
from ._transactions import RELEASE_STEP, Run, SQLiteGuard, TransactionEnded
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

__all__ = ["SQLiteStatements", "Usage", "apply_common", "count_finished", "count_marked", "plain"]

UNIQUES: Final = Uniques("?", uniques="inturn_uniques", jobs="inturn_jobs")
SCHEDULES: Final = ScheduleSQL("inturn_schedules", "?")


@attrs.define
class Usage:
    """What the file may hold that some work depends on: work a commit may skip when it holds none.

    The journal is the file's one writer, so once read at `open` this stays
    exact as its own changes go by; a rollback makes the journal read it
    again, since it may have counted what was undone.  A flag left True
    only costs the work it saves; a flag False must be true of the file.
    """

    windows: bool = False
    """Some reservation has an end time (`Uniques.expire` has work)."""
    steps: bool = False
    """Some job recorded a step (a completion deletes its steps)."""
    halts: bool = False
    """Some key is halted (a start must look for its key in ``halted``)."""

    @classmethod
    def of(cls, connection: sqlite3.Connection | sqlite3.Cursor) -> Usage:
        [(windows, steps, halts)] = connection.execute(
            "SELECT EXISTS (SELECT 1 FROM inturn_uniques WHERE until IS NOT NULL),"
            " EXISTS (SELECT 1 FROM inturn_steps), EXISTS (SELECT 1 FROM inturn_halted)"
        )
        return cls(bool(windows), bool(steps), bool(halts))

    def resumed(self, cursor: sqlite3.Cursor) -> None:
        """A key was let go on: whether any is still halted."""
        [(halts,)] = cursor.execute("SELECT EXISTS (SELECT 1 FROM inturn_halted)")
        self.halts = bool(halts)


@attrs.define(eq=False)
class SQLiteStatements:
    """SQLite's `_sql_apply.Statements`, on the cursor of the group's transaction."""

    connection: sqlite3.Cursor
    name: str
    usage: Usage
    now: float
    """The time of the request being applied (its writer's clock: `Journal.write`'s *now*):
    when its new jobs were accepted and its dead letters discarded."""
    marking: list[int] | None
    """Where a completed job's id goes, its row marked (`_COMPLETE`); None: rows are deleted."""
    uniques: Uniques = UNIQUES
    guard: SQLiteGuard = attrs.field(factory=SQLiteGuard)
    """The connection's authorizer, active while a `Transaction`'s function runs."""
    deleted: int = 0
    """Completions whose rows these statements deleted (a marked one is counted as its
    row is deleted: `SQLiteJournal._delete_completed`), for ``inturn_finished``."""
    discarded: int = 0
    """Jobs these statements discarded."""

    def apply(self, request: Request, next_id: int) -> int:
        """`_sql_apply.apply` of *request* on these statements."""
        return apply(self, request, next_id)

    def whole(self, request: Request, next_id: int) -> int | None:
        return apply_common(self, request, next_id)

    def fresh(self, job_id: int, next_id: int) -> bool:
        return job_id >= next_id

    def not_applied(self, change: FleetChange, job_id: int, next_id: int) -> None:
        if job_id >= next_id:
            raise Refused(JournalError(f"{self.name}: job {job_id} was never appended"))

    def append(self, change: Append, start: MarkAttempt | None) -> bool:
        # Its own start goes into the row where no key is halted (else it may be superseded).
        if start is not None and change.key is not None and self.usage.halts:
            start = None
        attempts = 0 if start is None else start.attempt
        if (
            change.unique is None
            and change.unique_for is None
            and change.due_at is None
            and change.trace is None
        ):
            # The common row, its NULL columns left out: each None bound
            # costs about what a column does (sqlite3 looks for an adapter).
            sql = _INSERT_PLAIN
            row: tuple[object, ...] = (
                change.job_id,
                change.key,
                change.data,
                self.now,
                change.job_id,
                attempts,
            )
        else:
            sql = _INSERT
            row = (
                change.job_id,
                change.key,
                change.unique,
                change.unique_for,
                change.data,
                self.now,
                None if change.due_at is not None else change.job_id,
                change.due_at,
                attempts,
                change.trace,
            )
        try:
            self.connection.execute(sql, row)
        except sqlite3.IntegrityError as exc:
            if change.unique is None:  # its id, in a file edited by hand (SQLite says which)
                error = JournalError(f"{self.name}: job {change.job_id} cannot be stored: {exc}")
                raise Refused(error) from None
            refuse_duplicate(self, change.unique)
        return start is not None

    def due(self, change: Due) -> bool:
        cursor = self.connection
        if not cursor.execute(
            f"UPDATE main.inturn_jobs SET seq = ?, due_at = NULL WHERE id = ? AND {_PENDING} AND seq IS NULL",
            (change.seq, change.job_id),
        ).rowcount:
            return False
        # The place is taken from the ids: none is handed out again.
        cursor.execute(
            "UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = 'inturn_jobs'", (change.seq,)
        )
        return True

    def mark(self, change: MarkAttempt) -> bool:
        return mark(self.connection, change, self.usage)

    def retrying(self, change: Retrying) -> bool:
        return self._one(
            f"UPDATE main.inturn_jobs SET error = ?, retry_at = ? WHERE id = ? AND {_PENDING}",
            (change.error, change.retry_at, change.job_id),
        )

    def complete(self, change: Complete) -> Held | None:
        if complete(self.connection, change.job_id, self.now, self.marking):
            if self.marking is None:
                self.deleted += 1
            self._steps_gone(change.job_id)  # it held no unique key
            return _NOTHING_HELD
        held = self._held(change.job_id)
        if held is not None:
            self.connection.execute("DELETE FROM main.inturn_jobs WHERE id = ?", (change.job_id,))
            self.deleted += 1
            self._steps_gone(change.job_id)
        return held

    def discard(self, change: Discard) -> Held | None:
        held = self._held(change.job_id)
        if held is not None:
            self.connection.execute(
                "UPDATE main.inturn_jobs SET state = 'dead', error = ?, finished_at = ?, retry_at = NULL,"
                " due_at = NULL, stopped_during = ? WHERE id = ?",
                (change.error, self.now, change.stopped_during, change.job_id),
            )
            self.discarded += 1
        return held

    def halt_by(self, change: Discard) -> None:
        self.usage.halts = True
        self.connection.execute(
            "INSERT INTO inturn_halted (key, job_id, error) SELECT key, id, error FROM main.inturn_jobs"
            " WHERE id = ? AND key IS NOT NULL ON CONFLICT (key) DO UPDATE"
            " SET job_id = excluded.job_id, error = excluded.error"
            " WHERE inturn_halted.job_id IS NULL",
            (change.job_id,),
        )

    def purge(self, change: Purge) -> bool:
        if not self._one(
            "DELETE FROM main.inturn_jobs WHERE id = ? AND state = 'dead'", (change.job_id,)
        ):
            return False
        self.connection.execute("DELETE FROM inturn_steps WHERE job_id = ?", (change.job_id,))
        return True

    def step(self, change: Step) -> bool:
        self.usage.steps = True
        return self._one(
            "INSERT INTO inturn_steps (job_id, n, name, data)"
            " SELECT id, (SELECT COUNT(*) FROM inturn_steps WHERE job_id = ?), ?, ? FROM main.inturn_jobs"
            f" WHERE id = ? AND {_PENDING}"
            " ON CONFLICT (job_id, name) DO UPDATE SET data = excluded.data",
            (change.job_id, change.name, change.data, change.job_id),
        )

    def fence(self, change: Transaction) -> tuple[int, bytes | None] | None:
        # The group's transaction holds the file's write lock: what this reads stays so
        # until it commits.
        row = self.connection.execute(
            "SELECT attempts, (SELECT data FROM inturn_steps WHERE job_id = ? AND name = ?)"
            f" FROM main.inturn_jobs WHERE id = ? AND {_PENDING}",
            (change.job_id, change.name, change.job_id),
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def run_and_record(self, change: Transaction, run: Run) -> bytes:
        cursor = self.connection
        try:
            data = self.guard.run(cursor.connection, run, self.name)
        except TransactionEnded:  # the journal's failure, not the request's
            raise
        except Exception as exc:
            raise Refused(exc) from None
        self.usage.steps = True
        cursor.execute(
            "INSERT INTO inturn_steps (job_id, n, name, data)"
            " VALUES (?, (SELECT COUNT(*) FROM inturn_steps WHERE job_id = ?), ?, ?)",
            (change.job_id, change.job_id, change.name, data),
        )
        cursor.execute(RELEASE_STEP)
        return data

    def letter(self, job_id: int) -> Letter | None:
        row = self.connection.execute(
            "SELECT unique_key, key FROM main.inturn_jobs WHERE id = ? AND state = 'dead'",
            (job_id,),
        ).fetchone()
        return None if row is None else Letter(*row)

    def requeue(self, change: Requeue, letter: Letter) -> None:
        cursor = self.connection
        try:
            cursor.execute(
                "INSERT INTO main.inturn_jobs (id, key, unique_key, unique_for, data, accepted_at, seq, trace)"
                " SELECT ?, key, unique_key, unique_for, data, ?, ?, trace FROM main.inturn_jobs WHERE id = ?",
                (change.new_id, self.now, change.new_id, change.job_id),
            )
        except sqlite3.IntegrityError:
            refuse_duplicate(self, letter.unique)
        cursor.execute(  # a halt its discard caused names the job it becomes
            "UPDATE inturn_halted SET job_id = ? WHERE key = ? AND job_id = ?",
            (change.new_id, letter.key, change.job_id),
        )
        cursor.execute("DELETE FROM main.inturn_jobs WHERE id = ?", (change.job_id,))
        cursor.execute(  # the steps it made go with it
            "UPDATE inturn_steps SET job_id = ? WHERE job_id = ?", (change.new_id, change.job_id)
        )

    def revive(self, change: Revive, letter: Letter) -> None:
        try:
            self.connection.execute(
                "UPDATE main.inturn_jobs SET state = 'pending', attempts = 0, error = NULL,"
                " retry_at = NULL, finished_at = NULL, stopped_during = NULL, completed_at = NULL,"
                " seq = COALESCE(seq, id), due_at = NULL WHERE id = ?",
                (change.job_id,),
            )
        except sqlite3.IntegrityError:
            refuse_duplicate(self, letter.unique)
        if change.resume and letter.key is not None:
            self.connection.execute("DELETE FROM inturn_halted WHERE key = ?", (letter.key,))
            self.usage.resumed(self.connection)

    def halt(self, change: Halt) -> None:
        self.usage.halts = True
        self.connection.execute(
            "INSERT OR IGNORE INTO inturn_halted (key) VALUES (?)", (change.key,)
        )

    def resume(self, change: Resume) -> None:
        self.connection.execute("DELETE FROM inturn_halted WHERE key = ?", (change.key,))
        self.usage.resumed(self.connection)

    def audit(self, change: Audit, now: float) -> None:
        cursor = self.connection.execute(
            "INSERT INTO inturn_audit (at, actor, verb, job_id, key, head, older_than, outcome,"
            " error, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            audit_row(change, now),
        )
        added = cursor.lastrowid
        assert added is not None
        # Ids rise by one per entry (AUTOINCREMENT, none reused): the newest *keep* are these.
        self.connection.execute("DELETE FROM inturn_audit WHERE id <= ?", (added - change.keep,))

    def schedule_set(self, change: ScheduleSet) -> bool:
        return SCHEDULES.set(self.connection, change)

    def schedule_drop(self, change: ScheduleDrop) -> bool:
        return SCHEDULES.drop(self.connection, change)

    def schedule_pause(self, change: SchedulePause) -> bool:
        return SCHEDULES.pause(self.connection, change)

    def fire(self, change: Fire) -> bool:
        return SCHEDULES.fire(self.connection, change)

    def other(self, change: FleetChange, request: Request) -> bool:
        return False

    def _one(self, sql: str, parameters: tuple[object, ...]) -> bool:
        return self.connection.execute(sql, parameters).rowcount == 1

    def _held(self, job_id: int) -> Held | None:
        """The unique key and window of unfinished *job_id*; None if it is not unfinished."""
        row = self.connection.execute(
            f"SELECT unique_key, unique_for FROM main.inturn_jobs WHERE id = ? AND {_PENDING}",
            (job_id,),
        ).fetchone()
        if row is None:
            return None
        held = Held(*row)
        self.usage.windows = self.usage.windows or (
            held.unique is not None and held.unique_for is not None
        )
        return held

    def _steps_gone(self, job_id: int) -> None:
        if self.usage.steps:
            self.connection.execute("DELETE FROM inturn_steps WHERE job_id = ?", (job_id,))


_NOTHING_HELD: Final = Held(None, None)


def apply_common(statements: SQLiteStatements, request: Request, next_id: int) -> int | None:
    """`_sql_apply.apply` for the runtime's common batches, each one statement or two: the
    next free id; or None, having changed nothing, for any other batch.

    A send (an `Append` with neither a unique key nor a due time, maybe with
    its own start) is one ``INSERT``; a completion (`Complete` of a job with
    no unique key, maybe with the start of the job behind) one statement or
    two.  Once these checks pass none can be refused (see `sqlite`'s
    docstring; a statement that fails changes nothing, and its batch goes the
    long way), so none needs a savepoint.  Written out, not through the
    loop: its checks cost the writer half as much as SQLite's own work.
    """
    cursor, usage = statements.connection, statements.usage
    changes = request.changes
    count = len(changes)
    first = changes[0]
    if isinstance(first, Append):
        if (
            first.unique is not None
            or first.unique_for is not None
            or first.due_at is not None
            or first.trace is not None
        ):
            return None
        if first.job_id < next_id or count > 2:
            return None
        attempts = 0
        if count == 2:
            own = changes[1]
            if not isinstance(own, MarkAttempt) or own.job_id != first.job_id:
                return None
            if first.key is not None and usage.halts:
                return None  # a start on a halted key is superseded: the loop checks
            attempts = own.attempt
        row = (first.job_id, first.key, first.data, statements.now, first.job_id, attempts)
        try:
            cursor.execute(_INSERT_PLAIN, row)
        except sqlite3.IntegrityError:
            return None  # its id taken (a file edited by hand): the loop refuses it alone
        return first.job_id + 1
    if not isinstance(first, Complete) or count > 2:
        return None
    successor: MarkAttempt | None = None
    if count == 2:
        second = changes[1]
        if not isinstance(second, MarkAttempt) or second.job_id >= next_id:
            return None  # not a start; or of a job never appended, which the loop refuses
        successor = second
    if not complete(cursor, first.job_id, statements.now, statements.marking):
        return None  # gone, dead, or holding a unique key: the loop tells which
    if statements.marking is None:
        statements.deleted += 1
    statements._steps_gone(first.job_id)
    if successor is not None and not mark(cursor, successor, usage):
        request.superseded.append(successor)
    return next_id


def complete(cursor: sqlite3.Cursor, job_id: int, now: float, marking: list[int] | None) -> bool:
    """Complete pending *job_id* if it holds no unique key; whether it did.  With
    *marking*, its row is marked and its id goes there (`_COMPLETE`), else deleted."""
    if marking is None:
        return bool(cursor.execute(_DELETE_PLAIN, (job_id,)).rowcount)
    if not cursor.execute(_COMPLETE, (now, job_id)).rowcount:
        return False
    marking.append(job_id)
    return True


def mark(cursor: sqlite3.Cursor, change: MarkAttempt, usage: Usage) -> bool:
    """Apply *change*; whether it applied (else its job is not pending, or it is a start
    on a halted key).  Running again: no longer waiting to retry.  A start (attempts
    rising) is superseded on a halted key, which is looked for only if the file has any.
    """
    if usage.halts:
        parameters: tuple[object, ...] = (change.attempt, change.job_id, change.attempt)
        return cursor.execute(_MARK_UNLESS_HALTED, parameters).rowcount == 1
    return cursor.execute(_MARK, (change.attempt, change.job_id)).rowcount == 1


_INSERT: Final = (
    "INSERT INTO main.inturn_jobs (id, key, unique_key, unique_for, data, accepted_at, seq, due_at, attempts, trace)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_PLAIN: Final = "INSERT INTO main.inturn_jobs (id, key, data, accepted_at, seq, attempts) VALUES (?, ?, ?, ?, ?, ?)"
"""A new job's row; the plain one for a job with neither a unique key nor a due time."""

_PENDING: Final = "state = 'pending' AND completed_at IS NULL"
"""A job that is unfinished: a completed one's row may wait to be deleted (`_COMPLETE`)."""

_MARK: Final = (
    f"UPDATE main.inturn_jobs SET attempts = ?, retry_at = NULL WHERE id = ? AND {_PENDING}"
)
_MARK_UNLESS_HALTED: Final = (
    f"{_MARK} AND (? <= attempts OR key IS NULL OR key NOT IN (SELECT key FROM inturn_halted))"
)
"""A start or a given-back attempt; where keys may be halted, a start on one changes nothing."""

_COMPLETE: Final = (
    "UPDATE main.inturn_jobs SET completed_at = ? WHERE id = ? AND completed_at IS NULL"
    f" AND {STARTED} AND unique_key IS NULL"
)
"""A completion in one statement: a job with a unique key must release it too.  Only a
row in the started index (`STARTED`: every job the runtime completes) is marked, so the
reads find the marked rows there; another is deleted (`_DELETE_PLAIN`).

In a small group the row is marked, and deleted later with others
(`SQLiteJournal._delete_completed`): an ``UPDATE`` of a column no index holds
writes the row's page alone, where a ``DELETE`` writes the queued-by-key
index's page too, a third of a commit of one completion.  A group of
`_MARK_BELOW` batches or more deletes at once (`_DELETE_PLAIN`): its
completions share the pages a commit writes, and marking would cost each
job a second statement.
"""

_DELETE_PLAIN: Final = (
    f"DELETE FROM main.inturn_jobs WHERE id = ? AND {_PENDING} AND unique_key IS NULL"
)
"""`_COMPLETE` in a large group."""

_PLAIN: Final = (MarkAttempt, Complete, Retrying)
"""Changes to a job the journal handed out, which cannot be refused once it did."""


def plain(changes: Sequence[FleetChange], next_id: int) -> bool:
    """Whether no change of *changes* can be refused: so the batch needs no savepoint.

    Each must be an `Append` without a unique key, of a new id, or a plain
    change to an id handed out before it (a job never appended is refused).
    """
    for change in changes:
        if isinstance(change, Append):
            if change.unique is not None or change.job_id < next_id:
                return False
            next_id = change.job_id + 1
        elif not isinstance(change, _PLAIN) or change.job_id >= next_id:
            return False
    return True


_COUNT: Final = (
    "INSERT INTO inturn_finished (minute, completed, discarded) VALUES (?, ?, ?)"
    " ON CONFLICT (minute) DO UPDATE SET completed = completed + excluded.completed,"
    " discarded = discarded + excluded.discarded"
)


def count_finished(
    cursor: sqlite3.Cursor | sqlite3.Connection, tally: dict[int, list[int]], pruned: int
) -> int:
    """Add *tally* (completed, discarded by `minute_of`) to ``inturn_finished`` in the
    transaction under way: one upsert a minute.  The first count of a minute after
    *pruned* deletes those beyond the hour kept; return the minute pruned at."""
    for minute, (completed, discarded) in tally.items():  # one minute, mostly
        cursor.execute(_COUNT, (minute, completed, discarded))
    latest = max(tally)
    if latest <= pruned:
        return pruned
    cursor.execute("DELETE FROM inturn_finished WHERE minute <= ?", (latest - KEEP_MINUTES,))
    return latest


def count_marked(
    cursor: sqlite3.Cursor | sqlite3.Connection, where: str, parameters: tuple[object, ...]
) -> dict[int, list[int]]:
    """The completions of the marked rows *where* picks, by minute: counted as they are
    deleted, in the same transaction (until then the reads count the marked rows)."""
    tally: dict[int, list[int]] = {}
    for (at,) in cursor.execute(
        f"SELECT completed_at FROM main.inturn_jobs WHERE {where}"
        " AND state = 'pending' AND completed_at IS NOT NULL",
        parameters,
    ):
        tally.setdefault(minute_of(at), [0, 0])[0] += 1
    return tally
