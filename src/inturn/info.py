"""What an operator sees: one key's state, one job's state.

Plain frozen values, built by a journal from what it stores (and refined by
a running supervisor, which knows which handler runs right now), so the same
view comes from `Supervisor.keys` in the application and from the ``inturn``
command line on a file.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, final

import attrs

__all__ = [
    "AuditEntry",
    "JobInfo",
    "JobState",
    "KeyFilter",
    "KeyInfo",
    "MemberInfo",
    "Minute",
    "Overview",
    "ScheduleInfo",
]

JobState: TypeAlias = Literal["scheduled", "queued", "running", "retrying", "dead"]
"""``scheduled``: not due yet, in no key's sequence; ``queued``: waiting its turn; ``running``: an attempt started (read from a
journal alone: or the process stopped during it); ``retrying``: its last
attempt failed and it waits for the next; ``dead``: discarded, a dead letter."""

KeyFilter: TypeAlias = Literal["blocked", "running", "halted", "retrying", "waiting", "paused"]
"""``blocked``: the head is retrying or the key is halted; ``running``: the
head is running (halted or not: a pause stops the next start, not the attempt
under way); ``halted``: the key is halted (by a discard, or paused).  The
three below split keys as `Overview` counts them, a halt first:
``retrying``: not halted, the head waits out a backoff; ``waiting``: not
halted, the head has not started (it waits for a slot, or its turn);
``paused``: halted by an operator's pause (``halted_by`` is None: a halt
recorded before inturn named the discarded job reads as a pause too)."""


@final
@attrs.frozen(kw_only=True)
class JobInfo:
    """One unfinished job or dead letter."""

    id: int
    key: str | None
    state: JobState
    attempts: int
    """Attempts started (and not given back)."""
    unique: str | None
    accepted_at: float
    """Unix time."""
    finished_at: float | None
    """Unix time it was discarded (dead letters only)."""
    last_error: str | None
    """The text of its last failure, if any."""
    retry_at: float | None
    """Unix time of its next attempt, while ``retrying``."""
    data: bytes
    """The payload as the codec encoded it."""
    place: int | None = None
    """Where it runs among its key's jobs (they run in the order of their
    places): its id, unless it was scheduled; None while scheduled."""
    due_at: float | None = None
    """Unix time a scheduled job falls due (while ``scheduled``)."""
    stopped_during: int | None = None
    """For a dead letter that ran out of attempts because its process stopped
    (killed, crashed) during the last one: that attempt's number.
    ``last_error`` then keeps the last error its handler raised, if any."""
    trace: str | None = None
    """The trace context it was sent in, W3C's ``traceparent`` (then a space and
    ``tracestate``, if any), when the sender traced (``open_supervisor(...,
    tracing=...)``, or `inturn.enqueue` in a program that loaded OpenTelemetry):
    which request sent it.  versionadded:: Unreleased"""


@final
@attrs.frozen(kw_only=True)
class KeyInfo:
    """A key that has unfinished jobs, or is halted."""

    key: str
    queued: int
    """Unfinished jobs, the head included."""
    halted: bool
    head_job_id: int | None
    """The oldest unfinished job: the one that runs, or blocks the key."""
    head_state: JobState | None
    head_attempt: int | None
    """Attempts the head has started."""
    head_age: float | None
    """Seconds since the head was accepted."""
    next_retry_at: float | None
    """Unix time of the head's next attempt, while it is ``retrying``."""
    last_error: str | None
    """The text of the head's last failure, if any."""
    halted_by: int | None = None
    """The job whose discard halted the key: its dead letter, or the job it
    became if requeued at the tail since (gone if purged).  None if the key is
    not halted, or was halted by an operator's pause (or before inturn
    recorded halts)."""
    halt_error: str | None = None
    """That job's error, as its dead letter kept it: why the key is halted."""
    owner: str | None = None
    """In a fleet (``PostgresJournal(..., fleet=True)``): the member that owns the
    key now, as ``host:pid``; None if none does, or outside a fleet.  A member
    whose heartbeat expired still owns its keys until another member's next
    claim takes them over: ``owner_expired`` says so."""
    owner_expired: bool = False
    """The owner's heartbeat expired (by the server's clock): it is dead, and the
    next claim of a live member releases the key (a takeover)."""
    owner_heartbeat_age: float | None = None
    """Seconds since the owner last renewed its heartbeat (the server's clock);
    None without an owner, or if the journal has not recorded it yet."""


@final
@attrs.frozen(kw_only=True)
class AuditEntry:
    """One operator's fix as the audit trail keeps it: who, when, what, and the outcome.

    Never a payload: a fix's arguments only.
    """

    id: int
    """Its place in the trail: every later entry's is higher."""
    at: float
    """Unix time the fix's outcome was journaled, by the clock of the process that carried
    it out."""
    actor: str
    """Who asked: ``user@host:pid`` of the calling process, or the name it gave."""
    verb: str
    """``skip`` (cancelling a scheduled job too), ``requeue``, ``pause``, ``resume``,
    ``retry_now`` or ``purge_dead``."""
    job_id: int | None
    key: str | None
    head: bool | None
    """For ``requeue``: to its key's head (True) or tail (False)."""
    older_than: float | None
    """For ``purge_dead``: its *older_than* seconds."""
    outcome: str
    """``done``; ``superseded`` (another writer, or the job's own attempt, finished it
    first); ``not found`` (no such job, or key); or ``error``."""
    error: str | None
    """What the fix raised, as ``Type: text`` (None if it was done)."""
    result: int | None
    """A requeue's new id, how many dead letters a purge deleted, whether ``retry_now``
    woke a head (1 or 0); None otherwise."""


@final
@attrs.frozen(kw_only=True)
class MemberInfo:
    """One fleet member (a process on ``PostgresJournal(..., fleet=True)``), as the journal
    sees it.

    A member whose heartbeat expired is listed until a live member's next
    claim forgets it and takes its keys over: a process killed with
    ``kill -9`` shows here as expired in the meantime.
    """

    id: int
    """Its incarnation's number in the journal (what owns its keys); never reused."""
    name: str
    """``host:pid``."""
    started_at: float
    """Unix time it joined, by the server's clock."""
    heartbeat_age: float | None
    """Seconds since it last renewed its heartbeat, by the server's clock (None if
    the journal has not recorded it yet: a member of an older inturn)."""
    expires_in: float
    """Seconds until its heartbeat expires; zero or less once it has."""
    expired: bool
    """Its heartbeat expired: it commits nothing more, and its keys go to the next claim."""
    keys: int
    """Keys it owns."""
    keyless_jobs: int
    """Keyless jobs it owns."""


@final
@attrs.frozen(kw_only=True)
class Minute:
    """Jobs finished in one minute of the wall clock, as the journal counted them."""

    start: float
    """Unix time the minute starts (a multiple of 60)."""
    completed: int
    discarded: int
    """Discarded as dead letters (skips included)."""


@final
@attrs.frozen(kw_only=True)
class Overview:
    """A journal at a glance: how its keys stand, how many jobs wait, how fast they finish.

    The key counts are disjoint, a halt first: a paused key whose head still
    runs counts as ``paused``.  Read from the journal alone: a head whose
    attempt was marked by a process that stopped counts as ``running`` until
    it runs again or ends.
    """

    running: int
    """Keys whose head is in an attempt."""
    retrying: int
    """Keys whose head waits out a backoff."""
    waiting: int
    """Keys whose head has not started: it waits for a slot, or its turn."""
    halted: int
    """Keys halted by a discarded job (with or without unfinished jobs)."""
    paused: int
    """Keys halted by an operator's pause (``halted_by`` None, as `KeyFilter` says)."""
    jobs: int
    """Unfinished jobs that are due, keyless ones included (scheduled ones not)."""
    scheduled: int
    """Scheduled jobs not due yet."""
    dead: int
    """Dead letters."""
    oldest_age: float | None
    """Seconds from the acceptance of the oldest unfinished due job (the lowest id:
    ids rise in acceptance order) to *now*; None if there is none."""
    minutes: tuple[Minute, ...]
    """Jobs finished in each of the last 15 minutes, oldest first, the one *now* is in
    last; minutes with none included."""


@final
@attrs.frozen(kw_only=True)
class ScheduleInfo:
    """A recurring schedule as the journal holds it (`Supervisor.schedule`, and what became of it)."""

    name: str
    key: str | None
    data: bytes
    cron: str | None
    every: float | None
    tz: str
    start: float
    misfire: str
    unique_for: float | None
    next_at: float | None
    """Unix time of its first tick not fired yet; None while it is paused."""
    last_tick: float | None = None
    """Unix time of the newest tick it fired (a job or not); None before its first."""
