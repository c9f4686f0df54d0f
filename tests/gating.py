"""`GatingJournal`: the one journal wrapper tests use to stop a write or a load at a chosen point.

A race between two writers, an operator and an actor, a send and a page, is
tested by holding one side where a slow disk or a slow network would hold it,
doing the other, then letting the first go.  Each test used to write its own
wrapper for that; they differed in where the hold sat (before a write reaches
the journal, or after it committed and before its writer is told; before or
after a load or an operator's read reads) and in nothing else worth a class.

A `Hold` says which calls wait and lets them go::

    journal = GatingJournal(inturn.MemoryJournal())
    halts = journal.hold_writes(lambda changes: any(isinstance(c, Halt) for c in changes))
    ...
    await halts.wait_held()  # a Halt is on its way, not yet in the journal
    ...                      # the race
    halts.release()
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs
import trio

import inturn
from inturn.info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from inturn.journal import Change, StoredJob
from inturn.testing import FaultyJournal

_T = TypeVar("_T")

READS = ("job", "jobs", "keys", "scheduled", "dead_letters")
"""The operator reads a `GatingJournal` can hold (`GatingJournal.hold_reads`)."""


def everything(*args: object) -> bool:
    return True


def any_of(*kinds: type) -> Callable[[Sequence[Change]], bool]:
    """Picks the writes holding a change of one of *kinds*."""
    return lambda changes: any(isinstance(change, kinds) for change in changes)


@attrs.define(eq=False)
class Hold:
    """Which calls of a `GatingJournal` wait, and the switch that lets them go.

    It holds each call *picks* chooses (at most *limit* calls, if given) until
    `release` (all of them, and it holds nothing more) or `release_one` (one
    of them; it goes on holding others).  Made by the journal's ``hold_*``
    methods, never directly.
    """

    picks: Callable[..., bool]
    limit: int | None = None
    shielded: bool = False
    """A held call is not cancelled, as a durable journal's write, once queued, is not."""
    fails: bool = False
    """Once let go, a held write raises `JournalError` instead of reaching the journal."""
    held: list[Any] = attrs.field(factory=list, init=False)
    """What each call held so far carried: a write's changes, a load's ``(key, after, limit)``,
    a read's name."""
    _gates: list[trio.Event] = attrs.field(factory=list, init=False)
    _released: bool = attrs.field(default=False, init=False)
    _arrived: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def released(self) -> bool:
        return self._released

    def wants(self, *call: object) -> bool:
        if self._released or (self.limit is not None and len(self.held) >= self.limit):
            return False
        return self.picks(*call)

    async def wait_held(self, count: int = 1) -> None:
        """Wait until *count* calls have been held (at once if they already were)."""
        while len(self.held) < count:
            await self._arrived.wait()

    @property
    def waiting(self) -> int:
        """How many held calls still wait."""
        return sum(not gate.is_set() for gate in self._gates)

    def stop(self) -> None:
        """Hold no more calls; those held still wait."""
        self._released = True

    def release(self) -> None:
        """Let every held call go on; later calls pass."""
        self.stop()
        for gate in self._gates:
            gate.set()

    def release_one(self, index: int = 0) -> None:
        """Let one held call go on: the oldest still waiting, or the one at *index* among
        those still waiting (-1: the newest).  It goes on holding others."""
        waiting = [gate for gate in self._gates if not gate.is_set()]
        assert waiting, "no call is held"
        waiting[index].set()

    async def wait(self, carried: object) -> None:
        """Called by the journal: hold this call until it is let go."""
        self.held.append(carried)
        self._gates.append(gate := trio.Event())
        self._arrived.set()
        self._arrived = trio.Event()
        await gate.wait()


@attrs.define(eq=False)
class GatingJournal(FaultyJournal):
    """Delegates to *inner* (failing what *fail* picks, as `FaultyJournal` does), holding
    the writes, loads and operator reads its holds pick, and keeping what was written and
    loaded.

    *closes*: False leaves *inner* open when this journal is closed, so a write
    held across a supervisor's stop still lands, as a durable write queued
    before the close does.
    """

    closes: bool = attrs.field(default=True, kw_only=True)
    written: list[Sequence[Change]] = attrs.field(factory=list, init=False)
    """Every batch the inner journal stored, in order."""
    pages: list[list[int]] = attrs.field(factory=list, init=False)
    """The job ids of every page a load read, in order."""
    _before: list[Hold] = attrs.field(factory=list, init=False)
    _after: list[Hold] = attrs.field(factory=list, init=False)
    _loads: list[tuple[Hold, bool]] = attrs.field(factory=list, init=False)
    _reads: dict[str, list[tuple[Hold, bool]]] = attrs.field(factory=dict, init=False)
    _wrote: trio.Event = attrs.field(factory=trio.Event, init=False)

    def hold_writes(
        self,
        picks: Callable[[Sequence[Change]], bool] = everything,
        *,
        limit: int | None = None,
        shielded: bool = False,
        fails: bool = False,
    ) -> Hold:
        """Hold the writes *picks* chooses before they reach the inner journal."""
        hold = Hold(picks, limit, shielded=shielded, fails=fails)
        self._before.append(hold)
        return hold

    def hold_answers(
        self, picks: Callable[[Sequence[Change]], bool] = everything, *, limit: int | None = None
    ) -> Hold:
        """Store the writes *picks* chooses at once, and hold their answers (shielded):
        committed, and their writers not told yet, as a durable journal's writes are
        between the commit and its thread's answer."""
        hold = Hold(picks, limit, shielded=True)
        self._after.append(hold)
        return hold

    def hold_loads(
        self,
        picks: Callable[[str], bool] = everything,
        *,
        read_first: bool = True,
        limit: int | None = None,
    ) -> Hold:
        """Hold the loads of the keys *picks* chooses.  The page is read before the
        hold if *read_first*, else once it is let go: a test decides whether jobs
        sent meanwhile are in it."""
        hold = Hold(lambda key, after, limit: picks(key), limit)
        self._loads.append((hold, read_first))
        return hold

    def hold_reads(
        self,
        name: str,
        picks: Callable[[], bool] = everything,
        *,
        read_first: bool = True,
        limit: int | None = None,
    ) -> Hold:
        """Hold the operator reads called *name* (``"job"``, ``"dead_letters"``, ...)
        that *picks* chooses: each is read before the hold if *read_first* (what it
        found is what it returns), else once it is let go."""
        assert name in READS, name
        hold = Hold(picks, limit)
        self._reads.setdefault(name, []).append((hold, read_first))
        return hold

    async def wait_written(self, picks: Callable[[Sequence[Change]], bool]) -> None:
        """Wait until the inner journal has stored a batch *picks* chooses (at once if it has)."""
        seen = 0
        while True:
            if any(picks(changes) for changes in self.written[seen:]):
                return
            seen = len(self.written)
            await self._wrote.wait()

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        before = next((hold for hold in self._before if hold.wants(changes)), None)
        if before is None:
            superseded = await self._store(changes, now)
        else:
            with trio.CancelScope(shield=before.shielded):
                await before.wait(changes)
                if before.fails:
                    raise inturn.JournalError("injected failure")
                superseded = await self._store(changes, now)
        after = next((hold for hold in self._after if hold.wants(changes)), None)
        if after is not None:
            with trio.CancelScope(shield=True):
                await after.wait(changes)
        return superseded

    async def _store(self, changes: Sequence[Change], now: float | None) -> Sequence[Change]:
        superseded = await super().write(changes, now=now)
        self.written.append(list(changes))
        self._wrote.set()
        self._wrote = trio.Event()
        return superseded

    async def load(self, key: str, after: int, limit: int) -> Sequence[StoredJob]:
        found = next(
            ((hold, first) for hold, first in self._loads if hold.wants(key, after, limit)), None
        )
        if found is None:
            return self._kept(await self.inner.load(key, after, limit))
        hold, read_first = found
        page = self._kept(await self.inner.load(key, after, limit)) if read_first else ()
        await hold.wait((key, after, limit))
        return page if read_first else self._kept(await self.inner.load(key, after, limit))

    async def _read(self, name: str, read: Callable[[], Awaitable[_T]]) -> _T:
        found = next(
            ((hold, first) for hold, first in self._reads.get(name, ()) if hold.wants()), None
        )
        if found is None:
            return await read()
        hold, read_first = found
        if read_first:
            result = await read()
            await hold.wait(name)
            return result
        await hold.wait(name)
        return await read()

    async def job(self, job_id: int) -> JobInfo | None:
        return await self._read("job", lambda: self.inner.job(job_id))

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        return await self._read("jobs", lambda: self.inner.jobs(key, limit=limit, after=after))

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        return await self._read("keys", lambda: self.inner.keys(state=state, limit=limit, now=now))

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        return await self._read(
            "keys_by_name",
            lambda: self.inner.keys_by_name(
                state=state, prefix=prefix, after=after, limit=limit, now=now
            ),
        )

    async def overview(self, *, now: float) -> Overview:
        return await self._read("overview", lambda: self.inner.overview(now=now))

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        return await self._read("scheduled", lambda: self.inner.scheduled(key=key, limit=limit))

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        return await self.inner.schedules(after=after, limit=limit, name=name)

    async def due_schedules(self, *, limit: int = 100) -> list[ScheduleInfo]:
        return await self.inner.due_schedules(limit=limit)

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        return await self._read(
            "dead_letters",
            lambda: self.inner.dead_letters(
                key=key, limit=limit, after=after, finished_before=finished_before
            ),
        )

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        return await self.inner.audit(
            after=after, before=before, limit=limit, key=key, job_id=job_id
        )

    def _kept(self, page: Sequence[StoredJob]) -> Sequence[StoredJob]:
        self.pages.append([job.id for job in page])
        return page

    async def aclose(self) -> None:
        if self.closes:
            await self.inner.aclose()
        else:
            await trio.lowlevel.checkpoint()
