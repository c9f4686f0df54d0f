"""Helpers shared by the runtime tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import trio

import inturn
from inturn.info import JobInfo


@attrs.define(eq=False)
class Concurrency:
    """Counts handlers running at once, across every key."""

    now: int = 0
    peak: int = 0

    def enter(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)

    def exit(self) -> None:
        self.now -= 1


@attrs.define(eq=False)
class LaggingJournal(inturn.MemoryJournal):
    """A memory journal whose writes apply at once and answer late: a durable journal's
    window between its commit and its answer, widened.

    Each write's answer waits the next of *lags* (virtual seconds, in turn), and
    comes no earlier than an earlier write's, as a writer thread answers its
    groups in commit order.  Reads answer at once: they see a write before its
    writer hears back, as a read on another connection may (a journal of the
    application's own, or an autojumping clock's polled answers).  Shielded, as
    a queued durable write is: a cancel arrives at the caller's next checkpoint.
    """

    lags: Sequence[float] = (0.0,)
    _writes: int = 0
    _answered_until: float = -math.inf

    async def write(
        self, changes: Sequence[inturn.journal.Change], *, now: float | None = None
    ) -> Sequence[inturn.journal.Change]:
        lag = self.lags[self._writes % len(self.lags)]
        self._writes += 1
        with trio.CancelScope(shield=True):
            try:
                superseded = await super().write(changes, now=now)
            finally:
                answer = max(self._answered_until, trio.current_time() + lag)
                self._answered_until = answer
                await trio.sleep_until(answer)
        return superseded


async def sleep_payload(job: inturn.Job) -> object:
    """Sleep for the job's payload, in (virtual) seconds."""
    assert isinstance(job.payload, int | float)
    await trio.sleep(job.payload)
    return job.payload


@attrs.define(eq=False)
class Script:
    """A handler steered by its payloads, for the operator tests.

    ``"hang"`` never returns; ``"boom"`` fails every attempt with
    ``ValueError("boom")``; ``"boom-once"`` fails its first attempt only;
    ``"bad"`` fails with a `PermanentError`; a payload starting with
    ``"hold"`` waits until `release` is called with it; anything else returns
    at once.  Every job returns its payload.
    """

    _started: dict[object, trio.Event] = attrs.field(factory=dict, init=False)
    _released: dict[object, trio.Event] = attrs.field(factory=dict, init=False)

    def started(self, payload: object) -> trio.Event:
        """Set once a job carrying *payload* has started (payloads must be hashable)."""
        return self._started.setdefault(payload, trio.Event())

    def release(self, payload: object) -> None:
        """Let the jobs carrying ``"hold..."`` payload *payload* return."""
        self._released.setdefault(payload, trio.Event()).set()

    async def __call__(self, job: inturn.Job) -> object:
        payload = job.payload
        self.started(payload).set()
        if payload == "hang":
            await trio.sleep_forever()
        if payload == "boom" or (payload == "boom-once" and job.attempt == 1):
            raise ValueError("boom")
        if payload == "bad":
            raise inturn.PermanentError("bad payload")
        if isinstance(payload, str) and payload.startswith("hold"):
            await self._released.setdefault(payload, trio.Event()).wait()
        await trio.lowlevel.checkpoint()
        return payload


@attrs.define(eq=False)
class EventLog:
    """An ``on_event`` callback that keeps every event and lets a test wait for one."""

    events: list[inturn.Event] = attrs.field(factory=list)
    _changed: trio.Event | None = attrs.field(default=None, init=False)

    def __call__(self, event: inturn.Event) -> None:
        self.events.append(event)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def named(self, name: str) -> list[inturn.Event]:
        return [event for event in self.events if event.name == name]

    async def wait_for(self, name: str, count: int = 1) -> None:
        """Wait until *count* events called *name* have arrived."""
        while len(self.named(name)) < count:
            if self._changed is None:
                self._changed = trio.Event()
            await self._changed.wait()


async def dead_letters(journal: inturn.Journal) -> list[JobInfo]:
    """Every dead letter *journal* keeps, in id order, once no supervisor holds it.

    The journal's reads need it open, as a supervisor's do: open it for the read.
    """
    await journal.open()
    try:
        return await journal.dead_letters(limit=1_000_000)
    finally:
        await journal.aclose()
