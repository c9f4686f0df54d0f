"""One apply for the SQL journals: a batch's changes, in order, over a dialect's statements.

Theory of operation
-------------------
`SQLiteJournal` and `PostgresJournal` apply a batch the same way; they
differ in their SQL.  `apply` is the way: for each change, what it needs
(a fresh id, a unique key, an unfinished job, a dead letter), whether it is
superseded or breaks a rule (`_rules` says which is which), and the next
free id.  A dialect's `Statements` are its SQL for each step, each a
compare-and-set that says whether it applied: SQLite's mark a completed row
for a later delete and keep flags of what its file holds; PostgreSQL's fence
a fleet member's changes by its ownership of the key and place its new jobs
under the key's lock.  A dialect may also carry a whole batch out in fewer
statements (`Statements.whole`), for the runtime's commonest batches.

A change that breaks a rule raises `Refused`; the journal rolls its batch
back (a savepoint, or the transaction).  Unique keys are reserved and
released through `Uniques`, judged by the writer's ``request.now``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from ..errors import JournalError
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

__all__ = ["Held", "Letter", "Refused", "Statements", "apply", "refuse_duplicate"]


class Refused(Exception):
    """A batch broke a rule (or a `Transaction`'s function raised *error*); it alone is
    rolled back."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class Held(NamedTuple):
    """What a finished job held: its unique key and window, to release."""

    unique: str | None
    unique_for: float | None


class Letter(NamedTuple):
    """A dead letter coming back (`Requeue`, `Revive`): its unique key and its key."""

    unique: str | None
    key: str | None


class Statements(Protocol):
    """A dialect's SQL for each step of `apply`, on the transaction under way.

    A method named for a change applies it if its job is as the change
    needs (unfinished, scheduled, dead) and says whether it did.
    """

    name: str
    """How messages name the journal."""
    connection: Any
    """What runs the statements (a cursor or a connection)."""
    uniques: Uniques

    def whole(self, request: Request, next_id: int) -> int | None:
        """The next free id, having applied *request* whole in a few statements; or None,
        changing nothing, for a batch the loop applies."""

    def fresh(self, job_id: int, next_id: int) -> bool:
        """Whether this writer may use *job_id* as a new id."""

    def not_applied(self, change: FleetChange, job_id: int, next_id: int) -> None:
        """*change* to *job_id* did not apply: raise `Refused` if that breaks a rule (a job
        never appended), return if it is superseded."""

    def append(self, change: Append, start: MarkAttempt | None) -> bool:
        """Insert the job (`refuse_duplicate` if its key is taken after all); whether its own
        *start*, just behind it, went into its row."""

    def due(self, change: Due) -> bool: ...
    def mark(self, change: MarkAttempt) -> bool: ...
    def retrying(self, change: Retrying) -> bool: ...
    def complete(self, change: Complete) -> Held | None: ...
    def discard(self, change: Discard) -> Held | None: ...
    def halt_by(self, change: Discard) -> None:
        """*change* halts its job's key: the first discard that halts a key names it."""

    def purge(self, change: Purge) -> bool: ...
    def step(self, change: Step) -> bool: ...
    def fence(self, change: Transaction) -> tuple[int, bytes | None] | None:
        """The attempts marked for *change*'s job and the result it recorded under its name,
        held so until the commit; None if the job is not unfinished (or, for a fleet
        member, its key is not the member's)."""

    def run_and_record(self, change: Transaction, run: Run) -> bytes:
        """``run(connection)`` in a savepoint, and its result recorded as *change*'s step.
        Raises `Refused` with what *run* raised, its writes rolled back."""

    def letter(self, job_id: int) -> Letter | None:
        """Dead letter *job_id*, its row locked; None if it is not one."""

    def requeue(self, change: Requeue, letter: Letter) -> None:
        """A copy of the letter as a new job, its steps with it; the letter gone."""

    def revive(self, change: Revive, letter: Letter) -> None: ...
    def halt(self, change: Halt) -> None: ...
    def resume(self, change: Resume) -> None: ...
    def audit(self, change: Audit, now: float) -> None:
        """Add *change* to the audit trail at *now*, and delete the entries it leaves beyond
        its ``keep`` newest."""

    def schedule_set(self, change: ScheduleSet) -> bool:
        """Create or replace the schedule, unless its cursor is not after the tick the one it
        replaces fired last."""

    def schedule_drop(self, change: ScheduleDrop) -> bool: ...
    def schedule_pause(self, change: SchedulePause) -> bool: ...
    def fire(self, change: Fire) -> bool:
        """Move the schedule's cursor, if it runs with its cursor at ``change.at``
        (a fleet member's: if the member holds the schedule's lease)."""

    def other(self, change: FleetChange, request: Request) -> bool:
        """Apply a change only this dialect knows (a fleet's `Release`); False if it knows none."""


def apply(statements: Statements, request: Request, next_id: int) -> int:
    """Apply one batch inside the current savepoint or transaction; return the next free id.

    Superseded changes go to ``request.superseded``.  Raises `Refused` for
    a broken rule; the driver's error for the database failing.
    """
    whole = statements.whole(request, next_id)
    if whole is not None:
        return whole
    name, connection, uniques = statements.name, statements.connection, statements.uniques

    def settle(applied: bool, change: FleetChange, job_id: int) -> bool:
        if not applied:
            statements.not_applied(change, job_id, next_id)
            request.superseded.append(change)
        return applied

    def new_id(job_id: int) -> None:
        if not statements.fresh(job_id, next_id):
            raise Refused(JournalError(f"{name}: job id {job_id} was used before"))

    def reserve(unique: str | None, job_id: int, own: int | None = None) -> None:
        refused = uniques.reserve(connection, unique, job_id, request.now, own)
        if refused is not None:
            raise Refused(refused)

    def release(held: Held | None, change: Complete | Discard) -> bool:
        if not settle(held is not None, change, change.job_id):
            return False
        assert held is not None
        uniques.release(connection, *held, change.job_id, request.now)
        return True

    changes = request.changes
    folded: MarkAttempt | None = None  # a start its job's Append put in the row
    for position, change in enumerate(changes):
        if change is folded:
            continue
        if isinstance(change, Append):
            new_id(change.job_id)
            reserve(change.unique, change.job_id)
            start = changes[position + 1] if position + 1 < len(changes) else None
            if not isinstance(start, MarkAttempt) or start.job_id != change.job_id:
                start = None
            if statements.append(change, start):
                folded = start
            next_id = change.job_id + 1
        elif isinstance(change, MarkAttempt):
            settle(statements.mark(change), change, change.job_id)
        elif isinstance(change, Complete):
            release(statements.complete(change), change)
        elif isinstance(change, Discard):
            if release(statements.discard(change), change) and change.halt:
                statements.halt_by(change)
        elif isinstance(change, Due):
            new_id(change.seq)
            if settle(statements.due(change), change, change.job_id):
                next_id = change.seq + 1  # taken from the ids: none is handed out again
        elif isinstance(change, Retrying):
            settle(statements.retrying(change), change, change.job_id)
        elif isinstance(change, Purge):
            settle(statements.purge(change), change, change.job_id)
        elif isinstance(change, Step):
            settle(statements.step(change), change, change.job_id)
        elif isinstance(change, Transaction):
            settle(_transact(statements, change, request), change, change.job_id)
        elif isinstance(change, Requeue):
            new_id(change.new_id)
            letter = statements.letter(change.job_id)
            if settle(letter is not None, change, change.job_id):
                assert letter is not None
                reserve(letter.unique, change.new_id, own=change.job_id)
                statements.requeue(change, letter)
                next_id = change.new_id + 1
        elif isinstance(change, Revive):
            letter = statements.letter(change.job_id)
            if settle(letter is not None, change, change.job_id):
                assert letter is not None
                reserve(letter.unique, change.job_id, own=change.job_id)
                statements.revive(change, letter)
        elif isinstance(change, Halt):
            statements.halt(change)
        elif isinstance(change, Resume):
            statements.resume(change)
        elif isinstance(change, Audit):
            statements.audit(change, request.now)
        elif isinstance(change, Fire):
            if settle(statements.fire(change), change, 0):
                for job in change.jobs:  # scheduled jobs: no start goes with them
                    new_id(job.job_id)
                    if uniques.reserve(connection, job.unique, job.job_id, request.now) is not None:
                        request.superseded.append(job)  # a tick's job still in its window
                        continue
                    statements.append(job, None)
                    next_id = job.job_id + 1
        elif isinstance(change, ScheduleSet):
            settle(statements.schedule_set(change), change, 0)
        elif isinstance(change, ScheduleDrop):
            settle(statements.schedule_drop(change), change, 0)
        elif isinstance(change, SchedulePause):
            settle(statements.schedule_pause(change), change, 0)
        elif not statements.other(change, request):
            raise Refused(JournalError(f"{name}: not a journal change: {change!r}"))
    return next_id


def _transact(statements: Statements, change: Transaction, request: Request) -> bool:
    """Apply *change* (`_transactions`): its result into ``request.result``; False if the
    fence refuses it (superseded), and its function is not called."""
    found = statements.fence(change)
    if found is None or found[0] > change.attempt:
        return False
    recorded = found[1]
    if recorded is None:  # else recorded before: not run again
        if request.run is None:
            raise Refused(JournalError(f"{statements.name}: a Transaction needs its function"))
        recorded = statements.run_and_record(change, request.run)
    request.result = bytes(recorded)
    return True


def refuse_duplicate(statements: Statements, unique: str | None) -> None:
    """Raise `Refused` with the `DuplicateError` naming *unique*'s holder."""
    raise Refused(statements.uniques.holder(statements.connection, unique or "")) from None
