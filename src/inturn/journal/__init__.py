"""Journals: where accepted jobs live until they are terminal."""

from __future__ import annotations

from ._protocol import Journal
from .memory import MemoryJournal
from .records import (
    Append,
    Backlog,
    Change,
    Complete,
    DeadLetter,
    Discard,
    Halt,
    MarkAttempt,
    Purge,
    Recovery,
    Requeue,
    Resume,
    Retrying,
    StoredJob,
)
from .sqlite import SQLiteJournal, SQLiteReader

__all__ = [
    "Append",
    "Backlog",
    "Change",
    "Complete",
    "DeadLetter",
    "Discard",
    "Halt",
    "Journal",
    "MarkAttempt",
    "MemoryJournal",
    "Purge",
    "Recovery",
    "Requeue",
    "Resume",
    "Retrying",
    "SQLiteJournal",
    "SQLiteReader",
    "StoredJob",
]
