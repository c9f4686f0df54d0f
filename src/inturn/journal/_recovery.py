"""What a journal hands the next supervisor at `open`: one builder for the three journals.

A `Recovery` holds each key's head (its first unfinished job), every keyless
job that is not scheduled, and for a key with more, a `Backlog` (how many
more, and the last one's place) that `load` pages in: a recovery costs
memory in the number of keys, whatever the backlogs hold.  `recovery` builds
it from each key's count and places; `read_recovery` reads those from an SQL
journal with its dialect's statements (`RecoveryReads`), in one snapshot the
caller opens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ..errors import JournalCorrupt
from ._reads import stored
from .records import Backlog, Recovery, StoredJob

__all__ = ["RecoveryReads", "read_recovery", "recovery"]

KeyCount = tuple[str, int, int, int]
"""A key with unfinished jobs in its sequence: the key, how many, the first's place and the
last's."""


def recovery(
    *,
    next_id: int,
    keys: Iterable[KeyCount],
    jobs: Sequence[StoredJob],
    halted: Iterable[str],
    scheduled: int,
) -> Recovery:
    """The `Recovery` of a journal whose keys hold *keys*; *jobs* are the heads and the
    keyless jobs, in place order."""
    backlog = {
        key: Backlog(count=count - 1, last_id=last) for key, count, _, last in keys if count > 1
    }
    return Recovery(
        next_id=next_id,
        jobs=jobs,
        backlog=backlog,
        halted=frozenset(halted),
        scheduled=scheduled,
    )


@attrs.frozen
class RecoveryReads:
    """A dialect's statements for `read_recovery`, over its tables of jobs and halted keys."""

    keys: str
    """Each key with unfinished jobs in its sequence, as a `KeyCount`."""
    heads: str
    """Unfinished jobs in a sequence (``COLUMNS``) that are keyless or the heads given,
    in place order."""
    heads_parameters: Callable[[list[KeyCount]], tuple[object, ...]]
    """The parameters of ``heads`` for these keys."""
    high_id: str
    """The highest id used (no row: none)."""
    halted: str
    """Each halted key."""
    scheduled: str
    """How many jobs are scheduled."""


def read_recovery(connection: Any, reads: RecoveryReads, name: str) -> Recovery:
    """The `Recovery` of journal *name* on *connection*, read in the snapshot the caller holds."""
    keys: list[KeyCount] = connection.execute(reads.keys).fetchall()
    # Each row becomes its job as it is read: no list of raw rows beside the
    # jobs (a recovery's peak memory is O(keys) twice).
    jobs = [stored(row) for row in connection.execute(reads.heads, reads.heads_parameters(keys))]
    halted = [row[0] for row in connection.execute(reads.halted)]
    # A key is text to the runtime: only a file made by hand holds another kind
    # (a TEXT column of SQLite keeps a blob as it is).
    if not all(isinstance(key, str) for key in [*(row[0] for row in keys), *halted]):
        raise JournalCorrupt(name, "a key that is not text")
    (high_id,) = connection.execute(reads.high_id).fetchone() or (0,)
    (scheduled,) = connection.execute(reads.scheduled).fetchone()
    return recovery(
        next_id=int(high_id) + 1, keys=keys, jobs=jobs, halted=halted, scheduled=scheduled
    )
