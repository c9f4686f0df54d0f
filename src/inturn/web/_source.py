"""Where the dashboard reads and how it fixes: a journal nobody here holds, or this process's supervisor.

The pages and the API see one `Source` either way.  `inturn web` reads a
journal's blocking reader on worker threads (the journal itself may be held
by a service in another process) and opens an operator for each fix, as the
command line does; a dashboard embedded in an application (`inturn.web.serve`)
reads the journal its supervisor holds and fixes through that supervisor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import attrs
import trio

from .. import operate
from ..info import MemberInfo
from ..journal import Journal, JournalReads
from ..journal._thread import SyncReads, ThreadedReader
from ..operator import Operator, operator_of
from ..supervisor import Supervisor

__all__ = ["Source", "reader_source", "supervisor_source"]


@attrs.frozen
class Source:
    """The dashboard's reads, its fleet's members, and an operator for each fix."""

    reads: JournalReads
    """The journal's reads (`inturn.journal.Journal`'s), awaited."""
    members: Callable[[], Awaitable[Sequence[MemberInfo]]]
    """The fleet's members, oldest first; none outside a fleet."""
    operate: Callable[[str], AbstractAsyncContextManager[Operator]]
    """An operator for one fix, its audit trail's *actor* given (``web@<client address>``)."""


def reader_source(
    reader: SyncReads, journal: Callable[[], Journal], *, answer_within: float
) -> Source:
    """A journal read through *reader*, on worker threads, and fixed through a fresh
    ``operate(journal())`` each time: whether or not a service holds it."""
    members = getattr(reader, "members", None)

    async def fleet() -> Sequence[MemberInfo]:
        if members is None:  # a SQLite file: no fleet
            await trio.lowlevel.checkpoint()
            return []
        found: Sequence[MemberInfo] = await trio.to_thread.run_sync(members)
        return found

    def operator(actor: str) -> AbstractAsyncContextManager[Operator]:
        return operate(journal(), answer_within=answer_within, actor=actor)

    return Source(ThreadedReader(reader), fleet, operator)


def supervisor_source(supervisor: Supervisor) -> Source:
    """The journal *supervisor* holds, read beside it, and fixed by the supervisor itself."""
    journal = supervisor.journal
    members = getattr(journal, "members", None)

    async def fleet() -> Sequence[MemberInfo]:
        if members is None or getattr(journal, "fleet", False) is not True:
            await trio.lowlevel.checkpoint()
            return []
        found: Sequence[MemberInfo] = await members()
        return found

    @asynccontextmanager
    async def operator(actor: str) -> AsyncIterator[Operator]:
        yield operator_of(supervisor, actor=actor)

    return Source(journal, fleet, operator)
