"""A reference journal for the hypothesis models of `Core`: the supersede rules, on a few dicts.

The models drive the core as the trio shell does and write what it returns
here; this journal answers as the shipped ones do (`inturn.journal._rules`
says the rules, the conformance kit holds every journal to them), for the
changes the models write: a change to a job needs it unfinished; a start
(an attempt rising) on a halted key is superseded; an `Append` below the
next id breaks the rule that ids rise, and the whole write is refused; a
fleet member's `Release` keeps the key if a job waits on it, unhalted.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

import inturn
from inturn.journal.records import (
    Append,
    Audit,
    Backlog,
    Change,
    Complete,
    Discard,
    Fire,
    FleetChange,
    Halt,
    MarkAttempt,
    Release,
    Resume,
    Retrying,
    ScheduleDrop,
    SchedulePause,
    ScheduleSet,
    StoredJob,
    Transaction,
)


@attrs.define
class Row:
    """A job as the journal holds it."""

    key: str | None
    state: str = "queued"  # queued, done or dead
    attempts: int = 0


@attrs.define
class ReferenceJournal:
    rows: dict[int, Row] = attrs.field(factory=dict)
    halted: set[str] = attrs.field(factory=set)
    owned: set[str] = attrs.field(factory=set)
    """A fleet's keys this member owns."""
    next_id: int = 1

    def write(self, changes: Sequence[Change]) -> list[Change]:
        """Apply *changes*; return the superseded ones.  Raises `JournalError`, changing
        nothing, if an `Append` reuses an id (a write answered out of order)."""
        return [
            change
            for change in self.write_releasing(changes)
            if not isinstance(change, Release | Transaction)
        ]

    def write_releasing(self, changes: Sequence[FleetChange]) -> list[FleetChange]:
        """`write`, for a fleet member's changes that may hold a `Release`."""
        next_id = self.next_id
        for change in changes:
            if isinstance(change, Append):
                if change.job_id < next_id:
                    raise inturn.JournalError(f"id {change.job_id} used before")
                next_id = change.job_id + 1
        superseded: list[FleetChange] = []
        for change in changes:
            if isinstance(change, Append):
                self.rows[change.job_id] = Row(change.key)
                self.next_id = change.job_id + 1
            elif isinstance(change, Halt):
                self.halted.add(change.key)
            elif isinstance(change, Resume):
                self.halted.discard(change.key)
            elif isinstance(change, Audit | ScheduleSet | ScheduleDrop | SchedulePause | Fire):
                pass  # the audit trail, schedules: not modelled here
            elif isinstance(change, Release):
                if self.waiting(change.key):
                    superseded.append(change)  # kept: a job waits
                else:
                    self.owned.discard(change.key)
            else:
                row = self.rows.get(change.job_id)
                if row is None or row.state != "queued":
                    superseded.append(change)
                elif isinstance(change, MarkAttempt):
                    if change.attempt > row.attempts and row.key in self.halted:
                        superseded.append(change)  # a start on a halted key
                    else:
                        row.attempts = change.attempt
                elif isinstance(change, Complete):
                    row.state = "done"
                elif isinstance(change, Discard):
                    row.state = "dead"
                    if change.halt and row.key is not None:
                        self.halted.add(row.key)
                else:
                    assert isinstance(change, Retrying), change
        return superseded

    def append(self, key: str) -> int:
        """Another member's send: a new job of *key*, journaled."""
        job_id = self.next_id
        self.write([Append(job_id, key, b"x")])
        return job_id

    def queued(self, key: str) -> list[int]:
        """*key*'s unfinished jobs, in order."""
        return sorted(
            job_id for job_id, row in self.rows.items() if row.key == key and row.state == "queued"
        )

    def waiting(self, key: str) -> bool:
        """Whether a job waits on unhalted *key* (a `Release` of it is superseded)."""
        return key not in self.halted and bool(self.queued(key))

    def stored(self, job_id: int) -> StoredJob:
        row = self.rows[job_id]
        return StoredJob(job_id, row.key, b"x", attempts=row.attempts)

    def load(self, key: str, after: int, limit: int) -> list[StoredJob]:
        return [self.stored(job_id) for job_id in self.queued(key) if job_id > after][:limit]

    def backlog(self, key: str) -> Backlog:
        queued = self.queued(key)
        return Backlog(count=len(queued), last_id=queued[-1] if queued else 0)

    def release(self, key: str) -> Backlog | None:
        """`PostgresJournal.release`: None if let go (no job waits, or it is halted)."""
        if self.waiting(key):
            return self.backlog(key)
        self.owned.discard(key)
        return None
