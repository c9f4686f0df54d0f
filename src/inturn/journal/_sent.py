"""How a ``send`` command's jobs are kept in an inbox row: two columns, ``items`` and ``data``.

A `Command` of verb ``send`` carries jobs whose payloads the sender encoded
(`SentJob`).  The SQL inboxes (`_sqlite_inbox`, `_postgres_inbox`) keep them
in one row, so a ``send_many`` is one command, taken and answered as one:
``items`` is JSON text, one ``[key, unique, unique_for, due_at, size]`` per
job (and the sender's trace context after *size*, if it traced), readable by an operator who looks at the table, and ``data`` is the
payloads' bytes one after another (*size* bytes each), never decoded or
shown here.  A row whose columns do not hold that (made by hand, or torn)
unpacks to no jobs, and the supervisor answers such a send with an error
instead of taking the inbox down.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .records import SentJob

__all__ = ["pack", "sent_trace", "unpack"]


def pack(jobs: Sequence[SentJob], trace: str | None = None) -> tuple[str | None, bytes | None]:
    """The ``items`` and ``data`` columns of a command sending *jobs* (NULL, NULL: none), sent
    in the context *trace*."""
    if not jobs:
        return None, None
    traced = [] if trace is None else [trace]
    items = [
        [key, unique, unique_for, due_at, len(data), *traced]
        for key, data, unique, unique_for, due_at in jobs
    ]
    return json.dumps(items), b"".join(data for _, data, _, _, _ in jobs)


def sent_trace(items: object) -> str | None:
    """The trace context a send's ``items`` say it was sent in (None: none, or not `pack`'s)."""
    try:
        rows = json.loads(items) if isinstance(items, str) else None
    except ValueError:
        return None
    if isinstance(rows, list) and rows and isinstance(rows[0], list) and len(rows[0]) == 6:
        trace = rows[0][5]
        return trace if isinstance(trace, str) else None
    return None


def unpack(items: object, data: object) -> tuple[SentJob, ...]:
    """The jobs of a command's ``items`` and ``data`` columns; none if they are not `pack`'s."""
    if items is None or not isinstance(items, str) or not isinstance(data, bytes | memoryview):
        return ()
    data = bytes(data)
    try:
        rows = json.loads(items)
    except ValueError:
        return ()
    if not isinstance(rows, list):
        return ()
    jobs: list[SentJob] = []
    offset = 0
    for row in rows:
        if not (isinstance(row, list) and len(row) in (5, 6)):
            return ()
        key, unique, unique_for, due_at, size = row[:5]
        if not (
            isinstance(key, str)
            and (unique is None or isinstance(unique, str))
            and _number(unique_for)
            and _number(due_at)
            and type(size) is int
            and 0 <= size <= len(data) - offset
        ):
            return ()
        jobs.append((key, data[offset : offset + size], unique, _float(unique_for), _float(due_at)))
        offset += size
    return tuple(jobs) if offset == len(data) else ()


def _number(value: object) -> bool:
    return value is None or (type(value) in (int, float))


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)
