"""The port between the runtime and whatever stores its jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .records import Change, Recovery, StoredJob

__all__ = ["Journal"]


class Journal(Protocol):
    """**Protocol:** where accepted jobs live until they are terminal.

    A supervisor calls `open` once when it starts, `write` for every change,
    and `aclose` when it stops; a journal can be opened again afterwards, the
    way a file is reopened after a restart.

    * ``write`` applies a batch of changes all-or-nothing and returns only once
      they are durable (as durable as the journal promises).  Job ids are
      chosen by the supervisor, increasing in acceptance order, starting at
      ``Recovery.next_id``: an ``Append`` whose id is not above every id
      appended before (in the same batch too) is refused.
    * ``open`` returns the unfinished jobs in id order, with the attempts
      marked for each, and the halted keys: every keyless job, and of each key
      at least its oldest job, with a `Backlog` for the rest, which ``load``
      hands out page by page.  So a journal with a long backlog reopens in
      time and memory that grow with the keys, not the jobs.
    * Completed jobs may be forgotten; discarded ones are kept as dead letters.

    Every method is a cancellation point: if the caller is cancelled before
    anything is stored, it raises `trio.Cancelled` and stores nothing.  A
    journal that waits for I/O yields to other tasks; one that has nothing to
    wait for (`MemoryJournal`) need not, as the runtime adds the schedule
    points fairness needs.  A failure raises `inturn.JournalError` (or a
    subclass) and leaves the journal as it was before the call.
    """

    async def open(self) -> Recovery:
        """Claim the journal for one supervisor and return what it holds."""
        ...

    async def write(self, changes: Sequence[Change]) -> None:
        """Apply *changes* atomically, in order."""
        ...

    async def load(self, key: str, after: int, limit: int) -> Sequence[StoredJob]:
        """Up to *limit* unfinished jobs of *key* with ids above *after*, in id order.

        Sees every write that returned before it was called.
        """
        ...

    async def aclose(self) -> None:
        """Release the journal; its contents stay for the next `open`."""
        ...
