"""Fleet mode: one supervisor among many processes sharing one journal.

Theory of operation
-------------------
On a journal opened as a fleet member (``PostgresJournal(..., fleet=True)``),
the journal, not this process, decides who runs a key: it hands each key
with work to one member at a time (`Claim`), with an epoch that fences
everything the member writes for it.  So this shell changes three things
and the core none of its policy:

* A ``send`` only journals the job (ids come from blocks the journal grants
  this member); it does not put it in the core, since another member may
  own its key.  The journal gives it its place at commit.
* A claimer task takes keys with work and no owner, as many as there is
  room for, whenever the journal says there may be some (a notification),
  after a send of this process, and every *poll_interval*.  A claimed key
  is a lane whose jobs are all in the journal (`Core.owned`): it holds the
  first jobs the claim read, as many as ``window`` and ``max_buffered``
  allow (the head at least), and its actor pages in the rest.
* An actor that runs out of work asks the journal to release its key
  (`let_go`), which it does only if no job waits; otherwise the journal
  says what waits now, the lane pages it in, and the actor goes on.  An
  owner never lingers: while it does, a job another member sends could
  not be seen.

`wait_idle` (and leaving the ``async with`` block) means, for a member:
nothing this process owns runs or waits, and its last look found nothing to
claim.  Jobs owned by other live members are theirs.
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from .errors import JournalError, LeaseLost
from .events import exception_text
from .journal.records import (
    Append,
    Backlog,
    Change,
    Claim,
    Expiry,
    FleetChange,
    Release,
    StoredJob,
)

if TYPE_CHECKING:
    from ._runtime import Runtime
    from .core import Lane
    from .info import JobInfo

__all__ = ["Fleet", "FleetJournal"]

ID_BLOCK = 1000
"""Ids a member asks the journal for at once."""


class FleetJournal(Protocol):
    """What a journal adds to `inturn.Journal` for fleet members (see `PostgresJournal`)."""

    async def ids(self, count: int) -> Sequence[int]: ...

    async def claim(
        self, limit: int, *, page: int = 100, mark_below: int | None = None
    ) -> tuple[list[Claim], list[StoredJob]]: ...

    async def release(self, key: str) -> Backlog | None: ...

    def reaped(self) -> Sequence[Expiry]: ...

    def listen(self, woken: Callable[[], None], due: Callable[[], None] | None = None) -> None: ...

    async def hold(self) -> None: ...

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]: ...

    async def write_releasing(
        self, changes: Sequence[FleetChange], *, now: float | None = None
    ) -> Sequence[FleetChange]: ...

    async def fix(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]: ...


@attrs.define(eq=False)
class Fleet:
    """This member's part of the fleet: its ids, its claims and its releases."""

    runtime: Runtime
    journal: FleetJournal
    capacity: int
    """At most this many keys and keyless jobs owned at once."""
    poll_interval: float = 1.0
    page: int = 100
    """At most this many jobs of each claimed key are read with the claim, fewer if
    ``max_buffered`` leaves less room (`Core.claim_page`); the rest are paged in."""
    mark_below: int | None = None
    """The retry policy's ``max_attempts``, for a claim to mark its heads' starts;
    None under ``max_concurrency``, where a marked head could wait for a slot."""
    owned: int = 0
    """Keys and keyless jobs owned: each key's fencing token is in its lane (`Core.epoch`)."""
    dry: bool = False
    """The last claim found nothing more, and nothing was sent since."""

    @property
    def settled(self) -> bool:
        """Nothing waits for this member: its last claim found nothing, and it handed back every
        key and keyless job it took (`let_go`, `retired`).

        Jobs it sent to a key it owns are not claimed again: they wait in the
        journal until the key's actor, out of work, lets the key go and
        finds them.  Until the key is released, they may still be there.
        """
        return self.dry and not self.owned

    _blocks: list[range] = attrs.field(factory=list)
    """Ids granted and not handed out yet, in blocks, the lowest first."""
    _woken: trio.Event = attrs.field(factory=trio.Event)

    # -- sending -------------------------------------------------------------

    async def new_ids(self, count: int) -> list[int]:
        """*count* fresh ids, rising; no checkpoint unless the blocks granted run out.

        Sends that run out together each ask for a block, with no lock held
        across the wait: every block granted joins `_blocks`, lowest first, and
        what one send does not use the next one takes.
        """
        ids: list[int] = []
        while len(ids) < count:
            if not self._blocks:
                granted = await self.journal.ids(max(ID_BLOCK, count - len(ids)))
                for block in _blocks(granted):
                    bisect.insort(self._blocks, block, key=lambda granted: granted.start)
                continue
            block = self._blocks[0]
            take = min(count - len(ids), len(block))
            ids.extend(block[:take])
            if take == len(block):
                del self._blocks[0]
            else:
                self._blocks[0] = block[take:]
        if len(ids) > 1:
            ids.sort()  # from two blocks granted out of order, at worst
        return ids

    async def append(self, appends: list[Append], *, now: float | None) -> None:
        """Journal new jobs; whoever owns (or claims) their keys runs them."""
        await self.journal.write(appends, now=now)
        for append in appends:
            if append.due_at is not None:
                self.runtime.schedule.noticed(self.runtime.core.clock_time(append.due_at))
            self.runtime.log.debug("job.accepted", key=append.key, job_id=append.job_id)
        self.nudge()

    async def promote(self, due: list[JobInfo]) -> None:
        """Due scheduled jobs join their keys' sequences (their places given at commit)."""
        places = await self.new_ids(len(due))
        await self.journal.write(self.runtime.core.dues([info.id for info in due], places))
        self.nudge()

    # -- operators' fixes for keys another member owns -----------------------
    #
    # This member decides for the keys it owns (the `Supervisor` methods' own
    # paths).  For any other key it writes the fix straight to the journal
    # (`PostgresJournal.fix`, not fenced by ownership), whose compare-and-set
    # decides the race with the owner: a skipped job's start or completion is
    # superseded there, a halt stops its next start, and a requeued job is
    # found when the owner next runs dry.

    def owns(self, lane: Lane) -> bool:
        """Whether this member decides for *lane*: it owns the key (or the keyless job)."""
        return self.runtime.core.owns(lane)

    async def fix(self, changes: Sequence[Change]) -> Sequence[Change]:
        """Write an operator's *changes*; the superseded ones come back."""
        return await self.journal.fix(changes, now=self.runtime.unix_now())

    # -- claiming ------------------------------------------------------------

    def nudge(self) -> None:
        """Keys may have become claimable: look now."""
        self.dry = False
        self._woken.set()

    async def run(self) -> None:
        """Claim keys with work, for as long as the supervisor runs."""
        runtime = self.runtime
        token = trio.lowlevel.current_trio_token()

        def woken() -> None:  # on the listener's thread
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self.nudge)

        def due() -> None:  # on the listener's thread: a producer scheduled a job
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(runtime.schedule.noticed, -math.inf)

        self.journal.listen(woken, due)
        while not runtime.core.stopping:
            self._woken = trio.Event()
            room = self.capacity - self.owned
            if room > 0:
                try:
                    claims, jobs = await self.journal.claim(
                        room,
                        page=min(self.page, runtime.core.claim_page(room)),
                        mark_below=self.mark_below,
                    )
                except LeaseLost as exc:  # nothing here may go on
                    runtime.escalate(exc)
                    return
                except JournalError as exc:
                    runtime.log.error(
                        "fleet.claim_failed", error=str(exc), exception=exception_text(exc)
                    )
                    await trio.sleep(self.poll_interval)
                    continue
                self._expired(self.journal.reaped())
                self._adopt(claims, jobs)
                if len(claims) + len(jobs) == room:
                    continue  # there may be more
                if not self._woken.is_set():
                    self.dry = True
                    runtime.check_idle()
            with trio.move_on_after(self.poll_interval):
                await self._woken.wait()

    def _expired(self, expiries: Sequence[Expiry]) -> None:
        for expiry in expiries:
            self.runtime.log.warning(
                "fleet.member_expired",
                member=expiry.member,
                keys=expiry.keys,
                keyless_jobs=expiry.keyless_jobs,
            )

    def _adopt(self, claims: list[Claim], jobs: list[StoredJob]) -> None:
        runtime, core = self.runtime, self.runtime.core
        for claim in claims:
            # INFO: which member runs a key, and since when, is what an operator
            # asks first when a key moves (or does not) between processes.
            if claim.taken_from is None:
                runtime.log.info("key.claimed", key=claim.key, epoch=claim.epoch)
            else:
                runtime.log.info(
                    "key.taken_over", key=claim.key, epoch=claim.epoch, member=claim.taken_from
                )
            if core.owns(claim.key):
                # Released as its actor asked, and claimed again before it heard:
                # the actor goes on with what the claim found (`let_go`).
                core.reclaimed(claim)
                continue
            self.owned += 1
            if core.owned(
                claim.key, claim.backlog, claim.jobs, marked=claim.marked, epoch=claim.epoch
            ):
                runtime.spawn(claim.key)
        for job in jobs:
            self.owned += 1
            if core.revive(job):
                runtime.spawn(job.id)

    # -- releasing -----------------------------------------------------------

    async def complete_last(
        self, changes: Sequence[Change], release: Release, now: float | None
    ) -> Sequence[FleetChange]:
        """Write *changes*, the completion of the last jobs a key holds, and *release* the key
        in the same transaction (the core decides when: `Core.completion`)."""
        return await self.journal.write_releasing([*changes, release], now=now)

    async def let_go(self, key: str) -> bool:
        """*key*'s actor ran out of work: True if the key is released (the actor exits).

        False if jobs wait for it now: they are in its lane, to page in.  A
        journal that fails is asked again every *poll_interval*; the key
        stays owned meanwhile.
        """
        core = self.runtime.core
        backlog = await self._release(key) if core.releases(key) else None
        if not core.let_go(key, backlog):
            return False
        self.retired()
        return True

    async def _release(self, key: str) -> Backlog | None:
        while True:
            try:
                return await self.journal.release(key)
            except LeaseLost:
                raise
            except JournalError as exc:
                self.runtime.log.error(
                    "fleet.release_failed", key=key, error=str(exc), exception=exception_text(exc)
                )
                await trio.sleep(self.poll_interval)

    def retired(self) -> None:
        """A key released, or a keyless job's lane gone: room for one more claim."""
        self.owned -= 1
        self.nudge()


def _blocks(ids: Sequence[int]) -> list[range]:
    """Rising *ids* as runs of consecutive ones."""
    if isinstance(ids, range):
        return [ids]
    blocks: list[range] = []
    for n in ids:
        if blocks and blocks[-1].stop == n:
            blocks[-1] = range(blocks[-1].start, n + 1)
        else:
            blocks.append(range(n, n + 1))
    return blocks


def capacity_for(max_concurrency: int | None) -> int:
    """How many keys a member owns at most: a few per slot, so slots stay busy."""
    return 1000 if max_concurrency is None else max(1, min(1000, 2 * max_concurrency))
