"""A `MemoryJournal`'s row of a job: what a durable journal keeps in its table, as one object."""

from __future__ import annotations

import attrs

from ..info import JobInfo, JobState
from ._reads import job_state
from .records import StoredJob

__all__ = ["Row"]


@attrs.define(eq=False, slots=True)
class Row:
    key: str | None
    data: bytes
    unique: str | None
    accepted_at: float
    unique_for: float | None = None
    due_at: float | None = None
    """Set while it is scheduled."""
    trace: str | None = None
    """The trace context it was sent in (`Append.trace`)."""
    attempts: int = 0
    last_error: str | None = None
    retry_at: float | None = None
    finished_at: float | None = None
    """Set when discarded: the row is a dead letter then."""
    stopped_during: int | None = None
    steps: dict[str, bytes] | None = None
    """The steps it recorded (`Step`), in the order recorded."""
    seq: int | None = None
    """Its place, if not its id (given by `Due`)."""

    def stored(self, job_id: int) -> StoredJob:
        return StoredJob(  # positional: once per job paged in
            job_id,
            self.key,
            self.data,
            self.unique,
            self.attempts,
            self.last_error,
            self.retry_at,
            self.seq,
            self.due_at,
            self.trace,
        )

    def place(self, job_id: int) -> int:
        return job_id if self.seq is None else self.seq

    def mark(self, attempt: int) -> None:
        """A `MarkAttempt` (judged): running again, no longer waiting to retry; its last
        error stays."""
        self.attempts = attempt
        self.retry_at = None

    def state(self) -> JobState:
        return job_state(
            dead=self.finished_at is not None,
            attempts=self.attempts,
            retry_at=self.retry_at,
            scheduled=self.due_at is not None,
        )

    def info(self, job_id: int) -> JobInfo:
        return JobInfo(
            id=job_id,
            key=self.key,
            state=self.state(),
            attempts=self.attempts,
            unique=self.unique,
            accepted_at=self.accepted_at,
            finished_at=self.finished_at,
            last_error=self.last_error,
            retry_at=self.retry_at,
            data=self.data,
            place=None if self.due_at is not None else self.place(job_id),
            due_at=self.due_at,
            stopped_during=self.stopped_during,
            trace=self.trace,
        )
