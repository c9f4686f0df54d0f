"""What an operator reads, the same from every journal: argument checks and the state rule.

A journal stores facts (attempts marked, a retry time, a discard); the state
an operator sees is derived from them here, once, so `MemoryJournal`,
`SQLiteJournal` and `SQLiteReader` cannot disagree.  (SQLite also filters
keys by state in SQL, for speed; the conformance kit holds it to this rule.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs

from .._checks import check_count, check_number
from ..info import (
    AuditEntry,
    JobInfo,
    JobState,
    KeyFilter,
    KeyInfo,
    Minute,
    Overview,
    ScheduleInfo,
)
from .records import Audit, Complete, Discard, ScheduleSet, StoredJob

__all__ = [
    "AUDIT_COLUMNS",
    "KEY_FILTERS",
    "audit_entry",
    "audit_row",
    "audit_where",
    "check_audit",
    "check_dead_letters",
    "check_job_id",
    "check_jobs",
    "check_keys",
    "check_keys_by_name",
    "key_class",
    "key_where",
    "Finished",
    "finished",
    "minute_of",
    "minutes",
    "overview_of",
    "prefix_end",
    "check_scheduled",
    "check_schedules",
    "check_now",
    "halted_key_info",
    "info",
    "job_state",
    "key_info",
    "key_infos",
    "key_matches",
    "stored",
]

KEY_FILTERS: Final[tuple[KeyFilter, ...]] = (
    "blocked",
    "running",
    "halted",
    "retrying",
    "waiting",
    "paused",
)

MINUTES: Final = 15
"""How many minutes `Overview.minutes` gives."""
KEEP_MINUTES: Final = 3600
"""Seconds of finished-job counters a journal keeps (an hour), older ones deleted once a minute."""


def job_state(
    *, dead: bool, attempts: int, retry_at: float | None, scheduled: bool = False
) -> JobState:
    """The state of a job, from what a journal stores about it."""
    if dead:
        return "dead"
    if scheduled:
        return "scheduled"
    if retry_at is not None:
        return "retrying"  # its last attempt failed; the next MarkAttempt clears retry_at
    if attempts > 0:
        return "running"  # or the process stopped during the attempt
    return "queued"


def key_class(head: JobState | None, halted: bool, paused: bool = False) -> str | None:
    """How `Overview` counts a key whose head is in state *head* (None: no jobs): a halt
    first (``paused`` if no discarded job halted it), then the head's state; None for a
    key with neither."""
    if halted:
        return "paused" if paused else "halted"
    if head == "queued":
        return "waiting"
    if head == "running" or head == "retrying":
        return head
    return None


def key_matches(
    state: KeyFilter | None, head: JobState | None, halted: bool, paused: bool = False
) -> bool:
    """Whether a key whose head is in state *head* (None: no jobs) passes the *state*
    filter; *paused*: it is halted, by no discarded job (`KeyFilter`)."""
    if state is None:
        return True
    if state == "blocked":
        return halted or head == "retrying"
    if state == "running":
        return head == "running"
    if state == "halted":
        return halted
    return key_class(head, halted, paused) == state


def key_where(
    state: KeyFilter | None, *, halted: str, halted_by: str, attempts: str, retry_at: str
) -> str:
    """`key_matches` in SQL, over a head's *attempts* and *retry_at* and its key's halt
    (*halted*: an expression true if halted; *halted_by*: the halt's job column): the
    condition a dialect's ``keys`` filters with (the conformance kit holds the two equal)."""
    retrying, started = f"{retry_at} IS NOT NULL", f"{attempts} > 0"
    return {
        None: "1 = 1",
        "blocked": f"({retrying} OR {halted})",
        "running": f"({retry_at} IS NULL AND {started})",
        "halted": halted,
        "retrying": f"({retrying} AND NOT {halted})",
        "waiting": f"({retry_at} IS NULL AND NOT {started} AND NOT {halted})",
        "paused": f"({halted} AND {halted_by} IS NULL)",
    }[state]


def minute_of(now: float) -> int:
    """The Unix time the minute *now* is in starts."""
    return math.floor(now / 60) * 60


def minutes(counts: dict[int, tuple[int, int]], now: float) -> tuple[Minute, ...]:
    """`Overview.minutes` from *counts* (completed, discarded) by `minute_of`: the last
    `MINUTES`, the one *now* is in last."""
    last = minute_of(now)
    return tuple(
        Minute(start=float(start), completed=found[0], discarded=found[1])
        for start in range(last - 60 * (MINUTES - 1), last + 60, 60)
        for found in [counts.get(start, (0, 0))]
    )


def finished(changes: Sequence[object], superseded: Sequence[object]) -> tuple[int, int]:
    r"""Jobs an applied batch of *changes* completed and discarded: its `Complete`\ s and
    `Discard`\ s but those it *superseded* (the only changes that finish a job: a skip
    is a `Discard`, and `Transaction`, `Requeue` or an enqueue finish none)."""
    completed = discarded = 0
    for change in changes:
        if type(change) is Complete:
            completed += 1
        elif type(change) is Discard:
            discarded += 1
    for change in superseded:
        if type(change) is Complete:
            completed -= 1
        elif type(change) is Discard:
            discarded -= 1
    return completed, discarded


@attrs.define
class Finished:
    """Jobs finished per minute (`minute_of`), as a journal tallies them for `Overview.minutes`."""

    counts: dict[int, tuple[int, int]] = attrs.field(factory=dict)

    def add(self, now: float, completed: int, discarded: int) -> None:
        minute = minute_of(now)
        was = self.counts.get(minute)
        if was is None:
            # A new minute: forget those beyond the hour kept (once a minute, not per write).
            for old in [old for old in self.counts if old <= minute - KEEP_MINUTES]:
                del self.counts[old]
            was = (0, 0)
        self.counts[minute] = (was[0] + completed, was[1] + discarded)


def overview_of(
    *,
    keys: int,
    halted: int,
    paused: int,
    halted_busy: int,
    heads: Iterable[Sequence[Any]],
    jobs: int,
    scheduled: int,
    dead: int,
    oldest: float | None,
    counts: Iterable[Sequence[int]],
    marked: Iterable[float],
    now: float,
) -> Overview:
    """The `Overview` of what an SQL journal counted: *keys* with unfinished jobs in their
    sequence (*halted_busy* of them halted), its *halted* and *paused* keys, the *heads*
    an attempt started of keys not halted (attempts, retry_at), the finished-job *counts*
    (minute, completed, discarded) and the completion times of rows *marked* completed
    and not yet counted (SQLite's).  Every key with jobs and no halt whose head did not
    start is waiting."""
    started = [
        key_class(job_state(dead=False, attempts=attempts, retry_at=retry_at), False)
        for attempts, retry_at in heads
    ]
    running, retrying = started.count("running"), started.count("retrying")
    tally: dict[int, tuple[int, int]] = {}
    for minute, completed, discarded in counts:
        was = tally.get(minute, (0, 0))
        tally[minute] = (was[0] + completed, was[1] + discarded)
    for at in marked:
        was = tally.get(minute_of(at), (0, 0))
        tally[minute_of(at)] = (was[0] + 1, was[1])
    return Overview(
        running=running,
        retrying=retrying,
        waiting=keys - halted_busy - running - retrying,
        halted=halted,
        paused=paused,
        jobs=jobs,
        scheduled=scheduled,
        dead=dead,
        oldest_age=None if oldest is None else now - oldest,
        minutes=minutes(tally, now),
    )


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with *prefix*, in code-point
    order (None: no bound): a prefix search is a range, ``prefix <= key < end``, with no
    character that means anything else.  UTF-8 bytes (SQLite) and ``COLLATE "C"``
    (PostgreSQL) sort as code points do."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if 0xD800 <= last <= 0xDFFF:
            last = 0xE000  # no key holds a surrogate: the next code point a key may hold
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def check_keys(state: object, limit: object, now: object) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.keys``."""
    if state is not None and state not in KEY_FILTERS:
        raise ValueError(f"state must be None or one of {KEY_FILTERS}, not {state!r}")
    check_count("limit", limit, minimum=1)
    check_number("now", now)


def check_keys_by_name(
    state: object, prefix: object, after: object, limit: object, now: object
) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.keys_by_name``."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if after is not None and not isinstance(after, str):
        raise TypeError(f"after must be a str or None, not {type(after).__name__}")
    check_keys(state, limit, now)


def check_now(now: object) -> None:
    """Raise TypeError or ValueError unless *now*, ``Journal.write``'s, is None or a finite number."""
    if now is not None and not (type(now) is float and math.isfinite(now)):  # fast: the usual case
        check_number("now", now)


def check_job_id(job_id: object) -> None:
    """Raise TypeError unless *job_id* is an int (not a bool)."""
    check_number("job_id", job_id, types=(int,))


def check_jobs(key: object, limit: object, after: object) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.jobs``."""
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    check_count("limit", limit, minimum=1)
    check_count("after", after, minimum=0)


def check_scheduled(key: object, limit: object) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.scheduled``."""
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str or None, not {type(key).__name__}")
    check_count("limit", limit, minimum=1)


def check_schedules(after: object, limit: object, name: object = None) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.schedules``."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    if not isinstance(after, str):
        raise TypeError(f"after must be a str (a schedule's name), not {type(after).__name__}")
    check_count("limit", limit, minimum=1)


def check_dead_letters(key: object, limit: object, after: object, finished_before: object) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.dead_letters``."""
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str or None, not {type(key).__name__}")
    check_count("limit", limit, minimum=1)
    check_count("after", after, minimum=0)
    if finished_before is not None:
        check_number("finished_before", finished_before)


def key_info(
    *,
    key: str,
    queued: int,
    halted: bool,
    head_id: int,
    attempts: int,
    retry_at: float | None,
    error: str | None,
    accepted_at: float,
    now: float,
    halted_by: int | None = None,
    halt_error: str | None = None,
) -> KeyInfo:
    """The `KeyInfo` of a key with unfinished jobs, from what a journal stores of its head."""
    return KeyInfo(
        key=key,
        queued=queued,
        halted=halted,
        head_job_id=head_id,
        head_state=job_state(dead=False, attempts=attempts, retry_at=retry_at),
        head_attempt=attempts,
        head_age=now - accepted_at,
        next_retry_at=retry_at,
        last_error=error,
        halted_by=halted_by,
        halt_error=halt_error,
    )


def halted_key_info(
    key: str, halted_by: int | None = None, halt_error: str | None = None
) -> KeyInfo:
    """The `KeyInfo` of a halted key without unfinished jobs."""
    return KeyInfo(
        key=key,
        queued=0,
        halted=True,
        head_job_id=None,
        head_state=None,
        head_attempt=None,
        head_age=None,
        next_retry_at=None,
        last_error=None,
        halted_by=halted_by,
        halt_error=halt_error,
    )


def key_infos(
    heads: Iterable[Sequence[Any]], idle: Iterable[Sequence[Any]], now: float
) -> list[KeyInfo]:
    """The `KeyInfo`s of the SQL journals' two ``keys`` queries, in their order.

    *heads* rows: key, queued, halted, head id, attempts, retry_at, error,
    accepted_at, halted_by, halt_error; then *idle* rows, halted keys without
    unfinished jobs: key, halted_by, halt_error.
    """
    found = [
        key_info(
            key=key,
            queued=queued,
            halted=bool(halted),
            head_id=head_id,
            attempts=attempts,
            retry_at=retry_at,
            error=error,
            accepted_at=accepted_at,
            now=now,
            halted_by=halted_by,
            halt_error=halt_error,
        )
        for (
            key,
            queued,
            halted,
            head_id,
            attempts,
            retry_at,
            error,
            accepted_at,
            halted_by,
            halt_error,
        ) in heads
    ]
    found.extend(halted_key_info(key, halted_by, halt_error) for key, halted_by, halt_error in idle)
    return found


def stored(
    row: tuple[
        int,
        str | None,
        str | None,
        bytes,
        int,
        str | None,
        float | None,
        int | None,
        float | None,
        str | None,
    ],
) -> StoredJob:
    """The `StoredJob` of a row of the SQL journals' ``COLUMNS``."""
    job_id, key, unique, data, attempts, error, retry_at, seq, due_at, trace = row
    return StoredJob(  # positional: once per job paged in
        job_id,
        key,
        bytes(data),
        unique,
        attempts,
        error,
        retry_at,
        None if seq == job_id else seq,  # a job's place is its id unless it says otherwise
        due_at,
        trace,
    )


def info(row: tuple[Any, ...]) -> JobInfo:
    """The `JobInfo` of a row of the SQL journals' info columns (``INFO_COLUMNS``)."""
    (
        job_id,
        key,
        unique,
        data,
        attempts,
        state,
        error,
        accepted_at,
        finished_at,
        retry_at,
        stopped_during,
        seq,
        due_at,
        trace,
    ) = row
    dead = state == "dead"
    scheduled = seq is None and not dead
    return JobInfo(
        id=job_id,
        key=key,
        state=job_state(dead=dead, attempts=attempts, retry_at=retry_at, scheduled=scheduled),
        attempts=attempts,
        unique=unique,
        accepted_at=accepted_at,
        finished_at=finished_at,
        last_error=error,
        retry_at=retry_at,
        data=bytes(data),
        place=None if scheduled else job_id if seq is None else seq,
        due_at=due_at,
        stopped_during=stopped_during,
        trace=trace,
    )


AUDIT_COLUMNS: Final = "id, at, actor, verb, job_id, key, head, older_than, outcome, error, result"
"""The columns of an `AuditEntry`, in the SQL journals' audit tables."""


def check_audit(after: object, before: object, limit: object, key: object, job_id: object) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.audit``."""
    check_count("after", after, minimum=0)
    if before is not None:
        check_count("before", before, minimum=1)
    check_count("limit", limit, minimum=1)
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key must be a str or None, not {type(key).__name__}")
    if job_id is not None:
        check_job_id(job_id)


def audit_row(change: Audit, now: float) -> tuple[Any, ...]:
    """The values of an audit table's row for *change* at *now*, after its id (``AUDIT_COLUMNS``)."""
    return (
        now,
        change.actor,
        change.verb,
        change.job_id,
        change.key,
        change.head,
        change.older_than,
        change.outcome,
        change.error,
        change.result,
    )


def audit_entry(row: Sequence[Any]) -> AuditEntry:
    """The `AuditEntry` of a row of ``AUDIT_COLUMNS``."""
    entry_id, at, actor, verb, job_id, key, head, older_than, outcome, error, result = row
    return AuditEntry(
        id=entry_id,
        at=at,
        actor=actor,
        verb=verb,
        job_id=job_id,
        key=key,
        head=None if head is None else bool(head),
        older_than=older_than,
        outcome=outcome,
        error=error,
        result=result,
    )


def audit_where(
    after: int, before: int | None, key: str | None, job_id: int | None, mark: str
) -> tuple[str, list[object]]:
    """The WHERE clause of an audit read (placeholders *mark*) and its parameters."""
    where = f"id > {mark}"
    parameters: list[object] = [after]
    if before is not None:
        where += f" AND id < {mark}"
        parameters.append(before)
    if key is not None:
        where += f" AND key = {mark}"
        parameters.append(key)
    if job_id is not None:
        where += f" AND job_id = {mark}"
        parameters.append(job_id)
    return where, parameters


def set_schedule_info(change: ScheduleSet, last_tick: float | None) -> ScheduleInfo:
    """The schedule *change* sets, as a journal then holds it: running, at its cursor, with the
    tick its predecessor fired last (*last_tick*) passed on."""
    return ScheduleInfo(
        name=change.name,
        key=change.key,
        data=change.data,
        cron=change.cron,
        every=change.every,
        tz=change.tz,
        start=change.start,
        misfire=change.misfire,
        unique_for=change.unique_for,
        next_at=change.next_at,
        last_tick=last_tick,
    )
