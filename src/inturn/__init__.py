"""inturn: run jobs one at a time, in order, per key, on trio."""

from __future__ import annotations

from .codec import Codec, JSONCodec
from .errors import (
    BatchError,
    DecodeError,
    DuplicateError,
    EncodeError,
    InturnError,
    InvalidKey,
    InvalidSchedule,
    JobDiscarded,
    JobNotFound,
    JobStateError,
    JournalCorrupt,
    JournalError,
    JournalGone,
    JournalLocked,
    KeyNotFound,
    LeaseLost,
    PermanentError,
    RetryAfter,
    ScheduleNotFound,
    Snooze,
    SupervisorClosed,
)
from .events import Event
from .info import JobInfo, KeyInfo, MemberInfo, Minute, Overview
from .jobs import Item, Job, Stats
from .journal import Journal, MemoryJournal, PostgresJournal, SQLiteJournal
from .operator import Operator, operate
from .producers import enqueue, enqueue_async
from .retry import Retry
from .supervisor import Supervisor, open_supervisor
from .tracing import Tracing

__version__ = "0.1.0"
"""This release's version: the build reads it from here (pyproject.toml's ``tool.hatch.version``)."""

__all__ = [
    "open_supervisor",
    "Supervisor",
    "Job",
    "Item",
    "Stats",
    "KeyInfo",
    "MemberInfo",
    "Minute",
    "Overview",
    "JobInfo",
    "Event",
    "Tracing",
    "operate",
    "Operator",
    "enqueue",
    "enqueue_async",
    "Retry",
    "Journal",
    "MemoryJournal",
    "PostgresJournal",
    "SQLiteJournal",
    "Codec",
    "JSONCodec",
    "InturnError",
    "InvalidKey",
    "InvalidSchedule",
    "DuplicateError",
    "JobDiscarded",
    "PermanentError",
    "RetryAfter",
    "Snooze",
    "BatchError",
    "EncodeError",
    "DecodeError",
    "SupervisorClosed",
    "JournalError",
    "JournalCorrupt",
    "JournalLocked",
    "LeaseLost",
    "JournalGone",
    "JobNotFound",
    "JobStateError",
    "KeyNotFound",
    "ScheduleNotFound",
]
