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
    Recovery,
    Resume,
    StoredJob,
)
from .sqlite import SQLiteJournal

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
    "Recovery",
    "Resume",
    "SQLiteJournal",
    "StoredJob",
]
