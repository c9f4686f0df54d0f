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

from .._checks import check_count, check_number
from ..info import AuditEntry, JobInfo, JobState, KeyFilter, KeyInfo
from .records import Audit, StoredJob

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

KEY_FILTERS: Final[tuple[KeyFilter, ...]] = ("blocked", "running", "halted")


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


def key_matches(state: KeyFilter | None, head: JobState | None, halted: bool) -> bool:
    """Whether a key whose head is in state *head* (None: no jobs) passes the *state* filter."""
    if state is None:
        return True
    if state == "blocked":
        return halted or head == "retrying"
    if state == "running":
        return head == "running"
    return halted


def check_keys(state: object, limit: object, now: object) -> None:
    """Raise TypeError or ValueError for a bad argument of ``Journal.keys``."""
    if state is not None and state not in KEY_FILTERS:
        raise ValueError(f"state must be None or one of {KEY_FILTERS}, not {state!r}")
    check_count("limit", limit, minimum=1)
    check_number("now", now)


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
        int, str | None, str | None, bytes, int, str | None, float | None, int | None, float | None
    ],
) -> StoredJob:
    """The `StoredJob` of a row of the SQL journals' ``COLUMNS``."""
    job_id, key, unique, data, attempts, error, retry_at, seq, due_at = row
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
