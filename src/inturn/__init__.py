"""inturn: run jobs one at a time, in order, per key, on trio."""

from __future__ import annotations

from .codec import Codec, JSONCodec
from .errors import (
    DecodeError,
    DuplicateError,
    EncodeError,
    InturnError,
    InvalidKey,
    JobDiscarded,
    JournalCorrupt,
    JournalError,
    JournalLocked,
    PermanentError,
    SupervisorClosed,
)
from .jobs import Job, Stats
from .journal import Journal, MemoryJournal, SQLiteJournal
from .retry import Retry
from .supervisor import Supervisor, open_supervisor

__all__ = [
    "open_supervisor",
    "Supervisor",
    "Job",
    "Stats",
    "Retry",
    "Journal",
    "MemoryJournal",
    "SQLiteJournal",
    "Codec",
    "JSONCodec",
    "InturnError",
    "InvalidKey",
    "DuplicateError",
    "JobDiscarded",
    "PermanentError",
    "EncodeError",
    "DecodeError",
    "SupervisorClosed",
    "JournalError",
    "JournalCorrupt",
    "JournalLocked",
]
