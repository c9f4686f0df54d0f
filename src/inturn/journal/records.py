"""The journal's vocabulary: the changes a supervisor writes, and what it reads back.

Changes are values the runtime batches, whatever it has, into one
``Journal.write`` call; a durable journal turns one batch into one
transaction.  Nothing changes a change once built.  Most are frozen; those
built for every job (`Append`, `MarkAttempt`, `Complete`, and `StoredJob`
as a long backlog is paged in) are plain slotted classes, hashed by value
all the same, since attrs builds a frozen one through ``object.__setattr__``
at about three times the cost.

A change to a job is a compare-and-set on the job's state, decided by the
journal: `MarkAttempt`, `Retrying`, `Complete` and `Discard` apply only to an
unfinished job, `Purge` and `Requeue` only to a dead letter, and a
`MarkAttempt` that starts an attempt only while the job's key is not halted.
One that finds the job otherwise is *superseded*: another writer (an
operator's skip, pause or requeue) committed first.  It is not applied, and
``write`` returns it, while the rest of the batch applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

import attrs

__all__ = [
    "Answer",
    "Append",
    "Audit",
    "Backlog",
    "Change",
    "Claim",
    "Expiry",
    "Command",
    "Complete",
    "DeadLetter",
    "Discard",
    "Due",
    "Halt",
    "MarkAttempt",
    "Purge",
    "FleetChange",
    "Fire",
    "ScheduleDrop",
    "SchedulePause",
    "ScheduleSet",
    "Recovery",
    "Release",
    "Requeue",
    "Resume",
    "Retrying",
    "Revive",
    "SentJob",
    "Step",
    "StoredJob",
    "Transaction",
]


@attrs.define(unsafe_hash=True)
class Append:
    """A job was accepted; it is unfinished until `Complete` or `Discard`.

    Its *unique* key is reserved while it is unfinished and, with
    *unique_for*, that many seconds longer from when it is completed or
    discarded (by the ``now`` of that write): an `Append`, `Requeue` or
    `Revive` of another job that would take a reserved key is refused with
    `DuplicateError`.
    """

    job_id: int
    key: str | None
    data: bytes
    unique: str | None = None
    unique_for: float | None = None
    due_at: float | None = None
    """Unix time a *scheduled* job falls due: until a `Due` it holds its
    unique key but is in no key's sequence, so it blocks nothing."""
    trace: str | None = None
    """The trace context it was sent in: W3C's ``traceparent``, then a space and
    ``tracestate`` if any.  Opaque to the journal, which keeps it with the job like
    its payload (and its dead letter, and a requeue's new job), so every attempt,
    in whichever process, links to the request that sent it."""


@attrs.frozen
class Due:
    """Scheduled job *job_id* fell due: it joins its key's sequence at place *seq*.

    A fresh number, following the rule of an `Append`'s id (above every id
    and place before), so the job runs behind whatever its key holds now.
    Superseded unless the job is still scheduled.
    """

    job_id: int
    seq: int


@attrs.define(unsafe_hash=True)
class MarkAttempt:
    """Attempt number *attempt* of *job_id* is about to run.

    Written before the handler runs, so attempts survive a crash: a job whose
    handler kills the process every time still runs out of attempts.  Written
    with ``attempt - 1`` to give back an attempt that shutdown interrupted.
    One that raises the job's attempts starts an attempt: superseded while
    the job's key is halted, so nothing starts on a paused key.
    """

    job_id: int
    attempt: int


@attrs.frozen
class Step:
    """Step *name* of unfinished job *job_id* returned *data* (encoded by the codec).

    Written before the step's result reaches the handler, so a later attempt,
    or the next supervisor after a crash, returns *data* without running the
    step again.  Kept until the job completes (deleted with it), with its dead
    letter, moved by a `Requeue`; superseded unless the job is unfinished.
    Writing a name the job recorded already replaces its data.
    """

    job_id: int
    name: str
    data: bytes


@attrs.frozen
class Transaction:
    """Step *name* of job *job_id*, taken by its attempt *attempt* as a transaction of the
    journal's own database (`Job.transaction`).

    Not a change a writer hands `Journal.write`: the journal applies it in
    ``transaction``, which runs the step's function on the journal's database
    and records the result (a `Step`) in the same transaction.  Applied only
    while the job is unfinished, no attempt after *attempt* has started, and
    (for a fleet member) the job's key is the member's; otherwise superseded
    (another owner: refused with `inturn.LeaseLost`), and the function's
    writes are rolled back with it.  A name the job recorded already is not
    run again: its recorded result is the answer.
    """

    job_id: int
    attempt: int
    name: str


@attrs.define(unsafe_hash=True)
class Complete:
    """*job_id* completed; a journal may forget it (history stays bounded)."""

    job_id: int


@attrs.frozen
class Discard:
    """*job_id* was given up after *error*; a journal keeps it as a dead letter.

    With *halt*, its key is halted in the same step: a discard that is
    superseded halts nothing.
    """

    job_id: int
    error: str
    halt: bool = False
    stopped_during: int | None = None
    """The attempt the process stopped during, if that is how the job ran out
    of attempts: kept apart from *error*, the last handler error seen."""


@attrs.frozen
class Retrying:
    """*job_id*'s attempt failed with *error*; it runs again at *retry_at* (Unix time).

    Written before the backoff, so an operator sees why a key is blocked and
    until when, from the journal alone.  The job stays unfinished; the next
    `MarkAttempt` ends the wait (the error stays as its last error).
    """

    job_id: int
    error: str
    retry_at: float


@attrs.frozen
class Purge:
    """Dead letter *job_id* is deleted for good (refused for any other job)."""

    job_id: int


@attrs.frozen
class Requeue:
    """Dead letter *job_id* goes back as unfinished job *new_id*, attempts reset.

    One step: the dead letter is gone and the new job holds its key, data,
    unique key and window (`DuplicateError` if another job reserves that key
    now; its own reservation passes to the new job), and a halt its discard
    caused names the new job (``halted_by``).  *new_id* follows the rule of an
    `Append`'s id.
    """

    job_id: int
    new_id: int


@attrs.frozen
class Revive:
    """Dead letter *job_id* is unfinished again in its own place: same id, attempts reset.

    Its id puts it back where it was accepted, so on a key its discard
    halted it is the head again, before everything queued behind it.  With
    *resume*, its key's halt is lifted in the same step.  Only a dead letter
    can be revived (superseded otherwise); `DuplicateError` if another job
    reserves its unique key now.
    """

    job_id: int
    resume: bool = False


@attrs.frozen
class Halt:
    """*key* is parked: its queued jobs wait until `Resume`."""

    key: str


@attrs.frozen
class Resume:
    """*key* may run its queued jobs again."""

    key: str


@attrs.frozen(kw_only=True)
class Audit:
    """An operator's fix and its outcome, for the audit trail (`Journal.audit`).

    Not a change to any job: it is never superseded and breaks no rule.  The
    journal dates it with the batch's ``now`` (the writer's clock) and gives
    it the next id of the trail; then it keeps the newest *keep* entries and
    deletes the rest, so the trail stays bounded however many fixes are made.
    It carries a fix's arguments, never a payload.
    """

    actor: str
    """Who asked for the fix: ``user@host:pid`` of the calling process, or a name given."""
    verb: str
    """``skip``, ``requeue``, ``pause``, ``resume``, ``retry_now`` or ``purge_dead``."""
    outcome: str
    """``done``, ``superseded``, ``not found``, or ``error``."""
    job_id: int | None = None
    key: str | None = None
    head: bool | None = None
    """For ``requeue``: to its key's head (True) or tail (False)."""
    older_than: float | None = None
    error: str | None = None
    """What the fix raised, as ``Type: text``; None if it was done."""
    result: int | None = None
    """What it answered, if a number: a requeue's id, how many were purged, whether
    ``retry_now`` woke a head (1 or 0)."""
    keep: int = 10_000
    """How many entries the trail keeps, this one included (the newest)."""


@attrs.frozen(kw_only=True)
class ScheduleSet:
    """Recurring schedule *name* is created, or replaces the one of that name.

    Its cursor, *next_at*, is the Unix time of its first tick not fired yet.
    A schedule it replaces passes on the tick it fired last (``last_tick``):
    superseded if *next_at* is not after that, so a tick never fires twice
    (the writer reads the schedule again and decides anew).  A replaced
    schedule is running (not paused).
    """

    name: str
    key: str | None
    data: bytes
    cron: str | None
    every: float | None
    tz: str
    start: float
    misfire: str
    unique_for: float | None
    next_at: float


@attrs.frozen
class ScheduleDrop:
    """Schedule *name* is deleted (superseded if there is none)."""

    name: str


@attrs.frozen
class SchedulePause:
    """Schedule *name* is paused (*next_at* None), or resumed with its cursor at *next_at*.

    A paused schedule fires nothing; the ticks it was paused through are not
    missed, they are gone (resuming moves the cursor past them).  Superseded
    if there is no such schedule, or it is already as asked.
    """

    name: str
    next_at: float | None


@attrs.frozen
class Fire:
    """Schedule *name* fires: its cursor moves from *at* to *next_at*, and *jobs* are appended.

    The reservation of (schedule, tick time): applied only while the
    schedule runs (not paused) with its cursor at *at*, else superseded,
    jobs and all; so whoever moves the cursor first creates the ticks' jobs,
    once.  *jobs* follow an `Append`'s rules (a single holder's join their
    keys at their ids; a fleet member's are scheduled, due at their ticks);
    one whose unique key is reserved (the schedule's ``unique_for``) is left out, and ``write``
    returns it as superseded, while the cursor moves all the same.
    """

    name: str
    at: float
    next_at: float
    last_tick: float
    """The newest tick this firing passes (with a job or not): a replacement's first tick
    comes after it (`ScheduleSet`)."""
    jobs: tuple[Append, ...] = ()


Change: TypeAlias = (
    Append
    | Due
    | MarkAttempt
    | Step
    | Retrying
    | Complete
    | Discard
    | Purge
    | Requeue
    | Revive
    | Halt
    | Resume
    | Audit
    | ScheduleSet
    | ScheduleDrop
    | SchedulePause
    | Fire
)


@attrs.frozen
class Release:
    """A fleet member lets go of *key*, which it owns: only if no job waits in its sequence.

    Written with the completion of the last job it knew of, so that running
    a key dry and handing it back take one transaction.  Superseded while a
    job waits (sent meanwhile, by any member): the member keeps the key.
    Only a fleet's journal takes it (``PostgresJournal(..., fleet=True)``).
    """

    key: str


FleetChange: TypeAlias = Change | Release | Transaction
"""What reaches a journal's apply: any `Change`, a fleet member's `Release`, and a
`Transaction` (which only ``Journal.transaction`` carries)."""


@attrs.define(unsafe_hash=True)
class StoredJob:
    """An unfinished job as a journal hands it back.

    Not keyword-only: a page of a long backlog builds one per job, and keywords
    cost about twice the rest of building it.
    """

    id: int
    key: str | None
    data: bytes
    unique: str | None = None
    attempts: int = 0
    """Attempts started and not given back: the next one is ``attempts + 1``."""
    error: str | None = None
    """Its last failure's text (`Retrying`), if any."""
    retry_at: float | None = None
    """Unix time its next attempt is due, while it waits out a backoff."""
    seq: int | None = None
    """Its place in its key's sequence, if not its id: the number a `Due` gave it."""
    due_at: float | None = None
    """Unix time a scheduled job falls due (`Journal.scheduled` only)."""
    trace: str | None = None
    """The trace context it was sent in (`Append.trace`), if any."""

    @property
    def place(self) -> int:
        """Where it runs among its key's jobs: they run in the order of their places."""
        return self.id if self.seq is None else self.seq


@attrs.frozen(kw_only=True)
class DeadLetter:
    """A discarded job, kept for inspection."""

    id: int
    key: str | None
    data: bytes
    unique: str | None
    attempts: int
    error: str


@attrs.frozen(kw_only=True)
class Backlog:
    """A key's unfinished jobs that `Recovery.jobs` leaves in the journal."""

    count: int
    last_id: int
    """The id of the key's newest unfinished job."""


@attrs.frozen(kw_only=True)
class Claim:
    """A key a fleet member now owns (`PostgresJournal.claim`), and what it holds."""

    key: str
    epoch: int
    """The fencing token of this ownership: every later owner's is higher."""
    backlog: Backlog
    """All its unfinished jobs in its sequence: how many, and the last one's place."""
    jobs: Sequence[StoredJob] = ()
    """The first of them, in order; `Journal.load` pages in the rest."""
    marked: bool = False
    """The claim marked the first job's next attempt, ``attempts + 1`` (its
    ``attempts`` are as they were before)."""
    taken_from: str | None = None
    """A takeover: the member (``host:pid``) whose heartbeat expired owning the key,
    whose keys this claim released before taking this one; None if the key had
    no owner (or its expired owner was released by an earlier claim)."""


@attrs.frozen(kw_only=True)
class Expiry:
    """A fleet member whose heartbeat expired, forgotten by a claim (`PostgresJournal.reaped`):
    what it owned is claimable now."""

    member: str
    """Its name, ``host:pid``."""
    keys: int
    """The keys it owned, released."""
    keyless_jobs: int
    """The keyless jobs it owned, released."""


@attrs.frozen(kw_only=True)
class Recovery:
    """What a journal holds when a supervisor opens it.

    Replay is O(keys), not O(jobs): ``jobs`` may hold only the first few
    unfinished jobs of each key, and ``backlog`` says what waits behind them;
    the runtime pages those in with ``Journal.load`` as the key drains.
    """

    next_id: int = 1
    """Ids below this were handed out before and are never reused."""
    jobs: Sequence[StoredJob] = ()
    """In acceptance (id) order: every unfinished keyless job, and of each key
    with unfinished jobs its oldest ones (at least one; all unless ``backlog``
    names the key)."""
    backlog: Mapping[str, Backlog] = attrs.field(factory=dict)
    """Per key: the unfinished jobs that follow those in ``jobs``."""
    halted: frozenset[str] = frozenset()
    """Keys parked by `Halt` and not resumed."""
    scheduled: int = 0
    """Scheduled jobs not due yet: `Journal.scheduled` hands them out."""


SentJob: TypeAlias = tuple[str, bytes, str | None, float | None, float | None]
"""A job a `Command` sends: ``(key, data, unique, unique_for, due_at)``, as ``send`` takes
them (*due_at* a Unix time, None to run in turn at once)."""


@attrs.frozen(kw_only=True)
class Command:
    """An operator's fix sent through the journal to the supervisor that holds it.

    *verb* is a `Supervisor` method: ``skip``, ``requeue`` and
    ``requeue_head`` (``requeue(head=True)``) take *job_id*;
    ``pause``, ``resume`` and ``retry_now`` take *key*; ``purge_dead`` takes
    *older_than* and maybe *key*; ``send`` takes *jobs*, accepted all or
    none, and answers their ids.  The journal gives it its *id* when it is
    submitted.
    """

    verb: str
    id: int = 0
    job_id: int | None = None
    key: str | None = None
    older_than: float | None = None
    jobs: tuple[SentJob, ...] = ()
    """For ``send``: the jobs, their payloads encoded by the sender's codec."""
    actor: str | None = None
    """Who asks for the fix, for the audit trail (`Audit`); None: the process that
    carries it out."""
    trace: str | None = None
    """For ``send``: the trace context it was sent in (`Append.trace`), if the sender traced."""


@attrs.frozen(kw_only=True)
class Answer:
    """What the supervisor answered a `Command`: its *result*, or the *error* it raised.

    *error* names an `inturn` exception class and *error_args* its arguments,
    so the operator raises the same error the method would have raised.
    """

    result: int | bool | list[int] | None = None
    error: str | None = None
    error_args: tuple[str | int | float | None, ...] = ()
