"""How a ``send`` command's jobs are kept in an inbox row: two columns, ``items`` and ``data``.

A `Command` of verb ``send`` carries jobs whose payloads the sender encoded
(`SentJob`).  The SQL inboxes (`_sqlite_inbox`, `_postgres_inbox`) keep them
in one row, so a ``send_many`` is one command, taken and answered as one:
``items`` is JSON text, one ``[key, unique, unique_for, due_at, size]`` per
job, readable by an operator who looks at the table, and ``data`` is the
payloads' bytes one after another (*size* bytes each), never decoded or
shown here.  A row whose columns do not hold that (made by hand, or torn)
unpacks to no jobs, and the supervisor answers such a send with an error
instead of taking the inbox down.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .records import SentJob

__all__ = ["pack", "unpack"]


def pack(jobs: Sequence[SentJob]) -> tuple[str | None, bytes | None]:
    """The ``items`` and ``data`` columns of a command sending *jobs* (NULL, NULL: none)."""
    if not jobs:
        return None, None
    items = [
        [key, unique, unique_for, due_at, len(data)]
        for key, data, unique, unique_for, due_at in jobs
    ]
    return json.dumps(items), b"".join(data for _, data, _, _, _ in jobs)


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
        if not (isinstance(row, list) and len(row) == 5):
            return ()
        key, unique, unique_for, due_at, size = row
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
