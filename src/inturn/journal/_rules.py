"""The rules that judge a batch of changes: which are superseded, which break a rule.

Theory of operation
-------------------
A change to a job is a compare-and-set on the job's state (`records`).  One
that finds the job otherwise is *superseded*: another writer committed
first, so it is not applied, and the rest of its batch is.  The rules:

- `MarkAttempt`, `Step`, `Retrying`, `Complete` and `Discard` need the job
  unfinished; `Due` needs it still scheduled; `Purge`, `Requeue` and
  `Revive` need a dead letter this batch has not purged, requeued or
  revived already;
- a `MarkAttempt` that *starts* an attempt (attempts rising) is superseded on
  a halted key; one that gives an attempt back (not rising) is not
  (`starts_on_halted`).

A change that *breaks* a rule is the caller's bug or a refusal, and the
whole batch changes nothing: an id used before (`Append`, `Due`,
`Requeue`), a job never appended, a unique key another job reserves (held
by an unfinished job, or in its window after it finished: `DuplicateError`).

`judge` applies these rules to a batch against what a journal holds
(`Held`), playing the batch forward on a few dicts so each change sees the
ones before it, and changes nothing.  It is pure: `MemoryJournal` calls it
before it applies a batch.  The SQL journals say the same rules in their
statements (`_sql_apply`), and the conformance kit holds all three to them.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence, Set as AbstractSet
from typing import Final, Protocol

import attrs

from ..errors import DuplicateError, JournalError
from .records import (
    Append,
    Change,
    Complete,
    Discard,
    Due,
    Halt,
    MarkAttempt,
    Purge,
    Requeue,
    Resume,
    Retrying,
    Revive,
    Step,
)

__all__ = ["Held", "Job", "judge", "never_appended", "starts_on_halted", "used_before"]

NONE: frozenset[int] = frozenset()
"""What `judge` answers when nothing is superseded (the usual answer, not a new set)."""


class Job(Protocol):
    """What the rules read of a job, unfinished or a dead letter."""

    @property
    def key(self) -> str | None: ...
    @property
    def unique(self) -> str | None: ...
    @property
    def unique_for(self) -> float | None: ...
    @property
    def attempts(self) -> int: ...


@attrs.frozen
class Held:
    """What a journal holds, as the rules read it (never change it)."""

    jobs: Mapping[int, Job]
    """Unfinished jobs by id."""
    scheduled: Container[int]
    """Ids of unfinished jobs that are scheduled (in no key's sequence yet)."""
    dead: Mapping[int, Job]
    """Dead letters by id."""
    halted: Container[str]
    """Halted keys."""
    holders: Mapping[str, int]
    """Each unique key an unfinished job holds: that job's id."""
    reserved: Mapping[str, tuple[int, float]]
    """Unique keys reserved after their job finished: its id, and until when."""


@attrs.define  # not frozen: a frozen class is built at three times the cost, once per job
class _New:
    """A job the batch appends (or requeues), as the rest of the batch sees it."""

    key: str | None
    unique: str | None
    unique_for: float | None
    attempts: int = 0  # the rules read the batch's marks from their own dict


def starts_on_halted(attempt: int, attempts: int, key: str | None, halted: Container[str]) -> bool:
    """Whether marking *attempt* on a job of *key* that made *attempts* is a start (attempts
    rising) on a halted key.

    Such a start is superseded: an operator paused the key, or a discard
    halted it, while the start was on its way.  Giving an attempt back (not
    rising) applies: it changes nothing a halt is about.
    """
    return attempt > attempts and key is not None and key in halted


def never_appended(job_id: int, next_id: int, name: str = "") -> None:
    """Raise if *job_id* is at or above *next_id*: a change naming a job that never
    existed is a caller's bug, not a race.  *name*, if any, starts the message."""
    if job_id >= next_id:
        raise JournalError(f"{name}job {job_id} was never appended")


def used_before(job_id: int, next_id: int, name: str = "") -> int:
    """The next free id after new id *job_id*; raise if it was used before (below *next_id*)."""
    if job_id < next_id:
        raise JournalError(f"{name}job id {job_id} was used before")
    return job_id + 1


_OF_UNFINISHED: Final = (MarkAttempt, Step, Retrying, Complete, Discard)
"""Changes that need their job unfinished."""
_FINISHING: Final = (Complete, Discard)
_OF_DEAD: Final = (Purge, Requeue, Revive)
"""Changes that need a dead letter."""


class _Halts:
    """The halted keys as the batch leaves them, over those the journal holds."""

    __slots__ = ("held", "staged")

    def __init__(self, held: Container[str]) -> None:
        self.held = held
        self.staged: dict[str, bool] = {}

    def __contains__(self, key: object) -> bool:
        found = self.staged.get(key) if isinstance(key, str) else None
        return key in self.held if found is None else found


def judge(changes: Sequence[Change], held: Held, next_id: int, now: float) -> AbstractSet[int]:
    """The positions of *changes* that are superseded; raise, changing nothing, if one breaks a rule.

    *next_id* is the lowest id never used; unique keys' windows are judged
    at *now*.
    """
    appended: dict[int, _New] = {}  # job id -> the job, as this batch appends it
    attempts: dict[int, int] = {}  # job id -> its attempts, as this batch marks them
    finished: set[int] = set()
    dead: set[int] = set()  # dead letters made by this batch
    gone: set[int] = set()  # dead letters this batch purges, requeues or revives
    halts = _Halts(held.halted)
    scheduled: dict[int, bool] = {}  # job id -> still scheduled, as this batch leaves it
    taken: dict[str, int] = {}
    freed: set[str] = set()
    windows: dict[str, tuple[int, float] | None] = {}  # reservations, as this batch leaves them
    superseded: set[int] = set()

    def take(unique: str | None, job_id: int, own: int | None = None) -> None:
        """*job_id* takes *unique*: refused while another job reserves it (not *own*'s reservation)."""
        if unique is None:
            return
        holder = taken.get(unique)
        if holder is None and unique not in freed:
            holder = held.holders.get(unique)
        if holder is not None:
            raise DuplicateError(unique, holder)
        window = windows[unique] if unique in windows else held.reserved.get(unique)
        if window is not None and window[1] > now and window[0] != own:
            raise DuplicateError(unique, *window)
        taken[unique] = job_id
        windows[unique] = None

    for position, change in enumerate(changes):
        if isinstance(change, _OF_UNFINISHED):
            job_id = change.job_id
            job = None if job_id in finished else held.jobs.get(job_id) or appended.get(job_id)
            if job is None:
                never_appended(job_id, next_id)
                superseded.add(position)
            elif isinstance(change, MarkAttempt):
                made = attempts.get(job_id, job.attempts)
                if starts_on_halted(change.attempt, made, job.key, halts):
                    superseded.add(position)
                else:
                    attempts[job_id] = change.attempt
            elif isinstance(change, _FINISHING):
                finished.add(job_id)
                if job.unique is not None:
                    freed.add(job.unique)
                    taken.pop(job.unique, None)
                    if job.unique_for is not None:
                        windows[job.unique] = (job_id, now + job.unique_for)
                if isinstance(change, Discard):
                    dead.add(job_id)
                    if change.halt and job.key is not None:
                        halts.staged[job.key] = True
        elif isinstance(change, Append):
            next_id = used_before(change.job_id, next_id)
            if change.unique is not None:
                take(change.unique, change.job_id)
            appended[change.job_id] = _New(change.key, change.unique, change.unique_for)
            if change.due_at is not None:
                scheduled[change.job_id] = True
        elif isinstance(change, Due):
            job_id = change.job_id
            due = job_id not in finished and (job_id in held.jobs or job_id in appended)
            if not due or not scheduled.get(job_id, job_id in held.scheduled):
                never_appended(job_id, next_id)
                used_before(change.seq, next_id)  # checked, not taken
                superseded.add(position)
                continue
            next_id = used_before(change.seq, next_id)
            scheduled[job_id] = False
        elif isinstance(change, _OF_DEAD):
            job_id = change.job_id
            if job_id in gone or not (job_id in held.dead or job_id in dead):
                never_appended(job_id, next_id)
                if isinstance(change, Requeue):
                    used_before(change.new_id, next_id)  # checked, not taken
                superseded.add(position)
                continue
            gone.add(job_id)
            if isinstance(change, Purge):
                continue
            letter = held.dead.get(job_id) or held.jobs.get(job_id) or appended[job_id]
            if isinstance(change, Revive):
                take(letter.unique, job_id, own=job_id)
                if change.resume and letter.key is not None:
                    halts.staged[letter.key] = False
                continue
            next_id = used_before(change.new_id, next_id)
            take(letter.unique, change.new_id, own=job_id)
            appended[change.new_id] = _New(letter.key, letter.unique, letter.unique_for)
        elif isinstance(change, Halt):
            halts.staged[change.key] = True
        elif isinstance(change, Resume):
            halts.staged[change.key] = False
    return superseded or NONE
