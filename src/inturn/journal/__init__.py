"""Journals: where accepted jobs live until they are terminal."""

from __future__ import annotations

from ._protocol import Journal, JournalReads
from .memory import MemoryJournal
from .postgres import PostgresJournal, PostgresReader
from .records import (
    Answer,
    Append,
    Audit,
    Backlog,
    Change,
    Claim,
    Command,
    Complete,
    DeadLetter,
    Discard,
    Due,
    Halt,
    MarkAttempt,
    Purge,
    Recovery,
    Requeue,
    Resume,
    Retrying,
    Revive,
    SentJob,
    Step,
    StoredJob,
    Transaction,
)
from .sqlite import SQLiteJournal, SQLiteReader

__all__ = [
    "Answer",
    "Append",
    "Audit",
    "Backlog",
    "Claim",
    "Change",
    "Command",
    "Complete",
    "DeadLetter",
    "Discard",
    "Due",
    "Halt",
    "Journal",
    "JournalReads",
    "MarkAttempt",
    "MemoryJournal",
    "PostgresJournal",
    "PostgresReader",
    "Purge",
    "Recovery",
    "Requeue",
    "Resume",
    "Retrying",
    "Revive",
    "SentJob",
    "Step",
    "SQLiteJournal",
    "SQLiteReader",
    "StoredJob",
    "Transaction",
]
